"""The corpus recipe (azllm.recipes.corpus): the stage on data.train, the mix of corpus.mix, the eval sets."""

import warnings

import pytest

from azllm.config import load_params
from azllm.recipes import corpus
from conftest import FIXTURES


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    import os

    os.environ["AZLLM_ARTIFACTS"] = str(tmp_path_factory.mktemp("art"))
    return load_params(
        None,
        overrides={
            "run_name": "rc",
            "data": {
                "root": str(FIXTURES),
                "train": {"path": "data/az/train/tech_*.txt"},
                "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt"}},
                "parallel": {},
            },
            "corpus": {
                "workers": 1,
                "tasks": 1,
                "mix": {"weights": {"tech_docs": 0.0, "not_a_source": 2.0}, "caps": {"legal_codes": 1000}},
            },
        },
    )


def test_names_that_match_no_source_are_a_warning_not_a_stop(cfg):
    manifest = corpus.run_corpus(cfg)
    with pytest.warns(UserWarning, match=r"corpus.mix.caps: \['legal_codes'\] match no source"):
        path, mix = corpus.corpus_mix(cfg, manifest)
    assert mix["rates"]["tech_docs"] == 0 and "not_a_source" not in mix["rates"]
    assert path.is_file() and mix["caps"] == {}


def test_the_source_of_token_files_is_the_mix(cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = corpus.corpus_source(cfg)
    assert src.kind == "files" and src.files[0].name.startswith("mix-")
    off = cfg.model_copy(update={"corpus": cfg.corpus.model_copy(update={"enabled": False})})
    assert [f.name for f in corpus.corpus_source(off).files] == [
        "tech_ai_course.txt",
        "tech_docs.txt",
        "tech_docs_rollup.txt",
    ]


def test_eval_sets_and_clean_documents(cfg):
    evals, parallel, resolved = corpus.eval_sets(cfg)
    assert len(evals["flores"]) == 200 and parallel == {} and set(resolved) == {"eval.flores"}
    docs = corpus.clean_documents(cfg)
    assert docs and all(isinstance(d, str) and d for d in docs)


def test_removal_and_mix_rows_are_shares_of_the_manifest():
    """What notebook 00 shows, computed here: per source (the total last) the input, each step's removals and what
    was kept, in documents and MB, with the share kept; the mix's shares of the cleaned corpus and of the mix."""
    manifest = {
        "counts": {
            "by_source": {
                "total": {"input_docs": 10, "kept_docs": 6, "input_bytes": 4e6, "kept_bytes": 3e6},
                "news": {"input_docs": 8, "quality_docs": 3, "kept_docs": 5, "input_bytes": 3e6, "kept_bytes": 2e6},
                "wiki": {"input_docs": 2, "kept_docs": 1, "input_bytes": 1e6, "kept_bytes": 1e6},
            }
        }
    }
    rows = corpus.removal_rows(manifest)
    assert [r["source"] for r in rows] == ["news", "wiki", "total"]
    news = rows[0]
    assert news["docs"]["quality"] == 3 and news["docs"]["near_dedup"] == 0 and news["docs"]["kept_pct"] == 62.5
    assert news["mb"]["input"] == 3.0 and news["mb"]["kept_pct"] == 100 * 2.0 / 3.0
    mix = {"rates": {"news": 1.0, "wiki": 2.0}, "counts": {"news": {"bytes": 2e6}, "wiki": {"bytes": 2e6}}}
    m = {r["source"]: r for r in corpus.mix_rows(manifest, mix)}
    assert m["news"]["clean_pct"] == 100 * 2e6 / 3e6 and m["wiki"]["mix_pct"] == 50.0 and m["wiki"]["rate"] == 2.0
    assert m["news"]["clean_mb"] == 2.0 and m["wiki"]["mix_mb"] == 2.0
