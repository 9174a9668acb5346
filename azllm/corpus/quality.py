"""Quality rules in the style of Gopher (Rae et al. 2021), C4 and FineWeb, sized for Azerbaijani documents that
may be one line long (a headline, a comment) or many (an article).

:func:`quality_problem` returns the name of the first rule a document breaks, or None. Each rule is one
threshold; None switches it off. Words are whitespace-separated tokens; "alphabetic" words hold a letter.

===========================  =============================================================================
rule                         breaks when
===========================  =============================================================================
``too_short`` / ``too_long``  fewer than ``min_words`` / more than ``max_words`` words
``word_length``              mean length of words outside [``min_mean_word_length``, ``max_mean_word_length``]
``symbols``                  ``#`` and ``...``/``…`` per word above ``max_symbol_ratio`` (Gopher)
``digits``                   digits / characters above ``max_digit_ratio``
``non_alpha_words``          words without a letter / words above ``max_non_alpha_ratio`` (Gopher: 0.2; 0.5 here,
since one-line documents with a number or a dash are normal)
``punctuation_lines``        share of lines with no letter above ``max_punctuation_line_ratio`` (C4/FineWeb)
``duplicate_lines``          share of lines repeated inside the document above ``max_duplicate_line_ratio``
``repeated_ngrams``          characters in repeated word 5-grams / characters above ``max_repeated_5gram_ratio``
``repeated_chars``           a character repeated ``max_char_run`` times in a row (``Əəəəəəəəə``)
===========================  =============================================================================
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["quality_problem", "RULES"]

RULES = (
    "too_short",
    "too_long",
    "word_length",
    "symbols",
    "digits",
    "non_alpha_words",
    "punctuation_lines",
    "duplicate_lines",
    "repeated_ngrams",
    "repeated_chars",
)


def _repeated_ngram_share(words: list[str], n: int = 5) -> float:
    """Characters of the word n-grams that occur more than once, over all characters of the words."""
    if len(words) < 2 * n:
        return 0.0
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    counts = Counter(grams)
    covered = [False] * len(words)
    for i, g in enumerate(grams):
        if counts[g] > 1:
            covered[i : i + n] = [True] * n
    total = sum(len(w) for w in words)
    return sum(len(w) for w, c in zip(words, covered) if c) / max(total, 1)


def _line_shares(text: str) -> tuple[float, float]:
    """(share of non-empty lines with no letter, share of non-empty lines that repeat an earlier line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return 0.0, 0.0
    no_letter = sum(1 for ln in lines if not any(c.isalpha() for c in ln))
    return no_letter / len(lines), (len(lines) - len(set(lines))) / len(lines)


def quality_problem(
    text: str,
    *,
    min_words: int | None = 3,
    max_words: int | None = 100_000,
    min_mean_word_length: float | None = 2.0,
    max_mean_word_length: float | None = 18.0,
    max_symbol_ratio: float | None = 0.1,
    max_digit_ratio: float | None = 0.25,
    max_non_alpha_ratio: float | None = 0.5,
    max_punctuation_line_ratio: float | None = 0.3,
    max_duplicate_line_ratio: float | None = 0.3,
    max_repeated_5gram_ratio: float | None = 0.3,
    max_char_run: int | None = 6,
) -> str | None:
    """The first rule of the module table that ``text`` breaks, or None when it passes them all.

    >>> quality_problem("Bakıda bu iki marşrutun hərəkət sxemi dəyişdirilir.")
    >>> quality_problem("Salam")
    'too_short'
    >>> quality_problem("12.03.2021 14:55 2345 678 90 11")
    'digits'
    >>> quality_problem("Çox gözəl film idi əəəəəəəəəəə")
    'repeated_chars'
    """
    words = text.split()
    n = len(words)
    if min_words is not None and n < min_words:
        return "too_short"
    if max_words is not None and n > max_words:
        return "too_long"
    mean_len = sum(len(w) for w in words) / max(n, 1)
    if (min_mean_word_length is not None and mean_len < min_mean_word_length) or (
        max_mean_word_length is not None and mean_len > max_mean_word_length
    ):
        return "word_length"
    if (
        max_symbol_ratio is not None
        and (text.count("#") + text.count("...") + text.count("…")) / max(n, 1) > max_symbol_ratio
    ):
        return "symbols"
    if max_digit_ratio is not None and sum(c.isdigit() for c in text) / max(len(text), 1) > max_digit_ratio:
        return "digits"
    if (
        max_non_alpha_ratio is not None
        and sum(1 for w in words if not any(c.isalpha() for c in w)) / max(n, 1) > max_non_alpha_ratio
    ):
        return "non_alpha_words"
    return _structure_problem(
        text, words, max_punctuation_line_ratio, max_duplicate_line_ratio, max_repeated_5gram_ratio, max_char_run
    )


def _structure_problem(text, words, max_punct, max_dup, max_rep, max_run) -> str | None:
    """The line, n-gram and character-run rules of :func:`quality_problem`."""
    punct, dup = _line_shares(text)
    if max_punct is not None and punct > max_punct:
        return "punctuation_lines"
    if max_dup is not None and dup > max_dup:
        return "duplicate_lines"
    if max_rep is not None and _repeated_ngram_share(words) > max_rep:
        return "repeated_ngrams"
    if max_run is not None and re.search(rf"(\w)\1{{{max_run - 1},}}", text):
        return "repeated_chars"
    return None
