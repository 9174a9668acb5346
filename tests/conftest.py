"""Shared test setup: the fixture corpus, the full shared data tier, and the one tiny model shape.

Two tiers, one skip mechanism:

- every test runs on the committed fixture corpus (``tests/fixtures``, a data root with a slice of the shared
  data; see its README) and never skips for lack of data;
- tests marked ``needs_shared`` need the full shared folder (the whole corpus, the baseline tokenizers). They run
  when ``../shared`` is beside the repository (or ``$AZLLM_SHARED`` names it) and skip otherwise, saying so.

``slow`` marks tests over ~20 s on 2 cores; ``make test-fast`` leaves out both ``slow`` and ``needs_shared``.

``make test`` runs the tests on pytest-xdist workers, one per core (at most 4), each with its share of the cores'
threads (:func:`pytest_configure`: two workers of two torch threads each on two cores spin against each other and
ran no faster than one). Tests go to workers a scope at a time (:func:`pytest_xdist_make_scheduler`): the tests of one
file together, and the files that share a slow session fixture (:func:`adapt_report`: notebooks 05, 06 and 08;
:func:`lm_eval_registry`) together, so that it is built once. The scopes are handed out longest first, by each
file's recorded seconds (``tests/durations.json``; :func:`pytest_collection_modifyitems`), so that no worker is left
alone with a long file at the end. ``AZLLM_TEST_DURATIONS=tests/durations.json make test`` records them again.
"""

import gc
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"

# the one tiny model shape of the tests (LlamaConfig fields laid over the "tiny" preset)
TINY_MODEL = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}

# scripts that tests start in subprocesses (not test modules; --doctest-modules must not import them)
collect_ignore = [
    "liger_parity.py",
    "train_entry.py",
    "train_helpers.py",
    "fresh_targets.py",
    "config_helpers.py",
    "corpus_helpers.py",
    "tokens_helpers.py",
    "eval_helpers.py",
    "sft_helpers.py",
    "sft_entry.py",
    "browser_helpers.py",
    "cluster_helpers.py",
    "hub_helpers.py",
    "rank_hook",
]


def shared_root() -> Path | None:
    """The full shared folder: ``$AZLLM_SHARED``, else ``../shared`` beside the repository, when it holds data."""
    root = Path(os.environ.get("AZLLM_SHARED") or REPO.parent / "shared")
    return root if (root / "data" / "az" / "train").is_dir() and (root / "tokenizers").is_dir() else None


def notebook_stderr(run_dir: Path) -> list[str]:
    """Every stderr stream output of the executed notebooks of a report (``<run_dir>/*.ipynb``), as
    ``"<notebook> cell <n>: <first lines>"``."""
    import nbformat

    found = []
    for nb_path in sorted(Path(run_dir).glob("*.ipynb")):
        nb = nbformat.read(str(nb_path), as_version=4)
        for i, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    head = "\n    ".join(out["text"].splitlines()[:5])
                    found.append(f"{nb_path.name} cell {i}: {head}")
    return found


ANSWERED_BY = {
    "00_corpus": ("What the corpus stage kept",),
    "01_tokenizers": ("Tokens per word",),
    "02_tokens": ("Token files",),
    "03_train": ("Held-out bits per byte",),
    "04_benchmark": ("Speed × and memory × of each technique", "$ per billion tokens"),
    "05_adapt": ("Adaptation that wins (Azerbaijani bpb)",),
    "06_evaluate": ("Most Azerbaijani per device-hour (downstream)",),
    "07_sft": ("Does instruction tuning help (held-out answers)",),
    "08_distill_deploy": ("Small model for a phone (distilled, GGUF)",),
    "09_preference": ("Does preference tuning help (held-out answers)",),
}
"""The index's answers each notebook's numbers give (:func:`azllm.answers.headline`): every stage has one."""

_NUMBER = re.compile(r"(?<![\w.])[-+−]?\d[\d,]*\.\d+(?:[eE][-+]?\d+)?")


