"""The SFT run on TRL's SFTTrainer: the loss mask checked independently (including a base with no pad token, whose
pad is its EOS = the end-of-turn token), packed conversations against the same conversations alone on SDPA (CPU),
new token rows that train through TRL's fused LM head, the SIGTERM checkpoint and a restart that follows the same
curve, the best checkpoint, QLoRA's repack guard."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from sft_entry import run as entry_run
from sft_helpers import conversations, make_base, tiny_base, tiny_spec  # noqa: F401  (fixtures)

from conftest import FIXTURES

REPO = Path(__file__).resolve().parent.parent

MULTI = [
    {
        "id": f"multi{i}",
        "where": f"multi{i}",
        "source": "multi",
        "messages": [
            {"role": "system", "content": "Sən Azərbaycan dilində cavab verən köməkçisən."},
            {"role": "user", "content": f"Salam! {i} nədir?"},
            {"role": "assistant", "content": f"Salam. {i} bir ədəddir."},
            {"role": "user", "content": "Bəs Bakı?"},
            {"role": "assistant", "content": "Bakı Azərbaycanın paytaxtıdır." + " Çox gözəl şəhərdir." * (i % 3)},
        ],
    }
    for i in range(6)
]


@pytest.fixture(scope="module")
def no_pad_base(tmp_path_factory):
    """A tiny base with GPT-2's tokenizer: no pad token; its EOS becomes ChatML's <|im_end|> below."""
    return make_base(tmp_path_factory.mktemp("gpt2base") / "base", FIXTURES / "tokenizers" / "gpt2-2k")


def _trainer(base, convs, tmp_path, *, template="auto", eos=None, method="lora", **spec):
    from transformers import AutoTokenizer

    from azllm.sft.template import prepare_tokenizer
    from azllm.sft.train import build_trainer, lora_config, prepare_model

    tok = AutoTokenizer.from_pretrained(str(base))
    if eos:
        tok.add_tokens([eos], special_tokens=True)
        tok.eos_token = eos
    pad_before = tok.pad_token
    info = prepare_tokenizer(tok, template=template)
    model, _ = prepare_model(base, method=method, new_token_ids=info["added_tokens"])
    peft = (
        lora_config(model, r=4, alpha=8, dropout=0.0, new_token_ids=info["added_tokens"]) if method != "full" else None
    )
    trainer, parts = build_trainer(
        model,
        tok,
        tiny_spec(**spec),
        train_convs=convs,
        eval_convs=convs[:2],
        output_dir=tmp_path / "run",
        peft_config=peft,
        progress=False,
    )
    return trainer, tok, info, pad_before


def _runs(labels) -> list[list[int]]:
    """Maximal runs of consecutive loss-carrying tokens."""
    runs, cur = [], []
    for v in list(labels) + [-100]:
        if v != -100:
            cur.append(int(v))
        elif cur:
            runs.append(cur)
            cur = []
    return runs


@pytest.mark.parametrize("kind", ["azllm tokenizer and template", "no pad token, pad = eos = end of turn"])
def test_loss_tokens_are_exactly_the_assistant_turns_and_their_end_of_turn(
    kind, tiny_base, no_pad_base, conversations, tmp_path
):
    """Independent of TRL's own code: the labelled tokens of every prepared conversation, in runs, decode to exactly
    the assistant turns each followed by the end-of-turn token, and nothing of the system or user turns; in a
    padded batch the pads carry no loss and every end-of-turn token still does (the classic failure: a base with no
    pad token gets pad = eos, and a collator that masks the pad id never teaches the model to stop)."""
    convs = MULTI + conversations[:6]
    if kind.startswith("azllm"):
        trainer, tok, info, pad_before = _trainer(tiny_base, convs, tmp_path, max_length=1024)
        assert info["template"] == "azllm" and info["end_of_turn"] == "<|end|>"
    else:
        trainer, tok, info, pad_before = _trainer(
            no_pad_base, convs, tmp_path, template="chatml", eos="<|im_end|>", max_length=1024
        )
        assert pad_before is None and tok.pad_token_id == tok.eos_token_id == info["end_of_turn_id"]
    eot = info["end_of_turn"]
    ds = trainer.train_dataset
    assert len(ds) == len(convs)
    for conv, ex in zip(convs, ds):
        want = [m["content"] + eot for m in conv["messages"] if m["role"] == "assistant"]
        got = [tok.decode(r) for r in _runs(ex["labels"])]
        assert [g.lstrip() for g in got] == want, conv["id"]
        users = [m["content"] for m in conv["messages"] if m["role"] != "assistant"]
        assert not any(u in "".join(got) for u in users)
    batch = trainer.data_collator([ds[i] for i in range(4)])
    lengths = [len(ds[i]["input_ids"]) for i in range(4)]
    assert len(set(lengths)) > 1  # the batch is padded
    for row, n in enumerate(lengths):
        labels, ids = batch["labels"][row], batch["input_ids"][row]
        assert (labels[n:] == -100).all() and (ids[n:] == tok.pad_token_id).all()
        n_turns = sum(m["role"] == "assistant" for m in convs[row]["messages"])
        assert int((labels == info["end_of_turn_id"]).sum()) == n_turns


def _alone_vs_packed(trainer, tok, strategy):
    """Max |logit difference| of each packed conversation's tokens against the conversation alone."""
    model = trainer.model.eval()
    starts = {tok.convert_tokens_to_ids(t) for t in ("<|system|>", "<|user|>")}
    diffs = []
    with torch.no_grad():
        for batch, row in ((b, r) for b in trainer.get_train_dataloader() for r in range(b["input_ids"].shape[0])):
            ids = batch["input_ids"][row : row + 1]
            kw = (
                {"position_ids": batch["position_ids"][row : row + 1]}
                if "position_ids" in batch
                else {"attention_mask": batch["attention_mask"][row : row + 1]}
            )
            packed = model(input_ids=ids, use_cache=False, **kw).logits[0]
            if strategy == "bfd":
                bounds = (batch["position_ids"][row] == 0).nonzero().flatten().tolist() + [ids.shape[1]]
            else:  # wrapped: a conversation starts at each first-turn role token after a closed turn
                bounds = (
                    [0]
                    + [
                        i
                        for i in range(1, ids.shape[1])
                        if int(ids[0, i]) in starts and int(ids[0, i - 1]) == tok.convert_tokens_to_ids("<|end|>")
                    ]
                    + [ids.shape[1]]
                )
            for a, b in zip(bounds[:-1], bounds[1:]):
                if a == b:
                    continue
                alone = model(input_ids=ids[:, a:b], use_cache=False).logits[0]
                diffs.append(float((packed[a:b] - alone).abs().max()))
    return diffs


