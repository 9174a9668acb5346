"""Downstream evaluation: what a model can do, beside what it costs (tokens per word, bits per byte).

Modules: :mod:`azllm.evaluation.probe` (a linear probe on mean-pooled hidden states, a signal above chance for
models too small for multiple-choice tasks).
"""
