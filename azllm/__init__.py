"""azllm: build language models for Azerbaijani, and measure what each choice costs.

Data flows one way, one module per step:
``text`` (normalize) -> ``data`` (sources) -> ``tokenizer`` (train / load) -> ``metrics`` -> ``tokens``
(token files, batches) -> ``model`` -> ``train`` -> ``report`` (papermill -> HTML + metrics.json).
"""

__version__ = "0.1.0"

import os as _os

if _os.environ.get("AZLLM_LOG"):  # a report kernel: warnings and logging go to the run's log, not into the page
    from .utils import route_warnings as _route_warnings

    _route_warnings()
