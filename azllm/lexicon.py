"""Lexicon resources as an independent check of the suffix splitter in :mod:`azllm.morph`.

Two word lists from ``data/az/lexicon/`` (see the data README for provenance and licenses):

- **UniMorph** (``unimorph_aze.tsv``): ``lemma<TAB>form<TAB>features`` rows, e.g.
  ``açar  açarlarından  N;ABL;PL;PSS3S``; nouns and a few verbs (the verb lemma is the infinitive, ``ağlamaq``).
- **Hunspell** (``mozillaz_hunspell_az.dic`` / ``.aff``): stems with two-letter affix flags (``kitab/N1``) and the
  ``SFX`` rules each flag stands for. A rule ``SFX N1 q ğa q`` means: for a stem ending in ``q`` (the condition),
  strip ``q`` and add ``ğa`` (``uşaq`` -> ``uşağa``). Only the flags that the ``.aff`` defines generate forms (many
  flags of the ``.dic`` have no rules); continuation flags (``dır/V1``) are not followed; rules whose affix is
  not a word (``SFX F3 0 su.``, a missing field) are left out.

**Reference boundary** of a form: where the stem ends and the suffixes begin.

- UniMorph: ``len(stem)`` where the stem is the lemma (a verb's lemma without the infinitive ``-maq/-mək``) and
  the form starts with it (kind ``"prefix"``). A form whose stem-final ``q``/``k`` became ``ğ``/``y``
  (``ayaq`` -> ``ayağa``, ``ərik`` -> ``əriyi``) keeps the boundary at ``len(stem)`` and is counted apart (kind
  ``"mutated"``); other changes (``beyin`` -> ``beyni``, compounds) and malformed rows are skipped. A form equal
  to the stem has no suffix (kind ``"bare"``): it only tells whether the splitter over-splits.
- Hunspell: ``len(stem)`` (a stripped final consonant is replaced by the first letter of the affix, which belongs
  to the stem: ``uşağ|a``). A hunspell affix is often several morphemes at once (``larını`` = ``-lar -ı -nı``):
  only the stem boundary is known, the boundaries inside the affix are not, so recall and precision here are
  about the stem boundary only.

The ``.aff`` over-generates (its conditions are loose: ``SFX O2 0 sini`` applies after consonants too,
``SFX V1 0 ır .`` after vowel-final verbs: ``ağlaır``). A generated form is **well-formed** when its junction has
no vowel hiatus (a vowel-initial affix follows a consonant, and not a final ``q``/``k`` that the flag's own rules
turn into ``ğ``/``y`` before a vowel) and a buffer consonant before a vowel (``y``, ``s``, ``n``: ``-ya``, ``-sı``,
``-nın``; every such affix of this ``.aff`` is a buffered form) follows a vowel; only well-formed forms are
sampled.

**Agreement** of :func:`azllm.morph.suffix_boundaries` with the references: ``recall`` is the share of reference
boundaries among the predicted boundaries; ``precision`` the share of forms with a prediction whose first
predicted boundary is the reference (the stem boundary); ``predicted`` the share of forms with any prediction.
``misses`` counts the suffix strings (the form after the reference boundary) of the forms whose boundary was
not predicted: the suffixes (or suffix chains) the inventory does not know; ``early`` the pieces we cut off inside
the stem.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from .morph import VOWELS, suffix_boundaries

__all__ = [
    "SfxRule",
    "read_unimorph",
    "parse_aff",
    "read_aff",
    "parse_dic",
    "read_dic",
    "apply_rule",
    "hunspell_forms",
    "well_formed",
    "unimorph_reference",
    "agreement",
    "lexicon_agreement",
]


class SfxRule(NamedTuple):
    """One hunspell suffix rule: strip ``strip`` from the stem's end, add ``add``, if the stem's end matches
    ``condition`` (a hunspell condition: letters, ``.``, ``[...]``, ``[^...]``)."""

    strip: str
    add: str
    condition: str


def read_unimorph(path: str | Path) -> list[tuple[str, str, str]]:
    """The ``(lemma, form, features)`` rows of a UniMorph TSV file, in file order (rows without 3 fields are
    left out).

    >>> rows = read_unimorph(Path(__file__).parent.parent / "tests/fixtures/data/az/lexicon/unimorph_aze.tsv")
    >>> rows[0]
    ('açar', 'açarlara', 'N;DEF;DAT;PL')
    """
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) == 3:
                rows.append((parts[0], parts[1], parts[2]))
    return rows


def parse_aff(lines: Iterable[str]) -> dict[str, list[SfxRule]]:
    """The ``SFX`` rules of an ``.aff`` file, by flag, in file order.

    A header line (``SFX N1 Y 44``) opens a flag; a rule line is ``SFX flag strip add [condition] [# comment]``,
    ``0`` meaning empty and a missing condition meaning ``.``; the continuation flags of an affix (``dır/V1``) are
    dropped; a rule whose strip or affix is not letters is left out.

    >>> rules = parse_aff(["SFX N1 Y 3", "SFX N1 0 lar .", "SFX N1 q ğa q", "SFX N1 0 ya [aı] # halqa-ya",
    ...                    "SFX V1 0 dır/V1 .", "SFX F3 0 su."])
    >>> [tuple(rule) for rule in rules["N1"]]
    [('', 'lar', '.'), ('q', 'ğa', 'q'), ('', 'ya', '[aı]')]
    >>> rules["V1"], rules.get("F3")
    ([SfxRule(strip='', add='dır', condition='.')], None)
    """
    rules: dict[str, list[SfxRule]] = {}
    for line in lines:
        parts = line.split("#", 1)[0].split()
        if len(parts) < 4 or parts[0] != "SFX":
            continue
        if parts[2] in ("Y", "N") and parts[3].isdigit():
            continue  # header
        strip = "" if parts[2] == "0" else parts[2]
        add = "" if parts[3] == "0" else parts[3].split("/", 1)[0]
        cond = parts[4] if len(parts) > 4 else "."
        if (strip and not strip.isalpha()) or (add and not add.isalpha()):
            continue
        rules.setdefault(parts[1], []).append(SfxRule(strip, add, cond))
    return rules


def read_aff(path: str | Path) -> dict[str, list[SfxRule]]:
    """:func:`parse_aff` of a file."""
    return parse_aff(Path(path).read_text(encoding="utf-8").splitlines())


def parse_dic(lines: Iterable[str]) -> list[tuple[str, list[str]]]:
    """``(stem, flags)`` of the lines of a ``.dic`` file with two-letter flags (``FLAG long``); the first line
    (the count) is skipped, a stem without flags gets ``[]``.

    >>> parse_dic(["3", "kitab/N1", "abasbəyi/G2O2", "Afrika"])
    [('kitab', ['N1']), ('abasbəyi', ['G2', 'O2']), ('Afrika', [])]
    """
    out = []
    for i, line in enumerate(lines):
        line = line.strip()
        if not line or (i == 0 and line.isdigit()):
            continue
        stem, _, flags = line.partition("/")
        out.append((stem, [flags[j : j + 2] for j in range(0, len(flags) - 1, 2)]))
    return out


def read_dic(path: str | Path) -> list[tuple[str, list[str]]]:
    """:func:`parse_dic` of a file."""
    return parse_dic(Path(path).read_text(encoding="utf-8").splitlines())


def apply_rule(stem: str, rule: SfxRule) -> str | None:
    """The form a rule makes of a stem, or ``None`` where the stem's end does not match the condition.

    >>> apply_rule("uşaq", SfxRule("q", "ğa", "q")), apply_rule("uşaq", SfxRule("", "a", "[^aıq]"))
    ('uşağa', None)
    >>> apply_rule("halqa", SfxRule("", "ya", "[aı]")), apply_rule("çörək", SfxRule("k", "yi", "k"))
    ('halqaya', 'çörəyi')
    """
    if not _condition(rule.condition).search(stem):
        return None
    if rule.strip:
        if not stem.endswith(rule.strip):
            return None
        stem = stem[: -len(rule.strip)]
    return stem + rule.add


_CONDITIONS: dict[str, re.Pattern] = {}


def _condition(cond: str) -> re.Pattern:
    if cond not in _CONDITIONS:
        _CONDITIONS[cond] = re.compile(f"(?:{cond})$")
    return _CONDITIONS[cond]


def well_formed(stem: str, rule: SfxRule, mutates: str = "") -> bool:
    """Whether the junction of a generated form is phonotactically possible (see the module docstring);
    ``mutates``: the final consonants that the flag's own strip rules replace (``"q"`` for ``SFX N1 q ğa q``),
    which a vowel-initial affix then must not follow unchanged (``abadlıqın``: the flag makes ``abadlığı``).

    >>> well_formed("ağla", SfxRule("", "ır", ".")), well_formed("ağla", SfxRule("", "yacaq", "."))
    (False, True)
    >>> well_formed("şəhər", SfxRule("", "sini", ".")), well_formed("uşaq", SfxRule("q", "ğa", "q"))
    (False, True)
    >>> well_formed("uşaq", SfxRule("", "ın", "[^aı]"), mutates="q"), well_formed("uşaq", SfxRule("", "da", "."))
    (False, True)
    """
    if rule.strip or not rule.add:
        return True
    after_vowel = stem[-1:] in VOWELS
    first = rule.add[0]
    if first in VOWELS:
        return not after_vowel and stem[-1:] not in mutates
    if first in "ysn" and rule.add[1:2] in VOWELS:
        return after_vowel
    return True


def hunspell_forms(
    dic: list[tuple[str, list[str]]], rules: dict[str, list[SfxRule]], *, only_well_formed: bool = True
) -> list[tuple[str, str, str]]:
    """``(stem, form, flag)`` of every form the flags of each stem generate, in ``.dic`` and rule order (stems
    without letters-only spelling, e.g. ``ab-hava``, are left out; so are ill-formed forms unless asked).

    >>> hunspell_forms([("kitab", ["N1"]), ("halqa", ["N1"])], parse_aff(
    ...     ["SFX N1 0 lar .", "SFX N1 0 a [^aıq]", "SFX N1 0 ya [aı]", "SFX N1 0 ya ."]))
    [('kitab', 'kitablar', 'N1'), ('kitab', 'kitaba', 'N1'), ('halqa', 'halqalar', 'N1'), ('halqa', 'halqaya', 'N1')]
    """
    return [(stem, form, flag) for stem, form, flag, ok in _generate(dic, rules) if ok or not only_well_formed]


def _generate(dic: list[tuple[str, list[str]]], rules: dict[str, list[SfxRule]]):
    """``(stem, form, flag, well formed)`` of every generated form (the first rule that makes a form wins)."""
    for stem, flags in dic:
        if not stem.isalpha():
            continue
        seen = set()
        for flag in flags:
            mutates = "".join(r.strip for r in rules.get(flag, ()) if len(r.strip) == 1)
            for rule in rules.get(flag, ()):
                form = apply_rule(stem, rule)
                if form is not None and form not in seen:
                    seen.add(form)
                    yield stem, form, flag, well_formed(stem, rule, mutates)


_MUTATIONS = {("q", "ğ"), ("k", "y"), ("k", "ğ")}
_TAGS = re.compile(r"^[A-Z0-9]+(;[A-Z0-9]+)*$")


def unimorph_reference(lemma: str, form: str, features: str) -> tuple[int | None, str]:
    """The reference stem boundary of a UniMorph row and its kind: ``"prefix"``, ``"mutated"``, ``"bare"``, or
    ``"changed"`` / ``"malformed"`` (boundary ``None``: skipped).

    >>> unimorph_reference("açar", "açarlarından", "N;ABL;PL;PSS3S"), unimorph_reference("ayaq", "ayağa", "N;DAT")
    ((4, 'prefix'), (4, 'mutated'))
    >>> unimorph_reference("ağlamaq", "ağlayacaq", "V;3;SG;FUT"), unimorph_reference("beyin", "beyni", "N;ACC")
    ((4, 'prefix'), (None, 'changed'))
    >>> unimorph_reference("açar", "açar", "N;NOM;SG"), unimorph_reference("uçan", "xalça", "uçan")
    ((4, 'bare'), (None, 'malformed'))
    """
    if not _TAGS.match(features) or not form.isalpha():
        return None, "malformed"
    stem = lemma
    if features.startswith("V;") and lemma[-3:] in ("maq", "mək"):
        stem = lemma[:-3]
    n = len(stem)
    if form == stem:
        return n, "bare"
    if form.startswith(stem):
        return n, "prefix"
    if form[: n - 1] == stem[:-1] and len(form) > n and (stem[-1], form[n - 1]) in _MUTATIONS:
        return n, "mutated"
    return None, "changed"


def agreement(items: Iterable[tuple[str, int]], *, top: int = 20) -> dict:
    """Agreement of :func:`azllm.morph.suffix_boundaries` with ``(form, reference boundary)`` pairs (see the
    module docstring). ``misses`` are ``[suffix, count, example form]`` of the forms whose reference boundary
    was not predicted; ``early`` the same for the pieces cut off inside the stem (from our first boundary to the
    reference: a derivational suffix of a derived stem, or a spurious split), most frequent first.

    >>> a = agreement([("kitablar", 5), ("evlərimizdən", 2), ("uşaqlarımızın", 4)])
    >>> a["n"], a["recall"], a["precision"], a["predicted"]
    (3, 1.0, 1.0, 1.0)
    >>> b = agreement([("kitablar", 5), ("ada", 2), ("bazarda", 5)])
    >>> b["recall"], b["precision"], b["misses"], b["early"]
    (0.6667, 0.5, [['a', 1, 'ada']], [['ar', 1, 'bazarda']])
    """
    n = hit = predicted = first_ok = 0
    misses: Counter = Counter()
    early: Counter = Counter()
    examples: dict[tuple[str, str], str] = {}
    for form, ref in items:
        cuts = suffix_boundaries(form)
        n += 1
        predicted += bool(cuts)
        first_ok += bool(cuts) and cuts[0] == ref
        if ref in cuts:
            hit += 1
        else:
            misses[form[ref:].lower()] += 1
            examples.setdefault(("miss", form[ref:].lower()), form)
        if cuts and cuts[0] < ref:
            early[form[cuts[0] : ref].lower()] += 1
            examples.setdefault(("early", form[cuts[0] : ref].lower()), form)
    return {
        "n": n,
        "recall": _share(hit, n),
        "precision": _share(first_ok, predicted),
        "predicted": _share(predicted, n),
        "misses": [[s, c, examples["miss", s]] for s, c in misses.most_common(top)],
        "early": [[s, c, examples["early", s]] for s, c in early.most_common(top)],
    }


def _share(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _unimorph_agreement(rows: list[tuple[str, str, str]], top: int) -> tuple[dict, list[tuple[str, int]]]:
    """UniMorph agreement (one count per row): ``prefix`` forms (the headline), ``mutated`` forms apart, per
    feature set (both kinds), the share of ``bare`` forms (form = stem) that the splitter splits anyway; and the
    ``(form, ref)`` pairs of the prefix forms."""
    by_kind: dict[str, list[tuple[str, int, str]]] = {}
    for lemma, form, feats in rows:
        ref, kind = unimorph_reference(lemma, form, feats)
        by_kind.setdefault(kind, []).append((form, ref, feats))
    prefix = [(f, r) for f, r, _ in by_kind.get("prefix", [])]
    out = agreement(prefix, top=top)
    out["mutated"] = agreement(((f, r) for f, r, _ in by_kind.get("mutated", [])), top=top)
    bare = by_kind.get("bare", [])
    out["bare"] = len(bare)
    out["bare_split"] = _share(sum(bool(suffix_boundaries(f)) for f, _, _ in bare), len(bare))
    out["skipped"] = {k: len(by_kind.get(k, [])) for k in ("changed", "malformed")}
    feats: dict[str, list[tuple[str, int]]] = {}
    for form, ref, fs in by_kind.get("prefix", []) + by_kind.get("mutated", []):
        feats.setdefault(fs, []).append((form, ref))
    out["by_features"] = {
        fs: {"n": len(v), "recall": agreement(v, top=0)["recall"]}
        for fs, v in sorted(feats.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    }
    return out, prefix


def lexicon_agreement(
    unimorph_path: str | Path,
    dic_path: str | Path,
    aff_path: str | Path,
    *,
    sample: int = 20000,
    seed: int = 0,
    top: int = 20,
) -> dict:
    """Agreement of the suffix splitter with UniMorph and with a seeded sample of well-formed hunspell forms.

    Returns ``{"unimorph": {...}, "hunspell": {...}, "overall": {...}, "seconds": s}``; each source has ``n``,
    ``recall``, ``precision``, ``predicted``, ``misses`` and ``early`` (:func:`agreement`). ``unimorph`` adds
    ``mutated`` (the same numbers for ``ayağa``-type forms), ``bare``/``bare_split``, ``skipped`` and
    ``by_features`` (``{"N;ABL;PL": {"n", "recall"}}``, most frequent first); ``hunspell`` adds ``generated``
    (all forms of the defined flags), ``well_formed`` (how many of them pass :func:`well_formed`) and
    ``by_flag`` (``{"N1": {"n", "recall"}}``); ``overall`` pools the UniMorph prefix forms and the hunspell
    sample (the same fields as :func:`agreement`).
    """
    t0 = time.perf_counter()
    uni, uni_items = _unimorph_agreement(read_unimorph(unimorph_path), top)
    dic, rules = read_dic(dic_path), read_aff(aff_path)
    every = list(_generate(dic, rules))
    good = [(stem, form, flag) for stem, form, flag, ok in every if ok]
    picked = random.Random(seed).sample(good, min(sample, len(good)))
    hun_items = [(f, len(s)) for s, f, _ in picked]
    hun = agreement(hun_items, top=top)
    hun.update(generated=len(every), well_formed=len(good))
    flags: dict[str, list[tuple[str, int]]] = {}
    for (_stem, _flags, flag), item in zip(picked, hun_items):
        flags.setdefault(flag, []).append(item)
    hun["by_flag"] = {k: {"n": len(v), "recall": agreement(v, top=0)["recall"]} for k, v in sorted(flags.items())}
    overall = agreement(uni_items + hun_items, top=top)
    return {"unimorph": uni, "hunspell": hun, "overall": overall, "seconds": round(time.perf_counter() - t0, 2)}
