"""The corpus stage's params (azllm.config.corpus)."""

import pytest
from config_helpers import check_sections

from azllm.config import ParamsError, corpus, load_params


def test_sections_are_documented_and_valid():
    check_sections(corpus)


def test_defaults_keep_azerbaijani_and_a_mix_of_everything():
    c = load_params(None).corpus
    assert c.enabled and c.languages == ["az"] and c.mix.weights == {} and c.decontamination_n == 13


def test_a_wrong_type_names_the_key():
    with pytest.raises(ParamsError, match="corpus.decontamination_n"):
        load_params(None, overrides={"corpus": {"decontamination_n": "many"}})