def test_bfd_packed_conversations_do_not_see_each_other_and_wrapped_ones_do(tiny_base, conversations, tmp_path):
    """bfd packing (padding-free: position ids restart per conversation, no attention mask): on SDPA on a CPU each
    packed conversation's logits equal its logits alone. wrapped packing (a plain causal mask over the row): the
    conversations after the first in a row attend to the ones before (measured: far above float noise)."""
    trainer, tok, _, _ = _trainer(
        tiny_base,
        MULTI + conversations[:8],
        tmp_path / "bfd",
        packing=True,
        packing_strategy="bfd",
        max_length=256,
        batch_size=2,
    )
    assert trainer.padding_free and trainer.model.base_model.model.config._attn_implementation == "sdpa"
    bfd = _alone_vs_packed(trainer, tok, "bfd")
    assert len(bfd) == len(MULTI) + 8 and max(bfd) < 1e-4, bfd  # every conversation, several rows of 2+
    trainer, tok, _, _ = _trainer(
        tiny_base,
        MULTI + conversations[:8],
        tmp_path / "wrapped",
        packing=True,
        packing_strategy="wrapped",
        max_length=256,
        batch_size=2,
    )
    wrapped = _alone_vs_packed(trainer, tok, "wrapped")
    print(f"bfd max |diff| {max(bfd):.2e}; wrapped per conversation {[f'{d:.3f}' for d in wrapped]}")
    assert max(wrapped) > 1e-2  # the first conversation of a row is alone; the later ones are not


def test_new_role_rows_train_through_the_fused_lm_head(tiny_base, conversations, tmp_path):
    """LoRA with azllm's template: the 4 role-token rows are trainable token rows (peft), TRL's fused LM head reads
    them through peft's wrapper (azllm exposes the wrapper's bias), and after a few steps they moved while every
    other embedding row stayed."""
    from azllm.lora import embedding_rows

    trainer, tok, info, _ = _trainer(tiny_base, conversations, tmp_path, max_steps=3, eval_steps=3)
    new = info["added_tokens"]
    before, _ = embedding_rows(trainer.model)
    trainer.train()
    after, _ = embedding_rows(trainer.model)
    moved = (after - before).abs().sum(1)
    assert (moved[new] > 0).all() and float(moved[: min(new)].sum()) == 0.0


@pytest.fixture(scope="module")
def uninterrupted(tiny_base, tmp_path_factory):
    return entry_run(str(tiny_base), str(tmp_path_factory.mktemp("sft-full") / "run"), {})


def _losses(r):
    return {h["step"]: h["loss"] for h in r["curves"]["train"]}


