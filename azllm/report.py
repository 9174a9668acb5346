"""The report runner: params file -> papermill -> executed notebooks -> HTML pages, ``metrics.json``, ``index.html``.

Layout of ``reports/<run_name>/``::

    index.html            links to every page, the run's status, params hash, commit, the publish command
    01_tokenizers.html    one page per notebook (code hidden unless report.show_code or --show-code)
    01_tokenizers.ipynb   the executed notebook
    params.yaml           the params as resolved (defaults filled in)
    metrics.json          every number of the report + run metadata + input sha256s + artifact paths
    parts/                what each notebook recorded (merged into metrics.json)
    run.log               progress bars and library warnings of the kernels (echoed to the terminal, not in pages)

Notebooks record numbers with :func:`record` (plain JSON values), heavy outputs with :func:`record_artifact` (paths
under the git-ignored artifacts folder), inputs with :func:`record_inputs`. A failed cell stops the run: the partial
notebook is still rendered, ``metrics.json`` says which notebook failed and the runner exits non-zero.

The schema of ``metrics.json``: what a notebook records is what a recipe returned (``azllm.recipes``), never a
display table, so every key, at every depth, is snake_case (``^[a-z0-9_]+$``: ``az_bpb_after``, ``speed_ratio``,
``usd_per_billion_tokens``); display labels ("speed ×") live in :data:`azllm.tables.LABELS` only. Names the user
or the data chose (eval sets, tasks, tokenizers, sources, runs, variants) are values (a row's ``way``,
``variant``, ``task``), or they are the keys of a map listed in :data:`NAMED_MAPS`, never part of a key (a number
of the params may be: ``batch_at_<seq>``); :func:`key_problems` checks a file against this, and the tests check
every notebook's ``metrics.json`` on tiny params.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from .answers import headline
from .config import Config, ParamsError, load_params
from .recipes import run_metadata
from .recipes import sources as _sources
from .record import run_record
from .utils import LOG_ENV, REPO_ROOT, atomic_write_json, atomic_write_text

__all__ = [
    "record",
    "record_inputs",
    "record_artifact",
    "NAMED_MAPS",
    "key_problems",
    "run_report",
    "run_metadata",
    "compact_progress",
]


def _merge_part(out_dir: str | os.PathLike, kind: str, section: str, values: dict) -> Path:
    path = Path(out_dir) / "parts" / f"{kind}.{section}.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    old.update(values)
    return atomic_write_json(path, old)


def record(out_dir: str | os.PathLike, section: str, values: dict) -> None:
    """Add ``values`` (JSON-serializable) to section ``section`` of the run's ``metrics.json``.

    >>> record("reports/demo", "tokenizers", {"best_fertility": 1.52})  # doctest: +SKIP
    """
    _merge_part(out_dir, "metrics", section, _jsonable(values))


SNAKE_CASE = re.compile(r"^[a-z0-9_]+$")

_SCORE_MAPS = ("tasks", "subtasks", "fewshot_overlap", "n_items", "num_fewshot", "task_hashes")
NAMED_MAPS = (
    # the runner: input names (and their files' paths), artifact names, package names
    "inputs",
    "inputs.*.sha256",
    "artifacts",
    "run.packages",
    # 00: sources, languages, the eval sets and tasks decontaminated against
    "metrics.corpus.counts.by_source",
    "metrics.corpus.counts.languages",
    "metrics.corpus.settings.eval_sets",
    # 01: eval sets, tokenizers, the words segmented, the lexicons' feature bundles and flags
    "metrics.tokenizers.eval_sets",
    "metrics.tokenizers.skipped",
    "metrics.tokenizers.checks",
    "metrics.tokenizers.best_fertility_by_set",
    "metrics.tokenizers.reference_fertility",
    "metrics.tokenizers.recipe.[].fertility",
    "metrics.tokenizers.recipe.[].roundtrip",
    "metrics.tokenizers.segmentations",
    "metrics.tokenizers.segmentations.*",
    "metrics.tokenizers.lexicon.*.by_*",
    # 03: eval sets
    "metrics.train.final",
    # 05: eval sets
    "metrics.adapt.tokenizers.[].tokens_per_word",
    "metrics.adapt.extension_table.[].fertility",
    "metrics.adapt.extension_table.[].roundtrip",
    # 06: runs (way-method) and tasks
    "metrics.evaluate.after",
    "metrics.evaluate.fewshot_overlap",
    *(f"metrics.evaluate.{m}.{k}" for m in ("base", "after.*") for k in _SCORE_MAPS),
    # 07: runs, sources, eval sets and tasks, reasons a record was bad
    "metrics.sft.base.runs",
    "metrics.sft.counts.sources",
    "metrics.sft.counts.sources.*.bad",
    "metrics.sft.counts.bad",
    "metrics.sft.counts.decontaminated",
    "metrics.sft.counts.decontaminated.examples",
    "metrics.sft.counts.eval_source_counts",
    "metrics.sft.counts.eval_source_counts.*.bad",
    # 08: the teacher's choice among 05's runs (way-method), eval sets, tasks of the scored models
    "metrics.distill.teacher.note.runs",
    "metrics.distill.teacher.eval",
    "metrics.distill.teacher.note.sft_base.runs",
)
"""The maps of ``metrics.json`` whose keys are names the user or the data chose, as dotted paths (``*``: any key,
``by_*``: any key that starts so, ``[]``: every item of a list); their values are checked like any other."""

OTHER_SCHEMAS = ("run.params", "run.data.overrides")
"""Subtrees keyed by the params' own schema (:mod:`azllm.config`, which checks them), not by this one."""


