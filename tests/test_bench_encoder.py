"""The encoder benchmark (azllm.bench.encoder): one measurement of each kind in this process on a small corpus,
and the medians and ratios computed from measurements (speed itself is measured by the benchmark, not here)."""

import pytest

from azllm.bench import encoder
from azllm.tokenizer_train import train_tokenizer
from conftest import FIXTURES


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    from azllm.data import resolve_source

    tmp = tmp_path_factory.mktemp("enc")
    r = resolve_source({"path": "data/az/train/tech_*.txt"}, FIXTURES)
    n_docs, n_chars = encoder._normalized_copy(r, tmp / "corpus.txt")
    assert n_docs > 100 and n_chars > 10_000
    from azllm.data import iter_documents

    folder = train_tokenizer(iter_documents(r), tmp / "tok", vocab_size=400, model_type="unigram")
    return {
        "tokenizer": str(folder / "sp.model"),
        "encoder_tokenizer": str(folder),
        "corpus": str(tmp / "corpus.txt"),
        "scale": 2,
        "out": str(tmp / "out"),
    }


@pytest.mark.parametrize("variant", ["a", "b", "c", "limit"])
def test_every_variant_counts_the_same_tokens(job, variant, tmp_path):
    res = encoder.measure_encoder({**job, "variant": variant, "out": str(tmp_path / variant)})
    assert res["tokens"] > 0 and res["tokens_per_s"] > 0 and res["peak_rss_mb"] >= res["base_rss_mb"]
    ref = encoder.measure_encoder({**job, "variant": "a", "out": str(tmp_path / "ref")})
    assert res["tokens"] == ref["tokens"]  # the same documents (read scale times over) and EOS ids


def test_medians_and_ratios():
    runs = {
        f"{v}@{s}": [{m: float(k + (10 if v == "c" else 1)) for m in encoder._MEDIANS} for k in (1, 2, 3)]
        for v in ("a", "b", "c", "limit", "limit_1thread")
        for s in (1, 2)
        if not (v.startswith("limit") and s == 2)
    }
    med = encoder._medians(runs)
    assert med["c@1"]["tokens_per_s"] == 12 and med["a@1"]["runs"] == 3
    r = encoder._ratios(med, 2)
    assert r["c_over_a_1x"] == pytest.approx(12 / 3) and r["c_over_limit_1x"] == pytest.approx(12 / 3)


def test_variant_rows_speeds_against_the_limit_and_the_naive_list():
    """The medians as rows (variant and scale as values, not a key "c@10"), with the speeds against the limit and
    against (a) at the same scale, in millions of tokens per second."""

    def med(tps):
        return {"tokens_per_s": tps, "tokens_per_cpu_s": tps / 2, "tokens": 1000.0, "seconds": 1.0, "runs": 1}

    meds = {"a@1": med(1e6), "c@1": med(3e6), "a@10": med(0.5e6), "c@10": med(2e6), "limit@1": med(4e6)}
    rows = {(r["variant"], r["scale"]): r for r in encoder.variant_rows(meds, 10)}
    assert rows[("c", 10)]["mtokens_per_s"] == 2.0 and rows[("c", 10)]["vs_a"] == 4.0
    assert rows[("c", 1)]["vs_limit"] == 0.75 and rows[("limit", 1)]["vs_a"] == 4.0
    assert rows[("c", 1)]["mtokens_per_cpu_s"] == 1.5 and rows[("c", 1)]["tokens"] == 1000
    assert len(rows) == 5
