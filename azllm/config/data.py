"""The params sections of the data side: sources, tokenizers, baselines, report, token files. See
:mod:`azllm.config`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..assemble import METHODS

Dtype = Literal["fp32", "bf16", "fp16"]
Method = Literal[METHODS]
"""A training method: full | lora | qlora (:data:`azllm.assemble.METHODS`, the one list of them)."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True, validate_default=False)


# ------------------------------------------------------------------------------------------------------ data


class SourceConfig(Section):
    """One data source: a local path (used when it matches files), else a hub dataset streamed."""

    path: str | None = None
    """Glob of local files, relative to the data root unless absolute (.txt: one document per line;
    .jsonl/.parquet: the ``text_field`` of each record)."""
    hub: str | None = None
    """Hugging Face Hub dataset id (or a local dataset folder), streamed when ``path`` matches nothing."""
    config: str | None = None
    """Hub dataset config name, e.g. ``20231101.az``."""
    split: str = "train"
    """Hub dataset split."""
    text_field: str = "text"
    """Field or column holding the text (.jsonl, .parquet, hub)."""
    max_bytes: int | None = None
    """Stop after this many UTF-8 bytes of text (whole source)."""
    max_bytes_per_file: int | None = None
    """Local files only: cap each file at this many bytes (rebalances genres)."""
    max_lines: int | None = None
    """Stop after this many documents."""
    skip_lines: int = Field(default=0, ge=0)
    """Skip the source's first this many records (lines of a text file, records of a jsonl; across its files in
    order) before any cap: the rest of a set whose first lines are another split's. An evaluation set read from line
    ``N`` on is the selection split beside a verdict split of its first ``N`` lines (``evaluate.local`` tasks with
    ``first: N``). The corpus stage still keeps every line of an evaluation file out of training."""
    license: str | None = None
    """The SPDX id of every file or hub dataset this source reads (``CC-BY-SA-4.0``, ``MIT``,
    ``LicenseRef-research-only``); None: :data:`azllm.licenses.KNOWN` by the file's path under the data root. A
    source with neither may be trained on but not published (``azllm publish``)."""


def source_field(**kw: Any) -> Any:
    return Field(default_factory=lambda: SourceConfig(**kw))


class ParallelPair(Section):
    """Two line-parallel sides of one set: Azerbaijani and English."""

    az: SourceConfig = Field(default_factory=SourceConfig)
    """The Azerbaijani side."""
    en: SourceConfig = Field(default_factory=SourceConfig)
    """The English side, line by line the translation of ``az``."""


_FLORES_AZ = dict(
    path="data/az/dev/flores200.dev.azj_Latn.txt", hub="openlanguagedata/flores_plus", config="azj_Latn", split="dev"
)
_FLORES_EN = dict(
    path="data/az/dev/flores200.dev.eng_Latn.txt", hub="openlanguagedata/flores_plus", config="eng_Latn", split="dev"
)


class DataConfig(Section):
    """Where the text comes from."""

    root: str | None = None
    """Data root for relative paths; None: ``$AZLLM_DATA_ROOT`` (set but empty: no data root), else ``../shared``
    beside the repository when it exists."""
    train: SourceConfig = source_field(
        path="data/az/train/*.txt", hub="wikimedia/wikipedia", config="20231101.az", max_bytes=50_000_000
    )
    """The training corpus (tokenizers, token files, models)."""
    eval: dict[str, SourceConfig] = Field(
        default_factory=lambda: {
            "flores": SourceConfig(**_FLORES_AZ),
            "xwmt": SourceConfig(path="data/az/dev/xwmt.test.az.txt"),
        }
    )
    """Held-out sets by name: tokenizer metrics and the models' dev evaluations. The first one ranks tokenizers."""
    parallel: dict[str, ParallelPair] = Field(
        default_factory=lambda: {"flores": ParallelPair(az=SourceConfig(**_FLORES_AZ), en=SourceConfig(**_FLORES_EN))}
    )
    """Line-parallel az/en sets by name, for the token parity az/en."""
    lexicon: str | None = "data/az/lexicon"
    """Folder (under the data root) with ``unimorph_aze.tsv`` and ``mozillaz_hunspell_az.dic``/``.aff``: the
    independent check of azllm.morph's suffix boundaries in notebook 01. None: no check."""


# ------------------------------------------------------------------------------------------------ tokenizer


