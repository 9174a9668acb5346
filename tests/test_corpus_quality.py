"""The quality rules of the corpus stage (azllm.corpus.quality) on real Azerbaijani text."""

from corpus_helpers import AMENDMENTS, KILL_SCRIPT, PROSE, TURKISH, _clean, _write, cleaned, flores  # noqa: F401

from azllm.corpus import quality_problem


def test_quality_rules_on_real_text():
    assert quality_problem(PROSE[0]) is None
    assert quality_problem(AMENDMENTS[0]) is None
    assert quality_problem("FƏSİL 3") == "too_short"  # a legal_codes.txt heading
    assert quality_problem("Əlaqə üçün : (+994)77 555 01 08 18 1234") == "digits"
    assert quality_problem("Çox gözəl film idi əəəəəəəəəəə") == "repeated_chars"
    assert quality_problem("Ad (fiziki və ya hüquqi şəxsin):____________________") == "repeated_chars"
    doc = "\n".join(["Sabah hava yağışlı olacaq."] * 4 + ["Külək güclənəcək."])
    assert quality_problem(doc) == "duplicate_lines"
    assert quality_problem(doc, max_duplicate_line_ratio=None, max_repeated_5gram_ratio=None) is None
