"""``azllm sweep FILE [--record OUT]``: one stage's settings, varied and judged where no verdict is read.

A sweep file (:class:`azllm.config.sweep.SweepConfig`, ``params/sweeps/*.yaml``) names a params file and variants,
each a few settings of one stage's section. Each variant runs that stage's command on the params with its settings
laid over (preference tuning: :func:`azllm.recipes.prefer.prefer_command`, export off), judged on the **selection
split** (``preference.judge_on: selection``): with ``sft.verdict_size`` the verdict split is never read, so the
study that ships the chosen setting is judged on conversations no choice saw. A finished variant is read back,
not trained again. The record (``--record``, rendered by ``azllm results``) holds each variant's settings and
judgement (English bits per byte on held-out English text among it: the guard that keeps English), the rule and
the variant it chose (:func:`azllm.recipes.prefer.chosen_setting`), with the commit,
packages and machine.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..config import ParamsError, read_yaml
from ..config.sweep import SweepConfig

__all__ = ["read_sweep", "sweep_command", "RULE"]

RULE = (
    "preference accuracy above chance beyond the noise, chrF++ of the answers not below the SFT model's beyond the "
    "noise; of those, the ones that keep English (bits per byte on held-out English text, adapt.english_eval, not "
    "up beyond the noise), and of these the largest chrF++ change; when none keeps English, the one that loses the "
    "least (azllm.recipes.prefer.chosen_setting)"
)
"""How a preference sweep chooses, in words (the record keeps it)."""


def read_sweep(path: str | os.PathLike) -> SweepConfig:
    """A sweep file, validated (a bad key or value is a :class:`azllm.config.ParamsError` naming it)."""
    from pydantic import ValidationError

    try:
        return SweepConfig.model_validate(read_yaml(path))
    except ValidationError as e:
        raise ParamsError(f"{path}: {e.errors()[0]['loc']}: {e.errors()[0]['msg']}") from None


def _params_path(sweep: SweepConfig) -> Path:
    p = Path(sweep.params)
    if p.is_absolute() or p.is_file():
        return p
    from ..utils import REPO_ROOT

    return Path(REPO_ROOT) / p


def sweep_command(path: str | os.PathLike, *, record: str | os.PathLike | None = None, show=print) -> dict:
    """Run every variant of the sweep file at ``path`` (or read it back) and return the record ``{"sweep", "run",
    "rule", "variants", "chosen"}``; with ``record`` it is also written there (atomically)."""
    from ..utils import atomic_write_json, git_commit, machine_info, package_versions
    from . import load
    from .prefer import chosen_setting, judgement_rows, prefer_command

    sweep = read_sweep(path)
    params = _params_path(sweep)
    variants, judged_on = [], None
    for name, settings in sweep.variants.items():
        cfg = load(params, {sweep.stage: {**settings, "export": False, "judge_on": "selection"}})
        show(f"sweep: {name}: {settings}")
        rec = prefer_command(cfg, show=show)
        if rec.get("interrupted"):
            raise RuntimeError(f"sweep variant {name} was interrupted; run the sweep again to resume it")
        judged_on = (
            f"the selection split: {rec['preference_accuracy']['n']} held-out pairs and {rec['chrf']['n']} answers "
            f"{'(sft.verdict_size keeps the verdict split apart, unread)' if cfg.sft.verdict_size else ''}"
        ).strip()
        if rec.get("english"):
            judged_on += f"; English: {rec['english']['n']} documents of {cfg.adapt.english_eval.path}"
        variants.append(
            {
                "name": name,
                "settings": settings,
                "key": rec["key"],
                "steps": rec["run"]["steps"],
                "pairs": {"trained": rec["counts"]["trained"], "held_out": rec["counts"]["held_out"]["built"]},
                "judgement": judgement_rows(rec),
            }
        )
    best = chosen_setting(variants)
    out = {
        "sweep": sweep.stage,
        "run": {
            "run_name": cfg.run_name,
            "params_file": sweep.params,
            "sweep_file": str(path),
            "base_settings": f"the params file at that commit; each variant changes only what its settings name"
            f"{', and ' + sweep.stage + '.export is off'}" + (f"; {sweep.note}" if sweep.note else ""),
            "command": f"python -m azllm sweep {path}",
            "git_commit": git_commit(),
            "packages": package_versions(),
            "machine": machine_info(),
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "judged_on": judged_on,
        },
        "rule": RULE,
        "variants": variants,
        "chosen": best["name"] if best else None,
    }
    if record:
        atomic_write_json(record, out)
    show(f"sweep: chosen {out['chosen']}" + (f" (record {record})" if record else ""))
    return out
