"""Params sections -> the library's plain specs, by one helper: :func:`build_spec`.

The library's specs (:class:`azllm.assemble.ModelSpec`, :class:`azllm.train.TrainSpec`,
:class:`azllm.sft.train.SftSpec`) carry no defaults of the config's: every field that a params key sets is
required, and filled here from the field of the same name in the sections given (``tests/test_recipes_specs.py``
checks both). So a default lives in :mod:`azllm.config` alone, a new config field reaches the spec without a hand
copy, and a spec field with no params key is an error here rather than a silent default.

Names are matched exactly; a prefixed section matches fields that carry its prefix (``lora_r`` is ``r`` of
``{"lora_": cfg.model.lora}``) or its own field names (``use_rslora`` of the same section). Lists become tuples (the
specs are frozen and hashed). What a recipe decides itself (the run's seed, a method given on the command line) is
an override.

>>> from azllm.config import load_params
>>> from azllm.train import TrainSpec
>>> cfg = load_params(None)
>>> spec = build_spec(TrainSpec, cfg.train, seed=cfg.seed, max_steps=10)
>>> spec.max_steps, spec.lr == cfg.train.lr, spec.betas
(10, True, (0.9, 0.95))
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from pydantic import BaseModel

__all__ = ["build_spec", "spec_sources"]


def _plain(value: Any) -> Any:
    """A spec value: lists as tuples, pydantic sections as plain dicts."""
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, list):
        return tuple(value)
    return value


def spec_sources(cls, *sections: BaseModel, prefixed: dict[str, BaseModel] | None = None) -> dict[str, str]:
    """Where each field of the spec class ``cls`` is read from: ``{field: "Section.key"}`` (fields found in no
    section are left out)."""
    out = {}
    for f in fields(cls):
        hit = _lookup(f.name, sections, prefixed or {})
        if hit is not None:
            out[f.name] = f"{type(hit[0]).__name__}.{hit[1]}"
    return out


def _lookup(name: str, sections, prefixed: dict) -> tuple[BaseModel, str] | None:
    for prefix, sec in prefixed.items():
        fields_here = type(sec).model_fields
        if name.startswith(prefix) and name[len(prefix) :] in fields_here:
            return sec, name[len(prefix) :]
        if name in fields_here:
            return sec, name
    for sec in sections:
        if name in type(sec).model_fields:
            return sec, name
    return None


def build_spec(cls, *sections: BaseModel, prefixed: dict[str, BaseModel] | None = None, **overrides):
    """An instance of the spec dataclass ``cls``: each field from ``overrides``, else from the first section (or
    prefixed section, see the module docstring) that has it, else the field's own default (only fields with no
    params key have one). A field found nowhere is an error naming it."""
    values = {}
    for f in fields(cls):
        if f.name in overrides:
            values[f.name] = _plain(overrides.pop(f.name))
            continue
        hit = _lookup(f.name, sections, prefixed or {})
        if hit is not None:
            values[f.name] = _plain(getattr(*hit))
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ValueError(f"{cls.__name__}.{f.name}: no params key and no override sets it")
    if overrides:
        raise ValueError(f"{cls.__name__} has no field(s) {sorted(overrides)}")
    return cls(**values)
