"""Recipes: a params file -> a stage's artifacts. The layer between the library and the notebooks / command line.

Like torchtune's recipes, each stage is one small module that reads only its own config sections, calls the
library with plain named arguments and returns plain results; notebooks and the CLI call these and show what
comes back. Every number a report shows or records is computed here (or in the library): medians, ratios, shares,
costs, the fit plan and the winners (the best tokenizer, :func:`~azllm.recipes.adapt.best_run`, the ranking's
``top``, the fastest and cheapest variant); results are plain dicts and rows with snake_case keys, typed where
they cross a module boundary (:class:`azllm.lifecycle.RunResult`, :class:`~azllm.recipes.adapt.AdaptRun`,
:class:`azllm.sft.template.Template`, :class:`azllm.sft.data.SftData`, :class:`azllm.deploy.DeployRecord`:
``TypedDict``s, so that they are still the dicts the notebooks record into ``metrics.json`` as they are (its
schema: :mod:`azllm.report`)), and which :mod:`azllm.tables` only renames into display labels. Data flows one
way: library <- recipes <- presentation (:mod:`azllm.tables`, :mod:`azllm.plots`, :mod:`azllm.report`) and the
command line (:mod:`azllm.cli`), with no cycles (tests/test_imports.py).

- :mod:`~azllm.recipes.paths`: :class:`~azllm.recipes.paths.Paths`, where everything of a run lives;
- :mod:`~azllm.recipes.specs`: params sections -> the library's specs (:func:`~azllm.recipes.specs.build_spec`);
- :mod:`~azllm.recipes.corpus`: the corpus stage, its mix, the eval sets (notebook 00);
- :mod:`~azllm.recipes.tokenizers`: the tokenizer sweep, the baselines, the main tokenizer, what each corpus step
  and option bought, the lexicon check (notebook 01);
- :mod:`~azllm.recipes.tokens`: token files and the encoder benchmark (notebook 02);
- :mod:`~azllm.recipes.train`: the model and training specs, one training run (notebook 03, ``azllm train``);
- :mod:`~azllm.recipes.benchmark`: training variants, the fit planner, full vs LoRA vs QLoRA, the overhead
  measurement, the GPU run (notebook 04, ``azllm bench ...``);
- :mod:`~azllm.recipes.adapt`: a pretrained base taught Azerbaijani three ways, the study loop
  :func:`~azllm.recipes.adapt.run_study` (notebooks 05, 06 and the SFT base);
- :mod:`~azllm.recipes.evaluate`: lm-eval scores and the probe, before -> after, the ranking, what moved (notebook
  06, ``azllm eval``);
- :mod:`~azllm.recipes.tasks`: the local task configs of ``evaluate`` and their decontamination sets;
- :mod:`~azllm.recipes.sft`: instruction tuning (notebook 07, ``azllm sft``);
- :mod:`~azllm.recipes.controls`: which stage helps: the original base, adapted, adapted + SFT and SFT only on the
  same held-out answers (notebook 07);
- :mod:`~azllm.recipes.sources`: which data a run gets (local files, the Hub, or the shipped sample), the pages'
  banner, and :func:`~azllm.recipes.sources.resolve` (a source of the params against the data root);
- :mod:`~azllm.recipes.launch`: a params file as a SageMaker training job (``azllm launch``).

>>> cfg = load("params/tiny.yaml")  # doctest: +SKIP
>>> from azllm.recipes import tokens, train
>>> data = tokens.prepare_data(cfg)  # doctest: +SKIP
>>> result = train.train_model(cfg, data)  # doctest: +SKIP
"""

from __future__ import annotations

import os

from ..config import Config, load_params
from ..utils import route_library_output

__all__ = ["load", "setup", "run_metadata"]


def load(params_file: str | os.PathLike | None, overrides: dict | None = None) -> Config:
    """The validated config of a params file (:func:`azllm.config.load_params`)."""
    return load_params(params_file, overrides)


def _short_errors() -> None:
    """In JupyterLab, an error that azllm raised about the user's params or data shows its message (which says what
    to change) under "azllm:", without a traceback into the library; any other error keeps IPython's traceback."""
    import sys

    from IPython import get_ipython

    from ..config import ParamsError
    from ..data import DataError
    from ..tokenizer import TokenizerError

    def show(shell, etype, value, tb, tb_offset=None):
        print(f"azllm: {etype.__name__}: {value}", file=sys.stderr)
        print("Change the params file (the first cell names it) or the data it points to, then run the cells again.")

    get_ipython().set_custom_exc((ParamsError, DataError, TokenizerError), show)


def setup(params_file: str | os.PathLike, overrides: dict | None = None) -> Config:
    """The first call of every notebook: library warnings and progress bars go to the run's log (the terminal of
    ``make report``), not into the page; a value that does not apply (parity without a parallel side, the columns
    of a variant that could not run) shows as "—" in the pages' styled tables, never ``nan`` (the notebooks also
    pass ``na_rep="—"`` where they set a precision, which pandas would otherwise print as ``nan``); numbers show the
    digits they support (:func:`azllm.utils.significant`: at most 4 significant ones); a kernel that JupyterLab
    started in ``notebooks/`` moves to the folder above (the repository root, where the report's kernels run), and
    there an error about the params or the data shows as a message, not a traceback; then the config is loaded."""
    import pandas as pd

    from ..utils import in_jupyter, project_root, session_log, set_session_log, significant

    os.chdir(project_root())  # JupyterLab starts a kernel in notebooks/; the report's kernels run in the root
    if in_jupyter():
        _short_errors()
        log = set_session_log(session_log())
        print(f"azllm: library logs of this notebook go to {log}; progress bars stay here")
    route_library_output()
    pd.set_option("styler.format.na_rep", "—")
    pd.set_option("display.float_format", significant)  # every table: the digits its numbers support
    return load(params_file, overrides)


def run_metadata(cfg: Config, params_file: str | os.PathLike | None) -> dict:
    """Params, their hash, git commit, package versions, seed and machine of a run: what every report and record
    says of where it came from."""
    import time

    from ..utils import REPO_ROOT, git_commit, machine_info, package_versions
    from .paths import Paths

    root = Paths.of(cfg).data_root
    return {
        "run_name": cfg.run_name,
        "params_file": str(params_file) if params_file else None,
        "params": cfg.to_dict(),
        "params_hash": cfg.hash(),
        "seed": cfg.seed,
        "git_commit": git_commit(REPO_ROOT),
        "packages": package_versions(),
        "machine": machine_info(),
        "data_root": str(root) if root else None,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
