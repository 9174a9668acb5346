"""Every measurement of azllm, each run in a fresh process through one helper with one result format.

- :mod:`azllm.bench.process`: :func:`~azllm.bench.process.run_fresh`, the fresh-process helper, and its result
  format (``status`` ok / error / killed / timeout / crashed);
- :mod:`azllm.bench.encoder`: the token-file encoder against naive writers and the tokenizer's own limit
  (``azllm bench encoder PARAMS``; notebook 02);
- :mod:`azllm.bench.training`: memory and throughput of training variants (checkpointing, Liger, LoRA, QLoRA,
  8-bit optimizers, bf16), explained by :mod:`azllm.memory` (notebook 04);
- :mod:`azllm.bench.methods`: full fine-tuning vs LoRA vs QLoRA on one model, medians of several rounds
  (``azllm bench methods PARAMS``; notebook 03);
- :mod:`azllm.bench.overhead`: azllm's training path against a bare PyTorch (+ PEFT) loop, tokens/s side by side
  (``azllm bench overhead PARAMS``, also on a real base with ``--base``);
- :mod:`azllm.bench.evaluation`: scoring items/s through lm-eval by batch size (``azllm bench eval``);
- :mod:`azllm.bench.sft`: azllm's SFT path against a bare SFTTrainer and a bare PEFT loop, real tokens/s and peak
  memory (``azllm bench sft``);
- :mod:`azllm.bench.gguf`: prompt and generation tokens/s and peak RSS of a GGUF file (llama.cpp) against the same
  model in transformers (``azllm deploy``, notebook 08).

These modules take plain arguments; :mod:`azllm.recipes.benchmark` and :mod:`azllm.recipes.tokens` feed them the
params, and ``azllm bench gpu`` (``make bench-gpu``) runs notebook 04 on the GPU params.

Medians and ratios are measured side by side in one run, never in timed unit tests.
"""
