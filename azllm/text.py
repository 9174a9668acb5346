"""Azerbaijani text normalization, case mapping and the definition of "word" used by every metric.

Rules of :func:`normalize`, applied in this order (each one has a test in ``tests/test_text.py``):

1. Unicode NFC, so that ``ə`` typed as ``e`` + combining marks and precomposed letters compare equal.
2. Cyrillic schwa ``ә``/``Ә`` (U+04D9/U+04D8), which real Azerbaijani text often contains because of Cyrillic
   keyboards, becomes Latin ``ə``/``Ə`` (U+0259/U+018F).
3. Apostrophe variants (’ ‘ ʼ ʻ ` ´ ′) become ASCII ``'``; dash and hyphen variants (‐ ‑ ‒ – — ― −) become ASCII
   ``-``. Quotes are left alone: they carry no ambiguity for a tokenizer.
4. Soft hyphens, zero-width characters and the BOM are removed; other control characters are removed.
5. Every run of whitespace (tabs, no-break spaces, thin spaces, newlines) becomes one space; the ends are stripped.

Nothing here lower-cases: case is information, and Azerbaijani case mapping needs :func:`az_lower` /
:func:`az_upper` because Python's ``str.lower`` maps ``I`` to ``i`` (Azerbaijani: ``ı``) and ``İ`` to
``i̇`` (two code points).

Words. Two documented definitions:

- :func:`whitespace_words`: maximal runs of non-space characters (``"Bakı, 2021-ci il."`` has 3). This is the
  denominator of *fertility* (tokens per word), as in the published reference numbers for FLORES.
- :func:`alpha_words`: maximal runs of letters, where an apostrophe or hyphen *between* letters stays inside the
  word (``"ABŞ-nın"``, ``"Azərbaycan'ın"``); digits and punctuation are not words. Used by the morphology measure
  and the word statistics.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "normalize",
    "az_lower",
    "az_upper",
    "whitespace_words",
    "alpha_words",
    "VOWELS",
]

_CHAR_MAP = {
    "\u04d9": "\u0259",  # ә -> ə
    "\u04d8": "\u018f",  # Ә -> Ə
    # apostrophes
    "\u2019": "'",
    "\u2018": "'",
    "\u02bc": "'",
    "\u02bb": "'",
    "`": "'",
    "\u00b4": "'",
    "\u2032": "'",
    # dashes and hyphens
    "\u2010": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2015": "-",
    "\u2212": "-",
    # invisible characters
    "\u00ad": "",
    "\u200b": "",
    "\u200c": "",
    "\u200d": "",
    "\u2060": "",
    "\ufeff": "",
}
_TRANSLATE = str.maketrans(_CHAR_MAP)
_WS = re.compile(r"\s+")
# control characters (category Cc) other than whitespace, which rule 5 handles
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")

_NEEDS_MAP = re.compile("[" + re.escape("".join(_CHAR_MAP)) + r"\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")

VOWELS = frozenset("aıoueəiöüAIOUEƏİÖÜ")


def normalize(text: str) -> str:
    """Normalize Azerbaijani text by the rules in the module docstring.

    >>> normalize("Azәrbaycan’ın  paytaxtı – Bakı\\u00a0")
    "Azərbaycan'ın paytaxtı - Bakı"
    """
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if _NEEDS_MAP.search(text):  # most lines need no mapping: skip the copy
        text = _CONTROL.sub("", text.translate(_TRANSLATE))
    return " ".join(text.split())


def az_lower(text: str) -> str:
    """Lower-case with Azerbaijani rules: ``I`` -> ``ı`` and ``İ`` -> ``i``.

    >>> az_lower("İLHAM ILDIRIM")
    'ilham ıldırım'
    """
    return text.replace("I", "ı").replace("İ", "i").lower()


def az_upper(text: str) -> str:
    """Upper-case with Azerbaijani rules: ``i`` -> ``İ`` and ``ı`` -> ``I``.

    >>> az_upper("istiqlal ışıq")
    'İSTİQLAL IŞIQ'
    """
    return text.replace("i", "İ").replace("ı", "I").upper()


def whitespace_words(text: str) -> list[str]:
    """Words split on whitespace: the denominator of fertility.

    >>> whitespace_words("Bakı, 2021-ci il.")
    ['Bakı,', '2021-ci', 'il.']
    """
    return text.split()


_ALPHA_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")


def alpha_words(text: str) -> list[str]:
    """Alphabetic words: letters, with an apostrophe or hyphen kept only between letters.

    >>> alpha_words("ABŞ-nın 2021-ci ildə 'Bakı' şəhəri...")
    ['ABŞ-nın', 'ci', 'ildə', 'Bakı', 'şəhəri']
    """
    return _ALPHA_WORD.findall(text)
