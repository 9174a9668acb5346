"""Scoring with lm-eval (azllm.evaluation.harness): acc, acc_norm and acc_mutual_info against an independent count
with plain
transformers, the tokenizer checks, task-name validation against lm-eval's registry, the BOS convention of every
tokenizer we export."""

import functools
import math

import pytest
import torch
from eval_helpers import eval_tokenizer_dir, hf_tok, task, tiny_folder, tiny_model  # noqa: F401

from azllm.evaluation.harness import (
    EvalModelError,
    UnknownTaskError,
    bos_convention,
    check_tokenizer,
    score,
    validate_task_names,
)
from azllm.evaluation.tasks import LOCAL_TASKS, task_rows


def _render(template: str, doc: dict) -> str:
    import jinja2

    return jinja2.Template(template, keep_trailing_newline=True).render(**doc)


@torch.no_grad()
def _option_lls(model, tok, context: str, choices: list[str], delim: str) -> list[float]:
    """The summed log-probability of each option's tokens after ``context`` (plain transformers); an empty context
    is the tokenizer's BOS, or its EOS when it has none (lm-eval's prefix token)."""
    ctx = (
        tok(context).input_ids if context else [tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id]
    )
    out = []
    for ch in choices:
        whole = tok(context + delim + ch).input_ids if context else ctx + tok(delim + ch).input_ids
        if context:
            assert whole[: len(ctx)] == ctx, "the option's tokens must follow the context's"
        cont = whole[len(ctx) :]
        logp = torch.log_softmax(model(torch.tensor([whole])).logits[0].float(), -1)
        out.append(sum(logp[len(ctx) + i - 1, t].item() for i, t in enumerate(cont)))
    return out


def _independent(model, tok, config: dict) -> tuple[list[list[float]], dict]:
    """Per item, each option's summed log-probability, then accuracy by the raw sum (acc), by the sum per character
    of the option (acc_norm) and by the sum less the option's unconditional log-probability (acc_mutual_info)."""
    rows = task_rows(config, "test")
    hits, lls = {"acc": 0, "acc_norm": 0, "acc_mutual_info": 0}, []
    delim = config.get("target_delimiter", " ")
    for doc in rows:
        context = config.get("description", "") + _render(config["doc_to_text"], doc)
        choices = config["doc_to_choice"]
        choices = choices if isinstance(choices, list) else doc["choices"]
        item = _option_lls(model, tok, context, choices, delim)
        prior = _option_lls(model, tok, "", choices, delim)
        gold = doc[config["doc_to_target"]]
        best = {
            "acc": item,
            "acc_norm": [ll / len(c) for ll, c in zip(item, choices)],
            "acc_mutual_info": [ll - p for ll, p in zip(item, prior)],
        }
        for k, v in best.items():
            hits[k] += max(range(len(v)), key=v.__getitem__) == gold
        lls.append(item)
    return lls, {k: v / len(rows) for k, v in hits.items()}


@pytest.mark.parametrize("name", ["sib200_az", "tumlu_az"])
def test_acc_acc_norm_and_mutual_info_equal_an_independent_count(name, tiny_model, hf_tok):
    (cfg,) = task(name, num_fewshot=0, first=None)
    lls, want = _independent(tiny_model, hf_tok, cfg)
    res = score(tiny_model, hf_tok, [cfg], batch_size=4, bootstrap_iters=1)
    t = res["tasks"][name]
    assert {k: t[k] for k in want} == want
    assert t["n"] == len(lls) and t["headline"] == "acc" and len(t["items"]) == len(lls)
    acc = want["acc"]
    assert t["acc_stderr"] == pytest.approx(math.sqrt(acc * (1 - acc) / (len(lls) - 1)))
    assert len(set(map(tuple, lls))) > 1  # not a degenerate model


def test_score_records_conventions_and_chance(tiny_model, hf_tok):
    cfgs = task("sib200_az") + task("mmlu_en")
    res = score(tiny_model, hf_tok, cfgs, batch_size=8, seed=3, bootstrap_iters=1)
    assert res["seed"] == 3 and res["lm_eval"].startswith("0.4")
    assert res["bos"] == {"bos_token": "<s>", "prepends_bos": False}
    assert res["tasks"]["sib200_az"]["chance"] == pytest.approx(1 / 7)
    assert res["tasks"]["mmlu_en"]["chance"] == 0.25 and res["tasks"]["mmlu_en"]["num_fewshot"] == 2
    assert res["tasks"]["mmlu_en"]["n"] == 8 == res["n_items"]["mmlu_en"]
    assert set(res["task_hashes"]) == {"sib200_az", "mmlu_en_marketing"}


def test_the_same_call_gives_the_same_scores(tiny_model, hf_tok):
    cfgs = task("tumlu_az", num_fewshot=1)
    a = score(tiny_model, hf_tok, cfgs, batch_size=8, seed=5, bootstrap_iters=1)
    b = score(tiny_model, hf_tok, cfgs, batch_size=3, seed=5, bootstrap_iters=1)
    assert a["tasks"]["tumlu_az"]["items"] == b["tasks"]["tumlu_az"]["items"]