def _matches(path: tuple, pattern: str) -> bool:
    pat = pattern.split(".")
    return len(pat) == len(path) and all(
        p == "*" or p == k or (p.endswith("*") and k.startswith(p[:-1])) for p, k in zip(pat, path)
    )


def key_problems(doc: Any, path: tuple = ()) -> list[str]:
    """Every key of ``doc`` (a ``metrics.json``, at every depth) that is not snake_case and is not a name in one
    of :data:`NAMED_MAPS`, as its dotted path.

    >>> key_problems({"metrics": {"adapt": {"az bpb after": 1.0}, "train": {"final": {"FLORES-dev": {}}}}})
    ['metrics.adapt.az bpb after']
    """
    if any(_matches(path, p) for p in OTHER_SCHEMAS):
        return []
    out = []
    if isinstance(doc, dict):
        named = any(_matches(path, p) for p in NAMED_MAPS)
        for k, v in doc.items():
            if not named and not SNAKE_CASE.match(str(k)):
                out.append(".".join((*path, str(k))))
            out += key_problems(v, (*path, str(k)))
    elif isinstance(doc, list):
        for v in doc:
            out += key_problems(v, (*path, "[]"))
    return out


def record_inputs(out_dir: str | os.PathLike, name: str, resolved) -> None:
    """Record where an input came from and the sha256 of each of its local files."""
    _merge_part(out_dir, "inputs", "all", {name: {"source": resolved.describe(), "sha256": resolved.sha256s()}})


