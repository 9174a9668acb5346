"""Liger parity under Triton's CPU interpreter, run in its own process by tests/test_liger.py.

``TRITON_INTERPRET=1 python tests/liger_parity.py out.json``: builds a tiny Llama, computes the loss and every
gradient without Liger, then for each kernel set applies :func:`azllm.model.apply_liger` to a copy of the same
model and records the largest differences, or the error when the interpreter cannot run a kernel.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import traceback
import warnings

assert os.environ.get("TRITON_INTERPRET") == "1", (
    "set TRITON_INTERPRET=1 before Python starts (triton reads it at import)"
)
warnings.simplefilter("ignore")

import torch  # noqa: E402

SETS = [["rope", "fused_linear_cross_entropy"], ["rms_norm"], ["swiglu"], ["cross_entropy"]]


def run(model, x, y):
    model.train()
    model.zero_grad(set_to_none=True)
    out = model(input_ids=x, labels=y)
    out.loss.backward()
    return out, {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def main(path: str) -> None:
    from azllm.model import apply_liger, build_model, model_config

    cfg = model_config(
        "tiny",
        96,
        num_hidden_layers=2,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    ref_model = build_model(cfg, seed=0)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 96, (2, 16), generator=g, dtype=torch.int64)
    ref_out, ref_grads = run(copy.deepcopy(ref_model), x, x)
    ref_loss = ref_out.loss.item()
    results = {"ref_loss": ref_loss, "sets": {}}
    for kernels in SETS:
        m = copy.deepcopy(ref_model)
        key = "+".join(kernels)
        try:
            info = apply_liger(m, kernels, allow_interpreter=True)
            out, grads = run(m, x, x)
            m.eval()
            with torch.no_grad():
                eval_logits = m(input_ids=x, labels=x).logits
            results["sets"][key] = {
                "applied": info["applied"],
                "available": info["available"],
                "reason": info["reason"],
                "loss": out.loss.item(),
                "loss_diff": abs(out.loss.item() - ref_loss),
                "max_grad_diff": max((grads[n] - ref_grads[n]).abs().max().item() for n in ref_grads),
                "grads_compared": len(ref_grads),
                "train_logits_none": out.logits is None,
                "eval_logits_shape": list(eval_logits.shape),
                "forward_name": m.forward.__func__.__name__,
                "mlp_name": m.model.layers[0].mlp._get_name(),
                "error": None,
            }
        except Exception as e:  # noqa: BLE001 - the interpreter's limits are recorded, not hidden
            tb = traceback.format_exc()
            line = next((ln.strip() for ln in reversed(tb.splitlines()) if ".to(tl.float32)" in ln), "")
            results["sets"][key] = {"error": f"{type(e).__name__}: {e}", "kernel_line": line}
    with open(path, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1])
