"""The corpus stage: each filter on real Azerbaijani text, the datatrove pipeline end to end, its manifest, cache,
resumability, bad input, and the mix.

Real examples are cut from ../shared/data/az/train (legal_codes.txt: amendment notes; social_comments.txt:
headlines that differ in a word or two) and FLORES-200 dev (tests/fixtures)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from azllm.corpus import (clean_corpus, eval_index, find_contamination, in_input_order, quality_problem, rates,
                          read_jsonl)
from azllm.corpus.decontaminate import contaminated_by
from azllm.corpus.language import detect
from azllm.corpus.mix import SeenShingles, copies, drop_seen_sentences, write_mix
from azllm.data import DataError, resolve_source
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


# ------------------------------------------------------------------------------------------- the filters alone

def test_quality_rules_on_real_text():
    assert quality_problem(PROSE[0]) is None
    assert quality_problem(AMENDMENTS[0]) is None
    assert quality_problem("FƏSİL 3") == "too_short"                   # a legal_codes.txt heading
    assert quality_problem("Əlaqə üçün : (+994)77 555 01 08 18 1234") == "digits"
    assert quality_problem("Çox gözəl film idi əəəəəəəəəəə") == "repeated_chars"
    assert quality_problem("Ad (fiziki və ya hüquqi şəxsin):____________________") == "repeated_chars"
    doc = "\n".join(["Sabah hava yağışlı olacaq."] * 4 + ["Külək güclənəcək."])
    assert quality_problem(doc) == "duplicate_lines"
    assert quality_problem(doc, max_duplicate_line_ratio=None, max_repeated_5gram_ratio=None) is None


def test_language_labels(flores):
    labels = detect([TURKISH, "Президент подписал новый закон об образовании.", "The law was signed yesterday.",
                     "Бу ҝүн һава чох ҝөзәлдир.", PROSE[1],
                     "Bu gün hava günəşlidir ve çok güzel"])     # colloquial az, Turkish spelling, but a schwa
    assert labels == ["tr", "ru", "en", "az-Cyrl", "az", "az"]
    got = detect(flores)
    assert got.count("az") / len(got) >= 0.99


def test_decontamination_finds_a_copied_eval_line(flores):
    index = eval_index(flores, n=13, min_words=8)
    leaked = "Xəbərə görə, " + flores[3] + " Bu barədə məlumat verilib."
    assert contaminated_by(leaked, index) == 3
    assert contaminated_by(PROSE[0], index) is None
    assert find_contamination([PROSE[1], leaked, PROSE[2]], index) == [(1, 3)]
    short = eval_index(["Bakı Azərbaycanın paytaxtı və ən böyük şəhəridir."], n=13, min_words=5)
    assert contaminated_by("Məlumdur ki, Bakı Azərbaycanın paytaxtı və ən böyük şəhəridir!", short) == 0


def test_mix_rates_and_copies_are_deterministic():
    r = rates({"legal": 12_000_000, "wiki": 2_000_000}, temperature=0.0)
    assert r == {"legal": pytest.approx(7 / 12), "wiki": pytest.approx(3.5)}
    assert rates({"legal": 100, "wiki": 100}, weights={"legal": 0.0})["legal"] == 0.0
    with pytest.raises(DataError, match=r"unknown source\(s\) \['news'\]"):
        rates({"legal": 100}, weights={"news": 1.0})
    picks = [copies(f"legal/{i}", 0.5, seed=1) for i in range(2000)]
    assert picks == [copies(f"legal/{i}", 0.5, seed=1) for i in range(2000)]
    assert 900 < sum(picks) < 1100


def test_sentence_near_duplicates_inside_a_source_are_dropped():
    seen = SeenShingles(bits=1 << 20)
    first = AMENDMENTS[0] + " Bu maddə 2018-ci ildən qüvvədədir."
    assert drop_seen_sentences(first, seen, "legal") == first
    # the same note with other numbers, and one new sentence: only the new sentence stays
    again = AMENDMENTS[1] + " Məcəllənin yeni redaksiyası dərc olunub."
    assert drop_seen_sentences(again, seen, "legal") == "Məcəllənin yeni redaksiyası dərc olunub."
    assert drop_seen_sentences(again, seen, "news") == again          # another source has its own history


def test_write_mix_caps_in_input_order_and_drops_weight_zero(tmp_path):
    recs = [{"id": f"s/0/{i}", "text": f"Sənəd nömrə {i} haqqında {w} məlumat verilir.",
             "metadata": {"source": src, "order": [0, 0, i]}}
            for i, (src, w) in enumerate([("legal", "hüquqi")] * 6 + [("poetry", "şeir")] * 3)]
    counts = write_mix(iter(recs), tmp_path / "mix.jsonl", source_rates={"legal": 1.0, "poetry": 0.0},
                       caps={"legal": sum(len(r["text"].encode()) for r in recs[:3]) + 10}, sentence_dedup=False,
                       seed=0)
    lines = [json.loads(x)["text"] for x in (tmp_path / "mix.jsonl").read_text().splitlines()]
    assert lines == [r["text"] for r in recs[:3]]                       # the first bytes of legal, in order
    assert counts == {"legal": {"docs": 3, "bytes": sum(len(t.encode()) for t in lines)},
                      "poetry": {"docs": 0, "bytes": 0}}


# ------------------------------------------------------------------------------------------ the whole stage

def _write(folder: Path, name: str, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _clean(src_dir: Path, out: Path, evals: dict, **kw):
    r = resolve_source({"path": str(src_dir / "*")}, None)
    return clean_corpus([r], out, eval_lines=evals, languages=["az"], quality={}, tasks=kw.pop("tasks", 2),
                        workers=kw.pop("workers", 2), **kw)


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory, flores):
    tmp = tmp_path_factory.mktemp("corpus")
    src = tmp / "src"
    leaked = "Xəbərə görə, " + flores[3]
    _write(src, "legal.txt", AMENDMENTS + ["FƏSİL 3"] + PROSE[:2])
    _write(src, "news.txt", [PROSE[2], az_upper(PROSE[2]), TURKISH, leaked, PROSE[3]])
    manifest = _clean(src, tmp / "out", {"flores": flores})
    return tmp, manifest


def test_each_step_removes_what_it_should(cleaned):
    tmp, m = cleaned
    folder = tmp / "out" / m["key"]
    removed = {step: [r["text"] for r in read_jsonl(folder / "removed" / step)]
               for step in ("quality", "language", "decontamination", "exact_dedup", "near_dedup")}
    assert removed["quality"] == ["FƏSİL 3"]
    assert removed["language"] == [TURKISH]
    assert len(removed["decontamination"]) == 1 and removed["decontamination"][0].startswith("Xəbərə görə")
    assert len(removed["exact_dedup"]) == 1                       # PROSE[2] in capitals: same normalized text
    assert len(removed["near_dedup"]) == 2                         # two of the three amendment notes
    kept = [r["text"] for r in read_jsonl(folder / "clean")]
    assert sorted(kept) == sorted([AMENDMENTS[0]] + PROSE[:2] + [PROSE[2], PROSE[3]]) or \
        sum(a in kept for a in AMENDMENTS) == 1 and all(p in kept for p in PROSE[:2] + PROSE[3:])
    assert [r["metadata"]["order"] for r in in_input_order(folder / "clean")] == sorted(
        r["metadata"]["order"] for r in read_jsonl(folder / "clean"))
    t = m["counts"]["by_source"]["total"]
    assert (t["input_docs"], t["kept_docs"]) == (11, 5)
    assert m["counts"]["by_source"]["news"]["language_docs"] == 1
    assert m["counts"]["languages"] == {"az": 9, "tr": 1}     # "FƏSİL 3" left at the quality step


def test_manifest_records_inputs_settings_and_rerun_is_skipped(cleaned, flores):
    tmp, m = cleaned
    folder = tmp / "out" / m["key"]
    on_disk = json.loads((folder / "manifest.json").read_text())
    assert on_disk["inputs"][0]["sha256"] and on_disk["settings"]["decontamination_n"] == 13
    assert on_disk["settings"]["minhash"] == {"n_grams": 5, "num_buckets": 14, "hashes_per_bucket": 8}
    before = (folder / "manifest.json").stat().st_mtime_ns
    again = _clean(tmp / "src", tmp / "out", {"flores": flores})
    assert again == on_disk and (folder / "manifest.json").stat().st_mtime_ns == before
    other = _clean(tmp / "src", tmp / "out", {"flores": flores}, decontamination_n=8)
    assert other["key"] != m["key"]
    assert not list((tmp / "out").glob("*.work"))


def test_a_source_filtered_to_nothing_is_an_error(tmp_path, flores):
    _write(tmp_path / "src", "ok.txt", PROSE)
    _write(tmp_path / "src", "turkish.txt", [TURKISH, "Bugün hava çok güzel ve güneşli, dışarı çıkalım mı?"])
    with pytest.raises(DataError, match=r"source\(s\) \['turkish'\] filtered down to nothing"):
        _clean(tmp_path / "src", tmp_path / "out", {"flores": flores}, tasks=1, workers=1)
    assert not any((p / "manifest.json").exists() for p in (tmp_path / "out").iterdir())


@pytest.mark.parametrize("name,content,match", [
    ("bad.parquet", b"PAR1 this is not parquet", r"bad.parquet: not a readable parquet file"),
    ("recs.jsonl", '{"body": "Salam"}\n'.encode(), r"recs.jsonl:1: no field 'text'"),
    ("latin1.txt", "Bakı şəhəri\n".encode("utf-8") + b"caf\xe9 au lait\n", r"latin1.txt: not valid UTF-8"),
])
def test_bad_input_names_the_file(tmp_path, flores, name, content, match):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_bytes(content)
    with pytest.raises(DataError, match=match):
        _clean(tmp_path / "src", tmp_path / "out", {"flores": flores}, tasks=1, workers=1)


def test_hub_source_is_downloaded_once_and_cleaned(tmp_path, flores):
    ds = tmp_path / "hub_ds"
    ds.mkdir()
    (ds / "train.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in PROSE))
    r = resolve_source({"hub": str(ds)}, None)
    m = clean_corpus([r], tmp_path / "out", eval_lines={"flores": flores}, languages=["az"], quality={},
                     tasks=1, workers=1)
    assert m["inputs"][0]["fingerprint"] and m["counts"]["by_source"]["total"]["kept_docs"] == 4


KILL_SCRIPT = """
import sys
from azllm.corpus import clean_corpus
from azllm.data import resolve_source
r = resolve_source({"path": sys.argv[1] + "/*"}, None)
clean_corpus([r], sys.argv[2], eval_lines={"x": ["a b c"]}, languages=["az"], quality={}, tasks=2, workers=1)
"""


def test_a_killed_run_leaves_nothing_taken_as_finished(tmp_path, data_root, flores):
    src = data_root / "data/az/train"
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(src), str(out)], env={**os.environ},
                            start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not list(out.glob("*.work/removed")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)   # the run and its worker, forkserver and manager processes
    proc.wait()
    assert list(out.glob("*.work")), "the run was killed before it started writing"
    assert not list(out.glob("*/manifest.json"))
    done = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(src), str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (finished,) = list(out.glob("*/manifest.json"))
    m = json.loads(finished.read_text())
    assert m["counts"]["by_source"]["total"]["input_docs"] > 1000
    assert not list(out.glob("*.work"))


def test_processes_cleaning_at_once_share_one_result(tmp_path, data_root):
    """Like torchrun ranks of one run: both finish, one cleaned corpus, no work folder left."""
    src, out = data_root / "data/az/train", tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(src), str(out)], stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()[-2000:]
    assert len(list(out.glob("*/manifest.json"))) == 1 and not list(out.glob("*.work"))


STDIN_SCRIPT = """
import json, sys
from azllm.corpus import clean_corpus
from azllm.data import resolve_source
r = resolve_source({"path": "data/az/train/*"}, ROOT)
m = clean_corpus([r], OUT, eval_lines={"x": ["a b c"]}, languages=["az"], quality={}, tasks=2, workers=2)
print("RESULT", json.dumps({"kept": m["counts"]["by_source"]["total"]["kept_docs"], **m["performance"]}))
"""


STDIN_LIMIT_S = 120


def test_a_run_from_standard_input_finishes(tmp_path, data_root):
    """``python - < script.py``: the workers could not re-run ``<stdin>`` and were restarted forever (12 MB of
    tracebacks a minute); now the tasks run in the process, which says so, within the time limit."""
    script = STDIN_SCRIPT.replace("ROOT", repr(str(data_root))).replace("OUT", repr(str(tmp_path / "out")))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    env.pop("AZLLM_LOG", None)
    proc = subprocess.Popen([sys.executable, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=tmp_path, env=env, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(script, timeout=STDIN_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)   # the run and its forkserver, workers and manager
        out, _ = proc.communicate()
        pytest.fail(f"the run from standard input did not finish in {STDIN_LIMIT_S} s:\n" + out[-3000:])
    assert proc.returncode == 0, out[-3000:]
    assert "'<stdin>' does not exist" in out and "running the 2 tasks one after another in this process" in out
    result = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
    assert result["kept"] > 1000 and result["workers"] == 1
    assert "FileNotFoundError" not in out
