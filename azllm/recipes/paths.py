"""Where a run's things live: :class:`Paths`, the one object that knows the folders of a run.

Notebooks, recipes and the report ask it; nothing else builds an artifact path. Heavy artifacts go to
``$AZLLM_ARTIFACTS/<run_name>/`` (default ``./artifacts/<run_name>/``, git-ignored), the pages to
``reports/<run_name>/``, and inputs are found under the data root (``data.root``, else ``$AZLLM_DATA_ROOT``, else
``../shared`` beside the repository when it exists).

>>> from azllm.config import load_params
>>> p = Paths.of(load_params(None, overrides={"run_name": "demo"}))
>>> p.corpus("abc").parts[-3:], p.run("lora", "k1").name
(('demo', 'corpus', 'abc'), 'lora-k1')

One object per run: :meth:`Paths.of` builds it the first time a run's folders are asked for and hands the same object
out after (a config derived for one stage, with the same run name and data root, is the same run), so no recipe
rebuilds it. A test counts the constructions in one run of a stage chain.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..config import Config
from ..data import under_root
from ..utils import ARTIFACTS_ENV, REPO_ROOT

__all__ = ["Paths", "DATA_ROOT_ENV", "ARTIFACTS_ENV", "default_data_root", "run_name"]

DATA_ROOT_ENV = "AZLLM_DATA_ROOT"


def run_name(way: str, method: str) -> str:
    """The one name of an adaptation run (a way x a method): its folder, its export's, its key on the pages.

    >>> run_name("extend", "lora")
    'extend-lora'
    """
    return f"{way}-{method}"


def default_data_root(repo: str | os.PathLike = REPO_ROOT) -> Path | None:
    """``shared/`` beside the repository when it holds ``data/`` (this project's layout), else None. Every command
    (``azllm run``, ``train``, ``bench``, a notebook in JupyterLab) makes the same choice as ``make``.

    >>> default_data_root("/nowhere/repo") is None
    True
    """
    shared = Path(repo).parent / "shared"
    return shared if (shared / "data").is_dir() else None


class Paths:
    """The folders of one run (``cfg``'s run name, data root and ``tokens.dir``); ask :meth:`of` for it."""

    _runs: dict[tuple, Paths] = {}

    @classmethod
    def of(cls, cfg: Config) -> Paths:
        """The one :class:`Paths` of ``cfg``'s run: what it is made of (the run name, ``data.root``, ``tokens.dir``
        and the environment, working folder and default data root they are read against) names it; built once,
        then handed out.

        >>> from azllm.config import load_params, derive
        >>> cfg = load_params(None, overrides={"run_name": "demo"})
        >>> Paths.of(cfg) is Paths.of(derive(cfg, seed=7))
        True
        """
        key = (
            cfg.run_name,
            cfg.data.root,
            cfg.tokens.dir,
            os.environ.get(DATA_ROOT_ENV),
            os.environ.get(ARTIFACTS_ENV),
            os.environ.get("HOME"),
            os.getcwd(),
            default_data_root(),
        )
        if key not in cls._runs:
            cls._runs[key] = cls(cfg)
        return cls._runs[key]

    def __init__(self, cfg: Config):
        self.run_name = cfg.run_name
        env = os.environ.get(DATA_ROOT_ENV)
        root = cfg.data.root or (env if env is not None else default_data_root())
        self.data_root: Path | None = Path(root).expanduser().resolve() if root else None
        """The data root: ``data.root``, else ``$AZLLM_DATA_ROOT`` (set but empty: none), else
        :func:`default_data_root`; None: hub sources, or the shipped sample (:mod:`azllm.recipes.sources`)."""
        self.artifacts: Path = (Path(os.environ.get(ARTIFACTS_ENV, "artifacts")) / cfg.run_name).resolve()
        """The run's artifacts folder."""
        self._tokens_dir = cfg.tokens.dir

    def under_root(self, path: str | os.PathLike) -> Path | None:
        """``path`` under the data root unless absolute (:func:`azllm.data.under_root`)."""
        return under_root(path, self.data_root)

    def existing(self, path: str | os.PathLike) -> Path | None:
        """``path`` under the data root (or absolute) when it exists there, else None."""
        p = self.under_root(path)
        return p if p is not None and p.exists() else None

    # the corpus stage
    @property
    def corpus_root(self) -> Path:
        return self.artifacts / "corpus"

    def corpus(self, key: str) -> Path:
        """The corpus stage's output for one key (``clean/``, ``removed/``, ``manifest.json``, mixes)."""
        return self.corpus_root / key

    # tokenizers and token files
    @property
    def tokenizer(self) -> Path:
        """The run's main tokenizer."""
        return self.artifacts / "tokenizer"

    @property
    def tokenizers(self) -> Path:
        """The tokenizer sweep (one folder per variant)."""
        return self.artifacts / "tokenizers"

    @property
    def tokenizer_sample(self) -> Path:
        """The seeded sample of training sentences the sweep and the run's tokenizer train on
        (:func:`azllm.tokenizer_train.write_sample`)."""
        return self.artifacts / "tokenizer_sample.txt"

    @property
    def tokenizer_notes(self) -> Path:
        """One note per tokenizer trained in this run's artifacts (``reuse`` of
        :func:`azllm.tokenizer_train.train_tokenizer`): a tokenizer asked for again is copied, not trained again."""
        return self.artifacts / "tokenizer_notes"

    def recipe_step(self, i: int) -> Path:
        """The tokenizer of step ``i`` of the "what each change bought" table."""
        return self.artifacts / "recipe" / f"step{i}"

    def one_change(self, i: int) -> Path:
        """The tokenizer of row ``i`` of the one-at-a-time table (0: the run's own options)."""
        return self.artifacts / "one_at_a_time" / f"row{i}"

    @property
    def tokens(self) -> Path:
        """The run's token files: ``tokens.dir`` or ``artifacts/<run>/tokens``."""
        return Path(self._tokens_dir).expanduser().resolve() if self._tokens_dir else self.artifacts / "tokens"

    def dev_tokens(self, name: str) -> Path:
        return self.artifacts / "tokens_dev" / name

    @property
    def encoder_bench(self) -> Path:
        return self.artifacts / "tokens_bench"

    # training, benchmarks, adaptation, launch
    def run(self, method: str, key: str) -> Path:
        """A training run's folder (checkpoints, final model, results.json)."""
        return self.artifacts / "train" / f"{method}-{key}"

    @property
    def bench(self) -> Path:
        return self.artifacts / "bench"

    @property
    def methods_bench(self) -> Path:
        return self.artifacts / "bench_methods"

    @property
    def overhead_bench(self) -> Path:
        return self.artifacts / "bench_overhead"

    @property
    def adapt(self) -> Path:
        """The adaptation study's work folder."""
        return self.artifacts / "adapt"

    def adapt_run(self, way: str, method: str) -> Path:
        """One adaptation run's folder (checkpoints, final model, ``results.json``)."""
        return self.adapt / run_name(way, method)

    def adapt_export(self, way: str, method: str) -> Path:
        """One adaptation run as a standalone folder."""
        return self.adapt / f"{run_name(way, method)}-export"

    def distill_export(self, student: str) -> Path:
        """One student as a standalone folder."""
        return self.distill / f"{student}-export"

    @property
    def sft(self) -> Path:
        """Instruction tuning's work folder (runs, exports, the base of notebook 07)."""
        return self.artifacts / "sft"

    @property
    def preference(self) -> Path:
        """Preference tuning's work folder (runs, answers, the export)."""
        return self.artifacts / "preference"

    @property
    def distill(self) -> Path:
        """The distillation study's work folder (students, their token files, exports)."""
        return self.artifacts / "distill"

    @property
    def deploy(self) -> Path:
        """GGUF files and their checks (``deploy/<model>/``)."""
        return self.artifacts / "deploy"

    @property
    def launch(self) -> Path:
        return self.artifacts / "launch"

    def stage_done(self, stage: str) -> Path:
        """The completeness marker of a finished stage's output (:mod:`azllm.recipes.stages`)."""
        return self.artifacts / "stages" / f"{stage}.json"

    def report(self, reports_dir: str | os.PathLike = "reports") -> Path:
        """The run's pages and metrics.json."""
        return Path(reports_dir) / self.run_name
