import pytest

from azllm.morph import SUFFIXES, presplit, segment, suffix_boundaries


@pytest.mark.parametrize("word,expected", [
    ("evlərimizdən", ["ev", "lər", "imiz", "dən"]),
    ("kitablar", ["kitab", "lar"]),
    ("uşaqlarımızın", ["uşaq", "lar", "ımız", "ın"]),
    ("Respublikasının", ["Respublika", "sı", "nın"]),
    ("məktəbə", ["məktəb", "ə"]),
    ("gəldik", ["gəl", "dik"]),
    ("gələcək", ["gəl", "əcək"]),
    ("Bakıda", ["Bakı", "da"]),
    ("universitetlərin", ["universitet", "lər", "in"]),
])
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
