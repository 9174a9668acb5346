"""Run one tiny SFT run in its own process, for the SIGTERM resume test.

``python tests/sft_entry.py spec.json``: the spec holds ``base`` (a tiny base folder), ``output_dir``, ``spec``
(:class:`azllm.sft.train.SftSpec` fields over the tests' tiny spec) and ``term_at_step`` (this process sends itself
a real SIGTERM as that step begins). Prints the run's result (without the model) as one JSON line.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import warnings
from pathlib import Path

warnings.simplefilter("ignore")  # (tests/ is this script's folder, so sft_helpers imports as is)


def run(base: str, output_dir: str, spec: dict, callbacks=()) -> dict:
    """The LoRA run the resume test compares: the fixture conversations, azllm's template, new role rows."""
    from sft_helpers import fixture_conversations, tiny_spec
    from transformers import AutoTokenizer

    from azllm.sft.template import prepare_tokenizer
    from azllm.sft.train import lora_config, prepare_model, run_sft
    from azllm.utils import seed_everything

    convs = fixture_conversations()
    seed_everything(1234)
    tok = AutoTokenizer.from_pretrained(base)
    info = prepare_tokenizer(tok)
    model, minfo = prepare_model(base, method="lora", new_token_ids=info["added_tokens"])
    peft = lora_config(model, r=8, alpha=16, dropout=0.0, new_token_ids=info["added_tokens"])
    return run_sft(
        model,
        tok,
        tiny_spec(**spec),
        train_convs=convs[6:],
        eval_convs=convs[:6],
        output_dir=output_dir,
        key="resume-test",
        peft_config=peft,
        info=minfo,
        end_of_turn_id=info["end_of_turn_id"],
        callbacks=callbacks,
        progress=False,
    )


def main(spec_path: str) -> None:
    from transformers import TrainerCallback

    spec = json.loads(Path(spec_path).read_text())
    t = int(spec["term_at_step"])

    class Term(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if state.global_step == t - 1:
                os.kill(os.getpid(), signal.SIGTERM)

    r = run(spec["base"], spec["output_dir"], spec.get("spec", {}), callbacks=[Term()])
    print(json.dumps({k: v for k, v in r.items() if k in ("interrupted", "steps", "checkpoint")}))


if __name__ == "__main__":
    main(sys.argv[1])
