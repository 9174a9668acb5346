"""What the corpus page shows of the stage's output (azllm.corpus.contents): removed and kept examples, the
biggest near-duplicate clusters, decontamination hits, sizes."""

from corpus_helpers import AMENDMENTS, cleaned, flores  # noqa: F401  (module fixtures: a small cleaned corpus)

from azllm.corpus import contents


def test_examples_clusters_and_hits(cleaned, flores):  # noqa: F811
    tmp, m = cleaned
    folder = tmp / "out" / m["key"]
    rows = contents.examples(folder, seed=0)
    assert {r["step"] for r in rows} >= {"quality", "kept"} and all(len(r["text"]) <= 160 for r in rows)
    assert contents.examples(folder, seed=0) == rows  # the same seed draws the same rows
    (big, *_) = contents.clusters(folder)
    assert big["size"] == len(AMENDMENTS) and big["sources"] == "legal"
    (hit,) = contents.contamination_hits(folder, {"flores": flores})
    assert hit["eval set"] == "flores" and hit["eval line"] == flores[3][:159] + ("…" if len(flores[3]) > 160 else "")


def test_size_counts_with_a_tokenizer():
    from azllm.tokenizer import Tok

    chars = Tok(
        name="c",
        kind="test",
        vocab_size=0x110000,
        encode_fn=lambda t: [ord(c) for c in t],
        decode_fn=lambda ids: "".join(map(chr, ids)),
    )
    assert contents.size_counts(["ab c", "d"], chars, batch=1) == {"documents": 2, "words": 3, "mb": 5e-06, "tokens": 5}
