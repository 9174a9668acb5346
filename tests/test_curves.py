"""azllm.curves: the log fit against numpy's least squares, and the forecast's edges."""

import math

import numpy as np
import pytest

from azllm.curves import forecast, log_fit


def curve(steps, f):
    return [{"step": s, "bpb": f(s)} for s in steps]


def test_log_fit_equals_numpy_polyfit_on_noisy_points():
    rng = np.random.default_rng(0)
    pts = curve([20, 40, 60, 80, 100, 150], lambda s: 3.1 - 0.4 * math.log(s) + float(rng.normal(0, 0.02)))
    a, b = log_fit(pts)
    nb, na = np.polyfit(np.log([p["step"] for p in pts]), [p["bpb"] for p in pts], 1)
    assert (a, b) == pytest.approx((na, nb), abs=1e-12)


def test_forecast_fits_the_second_half_only_and_reads_the_line_later():
    # a kink: steep before step 75, on an exact log line from 75 on; the fit must see only the line
    pts = curve([25, 50], lambda s: 9.0) + curve([75, 100, 150], lambda s: 2.0 - 0.25 * math.log(s))
    f = forecast(pts, more_steps=50)
    assert f["fitted"] == 3 and f["last_step"] == 150 and f["more_steps"] == 50 and f["reach"] == 200 / 150
    assert f["bpb_after"] == pytest.approx(2.0 - 0.25 * math.log(200))
    assert f["per_doubling"] == pytest.approx(-0.25 * math.log(2))
    assert f["last_interval_per_100_steps"] == pytest.approx((-0.25 * math.log(150 / 100)) / 50 * 100)
    assert f["change_after"] == pytest.approx(f["bpb_after"] - f["last_bpb"])


def test_step_zero_is_left_out_and_one_point_in_the_second_half_gives_no_fit():
    f = forecast(curve([0, 10, 100], lambda s: 1.0 + 1 / (s + 1)), more_steps=10)
    assert f["fitted"] == 1 and f["bpb_after"] is None and f["per_doubling"] is None
    assert f["last_interval_per_100_steps"] == pytest.approx((1 / 101 - 1 / 11) / 90 * 100)


def test_a_curve_without_evaluations_after_step_zero_is_an_error():
    with pytest.raises(ValueError, match="no evaluation after step 0"):
        forecast([{"step": 0, "bpb": 3.0}], more_steps=10)
    with pytest.raises(ValueError, match="two distinct steps"):
        log_fit([{"step": 5, "bpb": 1.0}, {"step": 5, "bpb": 2.0}])
