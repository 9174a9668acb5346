"""A small, documented inventory of Azerbaijani suffixes and a rule-based suffix splitter.

This is *not* a morphological analyser: it is a transparent heuristic that peels known inflectional and a few
derivational suffixes off the end of a word, right to left, and only where

- the suffix's vowel agrees with the stem by **vowel harmony** (two-way ``a/ə``: back vowels ``a ı o u`` take
  ``a``, front vowels ``e ə i ö ü`` take ``ə``; four-way ``ı/i/u/ü``: ``a ı`` -> ``ı``, ``e ə i`` -> ``i``,
  ``o u`` -> ``u``, ``ö ü`` -> ``ü``);
- the buffer consonant fits: vowel-initial forms (``-ı``, ``-a``, ``-ım``) follow a consonant, buffered forms
  (``-sı``, ``-ya``, ``-nın``, ``-m``) follow a vowel;
- the suffixes come in the order of Azerbaijani morphotactics (slots below, left to right: derivation,
  negation, tense/participle, plural, possessive, case, person/copula, question);
- the stem left over keeps at least 2 letters and a vowel;
- a bare-vowel suffix (``-ı``, ``-a``) is only taken word-finally or before an n-buffered case (``-ndə``).

Slots and their suffixes (base forms; each is expanded over harmony variants):

====  =================  ===========================================================================
slot  what               forms
====  =================  ===========================================================================
1     derivation         -lıq -lı -sız -çı -laş -dır (causative)
2     negation           -ma
3     tense, participle  -dı -mış -acaq/-yacaq -ar -ır -malı -sa -an/-yan -dıq -araq -ıb -maq
4     plural             -lar
5     possessive         -ım/-m -ın/-n -ı/-sı -ımız/-mız -ınız/-nız -ları
6     case               -ın/-nın (gen.) -a/-ya/-na (dat.) -ı/-yı/-nı (acc.) -da/-nda (loc.)
                         -dan/-ndan (abl.) -la (instr.)
7     person, copula     -dır -am/-yam -san -ıq/-yıq -sınız -dırlar
8     question           -mı
====  =================  ===========================================================================

>>> segment("evlərimizdən")
['ev', 'lər', 'imiz', 'dən']
>>> segment("kitablar")
['kitab', 'lar']
"""

from __future__ import annotations

import re
from functools import lru_cache

from .text import az_lower

__all__ = ["segment", "suffix_boundaries", "SUFFIXES"]

BACK = set("aıou")
FRONT = set("eəiöü")
VOWELS = BACK | FRONT
_TWO = {"a": "a", "ı": "a", "o": "a", "u": "a", "e": "ə", "ə": "ə", "i": "ə", "ö": "ə", "ü": "ə"}
_FOUR = {"a": "ı", "ı": "ı", "o": "u", "u": "u", "e": "i", "ə": "i", "i": "i", "ö": "ü", "ü": "ü"}

# (slot, base form with A = two-way vowel and I = four-way vowel, position: "C" after a consonant, "V" after a
#  vowel, None either)
_BASE = [
    (1, "lIq", None), (1, "lI", None), (1, "sIz", None), (1, "çI", None), (1, "lAş", None), (1, "dIr", None),
    (2, "mA", None),
    (3, "dI", None), (3, "mIş", None), (3, "AcAq", "C"), (3, "yAcAq", "V"), (3, "Ar", "C"), (3, "Ir", "C"),
    (3, "mAlI", None), (3, "sA", None), (3, "An", "C"), (3, "yAn", "V"), (3, "dIq", None), (3, "ArAq", "C"),
    (3, "yArAq", "V"), (3, "Ib", "C"), (3, "yIb", "V"), (3, "mAq", None),
    (4, "lAr", None),
    (5, "Im", "C"), (5, "m", "V"), (5, "In", "C"), (5, "n", "V"), (5, "I", "C"), (5, "sI", "V"),
    (5, "ImIz", "C"), (5, "mIz", "V"), (5, "InIz", "C"), (5, "nIz", "V"), (5, "lArI", None),
    (6, "In", "C"), (6, "nIn", "V"), (6, "A", "C"), (6, "yA", "V"), (6, "nA", "V"), (6, "I", "C"), (6, "yI", "V"),
    (6, "nI", "V"), (6, "dA", None), (6, "ndA", "V"), (6, "dAn", None), (6, "ndAn", "V"), (6, "lA", None),
    (7, "dIr", None), (7, "Am", "C"), (7, "yAm", "V"), (7, "sAn", None), (7, "Iq", "C"), (7, "yIq", "V"),
    (7, "sInIz", None), (7, "dIrlAr", None),
    (8, "mI", None),
]


