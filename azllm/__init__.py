"""azllm: build language models for Azerbaijani, and measure what each choice costs.

The library, one concept per module, data flowing one way (each imports only the ones before it):
``text`` (normalize) -> ``data`` (sources) -> ``morph`` -> ``tokenizer`` (train / export / load) -> ``vocab``
(extend a base tokenizer) -> ``metrics`` -> ``tokens`` (token files, batches) -> ``memory`` (the memory model) ->
``model`` -> ``lora`` -> ``assemble`` (the one model assembly) -> ``callbacks`` -> ``loop`` (the loop's arguments,
shared by every trainer) -> ``train`` -> ``export`` (merge into a standalone folder) -> ``gguf`` (a GGUF base as a
folder).
Library functions take plain named arguments.

Around it: ``config`` (the typed params, where every default lives), ``recipes`` (params -> artifacts, one module
per stage: the only readers of a config), ``corpus``, ``evaluation`` and ``sft`` (the corpus stage, lm-eval
scoring, instruction tuning), ``bench`` (every measurement, each in a fresh process), ``tables`` and ``plots``
(what the reports show), ``report`` (papermill -> HTML pages + metrics.json) and ``cli`` (``python -m azllm``).
"""

__version__ = "0.1.0"

import logging as _logging
import os as _os


def _not_deepspeed_cpu_guess(record: _logging.LogRecord) -> bool:
    """DeepSpeed (pinned: accelerate's ZeRO path) is imported by every Trainer and ``save_pretrained``; on a machine
    with no GPU its auto-detection logs "Setting accelerator to CPU ... unable to detect it" and picks CPU. That
    line says nothing to an azllm user, so importing azllm drops it (DeepSpeed's other messages stay)."""
    return "Setting accelerator to CPU" not in str(record.msg)


_logging.getLogger("DeepSpeed").addFilter(_not_deepspeed_cpu_guess)

if _os.environ.get("AZLLM_LOG"):  # a report kernel: warnings and logging go to the run's log, not into the page
    from .utils import route_warnings as _route_warnings

    _route_warnings()
else:
    from .utils import in_jupyter as _in_jupyter

    if _in_jupyter():  # JupyterLab: library output to the session's log (bars stay widgets), from the first import
        from .utils import route_warnings as _route_warnings
        from .utils import session_log as _session_log
        from .utils import set_session_log as _set_session_log

        _set_session_log(_session_log())
        _route_warnings()
