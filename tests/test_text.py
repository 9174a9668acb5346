import unicodedata

from azllm.text import alpha_words, az_lower, az_upper, normalize, whitespace_words


def test_nfc_composes_decomposed_letters():
    decomposed = unicodedata.normalize("NFD", "gözəl şəhər Gəncə")
    assert decomposed != "gözəl şəhər Gəncə"
    assert normalize(decomposed) == "gözəl şəhər Gəncə"


def test_cyrillic_schwa_becomes_latin():
    # Cyrillic ә/Ә (U+04D9/U+04D8) typed on Cyrillic keyboards
    assert normalize("Az\u04d9rbaycan") == "Az\u0259rbaycan"
    assert normalize("\u04d8li m\u04d9kt\u04d9b\u04d9 getdi") == "\u018fli m\u0259kt\u0259b\u0259 getdi"
    assert "\u04d9" not in normalize("Bak\u0131 \u015f\u04d9h\u04d9ri")


def test_apostrophes_unified():
    for a in ["\u2019", "\u2018", "\u02bc", "`", "\u00b4", "\u2032"]:
        assert normalize(f"Azərbaycan{a}ın") == "Azərbaycan'ın"


def test_dashes_unified():
    for d in ["\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2212"]:
        assert normalize(f"2021{d}ci il") == "2021-ci il"
    assert normalize("MQT 4 mövzuları \u2013 2021/2022") == "MQT 4 mövzuları - 2021/2022"


def test_whitespace_and_invisible_characters():
    assert normalize("  Bakı\u00a0şəhəri\t\tvə\n\nGəncə  ") == "Bakı şəhəri və Gəncə"
    assert normalize("müəl\u00adlim\u200b") == "müəllim"
    assert normalize("\ufeffSalam\x07") == "Salam"
    assert normalize("   ") == ""


def test_normalize_is_idempotent():
    s = "Azәrbaycan’ın  paytaxtı – Bakı\u00a0"
    assert normalize(normalize(s)) == normalize(s)


def test_az_case_mapping_dotted_and_dotless_i():
    assert az_lower("İLHAM ILDIRIM") == "ilham ıldırım"
    assert az_lower("İstanbul") == "istanbul" and len(az_lower("İ")) == 1
    assert az_upper("istiqlal ışıq") == "İSTİQLAL IŞIQ"
    assert az_upper("iş") == "İŞ"
    # Python's default mapping is wrong for Azerbaijani:
    assert "ILDIRIM".lower() == "ildirim" and az_lower("ILDIRIM") == "ıldırım"
    assert len("İ".lower()) == 2
    # round trip for every Azerbaijani letter
    alphabet = "abcçdeəfgğhxıijkqlmnoöprsştuüvyz"
    assert az_lower(az_upper(alphabet)) == alphabet


def test_word_definitions():
    s = "ABŞ-nın 2021-ci ildə 'Bakı' şəhəri..."
    assert whitespace_words(s) == ["ABŞ-nın", "2021-ci", "ildə", "'Bakı'", "şəhəri..."]
    assert alpha_words(s) == ["ABŞ-nın", "ci", "ildə", "Bakı", "şəhəri"]
    assert alpha_words("Azərbaycan'ın paytaxtı, 3 milyon") == ["Azərbaycan'ın", "paytaxtı", "milyon"]