class OneChange(Section):
    """One change of the one-at-a-time sweep, against the run's own tokenizer at the selected size: the same BPE
    with only this changed (:func:`azllm.recipes.tokenizers.one_at_a_time_table`)."""

    name: str = ""
    """What the table calls it ("unigram", "law cap 1 MB"); empty: the change itself, as
    ``model_type=unigram; text=cleaned`` (``no change`` for none)."""
    tokenizer: dict[str, Any] = Field(default_factory=dict)
    """``tokenizer`` options that change (``model_type``, ``byte_fallback``, ...)."""
    mix: dict[str, Any] = Field(default_factory=dict)
    """``corpus.mix`` keys that change, each replaced whole (``weights``, ``caps``, ``sentence_dedup``)."""
    text: Literal["mix", "cleaned"] = "mix"
    """``cleaned``: train on every document the corpus stage kept (no mix, a larger sample)."""
    encode_raw: bool = False
    """Measure on the eval lines as found, not normalized (what normalization buys at encoding time)."""

    @model_validator(mode="after")
    def _named(self) -> OneChange:
        if not self.name:
            parts = [f"{k}={v}" for k, v in {**self.tokenizer, **self.mix}.items()]
            parts += ["text=cleaned"] * (self.text == "cleaned") + ["encode_raw"] * self.encode_raw
            self.name = "; ".join(parts) or "no change"
        return self


def _one_at_a_time() -> list[OneChange]:
    c = OneChange
    return [
        c(name="unigram", tokenizer={"model_type": "unigram"}),
        c(name="no byte fallback", tokenizer={"byte_fallback": False}),
        c(name="max piece length 24", tokenizer={"max_piece_length": 24}),
        c(name="digits split", tokenizer={"split_digits": True}),
        c(name="script split (punctuation apart)", tokenizer={"split_by_unicode_script": True}),
        c(name="affix pre-split", tokenizer={"affix_presplit": True}),
        c(name="character coverage 0.9999", tokenizer={"character_coverage": 0.9999}),
        c(name="whitespace stripped (SentencePiece's default)", tokenizer={"remove_extra_whitespaces": True}),
        c(name="no sentence dedup", mix={"sentence_dedup": False}),
        c(name="no source weights", mix={"weights": {}}),
        c(name="no caps", mix={"caps": {}}),
        c(name="every cleaned document (no mix)", text="cleaned"),
        c(name="no normalization when encoding", encode_raw=True),
    ]


class SweepConfig(Section):
    """The tokenizer study: every combination below is trained and measured."""

    vocab_sizes: list[int] = Field(default_factory=lambda: [8000, 16000, 32000, 48000, 64000])
    """Vocabulary sizes of the sweep."""
    model_types: list[Literal["unigram", "bpe"]] = Field(default_factory=lambda: ["unigram", "bpe"])
    """SentencePiece model types of the sweep."""
    affix_presplit: list[bool] = Field(default_factory=lambda: [False, True])
    """With and/or without the affix-aware pre-split (azllm.morph)."""
    select_vocab_size: int | None = 32000
    """The report's "best" tokenizer is chosen at this vocabulary size (None: ``tokenizer.vocab_size``)."""
    fertility_target: float = 1.40
    """The tokens per word the best tokenizer should reach on the first eval set (a line on the page's plot)."""
    one_at_a_time: list[OneChange] = Field(default_factory=_one_at_a_time)
    """Each change alone against the run's tokenizer at ``select_vocab_size`` (empty: no such table)."""


class TokenizerConfig(Section):
    """The run's main tokenizer (token files, model), and the study around it."""

    model_type: Literal["unigram", "bpe"] = "bpe"
    """SentencePiece model type."""
    vocab_size: int = 8000
    """Pieces, specials and byte pieces included. 8k fits the tiny CPU model; use 32000 for 125m/1b."""
    character_coverage: float = 0.9995
    """Share of characters covered by pieces; the rest go through byte fallback (0.9999 -> 0.9995: FLORES
    fertility -0.001, the rare characters' pieces go to Azerbaijani words)."""
    byte_fallback: bool = True
    """Unknown characters become UTF-8 byte pieces, so nothing is lost to <unk>."""
    split_digits: bool = False
    """One digit per piece."""
    max_piece_length: int = 16
    """Longest piece in characters."""
    affix_presplit: bool = False
    """No piece crosses a suffix boundary predicted by azllm.morph (training-time only)."""
    split_by_whitespace: bool = True
    """False allows multi-word pieces ("superwords": fewer tokens, but a token is no longer part of one word)."""
    split_by_unicode_script: bool = False
    """True (SentencePiece's default) keeps letters, digits and punctuation in separate pieces. False lets pieces
    such as ``ləri,`` or ``▁bilər.`` form: BPE-32k FLORES fertility 1.536 -> 1.441 on the cleaned mix, lossless;
    the cost: about 15% of the vocabulary are word+punctuation pieces, so a word can split differently before a
    comma."""
    remove_extra_whitespaces: bool = False
    """True (SentencePiece's default) strips leading, trailing and repeated spaces when encoding, so such a line
    never decodes to itself; False keeps them: every raw line round-trips, at the same fertility."""
    input_sentence_size: int = 1_000_000
    """Sentence lines that SentencePiece trains on: a seeded sample, written once and shared by the sweep and the
    main tokenizer (0: all). 1M lines are about 135 MB of Azerbaijani text; they bound the memory of training on a
    large corpus (measured in docs/scale.md). A corpus with fewer lines is read whole."""
    num_threads: int = 2
    """SentencePiece training threads."""
    max_bytes_per_file: int | None = 4_000_000
    """Cap each training file at this many bytes when training tokenizers (the legal codes are 60% of the
    corpus; the cap rebalances genres: BPE-32k FLORES fertility 1.578 -> 1.553). None: all."""
    sweep: SweepConfig = Field(default_factory=SweepConfig)
    """The vocabulary-size / model-type / pre-split study of the tokenizer report."""


