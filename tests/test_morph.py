import pytest

from azllm.morph import SUFFIXES, presplit, segment, suffix_boundaries


@pytest.mark.parametrize(
    "word,expected",
    [
        ("evlərimizdən", ["ev", "lər", "imiz", "dən"]),
        ("kitablar", ["kitab", "lar"]),
        ("uşaqlarımızın", ["uşaq", "lar", "ımız", "ın"]),
        ("Respublikasının", ["Respublika", "sı", "nın"]),
        ("məktəbə", ["məktəb", "ə"]),
        ("gəldik", ["gəl", "dik"]),
        ("gələcək", ["gəl", "əcək"]),
        ("Bakıda", ["Bakı", "da"]),
        ("universitetlərin", ["universitet", "lər", "in"]),
    ],
)
def test_segment_real_words(word, expected):
    assert segment(word) == expected


def test_vowel_harmony_blocks_wrong_suffixes():
    # -lar after a front vowel and -lər after a back vowel violate harmony: not split
    assert segment("evlar") == ["evlar"]
    assert segment("kitablər") == ["kitablər"]


def test_short_and_unknown_words_stay_whole():
    for w in ["ev", "və", "bu", "ana", "istifadə", "2021"]:
        assert segment(w) == [w]


def test_boundaries_and_presplit():
    assert suffix_boundaries("evlərimizdən") == (2, 5, 9)
    assert presplit("evlərimizdən gəldik, 2021", "|") == "ev|lər|imiz|dən gəl|dik, 2021"
    assert "".join(segment("Azərbaycanlılaşdıra")) == "Azərbaycanlılaşdıra"


def test_inventory_forms_respect_internal_harmony():
    forms = {f for _, f, _ in SUFFIXES}
    assert {"lar", "lər", "dan", "dən", "ımız", "imiz", "umuz", "ümüz", "acaq", "əcək"} <= forms
    assert "ləra" not in forms and "əcaq" not in forms


@pytest.mark.parametrize(
    "word,expected",
    [
        # future and participle before a vowel: -acağ/-əcəy, -dığ/-diy (q, k -> ğ, y)
        ("ağlayacağam", ["ağla", "yacağ", "am"]),
        ("gələcəyəm", ["gəl", "əcəy", "əm"]),
        ("olduğunu", ["ol", "duğ", "u", "nu"]),
        ("birliyi", ["bir", "liy", "i"]),
        ("almağa", ["al", "mağ", "a"]),
        # present tense after a vowel-final stem
        ("ağlayır", ["ağla", "yır"]),
        # a bare vowel before the copula
        ("kitabıdır", ["kitab", "ı", "dır"]),
        ("evlərədir", ["ev", "lər", "ə", "dir"]),
        # 1st-person possessive + dative, not negation
        ("alətlərimə", ["alət", "lər", "im", "ə"]),
        # the n-buffered locative only after a possessive
        ("evində", ["ev", "i", "ndə"]),
        # accusative after a vowel is -nı, so a y before -i is the stem's k (bəbək -> bəbəyi)
        ("bəbəyi", ["bəbəy", "i"]),
        # instrumental -la/-lə after a consonant only: this is the dative of avtomobil
        ("avtomobilə", ["avtomobil", "ə"]),
    ],
)
def test_segment_inflection_the_lexicons_showed_missing(word, expected):
    assert segment(word) == expected


def test_buffer_variants_only_before_a_vowel():
    forms = {f for _, f, _ in SUFFIXES}
    assert {"acağ", "əcəy", "dığ", "diy", "lığ", "liy", "yır", "yir"} <= forms
    assert (6, "yı", "V") not in SUFFIXES and (6, "yi", "V") not in SUFFIXES
    # after a stem-final n the ablative is -dan (the n before it is the stem's or a possessive -n), not -ndan
    assert segment("insandan")[-1] == "dan" and segment("Azərbaycanda")[-1] == "da"
    # a ğ/y form never ends a word
    assert segment("gəldiy") != ["gəl", "diy"] and segment("yazdığ") != ["yaz", "dığ"]
