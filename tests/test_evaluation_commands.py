"""lm-eval's own command line for the shipped tasks (azllm.evaluation.commands): a real run of ``lm_eval`` on a
tiny model, the multi-GPU and vLLM commands checked by lm-eval's and accelerate's parsers, the README's commands."""

import json
import re
import shlex
import subprocess
import sys

import pytest
from eval_helpers import REPO, eval_tokenizer_dir, hf_tok, tiny_folder  # noqa: F401

from azllm.evaluation.commands import check_lm_eval_argv, lm_eval_argv
from azllm.evaluation.harness import UnknownTaskError
from conftest import FIXTURES


@pytest.mark.slow  # one lm_eval process
def test_lm_eval_runs_the_shipped_tasks_from_its_own_command_line(tiny_folder, tmp_path):
    argv = lm_eval_argv(
        str(tiny_folder),
        ["sib200_az", "tumlu_az"],
        data_root=str(FIXTURES),
        dtype="float32",
        batch_size=4,
        output_path=str(tmp_path / "out"),
    )
    check_lm_eval_argv(argv)
    out = subprocess.run(
        [sys.executable, "-m", "lm_eval", *argv[1:], "--limit", "3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (res,) = list((tmp_path / "out").rglob("results_*.json"))
    r = json.loads(res.read_text())["results"]
    assert set(r) == {"sib200_az", "tumlu_az"} and "acc_norm,none" in r["sib200_az"]


def test_multi_gpu_and_vllm_commands_parse(lm_eval_registry):
    ns = check_lm_eval_argv(
        lm_eval_argv(
            "meta-llama/Llama-3.2-1B", ["sib200_az", "mmlu_en", "belebele_azj_Latn"], gpus=8, data_root="/data"
        )
    )
    assert ns.tasks == ["sib200_az", "mmlu", "belebele_azj_Latn"] and ns.metadata == {"data_root": "/data"}
    v = lm_eval_argv("meta-llama/Llama-3.2-1B", ["hellaswag"], gpus=8, backend="vllm", tensor_parallel=2)
    assert v[0] == "lm_eval" and "data_parallel_size=4" in v[v.index("--model_args") + 1]
    assert check_lm_eval_argv(v).model == "vllm"
    with pytest.raises(UnknownTaskError, match="hellaswagg"):
        check_lm_eval_argv(lm_eval_argv("m", ["hellaswagg"]))
    with pytest.raises(ValueError, match="must run -m lm_eval"):
        check_lm_eval_argv(["accelerate", "launch", "--num_processes", "2", "train.py"])


def test_every_lm_eval_command_of_the_readme_parses(lm_eval_registry):
    text = "\n".join(p.read_text(encoding="utf-8") for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    lines = [
        ln.strip() for ln in re.findall(r"^\s*((?:accelerate launch|lm_eval) .*)$", text, flags=re.M) if "lm_eval" in ln
    ]
    assert len(lines) >= 2
    for ln in lines:
        check_lm_eval_argv([a.replace("PATH_OR_ID", "m") for a in shlex.split(ln)])