class BaselineConfig(Section):
    """A baseline tokenizer: a local file or folder, else a hub id; or a tiktoken encoding."""

    path: str | None = None
    """Folder or file relative to the data root; for ``tiktoken``, tiktoken's cache folder."""
    hub: str | None = None
    """Hub id used when ``path`` does not exist."""
    tiktoken: str | None = None
    """A tiktoken encoding name, e.g. ``o200k_base``."""


def default_baselines() -> dict[str, BaselineConfig]:
    b = BaselineConfig
    return {
        "gpt2": b(path="tokenizers/gpt2", hub="openai-community/gpt2"),
        "llama2": b(path="tokenizers/llama2/tokenizer.model", hub="meta-llama/Llama-2-7b-hf"),
        "mistral": b(path="tokenizers/mistral-7b-v0.1/tokenizer.model", hub="mistralai/Mistral-7B-v0.1"),
        "llama3": b(path="tokenizers/llama3.1", hub="meta-llama/Llama-3.2-1B"),
        "qwen3": b(path="tokenizers/qwen3", hub="Qwen/Qwen3-0.6B"),
        "gemma": b(path="tokenizers/gemma", hub="google/gemma-2-2b"),
        "xlm-r": b(path="tokenizers/xlm-roberta/tokenizer.json", hub="FacebookAI/xlm-roberta-base"),
        "cl100k": b(tiktoken="cl100k_base", path="tokenizers/tiktoken_cache"),
        "o200k": b(tiktoken="o200k_base", path="tokenizers/tiktoken_cache"),
        "aztc-32k": b(path="tokenizers/az-localdoc-aztc", hub="LocalDoc/az-tokenizer"),
    }


class ReportConfig(Section):
    """What the HTML pages show."""

    show_code: bool = False
    """Show code cells in the HTML pages."""
    long_words: list[str] = Field(
        default_factory=lambda: [
            "evlərimizdən",
            "Azərbaycanlılaşdıra bilmədiklərimizdənsinizmi",
            "universitetlərimizdə",
            "müəllimlərimizin",
            "qanunvericiliyində",
            "gözləmədiyimiz",
        ]
    )
    """Words whose segmentation by every tokenizer is shown."""
    kernel_start_timeout: int = Field(default=300, ge=1)
    """Seconds a notebook's kernel may take to start (papermill's ``start_timeout``, 60 by default, was too short
    on a loaded machine: "Kernel didn't respond in 60 seconds")."""
    kernel_start_tries: int = Field(default=3, ge=1)
    """Kernel starts tried per notebook before it counts as failed (only a kernel that did not start is tried
    again; a failed cell is never re-run)."""


# --------------------------------------------------------------------------------------------------- tokens


class EncoderBenchConfig(Section):
    """The token-file encoder benchmark (notebook 02, azllm.bench.encoder)."""

    quick: bool = False
    """Small slice (50 KB per file unless ``max_bytes_per_file``), one round: for tests and the tiny report."""
    max_bytes_per_file: int | None = None
    """Cap each corpus file (None: data.train as it is)."""
    scale: int = 3
    """The large corpus is the corpus repeated ``scale`` times, streamed."""
    rounds: int = 3
    """Fresh processes per variant, round-robin; the table shows medians."""
    batch_size: int = 8
    """Batch of the get_batch timing and of the training step it is compared with."""
    block_size: int = 256
    """Window length of the get_batch timing."""


class TokensConfig(Section):
    """The token files (notebook 02)."""

    tokenizer: str | None = None
    """None: the run's main tokenizer; or any spec of azllm.tokenizer.load_tokenizer."""
    dir: str | None = None
    """Where train.bin/val.bin go (None: artifacts/<run_name>/tokens)."""
    val_fraction: float = 0.01
    """Share of documents (by a keyed hash of their text) in val.bin."""
    split_seed: int = 0
    """Key of that hash: keep it fixed to compare runs on the same split."""
    num_workers: int | None = None
    """Encoding threads (None: all cores)."""
    chunk_docs: int = 1024
    """Documents per chunk (memory stays flat at ~2 x num_workers chunks)."""
    prepare_timeout_s: float = Field(21600.0, gt=0)
    """How long the other ranks of a distributed ``azllm train`` wait for rank 0 to prepare the data."""
    benchmark: EncoderBenchConfig = Field(default_factory=EncoderBenchConfig)
    """The encoder benchmark."""
