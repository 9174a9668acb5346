"""A small, documented inventory of Azerbaijani suffixes and a rule-based suffix splitter.

This is *not* a morphological analyser: it is a transparent heuristic that peels known inflectional and a few
derivational suffixes off the end of a word, right to left, longest suffix first, and only where

- the suffix's vowel agrees with the stem by **vowel harmony** (two-way ``a/ə``: back vowels ``a ı o u`` take
  ``a``, front vowels ``e ə i ö ü`` take ``ə``; four-way ``ı/i/u/ü``: ``a ı`` -> ``ı``, ``e ə i`` -> ``i``,
  ``o u`` -> ``u``, ``ö ü`` -> ``ü``);
- the buffer consonant fits: vowel-initial forms (``-ı``, ``-a``, ``-ım``) follow a consonant, buffered forms
  (``-sı``, ``-ya``, ``-nın``, ``-m``) follow a vowel;
- the suffixes come in the order of Azerbaijani morphotactics (slots below, left to right: derivation,
  negation, tense/participle, plural, possessive, case, person/copula, question);
- the stem left over keeps at least 2 letters and a vowel;
- a bare-vowel suffix (``-ı``, ``-a``) is only taken word-finally, before an n-buffered case (``-ndə``) or
  before the copula (``kitab-ı-dır``, ``ev-lər-ə-dir``);
- the n-buffered dative, locative and ablative (``-na``, ``-nda``, ``-ndan``) follow the 3rd-person possessive
  (``ev-i-ndə``, ``kitab-ları-na``), never a bare stem;
- the forms ending in ``ğ``/``y`` (stem-final ``q``/``k`` before a vowel: ``-lığ/-liy``, ``-dığ/-diy``,
  ``-acağ/-əcəy``, ``-mağ/-məy``) come before a vowel-initial suffix only, and a ``y`` after ``-əcə``, ``-di``,
  ``-li`` is taken to be such a ``k`` rather than a buffer (``gəl-əcəy-əm``, ``bir-liy-ə``);
- negation ``-ma`` does not follow ``ı i u ü`` (there ``-ım-a`` is possessive + dative: ``kitab-ım-a``).

If a suffix's conditions fail further left (an n-buffered case with no possessive before it), the splitter
backs off and tries the next suffix. The agreement of the splits with two independent lexicons (UniMorph forms
and a hunspell dictionary) is measured by :func:`azllm.lexicon.lexicon_agreement`.

Slots and their suffixes (base forms; each is expanded over harmony variants):

====  =================  ===========================================================================
slot  what               forms
====  =================  ===========================================================================
1     derivation         -lıq/-lığ -lı -sız -çı -laş -dır (causative)
2     negation           -ma (also the verbal noun)
3     tense, participle  -dı -mış -acaq/-yacaq (-acağ/-yacağ) -ar -ır/-yır -malı -sa -an/-yan -dıq (-dığ)
                         -araq/-yaraq -ıb/-yıb -maq (-mağ)
4     plural             -lar
5     possessive         -ım/-m -ın/-n -ı/-sı -ımız/-mız -ınız/-nız -ları
6     case               -ın/-nın (gen.) -a/-ya/-na (dat.) -ı/-nı (acc.) -da/-nda (loc.)
                         -dan/-ndan (abl.) -la (instr., after a consonant)
7     person, copula     -dır -am/-yam -san -ıq/-yıq -sınız -dırlar
8     question           -mı (after a consonant)
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
#  vowel, None either); a final q/ğ of a base is k/y in front forms
_BASE = [
    (1, "lIq", None),
    (1, "lIğ", None),
    (1, "lI", None),
    (1, "sIz", None),
    (1, "çI", None),
    (1, "lAş", None),
    (1, "dIr", None),
    (2, "mA", None),
    (3, "dI", None),
    (3, "mIş", None),
    (3, "AcAq", "C"),
    (3, "yAcAq", "V"),
    (3, "AcAğ", "C"),
    (3, "yAcAğ", "V"),
    (3, "Ar", "C"),
    (3, "Ir", "C"),
    (3, "yIr", "V"),
    (3, "mAlI", None),
    (3, "sA", None),
    (3, "An", "C"),
    (3, "yAn", "V"),
    (3, "dIq", None),
    (3, "dIğ", None),
    (3, "ArAq", "C"),
    (3, "yArAq", "V"),
    (3, "Ib", "C"),
    (3, "yIb", "V"),
    (3, "mAq", None),
    (3, "mAğ", None),
    (4, "lAr", None),
    (5, "Im", "C"),
    (5, "m", "V"),
    (5, "In", "C"),
    (5, "n", "V"),
    (5, "I", "C"),
    (5, "sI", "V"),
    (5, "ImIz", "C"),
    (5, "mIz", "V"),
    (5, "InIz", "C"),
    (5, "nIz", "V"),
    (5, "lArI", None),
    (6, "In", "C"),
    (6, "nIn", "V"),
    (6, "A", "C"),
    (6, "yA", "V"),
    (6, "nA", "V"),
    (6, "I", "C"),
    (6, "nI", "V"),
    (6, "dA", None),
    (6, "ndA", "V"),
    (6, "dAn", None),
    (6, "ndAn", "V"),
    (6, "lA", "C"),
    (7, "dIr", None),
    (7, "Am", "C"),
    (7, "yAm", "V"),
    (7, "sAn", None),
    (7, "Iq", "C"),
    (7, "yIq", "V"),
    (7, "sInIz", None),
    (7, "dIrlAr", None),
    (8, "mI", "C"),
]
# the forms that end in ğ/y (q, k before a vowel) only come before a vowel-initial suffix
_BEFORE_VOWEL = {"lIğ", "AcAğ", "yAcAğ", "dIğ", "mAğ"}
# the n-buffered dative, locative and ablative only follow the 3rd-person possessive (evinə, kitabında)
_POSS3 = {(5, "I"), (5, "sI"), (5, "lArI")}
_NEEDS_LEFT = {(6, "nA"): _POSS3, (6, "ndA"): _POSS3, (6, "ndAn"): _POSS3}
# a bare-vowel suffix (-ı, -a) inside a word only comes before an n-buffered case or the copula
_AFTER_BARE = {(6, "nIn"), (6, "nA"), (6, "nI"), (6, "ndA"), (6, "ndAn"), (7, "dIr"), (7, "dIrlAr")}


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
            ok.append((f.replace("q", "k").replace("ğ", "y"), cls))  # -dıq/-dik, -acaq/-əcək, -acağ/-əcəy
    return ok


# (slot, form, position, base), longest first; if ambiguous, the later slot
_ENTRIES: list[tuple[int, str, str | None, str]] = sorted(
    {(slot, form, pos, base) for slot, base, pos in _BASE for form, _ in _expand(base)},
    key=lambda s: (-len(s[1]), -s[0], s[1]),
)
SUFFIXES: list[tuple[int, str, str | None]] = [(slot, form, pos) for slot, form, pos, _ in _ENTRIES]
# the entries by the letter their form ends with, each list in _ENTRIES order: a word's last letter leaves _peel
# only the forms that can end there (about a tenth of the inventory)
_BY_LAST: dict[str, list[tuple[int, str, str | None, str]]] = {}
for _entry in _ENTRIES:
    _BY_LAST.setdefault(_entry[1][-1], []).append(_entry)
# a y after -əcə, -di, -li (not -mə: gəlməyəcək) is the k of -əcək, -dik, -lik before a vowel, not a buffer
_FRONT_Y = sorted({form for _, form, _, base in _ENTRIES if base in {"AcAğ", "dIğ", "lIğ"} and form.endswith("y")})


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


def _fits(word: str, end: int, entry: tuple, right: tuple | None) -> bool:
    """Whether the suffix ``entry`` can end at ``end`` in ``word``, given the suffix ``right`` after it."""
    slot, form, pos, base = entry
    stem = word[: end - len(form)]
    if len(stem) < 2 or _last_vowel(stem) is None:
        return False
    if pos == "C" and stem[-1] in VOWELS:
        return False
    if pos == "V" and stem[-1] not in VOWELS:
        return False
    if not _harmonic(stem, form):
        return False
    if base == "mA" and stem[-1] in "ıiuü":  # -ım-a, -ım-ə: 1st-person possessive + dative, not negation
        return False
    if base[0] == "y" and _mutated_y(word[: len(stem) + 1]):  # gələcəy-ik, birliy-ə
        return False
    if len(form) == 1 and form in VOWELS and right is not None and (right[0], right[3]) not in _AFTER_BARE:
        return False
    if base in _BEFORE_VOWEL and (right is None or right[1][0] not in VOWELS):
        return False
    return True


def _mutated_y(part: str) -> bool:
    """Whether the ``y`` that ends ``part`` is the ``k`` of -əcək, -dik, -lik before a vowel."""
    for form in _FRONT_Y:
        stem = part[: -len(form)]
        if part.endswith(form) and len(stem) >= 2 and _last_vowel(stem) and _harmonic(stem, form):
            return True
    return False


def _peel(word: str, end: int, max_slot: int, right: tuple | None, depth: int) -> tuple[int, ...] | None:
    """Suffix start offsets in ``word[:end]``, left to right: the first parse, trying suffixes in inventory
    order, whose suffixes all fit; ``None`` where the suffix ``right`` needs a suffix before it and none fits."""
    need = _NEEDS_LEFT.get((right[0], right[3])) if right else None
    if depth < 8 and end > 0:
        for entry in _BY_LAST.get(word[end - 1], ()):
            slot, form = entry[0], entry[1]
            if slot > max_slot or (slot == max_slot and slot != 1) or (need and (slot, entry[3]) not in need):
                continue
            if not word.endswith(form, 0, end) or not _fits(word, end, entry, right):
                continue
            rest = _peel(word, end - len(form), slot, entry, depth + 1)
            if rest is not None:
                return (*rest, end - len(form))
    return None if need else ()


@lru_cache(maxsize=200_000)
def _split_lower(word: str) -> tuple[int, ...]:
    """Suffix start offsets in a lower-cased word, left to right."""
    return _peel(word, len(word), 99, None, 0) or ()


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
