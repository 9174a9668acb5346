"""The params section of downstream evaluation (``evaluate``, notebook 06 and ``azllm eval``). See
:mod:`azllm.config` and :mod:`azllm.recipes.evaluate`."""

from __future__ import annotations

from pydantic import Field

from .data import Section


class LocalTaskConfig(Section):
    """The data of one shipped task (``azllm/evaluation/tasks/<name>.yaml``): any split of the benchmark's format."""

    path: str
    """The test split: a file or a folder of files, relative to the data root unless absolute (FLORES: ``{lang}``
    where the language code goes). Point it at the benchmark's test split for final numbers."""
    fewshot_path: str | None = None
    """The few-shot pool (the same format). Equal to ``path``: the test split is the pool, and lm-eval leaves each
    item out of its own context. None: zero-shot only."""
    num_fewshot: int = 0
    """Few-shot examples per item (the same examples for every model: a seeded draw)."""
    subset: list[str] | None = None
    """MMLU / TUMLU: the subjects to keep (None: every subject of the split)."""
    first: int | None = None
    """Score only the first this many items of the test split (None: all)."""
    max_gen_toks: int | None = None
    """Generative tasks: the most new tokens per answer (None: the YAML's)."""


def _local() -> dict[str, LocalTaskConfig]:
    sib = "data/az/eval/sib200/{}/{}.tsv"
    tumlu, mmlu = "data/az/eval/tumlu/dev", "data/en/eval/mmlu"
    flores = "data/az/dev/flores200.dev.{lang}.txt"
    return {
        "sib200_az": LocalTaskConfig(path=sib.format("azj_Latn", "dev"), fewshot_path=sib.format("azj_Latn", "train")),
        "sib200_en": LocalTaskConfig(path=sib.format("eng_Latn", "dev"), fewshot_path=sib.format("eng_Latn", "train")),
        "tumlu_az": LocalTaskConfig(path=tumlu, fewshot_path=tumlu, num_fewshot=0),
        "tumlu_az_cot": LocalTaskConfig(path=tumlu, fewshot_path=tumlu, num_fewshot=1, max_gen_toks=128),
        "mmlu_en": LocalTaskConfig(
            path=f"{mmlu}/val",
            fewshot_path=f"{mmlu}/dev",
            num_fewshot=5,
            subset=["high_school_geography", "miscellaneous", "nutrition", "high_school_psychology", "marketing"],
        ),
        "flores_en_az": LocalTaskConfig(path=flores, fewshot_path=flores, num_fewshot=1, first=24, max_gen_toks=48),
        "flores_az_en": LocalTaskConfig(path=flores, fewshot_path=flores, num_fewshot=1, first=24, max_gen_toks=48),
    }


class ProbeConfig(Section):
    """The linear probe (:mod:`azllm.evaluation.probe`): a logistic regression on mean-pooled hidden states of a
    SIB-200 task's sentences. It separates small models whose multiple-choice scores sit at chance. Its chance level
    is the majority-class rate (what a model whose features carry nothing reaches), not 1/7."""

    tasks: list[str] = Field(default_factory=lambda: ["sib200_az", "sib200_en"])
    """SIB-200 tasks (names in ``local``) to probe; a result is named ``<task>_probe``. Empty: no probe."""
    layer: int = -1
    """The hidden layer pooled (-1: the last)."""
    max_length: int = 128
    """Tokens per sentence (longer ones are cut)."""
    batch_size: int = 16
    """Sentences per forward pass."""
    C: float = 1.0
    """Inverse L2 regularization of the logistic regression (features standardized)."""
    folds: int = 5
    """Stratified folds over the few-shot pool and the test split together (every item predicted once by a probe
    that did not see it: 420 items on the shared SIB-200 instead of 47 dev items, a standard error 3x smaller).
    0: train on the pool, score the test split."""


class EvalConfig(Section):
    """Downstream evaluation: lm-eval tasks (shipped local YAMLs and lm-eval's registry), the probe, and the
    before/after verdicts."""

    tasks: list[str] = Field(
        default_factory=lambda: ["sib200_az", "sib200_en", "tumlu_az", "mmlu_en", "flores_en_az", "flores_az_en"]
    )
    """Tasks scored: names of ``local`` and/or lm-eval registry names (``belebele_azj_Latn``,
    ``include_base_44_azerbaijani``, ``global_piqa_nonparallel_cloze_azj_latn``, ``mmlu``, ``hellaswag``,
    ``arc_easy``: validated against the
    registry, loaded from the Hugging Face Hub when run). A name neither knows is an error listing close ones."""
    local: dict[str, LocalTaskConfig] = Field(default_factory=_local)
    """The shipped tasks' data (a map replaces the default as a whole when given)."""
    az_tasks: list[str] = Field(default_factory=lambda: ["sib200_az", "tumlu_az", "flores_en_az", "sib200_az_probe"])
    """Which results are Azerbaijani (the before -> after tables group them)."""
    en_tasks: list[str] = Field(default_factory=lambda: ["sib200_en", "mmlu_en", "flores_az_en", "sib200_en_probe"])
    """Which results are English (the forgetting measure)."""
    az_headline: str = "sib200_az_probe"
    """The Azerbaijani score the ranking table sorts by (its gain per device-hour). The probe separates the CPU
    stand-ins; with a real base, ``sib200_az`` or ``belebele_azj_Latn``."""
    en_headline: str = "sib200_en_probe"
    """The English score whose change the ranking table shows (with a real base, ``mmlu_en``)."""
    limit: int | None = None
    """Registry (hub) tasks: score only the first this many items of each (None: all). Local tasks: ``first``."""
    batch_size: int = 16
    """Requests per forward pass (lm-eval sorts them by length)."""
    max_length: int | None = None
    """Context length lm-eval truncates to (None: the model's)."""
    bootstrap_iters: int = Field(default=200, ge=1)
    """Bootstrap draws of chrF++'s standard error (accuracies have a closed form; lm-eval computes no standard
    error at all with 0, so 1 is the least)."""
    z: float = 1.96
    """A before/after difference is a gain or loss only beyond this many standard errors (paired on the same
    items when both runs have per-item results)."""
    probe: ProbeConfig = Field(default_factory=ProbeConfig)
    """The linear probe."""
    decontaminate: bool = True
    """Add every local task's test and few-shot texts to the corpus stage's decontamination."""
