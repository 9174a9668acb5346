"""Shared pieces of the corpus-stage tests (tests/test_corpus_*.py): real Azerbaijani examples and a small cleaned
corpus. Import the fixtures into a test module (``from corpus_helpers import cleaned, flores``).

Real examples are cut from ../shared/data/az/train (legal_codes.txt: amendment notes; social_comments.txt:
headlines that differ in a word or two) and FLORES-200 dev (tests/fixtures)."""

from pathlib import Path

import pytest

from azllm.corpus import clean_corpus
from azllm.data import resolve_source
from azllm.text import az_upper

AMENDMENTS = [  # legal_codes.txt: the same amendment note with other dates and numbers (one MinHash cluster)
    "20 oktyabr 2017-ci il tarixli 811-VQD nömrəli Azərbaycan Respublikasının Qanunu (“Azərbaycan” qəzeti, 2 dekabr "
    "2017-ci il, № 266, Azərbaycan Respublikasının Qanunvericilik Toplusu, 2017-ci il, № 11, maddə 1964) ilə yeni "
    "məzmunda 213.0.4-cü maddə əlavə edilmişdir.",
    "20 oktyabr 2017-ci il tarixli 812-VQD nömrəli Azərbaycan Respublikasının Qanunu (“Azərbaycan” qəzeti, 2 dekabr "
    "2017-ci il, № 266, Azərbaycan Respublikasının Qanunvericilik Toplusu, 2017-ci il, № 11, maddə 1965) ilə yeni "
    "məzmunda 213.0.5-ci maddə əlavə edilmişdir.",
    "21 oktyabr 2017-ci il tarixli 811-VQD nömrəli Azərbaycan Respublikasının Qanunu (“Azərbaycan” qəzeti, 3 dekabr "
    "2017-ci il, № 266, Azərbaycan Respublikasının Qanunvericilik Toplusu, 2017-ci il, № 11, maddə 1964) ilə yeni "
    "məzmunda 213.0.4-cü maddə əlavə edilmişdir.",
]


TURKISH = "Türkiye'nin en büyük şehri olan İstanbul, iki kıtaya yayılmış tarihi bir liman kentidir."


PROSE = [
    "Xaqani 1199-cu ildə vəfat etmiş və Təbrizin Şairlər qəbiristanlığında dəfn edilmişdir.",
    "Bakıda iki marşrutun hərəkət sxemi sabahdan etibarən dəyişdirilir.",
    "Doktorantura üzrə bəzi imtahanların nəticələri açıqlandı və tələbələrə göndərildi.",
    "Hamilə qadınlar bu xidmətlərdən pulsuz yararlana bilərlər, nazirlik bildirir.",
]


@pytest.fixture(scope="module")
def flores(data_root) -> list[str]:
    from azllm.text import normalize

    path = data_root / "data/az/dev/flores200.dev.azj_Latn.txt"
    return [normalize(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _write(folder: Path, name: str, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _clean(src_dir: Path, out: Path, evals: dict, **kw):
    r = resolve_source({"path": str(src_dir / "*")}, None)
    return clean_corpus(
        [r],
        out,
        eval_lines=evals,
        languages=["az"],
        quality={},
        tasks=kw.pop("tasks", 2),
        workers=kw.pop("workers", 2),
        **kw,
    )


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory, flores):
    tmp = tmp_path_factory.mktemp("corpus")
    src = tmp / "src"
    leaked = "Xəbərə görə, " + flores[3]
    _write(src, "legal.txt", AMENDMENTS + ["FƏSİL 3"] + PROSE[:2])
    _write(src, "news.txt", [PROSE[2], az_upper(PROSE[2]), TURKISH, leaked, PROSE[3]])
    manifest = _clean(src, tmp / "out", {"flores": flores})
    return tmp, manifest


KILL_SCRIPT = """
import sys
from azllm.corpus import clean_corpus
from azllm.data import resolve_source
r = resolve_source({"path": sys.argv[1] + "/*"}, None)
clean_corpus([r], sys.argv[2], eval_lines={"x": ["a b c"]}, languages=["az"], quality={}, tasks=2, workers=1)
"""
