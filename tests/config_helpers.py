"""Shared checks of the params sections (tests/test_config_*.py): every section class of a config module has a
docstring, every field a documented description, and its defaults validate."""

import inspect

from azllm.config.data import _Section


def sections(module) -> list[type]:
    return [c for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, _Section) and c is not _Section and c.__module__ == module.__name__]


def check_sections(module) -> None:
    found = sections(module)
    assert found, module
    for cls in found:
        assert (cls.__doc__ or "").strip(), cls
        for name, f in cls.model_fields.items():
            assert (f.description or "").strip(), f"{cls.__name__}.{name} has no docstring"
        cls()  # the defaults are valid
