"""The data, tokenizer, baseline, report and token-file params (azllm.config.data)."""

import pytest
from config_helpers import check_sections

from azllm.config import ParamsError, data, load_params


def test_sections_are_documented_and_valid():
    check_sections(data)


def test_default_sources_have_a_local_path_and_a_hub_fallback():
    d = load_params(None).data
    assert d.train.path and d.train.hub == "wikimedia/wikipedia"
    assert set(d.eval) == {"flores", "xwmt"} and d.parallel["flores"].en.path.endswith("eng_Latn.txt")


def test_a_source_rejects_unknown_fields():
    with pytest.raises(ParamsError, match="data.train.pth"):
        load_params(None, overrides={"data": {"train": {"pth": "x"}}})
