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


def test_a_one_at_a_time_change_is_named_by_what_it_changes_when_unnamed():
    from azllm.config.data import OneChange

    assert OneChange().name == "no change"
    assert OneChange(tokenizer={"model_type": "unigram"}, text="cleaned").name == "model_type=unigram; text=cleaned"
    assert OneChange(name="law cap 1 MB", mix={"caps": {"legal_codes": 1000000}}).name == "law cap 1 MB"
    with pytest.raises(ParamsError, match="one_at_a_time"):
        load_params(None, overrides={"tokenizer": {"sweep": {"one_at_a_time": [{"text": "everything"}]}}})
