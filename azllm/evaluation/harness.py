"""Scoring a model with EleutherAI's lm-evaluation-harness (lm-eval 0.4): local task configs
(:mod:`azllm.evaluation.tasks`) and lm-eval's own registry names, one call, plain results.

:func:`score` wraps the model in lm-eval's ``HFLM`` (an in-memory model with its tokenizer; lm-eval batches the
requests, sorts them by length and computes the shared context of one item's options once) and runs
``simple_evaluate``. It returns, per task:

- every metric with its standard error (lm-eval's: the sample standard error of the mean for accuracies, a
  bootstrap for corpus chrF++), the number of items, the chance level;
- ``headline``: the metric a table shows: ``acc`` for multiple choice (the option with the highest summed
  log-likelihood), ``chrf`` (chrF++) for translation, ``exact_match`` for generative answers. ``acc_norm`` (the sum
  per character of the option) and ``acc_mutual_info`` (the sum less the option's own unconditional
  log-likelihood) are reported beside it. The choice was measured on SmolLM2-135M-Instruct, SIB-200 dev (47 items,
  chance 0.14): English acc 0.53 ± 0.07, acc_norm 0.28 ± 0.07, acc_mutual_info 0.45 ± 0.07; Azerbaijani
  0.23 ± 0.06, 0.21 ± 0.06, 0.11 ± 0.05 (a SIB-200 test split gave English 0.60 against acc_norm 0.26). Only
  ``acc`` keeps the real base well clear of chance in both languages. It stays comparable across tokenizers: the
  summed log-likelihood of an option is the model's probability of that *string*, whatever the tokenizer cuts it
  into (per-character normalisation answers a different question, and divides away most of the signal here);
- ``items``: the headline score of every item, in order (what a paired before/after test reads,
  :mod:`azllm.evaluation.compare`).

MMLU's per-subject tasks are pooled into one ``mmlu_en`` entry (every item of every subject); the subjects, and the
subtasks a hub group reports, are under ``subtasks``.

Conventions recorded with every score: lm-eval's version, each task config's hash, the few-shot count and seed
(lm-eval samples the few-shot examples with a seeded generator over the items in order, so every model sees the
same examples), and whether the tokenizer prepends BOS (lm-eval follows the tokenizer's own default,
:func:`bos_convention`).

>>> res = score(model, tokenizer, local_task("sib200_az", path="dev.tsv"), batch_size=16)  # doctest: +SKIP
>>> res["tasks"]["sib200_az"]["headline"], res["tasks"]["sib200_az"]["acc_stderr"]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import logging
from collections import defaultdict

from ..utils import DEFAULT_SEED

__all__ = [
    "EvalModelError",
    "UnknownTaskError",
    "check_tokenizer",
    "bos_convention",
    "validate_task_names",
    "registry_names",
    "score",
    "HEADLINE",
]

HEADLINE = {
    "multiple_choice": "acc",
    "generate_until": "exact_match",
    "loglikelihood": "acc",
    "loglikelihood_rolling": "word_perplexity",
}
"""The headline metric of a task by its lm-eval output type (translation tasks: ``chrf``)."""


class EvalModelError(ValueError):
    """A model or tokenizer cannot be scored as given (the message says what to do)."""


class UnknownTaskError(KeyError):
    """A task name that neither azllm nor lm-eval knows (the message lists close matches)."""

    def __str__(self) -> str:
        return str(self.args[0])


def check_tokenizer(tokenizer, where: str = "the model") -> None:
    """Refuse a tokenizer lm-eval cannot batch or stop with: it needs an eos token, and a pad token (or an eos
    token to pad with)."""
    if getattr(tokenizer, "eos_token_id", None) is None:
        raise EvalModelError(
            f"{where}: the tokenizer has no eos token, so generations cannot stop and batches "
            "cannot be padded; set tokenizer.eos_token (e.g. in tokenizer_config.json) and re-export"
        )
    if getattr(tokenizer, "pad_token_id", None) is None:
        tokenizer.pad_token = tokenizer.eos_token  # left padding for generation, masked for log-likelihoods


def bos_convention(tokenizer) -> dict:
    """What the tokenizer does by default at the start of a text: ``{"bos_token", "prepends_bos"}`` (lm-eval 0.4.13
    encodes contexts with the tokenizer's own default)."""
    ids = tokenizer("Salam").input_ids
    bos = getattr(tokenizer, "bos_token_id", None)
    return {
        "bos_token": getattr(tokenizer, "bos_token", None),
        "prepends_bos": bool(bos is not None and ids and ids[0] == bos),
    }


def registry_names(task_manager=None) -> list[str]:
    """Every task, group and tag name lm-eval's registry knows (its shipped tasks; indexed once per process)."""
    return list((task_manager or _task_manager(True)).all_tasks)


@functools.lru_cache(maxsize=2)
def _task_manager(registry: bool):
    """lm-eval's task manager, built once per process: with its registry (``registry``: the hub tasks need it; indexing
    its ~14,700 YAML files takes ~7 s, which ``simple_evaluate`` would otherwise pay on every call) or without it
    (local task configs are complete dicts and need no index)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_defaults=registry, metadata={})


def validate_task_names(names: list[str], local: list[str], task_manager=None) -> None:
    """Refuse a name that is neither a local task nor in lm-eval's registry, listing the closest names."""
    known = set(local)
    unknown = [n for n in names if n not in known]
    if not unknown:
        return
    reg = set(registry_names(task_manager))
    bad = [n for n in unknown if n not in reg]
    if bad:
        pool = sorted(known | reg)
        hints = {n: difflib.get_close_matches(n, pool, n=5, cutoff=0.6) for n in bad}
        raise UnknownTaskError(
            "unknown evaluation task(s): "
            + "; ".join(f"{n!r} (close: {', '.join(h) if h else 'none'})" for n, h in hints.items())
            + ". Local tasks: "
            + ", ".join(sorted(known))
            + "; `lm_eval ls tasks` lists lm-eval's."
        )


def _quiet_lm_eval() -> None:
    for name in ("lm_eval", "lm-eval", "lm_eval.api.task", "lm_eval.evaluator"):
        logging.getLogger(name).setLevel(logging.ERROR)


@contextlib.contextmanager
def _without_env_dump():
    """``simple_evaluate`` ends with ``add_env_info``: torch's ``collect_env``, which starts ``pip list`` (and, on
    a GPU machine, ``nvidia-smi``) in child processes, ~1 s a call on 2 cores, for a text blob azllm never reads:
    every report records its own packages, commit and machine. Within this block it records lm-eval's and
    transformers' versions only."""
    import lm_eval.evaluator as ev

    def versions(storage: dict) -> None:
        from transformers import __version__ as transformers_version

        storage.update(lm_eval_version=_version(), transformers_version=transformers_version)

    was, ev.add_env_info = ev.add_env_info, versions
    try:
        yield
    finally:
        ev.add_env_info = was


def score(
    model,
    tokenizer,
    configs: list[dict],
    *,
    hub_tasks: list[str] = (),
    batch_size: int = 8,
    limit: int | None = None,
    seed: int = DEFAULT_SEED,
    bootstrap_iters: int = 200,
    max_length: int | None = None,
) -> dict:
    """Score ``model`` on local task ``configs`` (:func:`azllm.evaluation.tasks.local_task`) and lm-eval registry
    names ``hub_tasks``; returns ``{"tasks": {name: {...}}, "lm_eval", "task_hashes", "n_items", "num_fewshot",
    "seed", "bos"}``. ``limit``: the first items of each task (None: all)."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    from ..utils import log_stream
    from .tasks import chance, config_hash

    _quiet_lm_eval()
    check_tokenizer(tokenizer)
    was_training = model.training
    model.eval()
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=max_length)
    if not configs and not hub_tasks:  # nothing to score (e.g. no task's data is here)
        return {
            "tasks": {},
            "subtasks": {},
            "lm_eval": _version(),
            "task_hashes": {},
            "n_items": {},
            "num_fewshot": {},
            "seed": seed,
            "limit": limit,
            "bos": bos_convention(tokenizer),
        }
    stream = log_stream()  # lm-eval's progress bars and prints: the terminal / the run's log, never a page
    try:
        with contextlib.redirect_stderr(stream), contextlib.redirect_stdout(stream), _without_env_dump():
            out = simple_evaluate(
                lm,
                tasks=[*configs, *hub_tasks],
                task_manager=_task_manager(bool(hub_tasks)),
                limit=limit,
                bootstrap_iters=bootstrap_iters,
                log_samples=True,
                random_seed=seed,
                numpy_random_seed=seed,
                torch_random_seed=seed,
                fewshot_random_seed=seed,
            )
    finally:
        model.train(was_training)
    by_name = {c["task"]: c for c in configs}
    tasks, pooled = {}, defaultdict(list)
    for name, res in out["results"].items():
        cfg = out["configs"].get(name, {})
        otype = cfg.get("output_type", "")
        metrics = {k.split(",")[0]: v for k, v in res.items() if "," in k and isinstance(v, (int, float))}
        head = "chrf" if "chrf" in metrics else HEADLINE.get(otype, next(iter(metrics), None))
        items = [
            float(s[head]) if not isinstance(s[head], (list, tuple)) else None
            for s in out["samples"].get(name, [])
            if head in s
        ]
        entry = {
            **metrics,
            "headline": head,
            "value": metrics.get(head),
            "stderr": metrics.get(f"{head}_stderr"),
            "n": out["n-samples"].get(name, {}).get("effective"),
            "output_type": otype,
            "num_fewshot": out.get("n-shot", {}).get(name),
            "chance": chance(by_name[name]) if name in by_name else None,
            "items": items if all(i is not None for i in items) else None,
        }
        if name.startswith("mmlu_en_"):
            pooled["mmlu_en"].append(entry)
        tasks[name] = entry
    for name, parts in pooled.items():
        tasks[name] = _pool(parts)
    # a hub group (mmlu, include_base_44_azerbaijani) reports its subtasks too: kept apart from the named tasks
    named = {n for n in by_name if not n.startswith("mmlu_en_")} | set(hub_tasks) | set(pooled)
    subtasks = {k: v for k, v in tasks.items() if k not in named}
    tasks = {k: v for k, v in tasks.items() if k in named}
    return {
        "tasks": tasks,
        "subtasks": subtasks,
        "lm_eval": _version(),
        "task_hashes": {c["task"]: config_hash(c) for c in configs},
        "n_items": {k: v.get("n") for k, v in tasks.items()},
        "num_fewshot": {k: v.get("num_fewshot") for k, v in tasks.items()},
        "seed": seed,
        "limit": limit,
        "bos": bos_convention(tokenizer),
    }


def _version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


def _pool(parts: list[dict]) -> dict:
    """Per-subject entries pooled over every item (MMLU): the mean and its sample standard error."""
    import math

    items = [x for p in parts for x in (p["items"] or [])]
    n = len(items)
    mean = sum(items) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in items) / (n - 1) / n) if n > 1 else 0.0
    head = parts[0]["headline"]
    chances = [p["chance"] for p in parts if p["chance"] is not None]
    return {
        head: mean,
        f"{head}_stderr": se,
        "headline": head,
        "value": mean,
        "stderr": se,
        "n": n,
        "output_type": parts[0]["output_type"],
        "num_fewshot": parts[0]["num_fewshot"],
        "chance": sum(chances) / len(chances) if chances else None,
        "items": items,
        "subjects": len(parts),
    }
