"""Shared checks of the params sections (tests/test_config_*.py): every section class of a config module has a
docstring, every field a documented description, and its defaults validate."""

import inspect

from azllm.config.data import Section


def sections(module) -> list[type]:
    return [
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, Section) and c is not Section and c.__module__ == module.__name__
    ]


def check_sections(module) -> None:
    found = sections(module)
    assert found, module
    for cls in found:
        assert (cls.__doc__ or "").strip(), cls
        for name, f in cls.model_fields.items():
            assert (f.description or "").strip(), f"{cls.__name__}.{name} has no docstring"
        cls()  # the defaults are valid


def default_spec(kind: str, section: dict | None = None, **overrides):
    """A library spec (``model``, ``train`` or ``sft``) built the way the recipes build it, from the config's defaults
    with ``section`` laid over the params section, then ``overrides`` on the spec (the specs have no defaults of
    their own)."""
    from azllm.config import load_params
    from azllm.recipes.sft import sft_spec
    from azllm.recipes.train import model_spec, train_spec

    where = {"model": "model", "train": "train", "sft": "sft"}[kind]
    cfg = load_params(None, overrides={where: section or {}})
    spec = {"model": model_spec, "train": train_spec, "sft": sft_spec}[kind](cfg)
    import dataclasses

    return dataclasses.replace(spec, **overrides)
