"""The token-file recipe (azllm.recipes.tokens): the run's tokenizer, train/val files and one file per eval set."""

from train_helpers import data  # noqa: F401  (module fixture: prepare_data on the fixture corpus)

from azllm.recipes.paths import Paths
from azllm.tokens import TokenFile, read_header


def test_prepare_data_gives_the_tokenizer_and_its_files(data):  # noqa: F811
    tok = data["tokenizer"]
    assert set(data) >= {"tokenizer", "train", "val", "dev", "encode"}
    assert data["train"].parent == Paths(data["P"]).tokens and set(data["dev"]) == {"flores"}
    for f in (data["train"], data["val"], data["dev"]["flores"]):
        assert read_header(f)["vocab_size"] == tok.vocab_size and len(TokenFile(f, tok)) > 0
    assert data["encode"]["train_tokens"] == read_header(data["train"])["n_tokens"]
