"""The params section of the corpus stage (notebook 00_corpus). See :mod:`azllm.config` and
:mod:`azllm.corpus`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .data import Section


class QualityConfig(Section):
    """Thresholds of :func:`azllm.corpus.quality.quality_problem` (None switches a rule off). Sized for
    documents that can be one line (a headline, a comment)."""

    min_words: int | None = 3
    """Fewer words: ``too_short``."""
    max_words: int | None = 100_000
    """More words: ``too_long``."""
    min_mean_word_length: float | None = 2.0
    """Mean word length below: ``word_length``."""
    max_mean_word_length: float | None = 18.0
    """Mean word length above: ``word_length`` (Azerbaijani words are long; Gopher's 10 would drop law)."""
    max_symbol_ratio: float | None = 0.1
    """``#`` and ellipses per word above: ``symbols`` (Gopher)."""
    max_digit_ratio: float | None = 0.25
    """Digits per character above: ``digits``."""
    max_non_alpha_ratio: float | None = 0.5
    """Share of words without a letter above: ``non_alpha_words``."""
    max_punctuation_line_ratio: float | None = 0.3
    """Share of lines without a letter above: ``punctuation_lines`` (C4/FineWeb)."""
    max_duplicate_line_ratio: float | None = 0.3
    """Share of repeated lines inside a document above: ``duplicate_lines`` (Gopher)."""
    max_repeated_5gram_ratio: float | None = 0.3
    """Share of characters in repeated word 5-grams above: ``repeated_ngrams`` (Gopher)."""
    max_char_run: int | None = 6
    """A character this many times in a row: ``repeated_chars``."""


class MinhashSettings(Section):
    """datatrove's MinHash LSH: documents whose word 5-gram sets have Jaccard similarity above about
    ``(1/num_buckets) ** (1/hashes_per_bucket)`` (0.72 with the defaults) are near duplicates."""

    n_grams: int = 5
    """Words per shingle."""
    num_buckets: int = 14
    """LSH bands."""
    hashes_per_bucket: int = 8
    """Hashes per band."""


class SentenceFilterConfig(Section):
    """The Bloom filter of seen word 3-grams behind ``sentence_dedup`` (:class:`azllm.corpus.mix.SeenShingles`),
    sized from the cleaned corpus: ``expected_per_byte`` × its bytes keys at ``false_positive``, 0.24 bytes of memory
    per byte of cleaned text with the defaults (240 MB for 1 GB, 3.6 GB for 15 GB)."""

    expected_per_byte: float = Field(0.2, gt=0)
    """Word 3-grams expected per byte of cleaned text (measured: 0.099 on the 23 MB cleaned corpus of ../shared)."""
    false_positive: float = Field(0.01, gt=0, lt=1)
    """The design false-positive rate per 3-gram, at the expected count."""
    max_false_positive: float = Field(0.02, gt=0, lt=1)
    """The mix stops with a clear error when the measured rate passes this (the filter is too small for the text)."""


class MixConfig(Section):
    """How much of each source the tokenizer and the model see (:mod:`azllm.corpus.mix`)."""

    temperature: float = 1.0
    """Share of a source ∝ bytes ** temperature (1: as found, 0: all equal)."""
    weights: dict[str, float] = Field(default_factory=dict)
    """Extra weight per source (a file's stem, or a hub id); 0 drops the source."""
    sentence_dedup: bool = True
    """Drop sentences whose word 3-grams mostly occurred earlier in the same source (BPE-32k FLORES -0.011)."""
    sentence_filter: SentenceFilterConfig = Field(default_factory=SentenceFilterConfig)
    """How the seen 3-grams are held: the filter's size and false-positive bound."""
    caps: dict[str, int] = Field(default_factory=dict)
    """A source contributes its first this-many bytes, in input order (after weights and temperature)."""
    max_repeat: float = 4.0
    """A document is repeated at most this many times."""
    total_bytes: int | None = None
    """Bytes of the mix before caps; None: the bytes of the sources whose weight is not 0."""


class RayExecutorConfig(Section):
    """``corpus.executor: ray``: datatrove's RayPipelineExecutor. The work folder (the artifacts) must be on storage
    that every node sees."""

    address: str | None = None
    """A running cluster (``ray://host:10001``, ``auto``); None: ``$RAY_ADDRESS`` when set, else a local cluster on
    this machine with ``corpus.workers`` CPUs, started and stopped by the stage."""
    cpus_per_task: int = Field(1, ge=1)
    """CPUs Ray reserves per task."""
    mem_per_cpu_gb: float = Field(2.0, gt=0)
    """Memory Ray reserves per CPU of a task."""


class SlurmExecutorConfig(Section):
    """``corpus.executor: slurm``: datatrove's SlurmPipelineExecutor; each of the six steps is one job array that
    depends on the one before (``afterok``). Run ``azllm prepare`` where ``sbatch`` works (a login node, or itself
    inside a job); the work folder must be on shared storage."""

    partition: str | None = None
    """The partition (required)."""
    time: str = "24:00:00"
    """Time limit of each task."""
    cpus_per_task: int = Field(1, ge=1)
    """CPUs per task."""
    mem_per_cpu_gb: float = Field(2.0, gt=0)
    """Memory per CPU of a task."""
    qos: str = "normal"
    """Quality of service."""
    env_command: str | None = None
    """A shell line each job runs first (``module load ...; source .venv/bin/activate``); None: activate the virtual
    environment of the submitting Python."""
    sbatch_args: dict[str, str] = Field(default_factory=dict)
    """More ``#SBATCH`` directives (``{"account": "myproj"}``)."""
    job_name: str = "azllm-corpus"
    """Prefix of the jobs' names."""
    wait: bool = True
    """Wait for the jobs and go on (mix, tokenizer, token files); False: submit and stop with a message, and the
    same command goes on from the finished jobs when run again."""
    poll_s: float = Field(60.0, gt=0)
    """How often the waiting process checks the jobs."""
    max_wait_hours: float = Field(72.0, gt=0)
    """Stop waiting (with an error) after this long."""


class CorpusConfig(Section):
    """The corpus stage: ``data.train`` cleaned, deduplicated, decontaminated and mixed (notebook 00_corpus).
    Tokenizers and token files are then made from the mix."""

    enabled: bool = True
    """False: tokenizers and token files read ``data.train`` as found (``tokenizer.max_bytes_per_file`` caps
    each file for tokenizers)."""
    languages: list[str] = Field(default_factory=lambda: ["az"])
    """Languages kept, from azllm.corpus.language.LABELS (az, az-Cyrl, az-Arab, tr, uz, kk, tk, tt, ky, ba, ru, uk,
    fa, ar, en, other, unknown)."""
    quality: QualityConfig = Field(default_factory=QualityConfig)
    """The quality rules."""
    decontamination_n: int = 13
    """A training document sharing a word n-gram of this length with a line of ``data.eval`` is dropped."""
    decontamination_min_words: int = 8
    """An eval line shorter than ``decontamination_n`` words is matched whole if it has this many words."""
    minhash: MinhashSettings = Field(default_factory=MinhashSettings)
    """Near-duplicate detection."""
    mix: MixConfig = Field(default_factory=MixConfig)
    """The mix."""
    count_with: str | None = "llama3"
    """A baseline tokenizer (a name in ``baselines``) counting tokens before and after cleaning; None: words and
    bytes only."""
    tasks: int | None = None
    """Shards the stage splits the input into; None: one per CPU core."""
    workers: int | None = None
    """Processes; None: one per CPU core."""
    executor: Literal["local", "ray", "slurm"] = "local"
    """Where the stage's tasks run: processes of this machine, a Ray cluster, or Slurm job arrays (the same output
    for each, tested for local and Ray)."""
    ray: RayExecutorConfig = Field(default_factory=RayExecutorConfig)
    """With ``executor: ray``."""
    slurm: SlurmExecutorConfig = Field(default_factory=SlurmExecutorConfig)
    """With ``executor: slurm``."""
