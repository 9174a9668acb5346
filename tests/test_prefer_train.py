"""Preference tuning on TRL (azllm.prefer.train): TRL's DPO loss against the direct computation from the four
log-probabilities, the LoRA reference as the adapter disabled, held-out preference accuracy, resume and KTO."""

import json
import math
from pathlib import Path

import pytest
import torch
from prefer_helpers import fixture_pairs, model_and_tokenizer, tiny_pref_spec
from sft_helpers import conversations, tiny_base  # noqa: F401  (fixtures)

from azllm.prefer.train import completion_logprobs, dpo_loss, preference_accuracy, run_preference


def test_dpo_loss_is_the_sigmoid_of_the_reward_margin():
    pc, pr, rc, rr = (torch.tensor(x) for x in (-4.0, -9.0, -5.0, -7.0))
    want = -torch.log(torch.sigmoid(torch.tensor(0.2 * ((-4.0 + 5.0) - (-9.0 + 7.0)))))
    assert float(dpo_loss(pc, pr, rc, rr, 0.2)) == pytest.approx(float(want))


@pytest.fixture(scope="module")
def dpo_run(tiny_base, conversations, tmp_path_factory):
    model, tok, peft = model_and_tokenizer(tiny_base)
    pairs = fixture_pairs(conversations)
    out = tmp_path_factory.mktemp("dpo") / "run"
    spec = tiny_pref_spec(max_steps=6, eval_steps=3, lr=5e-3, batch_size=2, eval_batch_size=1)
    r = run_preference(
        model,
        tok,
        spec,
        train_pairs=pairs,
        eval_pairs=pairs[:1],
        output_dir=out,
        key="k",
        peft_config=peft,
        progress=False,
    )
    return r, tok, pairs


def test_trl_dpo_loss_equals_the_direct_computation_and_the_reference_is_the_adapter_off(dpo_run):
    r, tok, pairs = dpo_run
    model = r["model"]
    one = pairs[:1]
    prompts, chosen, rejected = [p["prompt"] for p in one], [p["chosen"] for p in one], [p["rejected"] for p in one]

    def logps(completions):
        return completion_logprobs(model, tok, prompts, completions, max_length=128)  # cut where TRL cuts

    pc, pr = logps(chosen), logps(rejected)
    with model.disable_adapter():
        rc, rr = logps(chosen), logps(rejected)
    assert abs(pc[0] - rc[0]) > 1e-3  # training moved the policy away from the reference
    want = float(dpo_loss(*(torch.tensor(x[0]) for x in (pc, pr, rc, rr)), 0.1))
    assert r["eval"]["eval_loss"] == pytest.approx(want, rel=1e-3, abs=1e-4)
    saved = json.loads((Path(r["output_dir"]) / "results.json").read_text())
    assert saved["steps"] == 6 and (Path(r["final_dir"]) / "adapter_config.json").is_file()


def test_preference_accuracy_moves_from_no_margin_to_the_trained_preference(dpo_run, tiny_base):
    r, tok, pairs = dpo_run
    acc = preference_accuracy(r["model"], tok, pairs, beta=0.1, max_length=128)
    assert acc["n"] == len(pairs) and acc["chance"] == 0.5
    assert acc["accuracy"] > 0.5 and acc["margin"] > 0 and acc["margin_se"] > 0
    assert acc["accuracy_se"] == pytest.approx((acc["accuracy"] * (1 - acc["accuracy"]) / len(pairs)) ** 0.5)
    base, tok2, _ = model_and_tokenizer(tiny_base, method="full")
    same = preference_accuracy(base, tok2, pairs, beta=0.1)  # no reference given: the model against itself
    assert same["accuracy"] == 0 and same["margin"] == 0


def test_a_run_resumes_from_its_newest_checkpoint(tiny_base, conversations, tmp_path):
    pairs = fixture_pairs(conversations, n=8)
    out = tmp_path / "run"
    for steps in (2, 4):
        model, tok, peft = model_and_tokenizer(tiny_base)
        spec = tiny_pref_spec(max_steps=steps, eval_steps=2, batch_size=2)
        r = run_preference(
            model,
            tok,
            spec,
            train_pairs=pairs,
            eval_pairs=pairs[:2],
            output_dir=out,
            key="k",
            peft_config=peft,
            progress=False,
        )
    assert r["resumed_from"] and r["resumed_from"].endswith("checkpoint-2") and r["steps"] == 4


@pytest.mark.parametrize("method", ["kto", "orpo"])
def test_kto_on_unpaired_labels_and_orpo_without_a_reference(method, tiny_base, conversations, tmp_path):
    """KTO on the pairs split into good and bad completions; ORPO (TRL's experimental trainer) on the pairs, with no
    reference model. Each logs finite losses, evaluates and saves its final model."""
    pairs = fixture_pairs(conversations, n=8)
    if method == "kto":
        pairs = [
            {"id": f"{p['id']}/{k}", "source": "fixture", "prompt": p["prompt"], "completion": p[k],
             "label": k == "chosen"}
            for p in pairs
            for k in ("chosen", "rejected")
        ]  # fmt: skip
    model, tok, peft = model_and_tokenizer(tiny_base)
    spec = tiny_pref_spec(method=method, max_steps=2, eval_steps=2, batch_size=4)
    r = run_preference(
        model,
        tok,
        spec,
        train_pairs=pairs,
        eval_pairs=pairs[:4],
        output_dir=tmp_path / method,
        key=method,
        peft_config=peft,
        progress=False,
    )
    assert r["steps"] == 2 and all(math.isfinite(h["loss"]) for h in r["curves"]["train"]) and r["curves"]["train"]
    assert "eval_loss" in r["eval"] and (tmp_path / method / "final" / "azllm_preference.json").is_file()


def test_sft_weight_adds_the_chosen_answers_mean_token_cross_entropy_to_dpos_loss(tiny_base, conversations, tmp_path):
    """RPO: TRL's held-out loss with ``sft_weight`` w is DPO's loss of the pair plus w times the mean negative
    log-probability of the chosen answer's tokens, computed here directly from the trained policy."""
    from azllm.prefer.train import _prompt_completion_ids

    pairs = fixture_pairs(conversations, n=8)
    model, tok, peft = model_and_tokenizer(tiny_base)
    spec = tiny_pref_spec(sft_weight=0.5, max_steps=2, eval_steps=2, batch_size=2, eval_batch_size=1, lr=5e-3)
    r = run_preference(
        model, tok, spec, train_pairs=pairs, eval_pairs=pairs[:1], output_dir=tmp_path / "rpo", key="rpo",
        peft_config=peft, progress=False,
    )  # fmt: skip
    model, one = r["model"], pairs[0]

    def logp(key: str) -> float:
        return completion_logprobs(model, tok, [one["prompt"]], [one[key]], max_length=128)[0]

    pc, pr = logp("chosen"), logp("rejected")
    with model.disable_adapter():
        rc, rr = logp("chosen"), logp("rejected")
    prompt_ids, chosen_ids = _prompt_completion_ids(tok, one["prompt"], one["chosen"])
    n_chosen = min(len(chosen_ids), 128 - len(prompt_ids))  # cut where TRL cuts
    want = float(dpo_loss(*(torch.tensor(x) for x in (pc, pr, rc, rr)), 0.1)) + 0.5 * (-pc / n_chosen)
    assert r["eval"]["eval_loss"] == pytest.approx(want, rel=1e-3, abs=1e-4)
    assert r["trainer"].args.loss_type == ["sigmoid", "sft"] and r["trainer"].args.loss_weights == [1.0, 0.5]
