"""Held-out answers and their judgement (azllm.recipes.judge): a base's answers before any step, cached, and the
paired before -> after changes of chrF++, the loop rate and the empty share."""

import pytest
from sft_helpers import params, tiny_base  # noqa: F401  (fixture)

from azllm.recipes import conversations, judge, sft


def test_base_answers_score_the_base_before_any_step_and_the_change_is_paired(tiny_base, tmp_path):
    """The "before" of chrF++: the SFT base's own greedy answers with the training template (cached by base, data
    and template); chrf_change's standard error is that of the per-answer differences."""
    import math

    from azllm.sft.generate import chrf_scores

    cfg = params(tiny_base, tmp_path)
    tok, template = sft.sft_tokenizer(cfg, str(tiny_base))
    data = conversations.sft_data(cfg, tok)
    before = judge.base_answers(cfg, base=str(tiny_base), tokenizer=tok, template=template, data=data)
    assert [r["id"] for r in before["rows"]] == [c["id"] for c in data["held_out"]]
    assert before["chrf++"] is not None and len(before["rows"]) >= 3
    assert judge.base_answers(cfg, base=str(tiny_base), tokenizer=tok, template=template, data=data) == before
    rows = before["rows"][:3]
    after = {
        "chrf++": before["chrf++"] + 3.0,
        "rows": [{**r, "chrf++": r["chrf++"] + d} for r, d in zip(rows, [1.0, 5.0, 3.0])],
    }
    ch = judge.chrf_change(cfg, {**before, "rows": rows}, after)
    assert ch["delta"] == pytest.approx(3.0) and ch["n"] == 3
    assert ch["delta_se"] == pytest.approx(math.sqrt(4.0 / 3)) and ch["verdict"] == "gain"  # 3 > 1.96 * 1.155
    echoed = chrf_scores([r["prompt"] for r in rows], [r["reference"] for r in rows])["chrf++"]
    assert ch["chance"] == pytest.approx(echoed)  # each instruction echoed as its answer


def test_a_loop_rate_that_falls_because_the_answers_vanished_shows_as_empty_answers():
    """Eight held-out answers, six looping, all empty after: the loop rate falls beyond the noise, and the empty
    share says why (0 -> 1, a loss; lower is better)."""
    from azllm.config import Config

    before_rows = [{"loop": i < 6, "words": 12, "chrf++": 5.0} for i in range(8)]
    after_rows = [{"loop": False, "words": 0, "chrf++": 0.0} for _ in range(8)]
    before = {"rows": before_rows, "chrf++": 5.0, "loop_share": 0.75, "empty_share": 0.0}
    after = {"rows": after_rows, "chrf++": 0.0, "loop_share": 0.0, "empty_share": 1.0}
    loops = judge.answer_change(Config(), before, after, measure="loop")
    assert loops["delta"] == pytest.approx(-0.75) and loops["verdict"] == "gain" and loops["n"] == 8
    empty = judge.answer_change(Config(), before, after, measure="empty")
    assert (empty["before"], empty["after"], empty["delta"], empty["verdict"]) == (0.0, 1.0, 1.0, "loss")