def record_artifact(out_dir: str | os.PathLike, name: str, path: str | os.PathLike) -> None:
    """Record the path of a heavy artifact (tokenizer folder, token file, checkpoint)."""
    _merge_part(out_dir, "artifacts", "all", {name: str(Path(path).resolve())})


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        try:
            return obj.item()
        except (ValueError, RuntimeError):
            pass
    if isinstance(obj, float) and (obj != obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _kernel_name() -> str:
    from jupyter_client.kernelspec import KernelSpecManager

    return "azllm" if "azllm" in KernelSpecManager().find_kernel_specs() else "python3"


_TQDM_LINE = re.compile(r"^(?P<desc>[^|]*?):?\s*\d+%\|")


def compact_progress(text: str) -> str:
    r"""Keep only the last state of each tqdm bar in a stream output (the page needs the result, not the trace).

    >>> compact_progress("a:  0%| | 0/2\ra: 50%| | 1/2\nwarn\na: 100%| | 2/2\n")
    'warn\na: 100%| | 2/2\n'
    """
    lines = re.split(r"[\r\n]+", text)
    last = {}
    for i, ln in enumerate(lines):
        m = _TQDM_LINE.match(ln)
        if m:
            last[m.group("desc").strip()] = i
    keep = [ln for i, ln in enumerate(lines) if ln and (not _TQDM_LINE.match(ln) or i in last.values())]
    return "\n".join(keep) + ("\n" if keep else "")


def _with_banner(body: str, banner: str | None) -> str:
    """``body`` (an HTML page) with ``banner`` as the first line of its content."""
    if not banner:
        return body
    tag = f'<p style="background:#fff3cd;border:1px solid #d39e00;padding:6px 10px"><b>{html.escape(banner)}</b></p>'
    i = body.find(">", body.find("<body")) + 1 if "<body" in body else 0
    return body[:i] + tag + body[i:]


def _render_html(nb_path: Path, html_path: Path, show_code: bool, banner: str | None = None) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(nb_path), as_version=4)
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        merged: list = []  # consecutive stream chunks of one name become one output, then progress is compacted
        for out in cell.get("outputs", []):
            if (
                out.get("output_type") == "stream"
                and merged
                and merged[-1].get("output_type") == "stream"
                and merged[-1].get("name") == out.get("name")
            ):
                merged[-1]["text"] += out["text"]
            else:
                merged.append(out)
        for out in merged:
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                out["text"] = compact_progress(out["text"])
        cell["outputs"] = [o for o in merged if not (o.get("output_type") == "stream" and not o.get("text"))]
    exporter = HTMLExporter(exclude_input=not show_code, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb)
    atomic_write_text(html_path, _with_banner(_offline(body), banner))


_REMOTE_SCRIPT = re.compile(r'<script src="https?://[^"]*">\s*</script>\n?')


def _offline(html_text: str) -> str:
    """A page without the scripts nbconvert's template loads from a CDN (require.js and MathJax, which no page uses:
    no widget state, no math): it opens complete offline, with no failed request in the browser's console.

    >>> _offline('<p>x</p><script src="https://cdnjs.cloudflare.com/a.js"> </script>\\n<script>init()</script>')
    '<p>x</p><script>init()</script>'
    """
    return _REMOTE_SCRIPT.sub("", html_text)


def _collect(run_dir: Path) -> dict:
    out: dict = {"metrics": {}, "inputs": {}, "artifacts": {}}
    for part in sorted((run_dir / "parts").glob("*.json")):
        kind, section, _ = part.name.split(".", 2)
        data = json.loads(part.read_text())
        if kind == "metrics":
            out["metrics"][section] = data
        else:
            out[kind].update(data)
    return out


def _data_source(cfg: Config, params_file: Path, run_dir: Path) -> tuple[Config, Path, dict]:
    """Local data, the hub or the shipped sample (:func:`azllm.recipes.sources.choose`), decided and said before
    any notebook runs; with overrides, the notebooks get ``<run_dir>/params.effective.yaml`` (the params file with
    them laid over it)."""
    from .config import deep_update, read_yaml

    data = _sources.choose(cfg)
    for note in data["notes"]:
        print(f"azllm: {note}", flush=True)
    if not data["overrides"]:
        return cfg, params_file, data
    raw = read_yaml(params_file) or {}
    effective = run_dir / "params.effective.yaml"
    atomic_write_text(
        effective, yaml.safe_dump(deep_update(raw, data["overrides"]), sort_keys=False, allow_unicode=True)
    )
    return load_params(effective), effective, data


