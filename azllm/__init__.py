"""azllm: build language models for Azerbaijani, and measure what each choice costs.

The library, one concept per module, data flowing one way (each imports only the ones before it):
``text`` (normalize) -> ``data`` (sources) -> ``morph`` -> ``tokenizer`` (train / export / load) -> ``vocab``
(extend a base tokenizer) -> ``metrics`` -> ``tokens`` (token files, batches) -> ``memory`` (the memory model) ->
``model`` -> ``lora`` -> ``callbacks`` -> ``train`` -> ``export`` (merge into a standalone folder).
Library functions take plain named arguments.

Around it: ``config`` (the typed params), ``run`` and ``adapt`` (the run layer: params -> artifacts, the only
readers of a config), ``bench`` (every measurement, each in a fresh process), ``tables`` and ``plots`` (what the reports show)
and ``report`` (papermill -> HTML pages + metrics.json).
"""

__version__ = "0.1.0"

import os as _os

if _os.environ.get("AZLLM_LOG"):  # a report kernel: warnings and logging go to the run's log, not into the page
    from .utils import route_warnings as _route_warnings

    _route_warnings()
