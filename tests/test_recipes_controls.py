"""Which stage helps (azllm.recipes.controls): the rows pair each stage's answers with the first stage's."""

import pytest

from azllm.config import load_params


def _answers(scores, words=5, loops=(), ids=None):
    ids = ids or [f"c{i}" for i in range(len(scores))]
    rows = [
        {
            "id": i,
            "answer": f"cavab {s}",
            "prompt": "cavab nədir?",
            "reference": "cavab 100",
            "chrf++": s,
            "words": words,
            "loop": k in loops,
            "stopped": True,
        }
        for k, (i, s) in enumerate(zip(ids, scores))
    ]
    return {"rows": rows}


def test_stage_rows_pair_every_stage_with_the_first_on_common_answers():
    from sacrebleu.metrics import CHRF

    from azllm.evaluation.compare import difference
    from azllm.recipes import controls

    cfg = load_params(None)
    stages = {
        "original base": _answers([10, 20, 30, 40]),
        "adapted": _answers([12, 18, 35, 41], words=7, loops=(0, 1)),
        "adapted + SFT": _answers([20, 25, 33], ids=["c0", "c1", "c3"]),  # c2 not answered: left out everywhere
    }
    rows = controls.stage_rows(cfg, stages)
    assert [r["model"] for r in rows] == ["original base", "adapted", "adapted + SFT"]
    assert all(r["n"] == 3 for r in rows)
    first, adapted, sft_row = rows
    assert first["delta"] is None and first["verdict"] is None and first["loop_share"] == 0
    assert adapted["loop_share"] == pytest.approx(2 / 3) and adapted["mean_words"] == 7
    ref = CHRF(word_order=2).corpus_score(["cavab 10", "cavab 20", "cavab 40"], [["cavab 100"] * 3]).score
    assert first["chrf"] == pytest.approx(ref)
    want = difference({"value": ref, "items": [10, 20, 40]}, {"value": sft_row["chrf"], "items": [20, 25, 33]})
    assert (sft_row["delta"], sft_row["delta_se"], sft_row["mde"]) == pytest.approx(
        (want["delta"], want["se"], want["mde"])
    )
    echo = CHRF(word_order=2).corpus_score(["cavab nədir?"] * 3, [["cavab 100"] * 3]).score
    assert all(r["chance"] == pytest.approx(echo) for r in rows)  # the instructions echoed, on the common answers
    assert controls.stage_rows(cfg, {}) == []


def test_the_original_base_is_adapt_base_unless_sft_names_its_own(tmp_path):
    from azllm.recipes import controls

    assert controls.original_base(load_params(None)) is None  # the stand-in: nothing to compare with
    cfg = load_params(None, overrides={"adapt": {"base": str(tmp_path)}})
    assert controls.original_base(cfg) == str(tmp_path)
    cfg = load_params(None, overrides={"adapt": {"base": str(tmp_path)}, "sft": {"base": "x"}})
    assert controls.original_base(cfg) is None
    stages = controls.control_answers(cfg, adapted=_answers([1]), adapted_sft=_answers([2]), show=None)
    assert list(stages) == ["adapted", "adapted + SFT"]