def _write_index(run_dir: Path, meta: dict, pages: list[dict], collected: dict, banner: str | None = None) -> None:
    e = html.escape
    items = "\n".join(
        f'<li><a href="{e(p["html"])}">{e(p["name"])}</a> — <b class="{p["status"]}">{e(p["status"])}</b>'
        f" ({p['seconds']:.0f} s){(' — ' + e(p['error'])) if p.get('error') else ''}</li>"
        for p in pages
    )
    rows = "\n".join(
        f'<tr><td>{e(q)}</td><td>{e(a)}</td><td>{e(ref)}</td><td><a href="{e(page)}">{e(page)}</a></td></tr>'
        for q, a, ref, page in headline(run_record({**collected, "run": meta, "notebooks": pages}))
    )
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>azllm — {e(meta["run_name"])}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}} td{{padding:2px 8px}}
.ok{{color:green}} .failed{{color:#b00}} .skipped{{color:#888}} code{{background:#eee}}</style></head><body>
<h1>azllm report: {e(meta["run_name"])}</h1>
<p>params <code>{e(str(meta["params_file"]))}</code>, hash <code>{e(meta["params_hash"])}</code>,
commit <code>{e(str(meta["git_commit"]))}</code>, seed {meta["seed"]}, {e(meta["time_utc"])}<br>
machine: {e(str(meta["machine"].get("processor")))}, {meta["machine"].get("cpu_count")} cores,
GPU: {e(", ".join(meta["machine"].get("gpus", [])) or "none")}</p>
<h2>The answers</h2><table><tr><th>question</th><th>this run</th><th>beside</th><th>page</th></tr>{rows}</table>
<h2>Pages</h2><ul>{items}</ul>
<p><a href="metrics.json">metrics.json</a> (every number, with params, versions and input sha256s) ·
<a href="params.yaml">params.yaml</a> · to the Hub: <code>azllm publish {e(str(run_dir))} --repo OWNER/NAME</code></p>
</body></html>"""
    atomic_write_text(run_dir / "index.html", _with_banner(doc, banner))


class _LogEcho:
    """Echo what the notebook kernels append to the run's log (progress bars, library warnings) to this process's
    stderr: the terminal of ``make report`` shows progress while the pages stay clean."""

    def __init__(self, path: Path):
        self.path, self.stop = path, threading.Event()
        self.thread = threading.Thread(target=self._follow, daemon=True)

    def _follow(self) -> None:
        with open(self.path, "rb") as f:
            while True:
                chunk = f.read()
                if chunk:
                    sys.stderr.buffer.write(chunk) if hasattr(sys.stderr, "buffer") else sys.stderr.write(
                        chunk.decode(errors="replace")
                    )
                    sys.stderr.flush()
                elif self.stop.is_set():
                    return
                else:
                    time.sleep(0.5)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=5)


def _check_notebooks(names: list[str], nb_dir: Path) -> None:
    for n in names:
        if not (nb_dir / f"{n}.ipynb").is_file():
            raise ParamsError(
                f"notebooks: no notebook {n!r} in {nb_dir} (have: {sorted(p.stem for p in nb_dir.glob('*.ipynb'))})"
            )


def _kernel_did_not_start(e: BaseException) -> bool:
    """jupyter_client's "Kernel didn't respond in N seconds" (a kernel that never started), not a failed cell."""
    import papermill as pm

    return not isinstance(e, pm.PapermillExecutionError) and "didn't respond" in str(e)


def _execute(
    name: str,
    nb_dir: Path,
    run_dir: Path,
    params_file: Path,
    show_code: bool,
    banner: str | None = None,
    *,
    start_timeout: int = 300,
    start_tries: int = 3,
) -> dict:
    """Run one notebook with papermill into ``run_dir`` and render its page (also when a cell failed). A kernel
    that does not start within ``start_timeout`` seconds is started again, ``start_tries`` times in all."""
    import papermill as pm

    t0 = time.time()
    out_nb = run_dir / f"{name}.ipynb"
    page = {"name": name, "html": f"{name}.html", "status": "ok", "seconds": 0.0}
    print(f"azllm: executing {name} ...", flush=True)
    for attempt in range(1, start_tries + 1):
        try:
            pm.execute_notebook(
                str(nb_dir / f"{name}.ipynb"),
                str(out_nb),
                parameters={"params_file": str(params_file), "out_dir": str(run_dir)},
                kernel_name=_kernel_name(),
                language="python",
                cwd=str(REPO_ROOT),
                progress_bar=True,
                log_output=False,
                start_timeout=start_timeout,
            )
            break
        except Exception as e:  # papermill's execution error, a kernel that did not start, or a kernel death
            if _kernel_did_not_start(e) and attempt < start_tries:
                print(
                    f"azllm: {name}: the kernel did not start in {start_timeout} s (try {attempt} of "
                    f"{start_tries}); starting it again",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            page["status"] = "failed"
            page["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"[:500]
            print(f"azllm: {name} FAILED: {page['error']}", file=sys.stderr, flush=True)
            break
    page["kernel_starts"] = attempt
    page["seconds"] = time.time() - t0
    if out_nb.is_file():
        _render_html(out_nb, run_dir / page["html"], show_code, banner)
    return page


def run_report(
    params_file: str | os.PathLike,
    *,
    reports_dir: str | os.PathLike = "reports",
    notebooks: list[str] | None = None,
    show_code: bool | None = None,
    notebooks_dir: str | os.PathLike | None = None,
) -> tuple[Path, bool]:
    """Execute the notebooks of a params file and write the report. Returns ``(run_dir, ok)``.

    Progress and library warnings of the kernels go to ``<run_dir>/run.log``, echoed to this terminal.
    """
    params_file = Path(params_file).resolve()
    cfg = load_params(params_file)
    names = notebooks or cfg.notebooks
    nb_dir = Path(notebooks_dir or REPO_ROOT / "notebooks")
    _check_notebooks(names, nb_dir)
    show = cfg.report.show_code if show_code is None else show_code
    run_dir = (Path(reports_dir) / cfg.run_name).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    for old in (run_dir / "parts").glob("*.json"):
        old.unlink()
    cfg, params_file, data = _data_source(cfg, params_file, run_dir)
    banner = _sources.banner(data)
    meta = {**run_metadata(cfg, params_file), "data": data}
    atomic_write_text(run_dir / "params.yaml", yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True))
    print(f"azllm: run {cfg.run_name!r} (params hash {meta['params_hash']})", flush=True)
    print(
        f"azllm: data root: {meta['data_root'] or 'none: hub sources from the params are used'} "
        f"(set AZLLM_DATA_ROOT or data.root in the params to point elsewhere)",
        flush=True,
    )
    log = run_dir / "run.log"
    log.write_text("")
    before = os.environ.get(LOG_ENV)
    os.environ[LOG_ENV] = str(log)  # inherited by the kernels
    pages: list[dict] = []
    try:
        with _LogEcho(log):
            for name in names:
                pages.append(
                    _execute(
                        name,
                        nb_dir,
                        run_dir,
                        params_file,
                        show,
                        banner,
                        start_timeout=cfg.report.kernel_start_timeout,
                        start_tries=cfg.report.kernel_start_tries,
                    )
                )
                if pages[-1]["status"] != "ok":
                    break
    finally:
        os.environ.pop(LOG_ENV) if before is None else os.environ.__setitem__(LOG_ENV, before)
    ok = all(p["status"] == "ok" for p in pages)
    pages += [
        {
            "name": n,
            "html": f"{n}.html",
            "status": "skipped",
            "seconds": 0.0,
            "error": "not run: an earlier notebook failed",
        }
        for n in names[len(pages) :]
    ]
    collected = _collect(run_dir)
    atomic_write_json(run_dir / "metrics.json", {"run": meta, "notebooks": pages, **collected})
    _write_index(run_dir, meta, pages, collected, banner)
    print(
        f"azllm: report {'written' if ok else 'FAILED (partial report written)'}: {run_dir / 'index.html'}", flush=True
    )
    return run_dir, ok
