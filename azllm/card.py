"""Model and dataset cards for the Hugging Face Hub, written from what a run measured (``azllm publish``).

A card is a ``README.md``: YAML metadata between ``---`` lines, then Markdown. The metadata is built with
``huggingface_hub``'s own classes (:class:`~huggingface_hub.ModelCardData`, :class:`~huggingface_hub.EvalResult`,
:class:`~huggingface_hub.DatasetCardData`), so the Hub reads it as it reads any card:

- model: ``base_model`` (a Hub id), ``language``, ``license``, ``datasets`` (the hub datasets among the inputs),
  ``library_name: transformers``, ``pipeline_tag``, ``tags`` and ``model-index``: one result per measure with the
  score the run recorded (``metric_value``), the benchmark, its config and split. ``EvalResult`` has no field for a
  standard error, the score before or the number of items: those are in the card's table;
- dataset: ``license``, ``language``, ``size_categories``, ``task_categories``, ``pretty_name`` and the parquet
  ``configs``.

The text says what the model is and how it was made (each stage with its key settings and wall time, each input with
its license), gives every measure with its standard error, the score before the last stage, the change, its
verdict and minimum detectable effect, the original base's score where the run measured it, and names **every
measure that did not move beyond the noise or moved down**. Nothing in a card is typed by hand: every number comes
from the run's ``metrics.json``.

>>> facts = ModelFacts(repo="me/az-135m", base_model="HuggingFaceTB/SmolLM2-135M-Instruct", license="apache-2.0",
...     stages=[], scores=[Score(task="sib200_az", metric="acc", n=47, after=0.3, after_se=0.06)], inputs=[],
...     run={"run_name": "smollm2"}, compared_with="the SFT model")
>>> text = model_card(facts)
>>> from huggingface_hub import ModelCard
>>> ModelCard(text).data.eval_results[0].metric_value
0.3
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from .licenses import DataInput, redistributable
from .markdown import cell, change, heading, score_format

__all__ = [
    "Score",
    "StageFacts",
    "GGUFFile",
    "ModelFacts",
    "DatasetFacts",
    "BENCHMARKS",
    "hub_license",
    "eval_results",
    "model_card",
    "dataset_card",
    "unmoved",
]


class Score(TypedDict, total=False):
    """One measure of the published model: its score (``after``, with ``after_se``) and the run's comparison with
    the model before the last stage (``before``, ``delta`` ± ``delta_se``, ``verdict``, ``mde``) on ``n`` items,
    ``chance`` for a multiple choice, ``original``: the original base's score on the same items where the run
    measured it (not paired)."""

    task: str
    metric: str
    n: int | None
    chance: float | None
    before: float | None
    after: float
    after_se: float | None
    delta: float | None
    delta_se: float | None
    mde: float | None
    verdict: str | None
    original: float | None
    language: str | None
    split: str | None


class StageFacts(TypedDict):
    """One stage of the chain that made the model: its name, its key settings in words, its page's wall time."""

    stage: str
    settings: str
    seconds: float | None


class GGUFFile(TypedDict):
    """One GGUF file of the model (llama.cpp)."""

    name: str
    quant: str
    size_bytes: int
    bits_per_weight: float | None


@dataclass
class ModelFacts:
    """Everything a model card says, gathered from a run (:mod:`azllm.recipes.publish`)."""

    repo: str
    base_model: str | None
    license: str
    stages: list[StageFacts]
    scores: list[Score]
    inputs: list[DataInput]
    run: dict
    compared_with: str
    """What ``before`` of every score is: the model before the last stage."""
    languages: list[str] = field(default_factory=lambda: ["az", "en"])
    base_note: str = ""
    """How the base was found (a GGUF mapped to the model it came from), said under the chain."""
    chain: list[dict] = field(default_factory=list)
    """Rows of each stage's model against the original base on the held-out native answers (``model``, ``chrf``,
    ``delta``, ``delta_se``, ``verdict``, ``n``), when the run compared them."""
    gguf: list[GGUFFile] = field(default_factory=list)
    gguf_repo: str | None = None
    """The repository of the GGUF files when it is not this one."""
    gguf_checks: dict = field(default_factory=dict)
    """``parity_share``, ``parity_lines``, ``mean_kld`` (the smallest file against F16)."""
    weights: bool = True
    """The repository holds the transformers weights (False: a ``-GGUF`` repository of GGUF files only)."""


