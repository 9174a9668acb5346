"""Reading token files: :class:`TokenFile` (memory-mapped, checked) and the Trainer's window dataset.
See :mod:`azllm.tokens`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .format import HEADER_SIZE, TokenFileError, read_header

# ---------------------------------------------------------------------------------------------------- reading


class TokenFile:
    """A token file mapped read-only: ``tokens`` is an ``np.memmap`` of the ids (no copy, no load).

    Checks on open: magic and version, file size == header + ``n_tokens * itemsize`` (a truncated or padded file
    is refused), and, when ``tokenizer`` or ``fingerprint`` is given, the tokenizer fingerprint.

    >>> tf = TokenFile("artifacts/tiny/tokens/train.bin", tok)  # doctest: +SKIP
    >>> x, y = tf.get_batch(8, 256, generator=torch.Generator().manual_seed(0))  # doctest: +SKIP
    >>> x.shape, x.dtype, bool((x[:, 1:] == y[:, :-1]).all())  # doctest: +SKIP
    (torch.Size([8, 256]), torch.int64, True)
    """

    def __init__(self, path: str | os.PathLike, tokenizer=None, *, fingerprint: str | None = None):
        self.path = Path(path)
        self.header = read_header(self.path)
        h = self.header
        try:
            self.dtype = np.dtype(h["dtype"]).newbyteorder("<")
            self.n_tokens = int(h["n_tokens"])
            self.vocab_size = int(h["vocab_size"])
            self.eos_id = int(h["eos_id"])
            self.fingerprint = str(h["tokenizer_fingerprint"])
        except (KeyError, TypeError) as e:
            raise TokenFileError(f"{self.path}: header lacks {e}; re-encode the corpus") from None
        self.n_docs = int(h.get("n_docs", 0))
        self.split = h.get("split")
        expected = HEADER_SIZE + self.n_tokens * self.dtype.itemsize
        size = self.path.stat().st_size
        if size != expected:
            raise TokenFileError(
                f"{self.path}: size {size} bytes, the header promises {expected} ({self.n_tokens} tokens of "
                f"{self.dtype.name}); the file is {'truncated' if size < expected else 'padded'} (an interrupted "
                "copy?). Re-encode it with azllm.tokens.encode_corpus."
            )
        want = fingerprint if fingerprint is not None else (tokenizer.fingerprint if tokenizer is not None else None)
        if want is not None and want != self.fingerprint:
            made = h.get("tokenizer_name")
            name = getattr(tokenizer, "name", None)
            raise TokenFileError(
                f"{self.path}: made with tokenizer {made!r} (fingerprint {self.fingerprint[:12]}…), not with "
                f"{name or 'the given one'} (fingerprint {want[:12]}…). Ids would mean other tokens: re-encode the "
                "corpus with this tokenizer or load the tokenizer that made the file."
            )
        if tokenizer is not None and tokenizer.vocab_size != self.vocab_size:
            raise TokenFileError(f"{self.path}: vocab_size {self.vocab_size} != tokenizer's {tokenizer.vocab_size}")
        self.tokens = (
            np.memmap(self.path, dtype=self.dtype, mode="r", offset=HEADER_SIZE, shape=(self.n_tokens,))
            if self.n_tokens
            else np.zeros(0, dtype=self.dtype)
        )

    def __len__(self) -> int:
        return self.n_tokens

    def __repr__(self) -> str:
        return (
            f"TokenFile({str(self.path)!r}, split={self.split}, n_tokens={self.n_tokens}, n_docs={self.n_docs}, "
            f"dtype={self.dtype.name}, vocab_size={self.vocab_size})"
        )

    def doc_ends(self) -> np.ndarray:
        """The document index (``<split>.idx`` beside the file, memory-mapped): for each document, the position
        just after its EOS, so document ``k`` is ``tokens[ends[k-1]:ends[k]]`` (``ends[-1] == n_tokens``).

        >>> ends = TokenFile("artifacts/tiny/tokens/train.bin").doc_ends()  # doctest: +SKIP
        >>> int(ends[-1]) == len(TokenFile("artifacts/tiny/tokens/train.bin"))  # doctest: +SKIP
        True
        """
        path = self.path.with_suffix(".idx")
        size = path.stat().st_size if path.is_file() else None
        if size != 8 * self.n_docs:
            raise TokenFileError(
                f"{path}: {'missing' if size is None else f'{size} bytes'}, the token file's {self.n_docs} documents "
                f"need {8 * self.n_docs}; re-encode the corpus with azllm.tokens.encode_corpus"
            )
        if not self.n_docs:
            return np.zeros(0, dtype="<u8")
        return np.memmap(path, dtype="<u8", mode="r", shape=(self.n_docs,))

    def _check_block(self, block_size: int) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if self.n_tokens < block_size + 1:
            raise TokenFileError(
                f"{self.path}: {self.n_tokens} tokens, fewer than block_size + 1 = "
                f"{block_size + 1}; use a smaller block_size or more data"
            )

    def _to(self, buf: np.ndarray, device) -> torch.Tensor:  # noqa: F821
        import torch

        t = torch.from_numpy(buf.astype(np.int64))
        device = torch.device(device)
        if device.type == "cuda":
            return t.pin_memory().to(device, non_blocking=True)
        return t if device.type == "cpu" else t.to(device)

    def get_batch(self, batch_size: int, block_size: int, generator=None, device="cpu"):
        """Random windows: ``x = tokens[i:i+block_size]``, ``y = tokens[i+1:i+block_size+1]`` for
        ``batch_size`` random starts ``i`` drawn with ``torch.randint(..., generator=generator)``.

        Returns int64 tensors of shape ``(batch_size, block_size)`` (Liger's kernels want int64). Deterministic
        for a seeded ``torch.Generator`` (an int is taken as a seed); on CUDA the batch is pinned and copied
        with ``non_blocking=True``. Windows may cross document boundaries (the EOS ids mark them), as in
        GPT-style pre-training.
        """
        import torch

        self._check_block(block_size)
        if isinstance(generator, int):
            generator = torch.Generator().manual_seed(generator)
        ix = torch.randint(self.n_tokens - block_size, (batch_size,), generator=generator).numpy()
        buf = self.tokens[ix[:, None] + np.arange(block_size + 1)]
        t = self._to(buf, device)
        return t[:, :-1], t[:, 1:]

    def iter_sequential(self, batch_size: int, block_size: int, device="cpu"):
        """Every next-token prediction of the split exactly once, in order, for evaluation.

        Window ``k`` is ``x = tokens[k*B:(k+1)*B]``, ``y`` = the same shifted by one (B = ``block_size``), batched
        by ``batch_size``; the last batch may be smaller, and a final window shorter than ``block_size`` (the
        tail) comes as its own batch of shape ``(1, tail)``. So the ``y`` of all batches, concatenated, equal
        ``tokens[1:]``.
        """
        if block_size < 1 or batch_size < 1:
            raise ValueError("batch_size and block_size must be >= 1")
        n_pred = self.n_tokens - 1
        full = max(n_pred, 0) // block_size
        for start in range(0, full, batch_size):
            k = np.arange(start, min(start + batch_size, full))
            buf = self.tokens[(k * block_size)[:, None] + np.arange(block_size + 1)]
            t = self._to(buf, device)
            yield t[:, :-1], t[:, 1:]
        tail = n_pred - full * block_size
        if tail > 0:
            buf = np.asarray(self.tokens[full * block_size :])[None, :]
            t = self._to(buf, device)
            yield t[:, :-1], t[:, 1:]


class _TokenWindows:
    """Fixed windows of a token file as a map-style dataset for the Hugging Face Trainer.

    Item ``i`` is ``{"input_ids": w, "labels": w}`` with ``w`` the ``i``-th window of ``block_size`` tokens
    (LongTensor), following the HF convention that the model shifts the labels itself. Windows start at
    ``offset + k * block_size`` with ``offset = seed % block_size``: ``seed=0`` is the plain grid, another seed
    (e.g. the epoch) moves every window boundary.

    Which sharding to use:

    - **HF Trainer / accelerate** (or any loop with a ``DistributedSampler``): leave ``rank`` and ``world_size``
      None. The Trainer's sampler already gives each rank different indices of a map-style dataset; sharding here
      as well would make every rank skip most of its data.
    - **A custom loop without a distributed sampler**: pass ``rank`` and ``world_size`` (or
      ``from_distributed=True`` to read them from an initialized ``torch.distributed``). Rank ``r`` then holds
      windows ``k = r, r + world_size, r + 2 * world_size, ...``, cut to the same length on every rank (so that
      collective ops never wait on a rank that ran out); ranks are disjoint and together cover all windows but at
      most ``world_size - 1``.

    >>> ds = TokenWindowDataset(TokenFile("artifacts/tiny/tokens/train.bin"), 256)  # doctest: +SKIP
    >>> ds[0]["input_ids"].shape  # doctest: +SKIP
    torch.Size([256])
    """

    def __init__(
        self,
        token_file: TokenFile | str | os.PathLike,
        block_size: int,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        seed: int = 0,
        from_distributed: bool = False,
    ):
        self.tf = token_file if isinstance(token_file, TokenFile) else TokenFile(token_file)
        self.block_size = int(block_size)
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if from_distributed and rank is None and world_size is None:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                rank, world_size = dist.get_rank(), dist.get_world_size()
        if (rank is None) != (world_size is None):
            raise ValueError("pass both rank and world_size, or neither")
        self.rank, self.world_size = (0, 1) if rank is None else (int(rank), int(world_size))
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {rank} must be in [0, world_size={world_size})")
        self.offset = int(seed) % self.block_size
        self.n_windows_total = max(0, (self.tf.n_tokens - self.offset) // self.block_size)
        self.n_windows = self.n_windows_total // self.world_size
        if self.n_windows == 0:
            raise TokenFileError(
                f"{self.tf.path}: {self.tf.n_tokens} tokens give no window of {self.block_size} "
                f"tokens for rank {self.rank} of {self.world_size}; use a smaller block_size"
            )

    def __len__(self) -> int:
        return self.n_windows

    def window_start(self, i: int) -> int:
        """Token position where item ``i`` of this rank starts."""
        if not -self.n_windows <= i < self.n_windows:
            raise IndexError(f"index {i} out of range for {self.n_windows} windows")
        i %= self.n_windows
        return self.offset + (i * self.world_size + self.rank) * self.block_size

    def __getitem__(self, i: int) -> dict:
        import torch

        s = self.window_start(int(i))
        ids = torch.from_numpy(self.tf.tokens[s : s + self.block_size].astype(np.int64))
        return {"input_ids": ids, "labels": ids.clone()}


def __getattr__(name: str):
    """``TokenWindowDataset`` subclasses ``torch.utils.data.Dataset``; it is built on first use so that
    ``import azllm.tokens`` (encoding, benchmarks in fresh processes) does not pay for importing torch."""
    if name == "TokenWindowDataset":
        import torch

        cls = type(
            "TokenWindowDataset",
            (_TokenWindows, torch.utils.data.Dataset),
            {"__doc__": _TokenWindows.__doc__, "__module__": "azllm.tokens"},
        )
        globals()["TokenWindowDataset"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
