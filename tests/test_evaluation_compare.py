"""Before/after verdicts (azllm.evaluation.compare): paired on the same items, unpaired otherwise."""

import pytest

from azllm.evaluation.compare import difference


def test_a_paired_difference_is_tighter_than_unpaired_on_correlated_items():
    before = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0] * 5
    after = [1, 1, 1, 1, 0, 0, 1, 1, 1, 0] * 5  # 10 of 50 items flip to correct, none the other way
    b = {"value": sum(before) / 50, "stderr": 0.08, "items": before}
    a = {"value": sum(after) / 50, "stderr": 0.075, "items": after}
    paired = difference(b, a)
    unpaired = difference({k: v for k, v in b.items() if k != "items"}, {k: v for k, v in a.items() if k != "items"})
    assert paired["paired"] and not unpaired["paired"]
    assert paired["delta"] == pytest.approx(0.2) == unpaired["delta"]
    assert paired["se"] < unpaired["se"]
    assert paired["verdict"] == "gain" and unpaired["verdict"] == "within noise"


def test_losses_noise_and_lower_is_better():
    assert difference({"value": 0.5, "stderr": 0.01}, {"value": 0.4, "stderr": 0.01})["verdict"] == "loss"
    assert difference({"value": 0.5, "stderr": 0.05}, {"value": 0.45, "stderr": 0.05})["verdict"] == "within noise"
    assert (
        difference({"value": 3.0, "stderr": 0.01}, {"value": 2.0, "stderr": 0.01}, higher_is_better=False)["verdict"]
        == "gain"
    )
    assert difference({"value": 0.5}, {"value": 0.6})["verdict"] == "no error estimate"


def test_the_minimum_detectable_effect_is_2_8_standard_errors_at_z_1_96():
    from azllm.evaluation.compare import difference, mde

    d = difference({"value": 0.5, "items": [1, 0, 1, 0, 1]}, {"value": 0.6, "items": [1, 1, 1, 0, 0]})
    assert d["mde"] == pytest.approx((1.96 + 0.8416) * d["se"])
    assert mde(0.1, z=2.0) == pytest.approx(0.28416)
    assert difference({"value": 1.0, "items": [1, 1]}, {"value": 1.0, "items": [1, 1]})["mde"] is None
