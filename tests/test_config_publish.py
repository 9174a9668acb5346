"""azllm.config.publish: the publish section's defaults, its refusals, and no token in it."""

import pytest

from azllm.config import ParamsError, load_params


def test_defaults_are_private_with_gguf_in_the_same_repository():
    p = load_params(None).publish
    assert (p.repo, p.private, p.gguf, p.license, p.base_model) == (None, True, "same", None, None)


def test_a_token_or_an_unknown_layout_is_refused():
    with pytest.raises(ParamsError, match="looks like a secret"):
        load_params(None, overrides={"publish": {"token": "x"}})
    with pytest.raises(ParamsError, match="publish.gguf"):
        load_params(None, overrides={"publish": {"gguf": "elsewhere"}})
    assert load_params(None, overrides={"data": {"train": {"license": "CC-BY-4.0"}}}).data.train.license == "CC-BY-4.0"
