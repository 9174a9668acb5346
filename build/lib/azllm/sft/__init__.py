"""Instruction tuning (SFT): chat data -> a cleaned, decontaminated set of conversations -> a chat template with
generation markers -> TRL's ``SFTTrainer`` with azllm's training pieces -> held-out loss, generations, chrF++.

One concept per module, each taking plain named arguments (the recipe :mod:`azllm.recipes.sft` reads the config):

- :mod:`~azllm.sft.data`: read ``messages`` lists, prompt/completion pairs or Alpaca-style instruction records
  (jsonl, parquet or a hub dataset) as conversations, with clear errors for bad records;
- :mod:`~azllm.sft.clean`: empty turns and placeholder inputs, exact and near-duplicate prompts, normalization,
  the held-out split;
- :mod:`~azllm.sft.decontaminate`: drop training conversations that overlap held-out or evaluation texts;
- :mod:`~azllm.sft.template`: azllm's documented chat template, its role tokens, the end-of-turn token, the
  generation-marker check, the token-length policy;
- :mod:`~azllm.sft.train`: the ``SFTTrainer`` run (new token rows, the QLoRA repack guard, the SIGTERM checkpoint,
  throughput and memory, the best checkpoint, early stopping, resume);
- :mod:`~azllm.sft.generate`: answers to held-out instructions with the chat template, chrF++ against the
  references.
"""
