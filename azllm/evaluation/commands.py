"""lm-eval's own command line for the shipped tasks, and its multi-GPU launch: built and checked with lm-eval's and
accelerate's own argument parsers (nothing of ours runs on the GPUs).

- one process: ``lm_eval run --model hf --model_args pretrained=M --include_path azllm/evaluation/tasks --tasks ...
  --metadata '{"data_root": ...}'``;
- data parallel on K GPUs: ``accelerate launch --multi_gpu --num_processes K -m lm_eval run ...`` (one model copy per
  GPU, lm-eval splits the requests by rank);
- vLLM: ``--model vllm --model_args pretrained=M,tensor_parallel_size=T,data_parallel_size=D`` (``pip install
  vllm``; not in our lock).

The shipped tasks read their data paths from their YAMLs, relative to ``data_root`` (``--metadata``); the params'
``evaluate.local`` paths are what ``azllm eval`` uses instead. ``mmlu_en`` (one task per subject, built by azllm)
becomes lm-eval's own ``mmlu`` there (the same 5-shot prompt, from the Hugging Face Hub).

>>> argv = lm_eval_argv("meta-llama/Llama-3.2-1B", ["sib200_az", "mmlu"], gpus=8, data_root="../shared")
>>> argv[:6]
['accelerate', 'launch', '--multi_gpu', '--num_processes', '8', '-m']
>>> check_lm_eval_argv(argv).tasks
['sib200_az', 'mmlu']
"""

from __future__ import annotations

import json
import shlex

from ..utils import DEFAULT_SEED
from .tasks import LOCAL_TASKS, TASK_DIR

__all__ = ["lm_eval_argv", "check_lm_eval_argv", "as_shell"]


def lm_eval_argv(
    model: str,
    tasks: list[str],
    *,
    gpus: int = 1,
    backend: str = "hf",
    data_root: str | None = None,
    batch_size: int | str = "auto",
    dtype: str = "bfloat16",
    output_path: str = "reports/lm-eval",
    seed: int = DEFAULT_SEED,
    tensor_parallel: int = 1,
) -> list[str]:
    """The argv of lm-eval scoring ``model`` on ``tasks`` (local names and registry names): ``backend`` ``hf``
    (data parallel through accelerate when ``gpus > 1``) or ``vllm`` (its own data and tensor parallelism)."""
    if backend not in ("hf", "vllm"):
        raise ValueError(f"backend {backend!r}: hf or vllm")
    # azllm builds mmlu_en per subject from one template; on lm-eval's command line, its own mmlu (the same prompt)
    tasks = list(dict.fromkeys("mmlu" if t == "mmlu_en" else t for t in tasks))
    margs = f"pretrained={model},dtype={dtype}"
    if backend == "vllm":
        margs += f",tensor_parallel_size={tensor_parallel},data_parallel_size={max(1, gpus // tensor_parallel)}"
    run = [
        "run",
        "--model",
        backend,
        "--model_args",
        margs,
        "--tasks",
        ",".join(tasks),
        "--batch_size",
        str(batch_size),
        "--output_path",
        output_path,
        "--log_samples",
        "--seed",
        str(seed),
    ]
    if any(t in LOCAL_TASKS for t in tasks):
        run += ["--include_path", str(TASK_DIR)]
        if data_root:
            run += ["--metadata", json.dumps({"data_root": str(data_root)})]
    if backend == "hf" and gpus > 1:
        return ["accelerate", "launch", "--multi_gpu", "--num_processes", str(gpus), "-m", "lm_eval", *run]
    return ["lm_eval", *run]


def check_lm_eval_argv(argv: list[str]):
    """Parse ``argv`` (``lm_eval ...`` or ``accelerate launch ... -m lm_eval ...``) with accelerate's and lm-eval's
    own parsers and check every task name (shipped or in lm-eval's registry); returns lm-eval's namespace."""
    from accelerate.commands.launch import launch_command_parser
    from lm_eval._cli import HarnessCLI

    from .harness import validate_task_names

    if argv[:2] == ["accelerate", "launch"]:
        acc = launch_command_parser().parse_args(argv[2:])
        if not (acc.module and acc.training_script == "lm_eval"):
            raise ValueError(f"accelerate launch must run -m lm_eval, got {acc.training_script!r}")
        rest = acc.training_script_args
    elif argv[:1] in (["lm_eval"], ["lm-eval"]):
        rest = argv[1:]
    else:
        raise ValueError(f"not an lm-eval command: {shlex.join(argv)[:80]}")
    ns = HarnessCLI()._parser.parse_args(rest)
    validate_task_names(list(ns.tasks), list(LOCAL_TASKS) if ns.include_path else [])
    return ns


def as_shell(argv: list[str]) -> str:
    """``argv`` as one shell line (quoted)."""
    return shlex.join(argv)