def test_scoring_starts_no_process_for_lm_evals_environment_dump(tiny_model, hf_tok, monkeypatch):
    """lm-eval's ``add_env_info`` runs torch's ``collect_env`` (``pip list`` in a child process, ~1 s a call): the
    report records the environment itself, so a call to ``score`` starts no ``pip``, and puts lm-eval's own back
    (lm-eval's ``git describe`` stays)."""
    import subprocess

    import lm_eval.evaluator as ev

    started, popen, before = [], subprocess.Popen.__init__, ev.add_env_info

    def counted(self, args, *a, **kw):
        started.append(args)
        popen(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", counted)
    res = score(tiny_model, hf_tok, task("tumlu_az", first=2), batch_size=2, bootstrap_iters=1)
    pip = [a for a in started if "pip" in " ".join(map(str, a if isinstance(a, (list, tuple)) else [a]))]
    assert pip == [] and ev.add_env_info is before and res["tasks"]["tumlu_az"]["n"] == 2, started


def test_local_tasks_build_lm_evals_task_manager_once_and_without_its_registry(tiny_model, hf_tok, monkeypatch):
    """``simple_evaluate`` indexes lm-eval's ~14,700 task YAMLs (~7 s here) on every call unless it is handed a task
    manager: local task configs need none of them, and a second call reuses the first one's manager."""
    from lm_eval.tasks import TaskManager

    from azllm.evaluation import harness

    built, init = [], TaskManager.__init__

    def counted(self, *args, **kwargs):
        built.append(kwargs.get("include_defaults", True))
        init(self, *args, **kwargs)

    monkeypatch.setattr(TaskManager, "__init__", counted)
    # an empty cache for this test alone (the session's registry index, lm_eval_registry, stays built)
    monkeypatch.setattr(harness, "_task_manager", functools.lru_cache(maxsize=2)(harness._task_manager.__wrapped__))
    cfgs = task("tumlu_az", num_fewshot=1)
    a, b = (score(tiny_model, hf_tok, cfgs, batch_size=8, seed=5, bootstrap_iters=1) for _ in range(2))
    assert built == [False]  # one manager, no registry (before: two, each indexing the registry)
    assert a["tasks"]["tumlu_az"]["items"] == b["tasks"]["tumlu_az"]["items"]


def test_a_tokenizer_without_eos_is_refused_and_a_missing_pad_is_set(hf_tok):
    import copy

    t = copy.deepcopy(hf_tok)
    t.pad_token = None
    check_tokenizer(t)
    assert t.pad_token_id == t.eos_token_id
    t.eos_token = None
    with pytest.raises(EvalModelError, match="no eos token"):
        check_tokenizer(t, "model X")


def test_unknown_task_names_list_close_matches(lm_eval_registry):
    validate_task_names(
        [
            "sib200_az",
            "belebele_azj_Latn",
            "include_base_44_azerbaijani",
            "global_piqa_nonparallel_cloze_azj_latn",
            "mmlu",
            "hellaswag",
            "arc_easy",
        ],
        list(LOCAL_TASKS),
    )
    with pytest.raises(UnknownTaskError, match=r"'belebele_azj_latn' \(close: belebele_azj_Latn"):
        validate_task_names(["belebele_azj_latn"], list(LOCAL_TASKS))
    with pytest.raises(UnknownTaskError, match=r"'sib200_azz' \(close: sib200_az"):
        validate_task_names(["sib200_azz"], list(LOCAL_TASKS))


def test_every_exported_tokenizer_declares_the_bos_its_model_was_trained_with(eval_tokenizer_dir, tmp_path):
    """azllm's token files hold no BOS (a document, then EOS): the Hugging Face default encoding of our own, an
    extended and a swapped-in tokenizer must give exactly the ids training saw."""
    from transformers import AutoTokenizer

    from azllm.tokenizer import load_tokenizer
    from azllm.vocab import extend_tokenizer

    docs = ["Azərbaycan dili türk dillərinin oğuz qrupuna daxildir."] * 50 + ["Evlərimizdən çıxdıq."] * 50
    extended = tmp_path / "ext"
    extend_tokenizer(eval_tokenizer_dir, docs, 20, extended)
    text = "Bakı Azərbaycanın paytaxtıdır. Salam!"
    for folder in (eval_tokenizer_dir, extended):
        hf = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        assert bos_convention(hf)["prepends_bos"] is False
        assert hf(text).input_ids == load_tokenizer(folder).encode(text)


def test_the_generative_tumlu_variant_scores_the_answer_letter(tiny_model, hf_tok):
    from azllm.evaluation.tasks import letter_match

    assert letter_match({"letter": "B"}, ["b"]) == {"exact_match": 1.0}
    assert letter_match({"letter": "B"}, ["[invalid]"]) == {"exact_match": 0.0}
    res = score(tiny_model, hf_tok, task("tumlu_az_cot", first=2), batch_size=2, bootstrap_iters=1)
    t = res["tasks"]["tumlu_az_cot"]
    assert t["headline"] == "exact_match" and t["n"] == 2 and t["value"] in (0.0, 0.5, 1.0)
    assert t["num_fewshot"] == 1 and t["chance"] is None
