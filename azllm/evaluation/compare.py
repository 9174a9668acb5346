"""Before/after: is a change in a score a gain, a loss, or within the noise?

A difference is called a **gain** or a **loss** only when it exceeds ``z`` (1.96: a two-sided 95% test) standard
errors of the difference; otherwise it is **within noise**. The standard error:

- **paired** when both scores come with per-item results on the same items (the usual case: one model before and
  after training, the same test split): the sample standard error of the per-item differences. Pairing removes the
  items' own difficulty from the noise, so it is the tighter and the right test here;
- **unpaired** otherwise: ``sqrt(se_before**2 + se_after**2)``.

The **minimum detectable effect** (``mde``) is the smallest true change that this test would call a gain or a loss
four times in five: ``(z + 0.8416) * se`` (80% power; 2.80 standard errors at ``z`` 1.96). A change smaller than
it can be real and still read "within noise": more items, not more steps, is then what the measure needs.

>>> d = difference({"value": 0.30, "stderr": 0.02}, {"value": 0.40, "stderr": 0.02})
>>> round(d["delta"], 2), round(d["se"], 4), d["verdict"], d["paired"]
(0.1, 0.0283, 'gain', False)
>>> round(d["mde"], 4)
0.0792
>>> difference({"value": 0.5, "items": [1, 0, 1, 0]}, {"value": 0.5, "items": [0, 1, 0, 1]})["verdict"]
'within noise'
"""

from __future__ import annotations

import math

__all__ = ["difference", "change_row", "mde", "Z", "POWER_Z"]

Z = 1.96
"""Standard errors a difference must exceed to be called a gain or a loss."""
POWER_Z = 0.8416
"""The standard normal quantile of 80%: the power the minimum detectable effect is stated at."""


def mde(se: float | None, *, z: float = Z) -> float | None:
    """The minimum detectable effect of a difference with standard error ``se``: ``(z + POWER_Z) * se``.

    >>> round(mde(1.0), 2)
    2.8
    """
    return None if se is None else (z + POWER_Z) * se


def difference(before: dict, after: dict, *, z: float = Z, higher_is_better: bool = True) -> dict:
    """``{"delta", "se", "z", "paired", "verdict", "mde"}`` of two scores ``{"value", "stderr"?, "items"?}``."""
    a, b = before.get("items"), after.get("items")
    paired = bool(a) and bool(b) and len(a) == len(b) and len(a) > 1
    if paired:
        d = [y - x for x, y in zip(a, b)]
        n = len(d)
        mean = sum(d) / n
        se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
        delta = after["value"] - before["value"] if before.get("value") is not None else mean
    else:
        delta = after["value"] - before["value"]
        se = math.sqrt((before.get("stderr") or 0.0) ** 2 + (after.get("stderr") or 0.0) ** 2)
    signed = delta if higher_is_better else -delta
    if se > 0:
        verdict = "gain" if signed > z * se else "loss" if signed < -z * se else "within noise"
    else:
        # every paired difference equal: a real change; no error estimate at all: no verdict
        verdict = (
            "within noise" if delta == 0 else ("gain" if signed > 0 else "loss") if paired else "no error estimate"
        )
    return {
        "delta": delta,
        "se": se,
        "z": delta / se if se > 0 else None,
        "paired": paired,
        "verdict": verdict,
        "mde": mde(se, z=z) if se > 0 else None,
    }


def change_row(before: dict, after: dict, *, z: float = Z, higher_is_better: bool = True) -> dict:
    """:func:`difference` of two scores ``{"value", "items"}`` as one before -> after row: ``{"before", "after",
    "delta", "delta_se", "verdict", "mde", "n"}`` (``n``: the items after).

    >>> r = change_row({"value": 0.5, "items": [1, 0, 1, 0]}, {"value": 0.75, "items": [1, 1, 1, 0]})
    >>> r["delta"], r["n"], r["verdict"]
    (0.25, 4, 'within noise')
    """
    d = difference(before, after, z=z, higher_is_better=higher_is_better)
    return {
        "before": before["value"],
        "after": after["value"],
        "delta": d["delta"],
        "delta_se": d["se"],
        "verdict": d["verdict"],
        "mde": d["mde"],
        "n": len(after["items"]),
    }