@dataclass
class DatasetFacts:
    """Everything a dataset card says: the corpus stage's record (:mod:`azllm.corpus`) and its inputs."""

    repo: str
    sources: list[dict]
    """Per source: ``source``, ``input_docs``, ``input_bytes``, each step's ``<step>_docs`` / ``_bytes``, ``kept_docs``,
    ``kept_bytes``."""
    steps: list[str]
    decontamination: dict[str, str]
    """The evaluation sets every document was checked against (name -> hash of their lines)."""
    decontamination_n: int
    inputs: list[DataInput]
    run: dict
    shards: list[str]
    languages: list[str] = field(default_factory=lambda: ["az"])


BENCHMARKS = {
    "sib200_az": ("text-classification", "Davlan/sib200", "SIB-200", "azj_Latn"),
    "sib200_en": ("text-classification", "Davlan/sib200", "SIB-200", "eng_Latn"),
    "sib200_az_probe": ("text-classification", "Davlan/sib200", "SIB-200 (linear probe)", "azj_Latn"),
    "sib200_en_probe": ("text-classification", "Davlan/sib200", "SIB-200 (linear probe)", "eng_Latn"),
    "tumlu_az": ("multiple-choice", "tumlu", "TUMLU-mini", "azerbaijani"),
    "mmlu_en": ("multiple-choice", "cais/mmlu", "MMLU", None),
    "flores_en_az": ("translation", "openlanguagedata/flores_plus", "FLORES-200 en→az", "eng_Latn-azj_Latn"),
    "flores_az_en": ("translation", "openlanguagedata/flores_plus", "FLORES-200 az→en", "azj_Latn-eng_Latn"),
}
"""Per task: the Hub task type, the benchmark (a Hub dataset id where it has one), its name and config."""