def _expand(base: str) -> list[tuple[str, str]]:
    """All surface forms of a base, each with the harmony class of its first harmonic vowel."""
    forms = [("", "")]
    for ch in base:
        if ch == "A":
            forms = [(f + v, cls or ("back" if v == "a" else "front")) for f, cls in forms for v in "aə"]
        elif ch == "I":
            forms = [(f + v, cls or v) for f, cls in forms for v in "ıiuü"]
        else:
            forms = [(f + ch, cls) for f, cls in forms]
    # inside one suffix the vowels agree: keep a-ı / ə-i pairs only (back with ı/u, front with i/ü)
    ok = []
    for f, cls in forms:
        vs = [c for c in f if c in VOWELS]
        if all(c in BACK for c in vs):
            ok.append((f, cls))
        elif all(c in FRONT for c in vs):
            ok.append((f.replace("q", "k"), cls))  # front forms end in -k: -dıq/-dik, -acaq/-əcək
    return ok


SUFFIXES: list[tuple[int, str, str | None]] = sorted(
    {(slot, form, pos) for slot, base, pos in _BASE for form, _ in _expand(base)},
    key=lambda s: (-len(s[1]), -s[0], s[1]),  # longest first; if ambiguous, the later slot
)


def _last_vowel(s: str) -> str | None:
    for c in reversed(s):
        if c in VOWELS:
            return c
    return None


def _harmonic(stem: str, suffix: str) -> bool:
    v = _last_vowel(stem)
    first = next((c for c in suffix if c in VOWELS), None)
    if v is None:
        return False
    if first is None:
        return True
    if first in "aə":
        return _TWO[v] == first
    if first in "ıiuü":
        return _FOUR[v] == first
    return True  # invariant vowel (e.g. -ki): no constraint


@lru_cache(maxsize=200_000)
def _split_lower(word: str) -> tuple[int, ...]:
    """Suffix start offsets in a lower-cased word, left to right."""
    cuts: list[int] = []
    end = len(word)
    max_slot = 99
    while True:
        stem_part = word[:end]
        found = None
        for slot, form, pos in SUFFIXES:
            if slot > max_slot or (slot == max_slot and slot != 1):
                continue
            if not stem_part.endswith(form):
                continue
            stem = stem_part[: -len(form)]
            if len(stem) < 2 or _last_vowel(stem) is None:
                continue
            if pos == "C" and stem[-1] in VOWELS:
                continue
            if pos == "V" and stem[-1] not in VOWELS:
                continue
            if not _harmonic(stem, form):
                continue
            # a bare vowel suffix (-ı, -a) inside a word only comes before an n-buffered case (-ndə, -nın)
            if len(form) == 1 and form in VOWELS and cuts and not word[end:].startswith("n"):
                continue
            found = (slot, len(form))
            break
        if found is None:
            break
        max_slot = found[0]
        end -= found[1]
        cuts.append(end)
        if len(cuts) >= 8:
            break
    return tuple(sorted(cuts))


def suffix_boundaries(word: str) -> tuple[int, ...]:
    """Character offsets inside ``word`` where a suffix starts (empty if none is found).

    >>> suffix_boundaries("evlərimizdən")
    (2, 5, 9)
    """
    if len(word) < 4 or not word.isalpha():
        return ()
    return _split_lower(az_lower(word))


def segment(word: str) -> list[str]:
    """Split a word into stem and suffixes; words the rules do not recognise come back whole.

    >>> segment("Bakıda")
    ['Bakı', 'da']
    """
    cuts = (0, *suffix_boundaries(word), len(word))
    return [word[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def presplit(text: str, delimiter: str) -> str:
    """Insert ``delimiter`` at every predicted suffix boundary of every run of letters in ``text`` (for
    tokenizer training).

    >>> presplit("evlərimizdən gəldik, 2021", "|")
    'ev|lər|imiz|dən gəl|dik, 2021'
    """
    return _LETTERS.sub(lambda m: delimiter.join(segment(m.group(0))), text)


_LETTERS = re.compile(r"[^\W\d_]+")
