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

from .config import Config, ParamsError, load_params
from .recipes import sources as _sources
from .utils import LOG_ENV, REPO_ROOT, atomic_write_json, atomic_write_text, git_commit, machine_info, package_versions

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


def run_metadata(cfg: Config, params_file: str | os.PathLike | None) -> dict:
    """Params, their hash, git commit, package versions, seed and machine of a run."""
    from .recipes.paths import Paths

    root = Paths(cfg).data_root
    return {
        "run_name": cfg.run_name,
        "params_file": str(params_file) if params_file else None,
        "params": cfg.to_dict(),
        "params_hash": cfg.hash(),
        "seed": cfg.seed,
        "git_commit": git_commit(REPO_ROOT),
        "packages": package_versions(),
        "machine": machine_info(),
        "data_root": str(root) if root else None,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


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


def _pct(share: float | None) -> str | None:
    """A share as a percentage to 4 significant digits at most (1.0 -> "100%", 0.99875 -> "99.88%").

    >>> _pct(1.0), _pct(0.99875), _pct(None)
    ('100%', '99.88%', None)
    """
    return None if share is None else f"{100 * share:.4g}%"


def _f(x, fmt: str = "{:.3f}") -> str:
    return "—" if x is None or (isinstance(x, float) and x != x) else fmt.format(x)


def _corpus_answer(m: dict) -> tuple | None:
    c = m.get("corpus") or {}
    total = ((c.get("counts") or {}).get("by_source") or {}).get("total") or {}
    if not total.get("input_bytes"):
        return None
    mix = sum(r.get("mix_mb") or 0 for r in c.get("mix") or [])
    sf = c.get("sentence_filter") or {}
    dropped = [r for r in c.get("mix") or [] if r.get("dropped_sentences_pct") is not None]
    sentences = (
        f"; near-duplicate sentences dropped in the mix: up to {max(r['dropped_sentences_pct'] for r in dropped):.1f}%"
        " of a source" + (f" (filter false-positive rate {sf['false_positive']:.1e})" if sf else "")
        if dropped
        else ""
    )
    return (
        "What the corpus stage kept",
        f"{total.get('kept_bytes', 0) / 1e6:,.1f} of {total['input_bytes'] / 1e6:,.1f} MB "
        f"({100 * total.get('kept_bytes', 0) / total['input_bytes']:.1f}%), {total.get('kept_docs', 0):,} documents; "
        f"the mix: {mix:,.1f} MB{sentences}",
        "the input as found; what each step removed is on the page",
        "00_corpus.html",
    )


def _tokens_answer(m: dict) -> tuple | None:
    split = m.get("tokens_split") or {}
    if not split.get("train_tokens"):
        return None
    ratios = (m.get("tokens_benchmark") or {}).get("ratios") or {}
    speed = (
        f"; the encoder at {_f(ratios['c_over_limit_1x'], '{:.2f}')}× the tokenizer's own batch encode"
        if ratios.get("c_over_limit_1x") is not None
        else ""
    )
    return (
        "Token files",
        f"{split['train_tokens']:,} training and {split.get('val_tokens', 0):,} validation tokens "
        f"({100 * split.get('val_share_of_docs', 0):.1f}% of the documents held out){speed}",
        "the limit: the tokenizer's batch encode on all cores, nothing written",
        "02_tokens.html",
    )


def _sft_answer(m: dict) -> tuple | None:
    from .recipes.controls import stage_sentence

    s = m.get("sft") or {}
    c = s.get("chrf_before_after") or {}
    if c.get("after") is None:
        return None
    tasks = [r for r in s.get("tasks_before_after") or [] if r.get("verdict") in ("gain", "loss")]
    moved = (
        "; beyond the noise on the tasks: "
        + ", ".join(f"{r['task']} {_f(r.get('delta'), '{:+.3f}')} ({r['verdict']})" for r in tasks)
        if tasks
        else ("; every task within noise" if s.get("tasks_before_after") else "")
    )
    stages = s.get("stages") or []
    against = f"; {stage_sentence(stages)}" if len(stages) > 2 else ""  # the controls (two stages: the line above)
    return (
        "Does instruction tuning help (held-out answers)",
        f"chrF++ of {c.get('n')} held-out answers {_f(c.get('before'), '{:.2f}')} → {_f(c['after'], '{:.2f}')} "
        f"({_f(c.get('delta'), '{:+.2f}')} ± {_f(c.get('delta_se'), '{:.2f}')}, {c.get('verdict')}){moved}{against}",
        "the SFT base's own answers before any step; a gain only beyond 1.96 paired standard errors",
        "07_sft.html",
    )


def _preference_answer(m: dict) -> tuple | None:
    p = m.get("preference") or {}
    acc, chrf, words = p.get("preference_accuracy"), p.get("chrf"), p.get("mean_answer_words") or {}
    if not acc:
        return None
    said = (
        f"chrF++ of {chrf['n']} held-out answers {_f(chrf['before'], '{:.2f}')} → {_f(chrf['after'], '{:.2f}')} "
        f"({_f(chrf['delta'], '{:+.2f}')} ± {_f(chrf['delta_se'], '{:.2f}')}, {chrf['verdict']}); "
        if chrf
        else ""
    )
    length = f"; answers {words['before']:.1f} → {words['after']:.1f} words" if "before" in words else ""
    return (
        "Does preference tuning help (held-out answers)",
        f"{str(p.get('method', '')).upper()}: {said}preference accuracy {_f(acc['accuracy'], '{:.3f}')} on "
        f"{acc['n']} held-out pairs ({p.get('accuracy_verdict')} against chance){length}",
        "the SFT model's own answers; chance accuracy 0.5; a gain only beyond 1.96 standard errors",
        "09_preference.html",
    )


def _tokenizer_answer(m: dict) -> tuple | None:
    t = m.get("tokenizers") or {}
    if not t.get("best"):
        return None
    refs = ", ".join(f"{n} {_f(v)}" for n, v in (t.get("reference_fertility") or {}).items())
    return (
        "Tokens per word",
        f"{t['best']}: {_f(t.get('best_fertility'))} on {t.get('selected_on')}",
        refs or "no baseline in this run",
        "01_tokenizers.html",
    )


def _bpb_answer(m: dict) -> tuple | None:
    final = (m.get("train") or {}).get("final") or {}
    if (final.get("val") or {}).get("bpb") is None:
        return None
    uniform = ", ".join(f"{k} {_f(f['uniform_bpb'])}" for k, f in final.items() if f.get("uniform_bpb") is not None)
    return (
        "Held-out bits per byte",
        ", ".join(f"{k} {_f(f.get('bpb'))}" for k, f in final.items()),
        f"a uniform guess over the vocabulary on the same sets: {uniform}" if uniform else "no baseline recorded",
        "03_train.html",
    )


def _adapt_answer(m: dict) -> tuple | None:
    best = (m.get("adapt") or {}).get("best")
    if not best:
        return None
    return (
        "Adaptation that wins (Azerbaijani bpb)",
        f"{best['way']} / {best['method']}: {_f(best['az_bpb_before'])} → {_f(best['az_bpb_after'])}; English "
        f"{_f(best['en_bpb_before'])} → {_f(best['en_bpb_after'])} ({_f(best['en_bpb_change'], '{:+.3f}')})",
        "the base before adaptation (step 0)",
        "05_adapt.html",
    )


def _eval_answer(m: dict) -> tuple | None:
    e = m.get("evaluate") or {}
    top = e.get("top")
    if not top:
        return None
    en = (
        f"; English {e.get('en_headline')} {_f(top['en_change'], '{:+.3f}')} ({top['en_verdict']})"
        if top.get("en_change") is not None
        else ""
    )
    answer = (
        f"{top['way']} / {top['method']}: {e.get('az_headline')} {_f(top['az_gain'], '{:+.3f}')} "
        f"± {_f(top['az_gain_se'])} ({top['az_verdict']}){en}"
    )
    mv = e.get("moved") or {}
    beyond = [f"{r['way']} / {r['method']} {r['task']} {r['delta']:+.2f} ± {r['delta_se']:.2f} ({r['verdict']})"
              for r in [*(mv.get("az") or []), *(mv.get("en") or [])]]  # fmt: skip
    answer += (f"; beyond the noise: {', '.join(beyond)}" if beyond else "; no task beyond the noise") if mv else ""
    if mv.get("base_at_chance") or mv.get("stand_in"):  # no chance-level number presented as an answer
        answer = (
            "none here: this base is a stand-in (the small Llama of 05, at or near chance on every multiple-choice "
            "task), so its downstream changes are noise (" + answer + "). The answer on a real base is the "
            "SmolLM2-135M run: python -m azllm run params/smollm2.yaml (README, results)"
        )
    return (
        "Most Azerbaijani per device-hour (downstream)",
        answer,
        "the base before adaptation; a gain only beyond 1.96 paired standard errors",
        "06_evaluate.html",
    )


def _technique_answers(m: dict) -> list[tuple]:
    b = m.get("benchmark") or {}
    ok = [r for r in b.get("variants") or [] if r.get("status") == "ok" and r.get("speed_ratio") is not None]
    out = []
    if ok:
        fastest = f" (fastest: {b['fastest_variant']})" if b.get("fastest_variant") else ""
        out.append(
            (
                "Speed × and memory × of each technique",
                "; ".join(
                    f"{r['variant']} {_f(r['speed_ratio'], '{:.2f}')} / {_f(r.get('memory_ratio'), '{:.2f}')}"
                    for r in ok
                )
                + fastest,
                "the baseline variant = 1.00 / 1.00",
                "04_benchmark.html",
            )
        )
    cost = [r for r in b.get("cost") or [] if r.get("usd_per_billion_tokens") is not None]
    if cost:
        cheapest = f" (cheapest: {b['cheapest_variant']})" if b.get("cheapest_variant") else ""
        out.append(
            (
                "$ per billion tokens",
                "; ".join(f"{r['variant']} ${r['usd_per_billion_tokens']:,.0f}" for r in cost) + cheapest,
                f"at {_f(cost[0].get('price_per_hour'), '${:.2f}')}/h, the measured tokens/s of this machine",
                "04_benchmark.html",
            )
        )
    return out


def _distill_answer(m: dict) -> tuple | None:
    v, s = (m.get("distill") or {}).get("bpb") or {}, (m.get("deploy") or {}).get("summary") or {}
    if not v and not s:
        return None
    parts = []
    if v:
        parts.append(f"student {_f(v.get('kd_bpb'))} vs cross-entropy {_f(v.get('ce_bpb'))} {v.get('az_set')} bpb")
    if s:
        parts.append(
            f"{s.get('model')} {s.get('file')}: {_f(s.get('size_mb'), '{:.1f}')} MB"
            f" (F16 {_f(s.get('f16_size_mb'), '{:.1f}')}),"
            f" KLD {_f(s.get('mean_kld'), '{:.3g}')}, tokenizer parity {_f(_pct(s.get('parity_share')), '{}')}"
            f" of {s.get('parity_lines')} lines"
        )
    return (
        "Small model for a phone (distilled, GGUF)",
        "; ".join(parts),
        f"the teacher {_f(v.get('teacher_bpb'))}" if v else "no distillation in this run",
        "08_distill_deploy.html",
    )


def _headline(metrics: dict) -> list[tuple[str, str, str, str]]:
    """The few answers of the study, each ``(question, answer, reference point, page)``; what a run did not
    produce is left out. Every number, and every winner (the best tokenizer, the adaptation run, the recipe, the
    fastest and the cheapest variant), is chosen by a recipe and read here from metrics.json."""
    rows = [
        _corpus_answer(metrics),
        _tokenizer_answer(metrics),
        _tokens_answer(metrics),
        _bpb_answer(metrics),
        *_technique_answers(metrics),
        _adapt_answer(metrics),
        _eval_answer(metrics),
        _sft_answer(metrics),
        _preference_answer(metrics),
        _distill_answer(metrics),
    ]
    return [r for r in rows if r is not None]


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
        for q, a, ref, page in _headline(collected["metrics"])
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