_METRICS = {"acc": "accuracy", "chrf": "chrf", "chrf++": "chrf"}
_HUB_LICENSES = {"apache-2.0", "mit", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-sa-3.0", "cc0-1.0", "llama3.2", "gemma"}


def hub_license(spdx: str) -> dict:
    """The card's license fields for an SPDX id: the Hub's own id where it has one, else ``other`` with the name.

    >>> hub_license("Apache-2.0"), hub_license("LicenseRef-official-texts")
    ({'license': 'apache-2.0'}, {'license': 'other', 'license_name': 'licenseref-official-texts'})
    """
    s = spdx.lower()
    if s in _HUB_LICENSES or s == "other":
        return {"license": s}
    return {"license": "other", "license_name": s}


def _benchmark(s: Score) -> tuple[str, str, str, str | None]:
    name = s["task"]
    if name in BENCHMARKS:
        return BENCHMARKS[name]
    if name.startswith("preference accuracy"):
        return "text-generation", "held-out-preference-pairs", name, None
    if name.startswith("chrF"):
        return "text-generation", "held-out-native-instructions", name, None
    return "text-generation", name, name, None


def _is_score(s: Score) -> bool:
    """A measure the model-index holds: a task's score or a judgement's (lengths, loop rates and the English guard's
    bits per byte stay in the text)."""
    guards = ("mean answer", "loop rate", "empty answers", "English bits per byte")
    return s.get("after") is not None and not s["task"].startswith(guards)


def eval_results(scores: list[Score]) -> list:
    """One :class:`huggingface_hub.EvalResult` per score of ``scores`` (its ``after``, the recorded value)."""
    from huggingface_hub import EvalResult

    out = []
    for s in filter(_is_score, scores):
        task_type, dataset, name, config = _benchmark(s)
        metric = (s.get("metric") or ("accuracy" if "accuracy" in s["task"] else "chrf")).lower()
        out.append(
            EvalResult(
                task_type=task_type,
                dataset_type=dataset,
                dataset_name=name,
                dataset_config=config,
                dataset_split=s.get("split"),
                metric_type=_METRICS.get(metric, metric),
                metric_value=s["after"],
                metric_name=metric if s["task"] in BENCHMARKS else s["task"],
            )
        )
    return out


def unmoved(scores: list[Score]) -> tuple[list[str], list[str]]:
    """``(within noise, moved down)``: the measures whose change did not pass the noise, and those that fell."""
    flat = [s["task"] for s in scores if s.get("verdict") == "within noise"]
    down = [s["task"] for s in scores if s.get("verdict") == "loss"]
    return flat, down


def _score_rows(f: ModelFacts) -> list[str]:
    lines = heading(
        f"Every score with its standard error, on held-out items. **Before** is {f.compared_with}, on the same items; "
        "▲ / ▼ is a change beyond 1.96 standard errors of the paired difference, · within the noise; MDE is the "
        "smallest change the items can detect (80% power). **Original** is the original base's score where the run "
        "measured it (not paired).",
        ["measure", "items", "chance", "original", "before", "this model (Δ ± SE)", "MDE"],
    )
    for s in f.scores:
        fmt = score_format(s["task"], s.get("metric"))
        now = (
            change(s, fmt)
            if s.get("delta") is not None
            else f"{cell(s['after'], fmt)} ± {cell(s.get('after_se'), fmt)}"
        )
        lines.append(
            f"| {s['task']} | {s.get('n') or '—'} | {cell(s.get('chance'))} | {cell(s.get('original'), fmt)} | "
            f"{cell(s.get('before'), fmt)} | {now} | {cell(s.get('mde'), fmt)} |"
        )
    return [*lines, ""]


def _chain_rows(f: ModelFacts) -> list[str]:
    if not f.chain:
        return []
    lines = heading(
        f"Each stage's model against the {f.chain[0]['model']} on the same {f.chain[0].get('n')} held-out native "
        "answers (chrF++, paired):",
        ["model", "chrF++ (Δ ± SE)"],
    )
    for r in f.chain:
        score = change({**r, "after": r["chrf"]}, "{:.2f}") if r.get("delta") is not None else cell(r["chrf"], "{:.2f}")
        lines.append(f"| {r['model']} | {score} |")
    return [*lines, ""]


def _input_rows(inputs: list[DataInput]) -> list[str]:
    lines = ["| stage | source | input | license |", "| --- | --- | --- | --- |"]
    for i in inputs:
        lic = i.license or "none stated"
        lines.append(f"| {i.stage} | {i.source} | `{i.where}` | {lic}{'' if redistributable(i.license) else ' ⚠'} |")
    return [*lines, ""]


def _limits(f: ModelFacts) -> list[str]:
    flat, down = unmoved(f.scores)
    lines = [
        "## Intended use and limits",
        "",
        "A research model: it shows what this recipe does to a small model's Azerbaijani, measured on held-out items "
        "with their noise. It is not tuned for safety, it can be wrong with confidence, and it should not be used "
        "for advice or decisions.",
        "",
    ]
    if flat:
        lines += [f"- Did not move beyond the noise against {f.compared_with}: {', '.join(flat)}."]
    if down:
        lines += [f"- Moved down against {f.compared_with}: {', '.join(down)}."]
    down_chain = [r["model"] for r in f.chain if r.get("verdict") == "loss"]
    flat_chain = [r["model"] for r in f.chain if r.get("verdict") == "within noise"]
    first = f.chain[0]["model"] if f.chain else ""
    if flat_chain:
        lines += [f"- Not beyond the noise against the {first} (native answers): {', '.join(flat_chain)}."]
    if down_chain:
        lines += [f"- Below the {first} (native answers): {', '.join(down_chain)}."]
    if not (flat or down or flat_chain or down_chain):
        lines += ["- Every measure above moved up beyond the noise."]
    chance = [s["task"] for s in f.scores if s.get("chance") is not None and s["after"] <= s["chance"] + 1e-12]
    if chance:
        lines += [f"- At or below chance: {', '.join(chance)}."]
    return [*lines, ""]


def _run_line(run: dict) -> str:
    mach = run.get("machine") or {}
    parts = [*(mach.get("gpus") or []), mach.get("processor")]  # the keys of utils.machine_info
    where = ", ".join(str(x) for x in parts if x) or "a machine not recorded"
    cores = f" ({mach['cpu_count']} cores)" if mach.get("cpu_count") else ""
    return (
        f"Made by azllm, run `{run.get('run_name')}` at commit `{str(run.get('git_commit'))[:12]}`, "
        f"params hash `{run.get('params_hash')}`, {run.get('time_utc') or ''} on {where}{cores}."
    )


def _metadata(f: ModelFacts) -> str:
    from huggingface_hub import ModelCardData

    hubs = sorted({i.where for i in f.inputs if "/" in i.where and not i.where.startswith("data/")})
    data = ModelCardData(
        base_model=f.base_model,
        language=f.languages,
        datasets=hubs or None,
        library_name="transformers" if f.weights else "gguf",
        pipeline_tag="text-generation",
        tags=["azllm", "azerbaijani", *(["gguf"] if f.gguf and not f.gguf_repo else [])],
        model_name=f.repo.split("/")[-1],
        eval_results=eval_results(f.scores) or None,
        **hub_license(f.license),
    )
    return data.to_yaml()


def model_card(f: ModelFacts) -> str:
    """The model card (``README.md``) of :class:`ModelFacts`."""
    chain = " → ".join(s["stage"] for s in f.stages) or "—"
    lines = [
        "---",
        _metadata(f),
        "---",
        "",
        f"# {f.repo.split('/')[-1]}",
        "",
        f"An Azerbaijani language model from `{f.base_model or 'a base trained by azllm'}`, made by {chain}. "
        f"{f.base_note}".rstrip(),
        "",
        "## Results",
        "",
        *_score_rows(f),
        *_chain_rows(f),
        *_limits(f),
        "## How it was made",
        "",
        "| stage | key settings | wall time of its page |",
        "| --- | --- | --- |",
        *(f"| {s['stage']} | {s['settings']} | {cell(s.get('seconds'), '{:,.0f} s')} |" for s in f.stages),
        "",
        _run_line(f.run),
        "",
        "## Training data and licenses",
        "",
        "Every input the stages read (evaluation sets are never training text). ⚠ marks one that is not "
        "redistributable.",
        "",
        *_input_rows(f.inputs),
        *_files(f),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _files(f: ModelFacts) -> list[str]:
    lines = ["## Use", ""]
    if f.weights:
        lines += [
            "```python",
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            "",
            f'tok = AutoTokenizer.from_pretrained("{f.repo}")',
            f'model = AutoModelForCausalLM.from_pretrained("{f.repo}")',
            "```",
            "",
        ]
    if f.gguf:
        where = f.gguf_repo or f.repo
        smallest = min(f.gguf, key=lambda g: g["size_bytes"])
        lines += [
            f"GGUF files for llama.cpp{f' (in `{where}`)' if f.gguf_repo else ''}: "
            + ", ".join(
                f"`{g['name']}` ({g['size_bytes'] / 1e6:.1f} MB, {cell(g['bits_per_weight'], '{:.2f}')} bits/weight)"
                for g in f.gguf
            )
            + ".",
            "",
            f"    llama-cli -hf {where}:{smallest['quant']}",
            "",
        ]
        c = f.gguf_checks
        if c:
            lines += [
                f"Checked against the PyTorch model: the tokenizer gives the same ids on "
                f"{cell(c.get('parity_share'), '{:.1%}')} of {cell(c.get('parity_lines'), '{:,}')} lines; "
                f"{smallest['quant']} against F16: mean KL divergence {cell(c.get('mean_kld'), '{:.4f}')}.",
                "",
            ]
    return lines


def dataset_card(f: DatasetFacts) -> str:
    """The dataset card (``README.md``) of :class:`DatasetFacts`."""
    from huggingface_hub import DatasetCardData

    licenses = sorted({i.license for i in f.inputs if i.license})
    docs = sum(s.get("kept_docs", 0) for s in f.sources)
    size = "n<1K" if docs < 1e3 else "1K<n<10K" if docs < 1e4 else "10K<n<100K" if docs < 1e5 else "100K<n<1M"
    meta = DatasetCardData(
        language=f.languages,
        size_categories=size,
        task_categories=["text-generation"],
        pretty_name=f.repo.split("/")[-1],
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": "data/*.parquet"}]}],
        **(hub_license(licenses[0]) if len(licenses) == 1 else {"license": "other", "license_name": "mixed"}),
    )
    kept_b = sum(s.get("kept_bytes", 0) for s in f.sources)
    cols = ["source", "input docs", *(f"{s} removed" for s in f.steps), "kept docs", "kept MB", "share of kept"]
    lines = [
        "---",
        meta.to_yaml(),
        "---",
        "",
        f"# {f.repo.split('/')[-1]}",
        "",
        f"Azerbaijani text cleaned by azllm's corpus stage: {docs:,} documents, {kept_b / 1e6:.2f} MB, in "
        f"{len(f.shards)} parquet file{'s' if len(f.shards) != 1 else ''} (`text`, `id`, `source`).",
        "",
        *heading("Per source: documents in, documents each step removed, documents and bytes kept.", cols),
    ]
    for s in f.sources:
        removed = [f"{s.get(f'{st}_docs', 0):,}" for st in f.steps]
        share = s.get("kept_bytes", 0) / kept_b if kept_b else 0.0
        lines.append(
            f"| {s['source']} | {s.get('input_docs', 0):,} | {' | '.join(removed)} | {s.get('kept_docs', 0):,} | "
            f"{s.get('kept_bytes', 0) / 1e6:.2f} | {share:.1%} |"
        )
    lines += [
        "",
        f"**Decontamination**: a document sharing a {f.decontamination_n}-word sequence with a line of any of these "
        f"evaluation sets was removed: {', '.join(f'`{k}`' for k in f.decontamination) or 'none'}.",
        "",
        "## Inputs and licenses",
        "",
        *_input_rows(f.inputs),
        _run_line(f.run),
        "",
    ]
    return "\n".join(lines).rstrip() + "\n"
