"""Root pytest setup (the tests' own setup is tests/conftest.py): docstrings whose examples are all ``+SKIP`` (they
need a run's artifacts or the hub) are deselected, not reported as skipped tests: they can neither pass nor fail."""


def _only_skipped_examples(item) -> bool:
    """A docstring whose every example is marked ``+SKIP`` (it needs a run's artifacts or the hub): nothing to run."""
    import doctest

    from _pytest.doctest import DoctestItem

    return isinstance(item, DoctestItem) and all(e.options.get(doctest.SKIP) for e in item.dtest.examples)


def pytest_collection_modifyitems(config, items):
    shown = [i for i in items if _only_skipped_examples(i)]
    if shown:
        config.hook.pytest_deselected(items=shown)
        items[:] = [i for i in items if not _only_skipped_examples(i)]
