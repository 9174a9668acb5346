"""azllm.licenses: the shipped table against the shared data's README, the redistributable list, and refusals that
name every input that may not be published."""

import re

import pytest

from azllm import licenses as lic
from conftest import FIXTURES, REPO


def test_every_file_of_the_fixture_corpus_and_of_the_sample_has_a_license():
    for root in (FIXTURES, REPO / "sample"):
        for f in sorted((root / "data" / "az" / "train").glob("*.txt")):
            assert lic.license_of(f.relative_to(root).as_posix()), f
    assert lic.license_of("data/az/sft/native_train.jsonl") == "MIT"


def test_the_shipped_sample_holds_only_redistributable_text():
    """The sample is shipped because its text may be redistributed: the table agrees, file by file."""
    files = sorted((REPO / "sample" / "data").rglob("*.txt"))
    trained = [f for f in files if "/train/" in f.as_posix() or f.parent.name == "en"]
    assert trained
    for f in trained:
        assert lic.redistributable(lic.license_of(f.relative_to(REPO / "sample").as_posix())), f


def test_a_license_in_the_params_wins_and_case_does_not_matter():
    assert lic.license_of("data/az/train/news_banker.txt", "CC-BY-4.0") == "CC-BY-4.0"
    assert lic.license_of("/my/own/file.txt") is None
    assert lic.redistributable("mit") and lic.redistributable("MIT") and not lic.redistributable("proprietary")


def test_refusals_name_each_input_its_stage_and_why():
    inputs = [
        lic.DataInput("adapt", "data.train", "data/az/train/tech_docs.txt", "CC-BY-4.0", "azllm"),
        lic.DataInput("adapt", "data.train", "data/az/train/news_banker.txt", "LicenseRef-research-only", "azllm"),
        lic.DataInput("sft", "sft.sources.mine", "/data/mine.jsonl", None, "none"),
    ]
    lines = lic.refusals(inputs)
    assert lines == [
        "adapt: data.train: data/az/train/news_banker.txt is LicenseRef-research-only, which is not redistributable",
        "sft: sft.sources.mine: /data/mine.jsonl has no license (give the source a license: SPDX id in the params)",
    ]
    with pytest.raises(lic.LicenseError, match=r"a model may not be published: 2 of its 3 inputs"):
        lic.check_publishable(inputs, "a model")
    lic.check_publishable(inputs[:1], "a model")


@pytest.mark.needs_shared
def test_the_table_agrees_with_the_shared_readme(shared):
    """Each training file's license column in shared/data/README.md, read as the table reads it: research use
    only (or none stated, or unknown) is LicenseRef-research-only, the official texts their own id, the rest SPDX."""
    readme = (shared / "data" / "README.md").read_text()
    spdx = {"CC BY 4.0": "CC-BY-4.0", "CC BY-SA 4.0": "CC-BY-SA-4.0", "MIT": "MIT"}
    rows = re.findall(r"^\| (\w+\.txt) \|.*\| ([^|]+) \|$", readme.split("## az/lexicon")[0], re.M)
    assert len(rows) == 13
    for name, column in rows:
        got = lic.license_of(f"data/az/train/{name}")
        if "research use only" in column:
            assert got == "LicenseRef-research-only", name
        elif "official" in column:
            assert got == "LicenseRef-official-texts", name
        else:
            assert got == next(v for k, v in spdx.items() if k in column), (name, column)
