"""Decontamination against the eval sets (azllm.corpus.decontaminate): a copied eval line is found."""

from corpus_helpers import AMENDMENTS, KILL_SCRIPT, PROSE, TURKISH, _clean, _write, cleaned, flores  # noqa: F401

from azllm.corpus import eval_index, find_contamination
from azllm.corpus.decontaminate import contaminated_by


def test_decontamination_finds_a_copied_eval_line(flores):
    index = eval_index(flores, n=13, min_words=8)
    leaked = "Xəbərə görə, " + flores[3] + " Bu barədə məlumat verilib."
    assert contaminated_by(leaked, index) == 3
    assert contaminated_by(PROSE[0], index) is None
    assert find_contamination([PROSE[1], leaked, PROSE[2]], index) == [(1, 3)]
    short = eval_index(["Bakı Azərbaycanın paytaxtı və ən böyük şəhəridir."], n=13, min_words=5)
    assert contaminated_by("Məlumdur ki, Bakı Azərbaycanın paytaxtı və ən böyük şəhəridir!", short) == 0