def long_numbers(text: str, digits: int = 4) -> list[str]:
    """The non-integers in ``text`` written with more than ``digits`` significant digits.

    >>> long_numbers("268.940889 · 4.413 ± 0.0625 · 1,422 · 12.345% · 1.0e-05 · v1.2.3")
    ['268.940889', '12.345']
    """
    out = []
    for m in _NUMBER.finditer(text):
        mantissa = re.split(r"[eE]", m.group())[0]
        sig = re.sub(r"[^0-9]", "", mantissa).lstrip("0")
        if len(sig) > digits and not re.match(r"\d+\.\d+\.\d", text[m.start() :]):
            out.append(m.group())
    return out


def page_problems(run_dir: Path) -> list[str]:
    """What a reader should not see on the rendered pages of a report (``<run_dir>/*.html``, the index too): a table
    cell with a non-integer of more than 4 significant digits (:func:`long_numbers`), and a bare "... is empty" line
    printed by a notebook."""
    from html.parser import HTMLParser

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.depth, self.cells, self.text = 0, [], []

        def handle_starttag(self, tag, attrs):
            if tag in ("td", "th"):
                self.depth += 1
                self.text = []

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.depth:
                self.depth -= 1
                self.cells.append("".join(self.text).strip())

        def handle_data(self, data):
            if self.depth:
                self.text.append(data)

    found = []
    for page in sorted(Path(run_dir).glob("*.html")):
        html = page.read_text(encoding="utf-8")
        parser = Cells()
        parser.feed(html)
        for cell in parser.cells:
            for n in long_numbers(cell):
                found.append(f"{page.name}: table cell {cell[:80]!r} shows {n}")
        for line in re.sub(r"<[^>]+>", "\n", html).splitlines():
            if re.fullmatch(r"\s*[\w.]+ is empty\s*", line):
                found.append(f"{page.name}: a bare line {line.strip()!r}")
    return found


def check_metrics(run_dir: Path) -> None:
    """The run's ``metrics.json`` against its schema: every key snake_case or a name in one of
    :data:`azllm.report.NAMED_MAPS` (:func:`azllm.report.key_problems`), and every answer of the index that the
    notebooks that ran should give is there, with no value missing ("—")."""
    from azllm.answers import headline
    from azllm.record import run_record
    from azllm.report import key_problems

    m = json.loads((Path(run_dir) / "metrics.json").read_text())
    bad = key_problems(m)
    assert not bad, "metrics.json keys that are not snake_case (a display label? a name outside NAMED_MAPS):\n" + (
        "\n".join(bad[:30])
    )
    answers = {q: a for q, a, _, _ in headline(run_record(m))}
    for page in (p["name"] for p in m["notebooks"] if p["status"] == "ok"):
        for question in ANSWERED_BY.get(page, ()):
            assert question in answers, f"{page} ran, but the index has no answer {question!r}"
            assert "—" not in answers[question], f"{question}: a value the index reads is missing: {answers[question]}"


def run_notebooks(params_file, **kwargs):
    """:func:`azllm.report.run_report` as ``make report`` runs it, then: no executed notebook holds a stderr stream
    output (progress bars, library warnings and datatrove's log go to the terminal and ``run.log``, never into a
    page), and the run's ``metrics.json`` keeps to its schema and gives the index's answers (:func:`check_metrics`).
    Every test that runs notebooks goes through here. Returns ``(run_dir, ok)``; the checks are left out
    when a notebook failed (the test's own ``assert ok`` says why).

    The kernels run without ``$PYTEST_CURRENT_TEST``: with it, ipykernel does not capture the output written to
    its file descriptors 1 and 2 (by worker processes, native code), which a report's kernel shows in the page."""
    from azllm.report import run_report

    was = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        run_dir, ok = run_report(params_file, **kwargs)
    finally:
        if was is not None:
            os.environ["PYTEST_CURRENT_TEST"] = was
    if ok:
        found = notebook_stderr(run_dir)
        assert not found, "stderr output in the pages (route it to azllm.utils.log_stream):\n" + "\n".join(found)
        check_metrics(run_dir)
        found = page_problems(run_dir)
        assert not found, "what the pages should not show:\n" + "\n".join(found)
        log = Path(run_dir) / "run.log"
        assert not log.is_file() or "IProgress not found" not in log.read_text(errors="replace"), "ipywidgets missing"
    return run_dir, ok


