"""Reading a training curve forward: does it still fall at the last step, and what would more time buy?

A curve is a list of evaluations ``{"step": int, "bpb": float}`` (a run's ``curves["eval"][set]``). The forecast
fits ``bpb = a + b * ln(step)`` by least squares to the evaluations of the run's second half (step >= half the last
step, at least two of them), the range where the log-linear form (a power law's local shape) holds best, and reads the
line at ``last step + more steps``. It is an estimate, not a measurement, and says so: it assumes that a run given the
extra steps (with its schedule stretched to match) would follow the second half's line. The line has no floor while
a real curve flattens, so the further it is read past the measured steps (``reach``: the forecast's step over the
last measured one) the more it promises; past about 2x it is a guess.

>>> pts = [{"step": s, "bpb": 3.0 - 0.5 * math.log(s)} for s in (25, 50, 75, 100, 150)]
>>> f = forecast(pts, more_steps=150)
>>> round(f["bpb_after"], 4), round(f["per_doubling"], 4), f["fitted"]
(0.1481, -0.3466, 3)
"""

from __future__ import annotations

import math

__all__ = ["log_fit", "forecast"]


def log_fit(points: list[dict]) -> tuple[float, float]:
    """Least-squares ``(a, b)`` of ``bpb = a + b * ln(step)`` over ``points`` (steps > 0, at least two distinct).

    >>> log_fit([{"step": 1, "bpb": 2.0}, {"step": math.e, "bpb": 1.0}])
    (2.0, -1.0)
    """
    xy = [(math.log(p["step"]), float(p["bpb"])) for p in points if p["step"] > 0]
    if len({x for x, _ in xy}) < 2:
        raise ValueError(f"a log fit needs evaluations at two distinct steps above 0, got {len(xy)}")
    mx = sum(x for x, _ in xy) / len(xy)
    my = sum(y for _, y in xy) / len(xy)
    b = sum((x - mx) * (y - my) for x, y in xy) / sum((x - mx) ** 2 for x, _ in xy)
    return my - b * mx, b


def forecast(points: list[dict], *, more_steps: int) -> dict:
    """The curve's last value, its fall over the last interval (per 100 steps; negative: it still falls), the
    second half's fitted change per doubling of the steps, and the fitted value ``more_steps`` later.

    Keys: ``last_step``, ``last_bpb``, ``last_interval_per_100_steps``, ``per_doubling``, ``bpb_after``,
    ``change_after`` (``bpb_after - last_bpb``), ``more_steps``, ``reach`` (``(last step + more_steps) / last
    step``: how far past the measurements the line is read), ``fitted`` (evaluations in the fit). With fewer
    than two evaluations after step 0 in the second half the fit's keys are ``None``."""
    pts = sorted((p for p in points if p["step"] > 0), key=lambda p: p["step"])
    if not pts:
        raise ValueError("the curve has no evaluation after step 0")
    last = pts[-1]
    half = [p for p in pts if p["step"] >= last["step"] / 2]
    prev = pts[-2] if len(pts) >= 2 else None
    out = {
        "last_step": last["step"],
        "last_bpb": last["bpb"],
        "last_interval_per_100_steps": (last["bpb"] - prev["bpb"]) / (last["step"] - prev["step"]) * 100
        if prev
        else None,
        "more_steps": int(more_steps),
        "reach": (last["step"] + more_steps) / last["step"],
        "fitted": len(half),
        "per_doubling": None,
        "bpb_after": None,
        "change_after": None,
    }
    if len(half) >= 2:
        a, b = log_fit(half)
        after = a + b * math.log(last["step"] + more_steps)
        out.update(per_doubling=b * math.log(2), bpb_after=after, change_after=after - last["bpb"])
    return out