@pytest.mark.slow  # ~15 s: a fresh process
def test_sigterm_writes_a_complete_checkpoint_and_the_restart_follows_the_same_curve(
    tiny_base, uninterrupted, tmp_path
):
    """A spot notice during step 6 (evaluations and checkpoints every 4 steps): step 6 finishes, checkpoint-6 is
    written complete, the process exits 0 with no results; the restart resumes there, follows the uninterrupted
    run's loss curve and ends with the same adapter."""
    from safetensors.torch import load_file

    from azllm.callbacks import latest_checkpoint

    out = tmp_path / "run"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"base": str(tiny_base), "output_dir": str(out), "term_at_step": 6}))
    p = subprocess.run(
        [sys.executable, str(REPO / "tests" / "sft_entry.py"), str(spec)], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {
        "interrupted": "SIGTERM",
        "steps": 6,
        "checkpoint": str(out / "checkpoint-6"),
    }
    ck = latest_checkpoint(out)
    assert ck.name == "checkpoint-6" and (ck / "adapter_model.safetensors").is_file()
    assert (ck / "optimizer.pt").is_file() and (ck / "trainer_state.json").is_file()
    assert not (out / "results.json").exists()
    r = entry_run(str(tiny_base), str(out), {})
    assert r["resumed_from"].endswith("checkpoint-6") and r["steps"] == 8
    a, b = _losses(uninterrupted), _losses(r)
    assert set(range(7, 9)) <= set(b) and all(b[s] == pytest.approx(a[s], abs=1e-5) for s in b)
    wa = load_file(Path(uninterrupted["final_dir"]) / "adapter_model.safetensors")
    wb = load_file(Path(r["final_dir"]) / "adapter_model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.allclose(wa[k], wb[k], atol=1e-6) for k in wa)


def test_the_run_keeps_the_best_checkpoint_and_saves_the_template(uninterrupted):
    """Held-out loss at step 0 and every 4 steps; the final model is the best checkpoint's; the final folder holds
    the adapter, the tokenizer and its chat template; results.json is written."""
    r = uninterrupted
    evals = {e["step"]: e["loss"] for e in r["curves"]["eval"]}
    assert {0, 4, 8} <= set(evals)
    assert r["best_eval_loss"] == pytest.approx(min(evals[4], evals[8]))
    assert r["eval_loss"] == pytest.approx(r["best_eval_loss"], abs=1e-6)
    final = Path(r["final_dir"])
    assert {"adapter_model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {p.name for p in final.iterdir()}
    assert "{% generation %}" in (final / "chat_template.jinja").read_text()
    assert json.loads((Path(r["output_dir"]) / "results.json").read_text())["key"] == "resume-test"
    assert 0 < r["mask"]["share"] < 1 and r["throughput"]["tokens_per_s"] > 0


def test_qlora_runs_with_the_repack_guard(tiny_base, conversations, tmp_path):
    """QLoRA: 4-bit NF4 base through azllm.lora.quantize_model (the CPU repack guard set on every layer), an
    evaluation (a no-grad forward) leaves the weights in the training layout, and the adapters train."""
    import bitsandbytes as bnb

    from azllm.lora import check_not_repacked

    trainer, tok, info, _ = _trainer(tiny_base, conversations[:10], tmp_path, method="qlora", max_steps=2, eval_steps=2)
    layers = [m for m in trainer.model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert layers and all(m.support_avx512bf16_for_cpu is False for m in layers)
    trainer.train()
    check_not_repacked(trainer.model)
    assert trainer.state.global_step == 2
    lora_b = [p for n, p in trainer.model.named_parameters() if "lora_B" in n]
    assert lora_b and any(float(p.abs().sum()) > 0 for p in lora_b)  # B starts at 0: the adapters trained


def test_the_lm_head_scores_only_labelled_positions_with_the_same_loss_and_gradients(
    tiny_base, conversations, tmp_path
):
    """``labelled_positions_only``: TRL's compact path on a CPU (only positions with a label go through the LM head)
    gives the loss and the gradients of its score-every-position path, and puts TRL's own check back on exit."""
    import trl.trainer.utils as tu

    from azllm.lifecycle import labelled_positions_only

    trainer, *_ = _trainer(tiny_base, conversations[:4], tmp_path, batch_size=4)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
    model = trainer.model.train()
    assert (batch["labels"] == -100).float().mean() > 0.25  # prompts and padding: positions the head may skip

    def loss_and_grads():
        model.zero_grad()
        out = model(**batch, fused_lm_head=True)
        loss = -out.log_probs.sum() / out.label_mask.sum()
        loss.backward()
        return loss.item(), [p.grad.clone() for p in model.parameters() if p.requires_grad]

    calls = []
    original = tu._use_triton
    tu._use_triton = lambda d: calls.append(d.type) or original(d)
    try:
        every, g_every = loss_and_grads()
        with labelled_positions_only():
            assert tu._use_triton(torch.device("cpu")) is True
            compact, g_compact = loss_and_grads()
        assert calls and tu._use_triton(torch.device("cpu")) is False
    finally:
        tu._use_triton = original
    assert abs(every - compact) < 1e-5
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g_every, g_compact))