def pytest_configure(config):
    """On an xdist worker: this worker's share of the cores as its compute threads (torch, OpenMP and the processes
    a test starts inherit it), set before any test imports torch."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if os.environ.get("PYTEST_XDIST_WORKER") and workers > 1:
        threads = str(max(1, (os.cpu_count() or 1) // workers))
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = threads


# Session fixtures that take long: the files whose tests take one (the pattern, in the file's source) go to one
# xdist worker, which builds it once; a file that takes two joins their groups into one.
WORKER_SHARED_FIXTURES = {
    "adapt_report": r"def \w+\([^)]*\badapt_report\b",
    "lm_eval_registry": r"def \w+\([^)]*\blm_eval_registry\b",
    "smollm2_folder": r"def \w+\([^)]*\bsmollm2_(?:folder|tokenizer|loaded)\b",
    "tiny_data": r"from train_helpers import[^\n]*\bdata\b",  # train_helpers.data: the module side of tiny_data
}
REGISTRY_DOCTESTS = ("azllm/evaluation/commands.py",)
"""Modules whose doctests read lm-eval's registry (:func:`lm_eval_registry`'s group)."""


def _shared_fixture_scopes() -> dict[str, str]:
    """``{test file: group}`` for the files whose tests take a :data:`WORKER_SHARED_FIXTURES` fixture (read from
    their source: xdist's controller schedules by node id and collects nothing itself). A group is named by one of
    its fixtures; fixtures that one file takes together are one group."""
    uses = {f: ["lm_eval_registry"] for f in REGISTRY_DOCTESTS}
    for path in sorted((REPO / "tests").glob("test_*.py")):
        source = path.read_text()
        names = [n for n, pattern in WORKER_SHARED_FIXTURES.items() if re.search(pattern, source)]
        if names:
            uses[str(path.relative_to(REPO))] = names
    return _join_groups(uses)


def _join_groups(uses: dict[str, list[str]]) -> dict[str, str]:
    """``{file: group}``, a group being the fixtures that some file takes together, named by the first of them in
    :data:`WORKER_SHARED_FIXTURES` order.

    >>> _join_groups({"a": ["lm_eval_registry"], "b": ["adapt_report", "lm_eval_registry"], "c": ["tiny_data"]})
    {'a': 'adapt_report', 'b': 'adapt_report', 'c': 'tiny_data'}
    """
    group = {n: n for n in WORKER_SHARED_FIXTURES}

    def root(n: str) -> str:
        while group[n] != n:
            n = group[n]
        return n

    order = list(WORKER_SHARED_FIXTURES)
    for names in uses.values():
        for n in names[1:]:
            a, b = sorted((root(names[0]), root(n)), key=order.index)
            group[b] = a
    return {f: root(names[0]) for f, names in uses.items()}


def pytest_xdist_make_scheduler(config, log):
    """xdist's scheduling by scope, a scope being a test file, or the files that share a
    :data:`WORKER_SHARED_FIXTURES` fixture (module docstring). (``--dist loadgroup`` would do this with markers, but
    pytest-xdist 3.8 sets a node id attribute that pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # keep the collection's order, longest scope first (not by test count)
    scopes = _shared_fixture_scopes()

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return scopes.get(path, path)

    return ByFile(config, log)


DURATIONS = REPO / "tests" / "durations.json"
"""``{test file: seconds}`` of a recorded ``make test`` (every phase of every test of the file, on its worker)."""


def scope_seconds(files: list[str], slow: set[str], record: dict[str, float], scopes: dict[str, str]) -> dict:
    """``{scope: expected seconds}``: a scope's files' recorded seconds, a file that the record lacks counted as
    20 s when it holds a ``slow`` test and 1 s otherwise.

    >>> scope_seconds(["a", "b", "c", "d"], {"c"}, {"a": 5.0, "b": 2.5}, {"b": "fixture", "d": "fixture"})
    {'a': 5.0, 'fixture': 3.5, 'c': 20.0}
    """
    out: Counter = Counter()
    for f in files:
        out[scopes.get(f, f)] += record.get(f, 20.0 if f in slow else 1.0)
    return dict(out)


def pytest_collection_modifyitems(config, items):
    """The scopes (:func:`pytest_xdist_make_scheduler`) longest first by :func:`scope_seconds` (the same order on
    every worker: xdist hands out whole scopes in the order it meets them, and the longest first leaves no worker
    alone with a long file at the end). Tests marked ``needs_shared`` skip, saying so, without the full shared
    folder."""

    def rel(item) -> str:
        return item.path.relative_to(REPO).as_posix() if item.path.is_relative_to(REPO) else str(item.path)

    record = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    files = list(dict.fromkeys(rel(item) for item in items))
    slow = {rel(item) for item in items if item.get_closest_marker("slow")}
    scopes = _shared_fixture_scopes()
    seconds = scope_seconds(files, slow, record, scopes)
    items.sort(key=lambda item: -seconds[scopes.get(rel(item), rel(item))])  # stable: a file's own order is kept
    if shared_root() is not None:
        return
    skip = pytest.mark.skip(reason="needs the full shared data (../shared beside the repository, or $AZLLM_SHARED)")
    for item in items:
        if "needs_shared" in item.keywords:
            item.add_marker(skip)


def pytest_collection_finish(session):
    """What collection made (the imported stack and the test modules, about 750,000 objects on a worker) frozen,
    out of the cyclic garbage collector's sight: its full collections, one at the start of every training
    (accelerate's ``free_memory``, from the Trainer) and those Python starts as a worker's heap grows, then go over
    what the tests make, not over every module again. Nothing a test makes is frozen; :func:`pytest_unconfigure`
    hands them back before the interpreter's exit frees them (frozen, triton's bindings report leaks at exit)."""
    gc.freeze()


def pytest_unconfigure(config):
    """What :func:`pytest_collection_finish` froze, back in the collector's sight for the interpreter's exit."""
    gc.unfreeze()


_SECONDS: Counter = Counter()


def pytest_runtest_logreport(report):
    """With ``$AZLLM_TEST_DURATIONS``: each test phase's seconds, per file (on xdist's controller, which receives
    every worker's reports, or in a run without workers)."""
    if os.environ.get("AZLLM_TEST_DURATIONS") and not os.environ.get("PYTEST_XDIST_WORKER"):
        _SECONDS[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_sessionfinish(session, exitstatus):
    """With ``$AZLLM_TEST_DURATIONS``: the run's seconds per test file, written there (:data:`DURATIONS`)."""
    path = os.environ.get("AZLLM_TEST_DURATIONS")
    if path and _SECONDS and not os.environ.get("PYTEST_XDIST_WORKER"):
        seconds = {f: round(s, 1) for f, s in sorted(_SECONDS.items(), key=lambda kv: (-kv[1], kv[0]))}
        Path(path).write_text(json.dumps(seconds, indent=0) + "\n")


@pytest.fixture(scope="session")
def lm_eval_registry():
    """lm-evaluation-harness's task index with its registry (~14,700 YAML files, ~8 s on 2 cores), which
    :mod:`azllm.evaluation.harness` builds once per process: the tests that read it take this fixture, so that their
    files go to one worker (:data:`WORKER_SHARED_FIXTURES`) and the index is built there once."""
    from azllm.evaluation.harness import _task_manager

    return _task_manager(True)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """The tiny run's tokenizer and token files on the fixture corpus, prepared once per worker
    (:func:`train_helpers.prepare_tiny_data`; test modules take it as ``train_helpers.data``)."""
    from train_helpers import prepare_tiny_data

    return prepare_tiny_data(tmp_path_factory.mktemp("art"))


@pytest.fixture(scope="session")
def smollm2_loaded(tmp_path_factory):
    """SmolLM2-135M-Instruct as :func:`azllm.gguf.load_gguf` loads its packaged GGUF, once per worker; under a report
    (``$AZLLM_LOG``) transformers' de-quantizing progress bar goes to the run's log, not to stderr (where a page would
    show it in a box)."""
    import contextlib
    import io

    from azllm.gguf import load_gguf, smollm2_gguf

    log = tmp_path_factory.mktemp("log") / "run.log"
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err):
        mp.setenv("AZLLM_LOG", str(log))
        loaded = load_gguf(smollm2_gguf())
    assert "de-quantizing" not in err.getvalue() and "de-quantizing" in log.read_text()
    return loaded


@pytest.fixture(scope="session")
def smollm2_folder(tmp_path_factory, smollm2_loaded):
    """The SmolLM2 GGUF converted once per worker (:func:`azllm.gguf.gguf_to_folder`), from the model already loaded
    (one read of the GGUF)."""
    from azllm.gguf import gguf_to_folder, smollm2_gguf

    return gguf_to_folder(smollm2_gguf(), tmp_path_factory.mktemp("bases") / "smollm2", loaded=smollm2_loaded)


@pytest.fixture(scope="session")
def smollm2_tokenizer(tmp_path_factory, smollm2_folder):
    """SmolLM2's tokenizer alone: the tokenizer files of :func:`smollm2_folder` (read from the GGUF's metadata and
    saved as azllm.gguf saves them)."""
    import shutil

    out = tmp_path_factory.mktemp("smollm2-tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(smollm2_folder / name, out / name)
    return out


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The fixture corpus, laid out like a data root (``data/az/train``, ``data/az/dev``)."""
    return FIXTURES


@pytest.fixture(scope="session")
def shared() -> Path:
    """The full shared folder; only for tests marked ``needs_shared``."""
    root = shared_root()
    assert root is not None, "mark this test needs_shared"
    return root


@pytest.fixture
def hub(monkeypatch):
    """The real huggingface_hub client talking to a recorded Hub (tests/hub_helpers.py) for one test."""
    from hub_helpers import MockHub, install, uninstall

    h = MockHub()
    install(monkeypatch, h)
    yield h
    uninstall()


PATHS_COUNTER = """
import json, os
try:  # every process of the run (the notebooks' kernels, the fresh processes they start) logs each Paths it builds
    from azllm.recipes.paths import Paths

    _init = Paths.__init__

    def _counted(self, cfg):
        _init(self, cfg)
        with open(os.environ["AZLLM_TEST_PATHS_LOG"], "a") as f:
            f.write(json.dumps([os.getpid(), cfg.run_name, cfg.tokens.dir, str(self.data_root)]) + "\\n")

    Paths.__init__ = _counted
except Exception:
    pass
"""
"""The ``sitecustomize`` of :func:`adapt_report`'s processes: one line per :class:`Paths` built (pid, run name,
token folder, data root) in ``$AZLLM_TEST_PATHS_LOG``."""


@pytest.fixture(scope="session")
def adapt_report(tmp_path_factory):
    """Notebooks 05, 06 and 08 (whose teacher is 05's best run) on the tiny params and the fixture data, once per
    session: ``(run_dir, metrics, artifacts)``. Every process of the run logs the Paths it builds
    (:data:`PATHS_COUNTER`) into ``paths.log`` beside ``art``."""
    tmp = tmp_path_factory.mktemp("adapt-eval")
    hook = tmp / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(PATHS_COUNTER)
    old = {k: os.environ.get(k) for k in ("AZLLM_ARTIFACTS", "AZLLM_DATA_ROOT", "PYTHONPATH", "AZLLM_TEST_PATHS_LOG")}
    os.environ.update(
        {
            "AZLLM_ARTIFACTS": str(tmp / "art"),
            "AZLLM_DATA_ROOT": str(FIXTURES),
            "PYTHONPATH": os.pathsep.join(p for p in (str(hook), old["PYTHONPATH"]) if p),
            "AZLLM_TEST_PATHS_LOG": str(tmp / "paths.log"),
        }
    )
    try:
        run_dir, ok = run_notebooks(
            REPO / "params/tiny.yaml",
            reports_dir=tmp / "reports",
            notebooks=["05_adapt", "06_evaluate", "08_distill_deploy"],
        )
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert ok, metrics["notebooks"]
    return run_dir, metrics, tmp / "art" / "tiny"
