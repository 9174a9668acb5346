"""The distillation study (azllm.recipes.distill): a teacher folder -> the KD student and the cross-entropy student
at equal tokens and steps, the teacher's own bits per byte on the same windows, standalone exports that plain
transformers loads, the scores of notebook 06's tasks and the paired comparison; a vocabulary mismatch refused."""

import json
import os

import pytest
from sft_helpers import tiny_base  # noqa: F401  (fixture)

from azllm.config import load_params
from conftest import FIXTURES


def _params(art, teacher, **distill):
    return load_params(
        None,
        overrides={
            "run_name": "d",
            "data": {
                "root": str(FIXTURES),
                "train": {"path": "data/az/train/*.txt", "max_bytes_per_file": 25_000},
                "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt", "max_lines": 60}},
            },
            "train": {
                "batch_size": 2,
                "block_size": 32,
                "eval_max_tokens": 512,
                "logging_steps": 1,
                "untimed_steps": 1,
            },
            "adapt": {"english_eval": {"path": "data/en/valid.txt", "max_bytes": 20000}, "az_train_bytes": 40000},
            "distill": {"teacher": str(teacher), "max_steps": 4, "eval_steps": 2, "save_steps": 2, **distill},
            "evaluate": {"tasks": ["sib200_az"], "probe": {"folds": 0}},
        },
    )


def test_the_spec_is_the_params_and_the_baseline_has_no_teacher_term(tiny_base, tmp_path):
    from azllm.recipes.distill import distill_config, distill_spec

    cfg = _params(tmp_path, tiny_base, kd_weight=0.3, temperature=4.0, chunk_tokens=8, lr=1e-3)
    cfg_d = distill_config(cfg, str(tiny_base))
    kd, ce = distill_spec(cfg_d, kd=True), distill_spec(cfg_d, kd=False)
    assert (kd.kd_weight, kd.temperature, kd.chunk_tokens, kd.lr, kd.max_steps) == (0.3, 4.0, 8, 1e-3, 4)
    assert ce.kd_weight == 0.0 and ce.max_steps == kd.max_steps and ce.batch_size == kd.batch_size == 2
    assert cfg_d.tokens.tokenizer == str(tiny_base) and set(cfg_d.data.eval) == {"flores", "en"}


def test_a_student_of_another_vocabulary_is_refused(tiny_base, tmp_path):
    from azllm.assemble import load_base
    from azllm.distill import VocabMismatch
    from azllm.recipes.distill import student

    teacher = load_base(tiny_base, None)
    cfg = _params(tmp_path, tiny_base)
    with pytest.raises(VocabMismatch, match="tokenizer"):
        student(cfg, teacher, teacher.config.vocab_size + 7)  # a tokenizer with 7 ids more than the model
    kept = len(range(0, teacher.config.num_hidden_layers, 2))  # distill.keep_every 2: layers 0, 2, ...
    assert student(cfg, teacher, teacher.config.vocab_size).config.num_hidden_layers == kept


@pytest.mark.slow  # two students, the teacher's evaluation, three models scored (~40 s on 2 cores)
def test_the_study_trains_both_students_exports_them_and_compares(tiny_base, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from azllm.recipes.distill import run_distill

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    cfg = _params(tmp_path, tiny_base)
    r = run_distill(cfg, progress=False)
    kd, ce = r["runs"]["kd"], r["runs"]["ce"]
    assert kd["steps"] == ce["steps"] == 4 and kd["throughput"]["tokens_per_s"] > 0
    assert kd["parameters"]["total"] < kd["teacher_parameters"]["total"] and kd["layers"] < kd["teacher_layers"]
    assert set(kd["final"]) == {"val", "flores", "en"} and set(r["teacher"]["eval"]) == {"val", "flores", "en"}
    for name in ("kd", "ce"):  # a standalone folder: plain transformers loads the model and its tokenizer
        folder = r["exports"][name]
        model = AutoModelForCausalLM.from_pretrained(folder)
        tok = AutoTokenizer.from_pretrained(folder)
        assert model.config.vocab_size == len(tok) and json.loads(
            open(os.path.join(folder, "azllm_export.json")).read()
        )
    assert set(r["scores"]) == {"teacher", "kd", "ce"}
    rows = {row["task"]: row for row in r["kd_vs_ce"]}
    assert "sib200_az" in rows and rows["sib200_az"]["verdict"] and rows["sib200_az"]["chance"] > 0
    again = run_distill(cfg, progress=False)  # every run finished: returned as it is
    assert again["runs"]["kd"]["cached"] and again["runs"]["kd"]["key"] == kd["key"]
