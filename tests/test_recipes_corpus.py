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
    docs = corpus.clean_documents(cfg, corpus.run_corpus(cfg))
    assert docs and all(isinstance(d, str) and d for d in docs)
