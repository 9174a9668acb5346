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


@pytest.mark.slow  # shares the session's run of notebooks 05, 06 and 08 (conftest.adapt_report)
def test_notebook_08_distils_05s_best_run_and_deploys_the_student(adapt_report):
    """Notebook 08 on the tiny params: the KD and the cross-entropy students of notebook 05's best run at equal
    steps, the teacher's bits per byte on the same windows, standalone exports plain transformers loads, the tasks
    compared with paired verdicts, and the student's GGUF files with their checks, paths in metrics.json."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run_dir, m, _ = adapt_report
    d, dep, art = m["metrics"]["distill"], m["metrics"]["deploy"], m["artifacts"]
    rows = {r["model"]: r for r in d["models"]}
    assert set(rows) == {"teacher", "student (KD)", "student (cross-entropy)"}
    kd, ce, teacher = rows["student (KD)"], rows["student (cross-entropy)"], rows["teacher"]
    assert kd["steps"] == ce["steps"] == 8 and kd["parameters_m"] == ce["parameters_m"] < teacher["parameters_m"]
    assert kd["layers"] < teacher["layers"] and all(r["az_bpb"] > 0 and r["en_bpb"] > 0 for r in rows.values())
    assert d["teacher"]["note"]["way"] and d["bpb"]["kd_bpb"] == kd["az_bpb"] and d["bpb"]["ce_bpb"] == ce["az_bpb"]
    assert d["kd_vs_ce"] and all(r["verdict"] in ("gain", "loss", "within noise") for r in d["kd_vs_ce"])
    for name in ("kd", "ce"):  # a standalone folder: plain transformers loads the model and its tokenizer
        folder = art[f"distill_export/{name}"]
        model, tok = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
        assert model.config.vocab_size == len(tok) and model.config.num_hidden_layers == kd["layers"]
    files = {r["file"]: r for r in dep["files"]}
    assert set(files) == {"F16", "Q8_0", "Q4_K_M"} and files["F16"]["vs_pytorch_top1"] > 0.9
    assert all(os.path.isfile(art[f"gguf/student/{q}"]) for q in files)
    assert {r["set"] for r in dep["parity"]} >= {"flores", "flores_az", "flores_en"}
    assert all(r["lines"] > 0 and 0 <= r["share"] <= 1 for r in dep["parity"])
    assert dep["summary"]["file"] == "Q4_K_M" and dep["summary"]["parity_lines"] > 0
    assert len(dep["answers"]) == 2 and all(a["llama_cpp"] is not None for a in dep["answers"])
    html = (run_dir / "08_distill_deploy.html").read_text()
    assert "data:image/png;base64" in html and "Small model for a phone" in (run_dir / "index.html").read_text()
    deployed = json.loads(open(os.path.join(os.path.dirname(art["gguf/student/F16"]), "deploy.json")).read())
    assert deployed["files"]["Q8_0"]["same_tokenizer"] is True
