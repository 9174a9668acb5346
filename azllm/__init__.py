"""azllm: build language models for Azerbaijani, and measure what each choice costs.

Data flows one way, one module per step:
``text`` (normalize) -> ``data`` (sources) -> ``tokenizer`` (train / load) -> ``metrics`` -> ``tokens``
(token files, batches) -> ``model`` -> ``train`` -> ``report`` (papermill -> HTML + metrics.json).
"""

__version__ = "0.1.0"
