"""Publishing to the Hugging Face Hub: a model folder with its card and GGUF files, or a cleaned corpus as parquet
with its card, **staged whole before anything is uploaded**, then uploaded with ``huggingface_hub``.

- :func:`check_repo_id`, :func:`require_token`, :func:`export_files`: the refusals, each raised before any folder
  is staged or any request sent: a repository name that is not ``owner/name``, no token (``HF_TOKEN`` or the cached
  login, ``hf auth login``; never the params), an export folder that is not complete;
- :func:`stage`: one folder per repository (files hard-linked where the file system allows, else copied, and the
  card as ``README.md``), written beside itself and swapped in whole;
- :func:`corpus_parquet`: the corpus stage's jsonl shards as parquet (``text``, ``id``, ``source``);
- :func:`plan`: what would be uploaded (repository, visibility, files, sizes, which go as large files), the dry run;
- :func:`upload`: ``create_repo`` (private unless asked) then ``upload_folder`` for each staged folder. Weights, GGUF
  and parquet files go as large files (the Hub stores them in LFS by its default ``.gitattributes``).

>>> check_repo_id("me/az-135m")
'me/az-135m'
>>> check_repo_id("az-135m")
Traceback (most recent call last):
...
azllm.publish.PublishError: repository 'az-135m' is not OWNER/NAME (for example azllm-user/az-135m-instruct)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .export import TOKENIZER_FILES
from .utils import replace_dir

__all__ = [
    "PublishError",
    "Staged",
    "LARGE_SUFFIXES",
    "check_repo_id",
    "hub_token",
    "require_token",
    "export_files",
    "stage",
    "corpus_parquet",
    "plan",
    "upload",
]

LARGE_SUFFIXES = (".safetensors", ".gguf", ".parquet", ".bin", ".pt")
"""Files the Hub stores as large files (LFS) by the ``.gitattributes`` it gives a new repository."""

MODEL_FILES = ("config.json", "generation_config.json", *TOKENIZER_FILES)


class PublishError(ValueError):
    """Something to publish that is not ready: a bad repository name, no token, an incomplete folder."""


@dataclass(frozen=True)
class Staged:
    """One repository's folder, complete, ready to upload."""

    repo: str
    repo_type: str
    folder: Path
    private: bool

    def files(self) -> list[tuple[str, int]]:
        """``(path in the repository, bytes)`` of every file, sorted."""
        return sorted(
            (p.relative_to(self.folder).as_posix(), p.stat().st_size) for p in self.folder.rglob("*") if p.is_file()
        )


def check_repo_id(repo: str) -> str:
    """``repo`` when it is a valid ``owner/name`` Hub repository id, else a :class:`PublishError`."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if not isinstance(repo, str) or repo.count("/") != 1:
        raise PublishError(f"repository {repo!r} is not OWNER/NAME (for example azllm-user/az-135m-instruct)")
    try:
        validate_repo_id(repo)
    except HFValidationError as e:
        raise PublishError(f"repository {repo!r} is not a valid Hub id: {e}") from None
    return repo


def hub_token() -> str | None:
    """The Hub token of this machine: ``HF_TOKEN``, else the cached login (``hf auth login``), else None."""
    from huggingface_hub import get_token

    return get_token()


def require_token() -> str:
    """:func:`hub_token`, or a :class:`PublishError` that says how to give one."""
    token = hub_token()
    if not token:
        raise PublishError(
            "no Hugging Face token: set HF_TOKEN in the environment (a token with write access) or run "
            "`hf auth login`; a token never goes into params"
        )
    return token


def export_files(folder: str | os.PathLike) -> dict[str, Path]:
    """The files of a complete model export (``{name in the repository: path}``): ``config.json``, every weights
    file (one ``model.safetensors``, or an index and every shard it names) and a tokenizer, with the generation
    config and chat template when present. A :class:`PublishError` names what is missing.

    >>> export_files("/nowhere")
    Traceback (most recent call last):
    ...
    azllm.publish.PublishError: /nowhere: not a folder
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise PublishError(f"{folder}: not a folder")
    if (folder / "adapter_config.json").is_file():
        raise PublishError(f"{folder} holds an unmerged adapter (adapter_config.json): publish its merged export")
    missing = [] if (folder / "config.json").is_file() else ["config.json"]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weights = sorted(set(json.loads(index.read_text())["weight_map"].values())) + [index.name]
    else:
        weights = ["model.safetensors"]
    missing += [w for w in weights if not (folder / w).is_file()]
    if not any((folder / t).is_file() for t in ("tokenizer.json", "tokenizer.model", "sp.model", "vocab.json")):
        missing.append("a tokenizer (tokenizer.json, tokenizer.model or vocab.json)")
    if missing:
        raise PublishError(f"{folder} is not a complete model export: missing {', '.join(missing)}")
    names = [n for n in MODEL_FILES if (folder / n).is_file()] + weights
    return {n: folder / n for n in dict.fromkeys(names)}


def _place(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def stage(files: dict[str, Path], card: str, out: str | os.PathLike) -> Path:
    """A repository's folder ``out``: each of ``files`` (``{path in the repository: source}``) and ``card`` as
    ``README.md``, built beside ``out`` and swapped in whole; returns ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, src in files.items():
            if not Path(src).is_file():
                raise PublishError(f"{src}: missing, cannot stage {name}")
            _place(Path(src), tmp / name)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def corpus_parquet(shards: list[Path], out: str | os.PathLike, *, rows_per_file: int = 100_000) -> dict[str, Path]:
    """The corpus stage's jsonl shards as parquet files ``data/train-0000i-of-0000n.parquet`` in ``out`` (columns
    ``text``, ``id``, ``source``: the local paths in the stage's metadata stay behind), in input order; returns
    ``{path in the repository: file}``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: list[dict] = []
    for shard in shards:
        with open(shard, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                rows.append({"text": r["text"], "id": r["id"], "source": (r.get("metadata") or {}).get("source")})
    chunks = [rows[i : i + rows_per_file] for i in range(0, len(rows), rows_per_file)] or [[]]
    out, files = Path(out), {}
    out.mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(chunks):
        name = f"data/train-{i:05d}-of-{len(chunks):05d}.parquet"
        table = pa.Table.from_pylist(
            chunk, schema=pa.schema([("text", pa.string()), ("id", pa.string()), ("source", pa.string())])
        )
        pq.write_table(table, out / Path(name).name)
        files[name] = out / Path(name).name
    return files


def plan(staged: list[Staged]) -> list[str]:
    """What :func:`upload` would send, one line per repository and per file (``large`` for an LFS upload)."""
    lines = []
    for s in staged:
        files = s.files()
        total = sum(n for _, n in files)
        lines.append(
            f"{s.repo_type} {s.repo} ({'private' if s.private else 'public'}): {len(files)} files, "
            f"{total / 1e6:,.1f} MB, from {s.folder}"
        )
        for name, n in files:
            large = " (large file)" if name.endswith(LARGE_SUFFIXES) else ""
            lines.append(f"    {name}  {n / 1e6:,.2f} MB{large}")
    return lines


def upload(staged: list[Staged], token: str, *, message: str = "azllm publish") -> list[str]:
    """Create each repository (``exist_ok``; private unless the staged folder says public) and upload its folder in
    one commit; returns the commit URLs. Call it only once every folder is staged."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    urls = []
    for s in staged:
        api.create_repo(s.repo, repo_type=s.repo_type, private=s.private, exist_ok=True)
        info = api.upload_folder(
            folder_path=str(s.folder), repo_id=s.repo, repo_type=s.repo_type, commit_message=message
        )
        urls.append(info.commit_url)
    return urls
