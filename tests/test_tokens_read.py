"""Reading token files (azllm.tokens.read): batches, sequential iteration, dataset shards per rank, the Trainer."""

import numpy as np
import pytest
import torch
from tokens_helpers import REPO, _split_docs, _word_level, corpus, encoded, tok, tok2  # noqa: F401

from azllm.tokens import TokenFile, TokenFileError
from conftest import TINY_MODEL


def test_get_batch_shift_and_seed(encoded):
    tf = TokenFile(encoded["train"])
    x, y = tf.get_batch(4, 32, generator=torch.Generator().manual_seed(7))
    assert x.shape == y.shape == (4, 32) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    ix = torch.randint(tf.n_tokens - 32, (4,), generator=torch.Generator().manual_seed(7))
    toks = np.asarray(tf.tokens).astype(np.int64)
    for row, i in enumerate(ix.tolist()):
        assert x[row].tolist() == toks[i : i + 32].tolist() and y[row].tolist() == toks[i + 1 : i + 33].tolist()
    x2, y2 = tf.get_batch(4, 32, generator=7)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    x3, _ = tf.get_batch(4, 32, generator=torch.Generator().manual_seed(8))
    assert not torch.equal(x, x3)
    with pytest.raises(TokenFileError, match="fewer than block_size"):
        tf.get_batch(1, tf.n_tokens)


def test_iter_sequential_covers_the_split_once(encoded):
    tf = TokenFile(encoded["val"])
    toks = np.asarray(tf.tokens).astype(np.int64)
    xs, ys = [], []
    for x, y in tf.iter_sequential(3, 50):
        assert x.shape == y.shape and x.dtype == torch.int64 and x.shape[0] <= 3
        assert torch.equal(x[:, 1:], y[:, :-1])
        xs.append(x.reshape(-1))
        ys.append(y.reshape(-1))
    assert torch.cat(ys).tolist() == toks[1:].tolist()
    assert torch.cat(xs).tolist() == toks[:-1].tolist()


def test_dataset_shards_are_disjoint(encoded):
    from azllm.tokens import TokenWindowDataset

    tf = TokenFile(encoded["train"])
    block, world = 64, 3
    full = TokenWindowDataset(tf, block)
    assert isinstance(full, torch.utils.data.Dataset) and len(full) == tf.n_tokens // block
    item = full[5]
    assert item["input_ids"].dtype == torch.int64 and item["input_ids"].shape == (block,)
    assert torch.equal(item["input_ids"], item["labels"])
    assert item["input_ids"].tolist() == np.asarray(tf.tokens[5 * block : 6 * block]).tolist()
    shards = [TokenWindowDataset(tf, block, rank=r, world_size=world) for r in range(world)]
    starts = [{s.window_start(i) for i in range(len(s))} for s in shards]
    assert len({len(s) for s in shards}) == 1  # same length on every rank
    for a in range(world):
        for b in range(a + 1, world):
            assert not (starts[a] & starts[b])
    union = set().union(*starts)
    assert len(union) >= len(full) - (world - 1) and union <= {full.window_start(i) for i in range(len(full))}
    for s in shards:  # the content is the window at that start
        st = s.window_start(1)
        assert s[1]["input_ids"].tolist() == np.asarray(tf.tokens[st : st + block]).tolist()
    shifted = TokenWindowDataset(tf, block, seed=3)
    assert shifted.window_start(0) == 3
    loader = torch.utils.data.DataLoader(shards[1], batch_size=4)
    assert next(iter(loader))["input_ids"].shape == (4, block)
    with pytest.raises(ValueError, match="both rank and world_size"):
        TokenWindowDataset(tf, block, rank=0)
    with pytest.raises(ValueError, match="rank"):
        TokenWindowDataset(tf, block, rank=3, world_size=3)


def test_hf_trainer_consumes_the_dataset(encoded, tmp_path):
    """The real Hugging Face Trainer takes the windows as they are (default collator, the model shifts)."""
    from transformers import Trainer, TrainingArguments

    from azllm.tokens import TokenWindowDataset

    tf = TokenFile(encoded["train"])
    torch.manual_seed(0)
    from azllm.model import build_model, model_config

    model = build_model(model_config("tiny", tf.vocab_size, **TINY_MODEL), seed=0)
    args = TrainingArguments(
        output_dir=str(tmp_path / "o"),
        max_steps=2,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=TokenWindowDataset(tf, 32))
    out = trainer.train()
    assert out.global_step == 2 and np.isfinite(out.training_loss) and out.training_loss > 0
