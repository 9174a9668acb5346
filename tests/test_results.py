"""The README's results are a recorded run's, rendered (azllm.results, ``azllm results``): the committed
record re-rendered equals the README's block, number for number; a record keeps where it came from."""

import json

from azllm.cli import main
from azllm.record import read_record, run_record
from azllm.results import deploy_markdown, headline, markdown, readme_block, wall_time
from conftest import REPO

RECORD = REPO / "docs" / "smollm2_long.json"


def test_the_readme_results_are_the_recorded_run_rendered(capsys):
    """The README's block is the quick study's headline, as `azllm results docs/smollm2.json --headline` prints it
    (the README shows that command); docs/results.md holds every record's tables."""
    quick_path = REPO / "docs" / "smollm2.json"
    block = readme_block((REPO / "README.md").read_text(encoding="utf-8"), "smollm2")
    assert block == headline(read_record(quick_path)) and "The cycle's last model against the original base" in block
    assert "python -m azllm results docs/smollm2.json --headline" in (REPO / "README.md").read_text(encoding="utf-8")
    assert main(["results", str(quick_path), "--headline"]) == 0
    assert capsys.readouterr().out == block
    rec = read_record(RECORD)
    every = readme_block((REPO / "docs" / "results.md").read_text(encoding="utf-8"), "smollm2-long")
    assert every == markdown(rec)
    assert main(["results", str(RECORD)]) == 0
    assert capsys.readouterr().out == every
    details = readme_block((REPO / "docs" / "results.md").read_text(encoding="utf-8"), "smollm2-deploy")
    assert details == deploy_markdown(read_record(quick_path)) and "| student | Q4_K_M |" in details
    assert rec["run"]["git_commit"] and rec["run"]["params_hash"] and rec["run"]["machine"]
    default = readme_block((REPO / "docs" / "results.md").read_text(encoding="utf-8"), "default")
    assert default == markdown(read_record(REPO / "docs" / "default.json")) and "**The corpus stage (00)**" in default
    took = readme_block((REPO / "README.md").read_text(encoding="utf-8"), "wall-time")
    assert took == wall_time(read_record(REPO / "docs" / "default.json")) + "\n" and "for 10 pages" in took
    control = read_record(REPO / "docs" / "smollm2_noreplay.json")
    noreplay = readme_block((REPO / "docs" / "results.md").read_text(encoding="utf-8"), "smollm2-noreplay")
    assert noreplay == markdown(control) and control["adapt"]["runs"][0]["way"] == "extend"
    quick = read_record(REPO / "docs" / "smollm2.json")
    block = readme_block((REPO / "docs" / "results.md").read_text(encoding="utf-8"), "smollm2-quick")
    assert block == markdown(quick) and quick["run"]["run_name"] == "smollm2" and "**Preference tuning (09)**" in block
    assert [n["name"] for n in rec["notebooks"]] == [
        "05_adapt",
        "06_evaluate",
        "07_sft",
        "09_preference",
    ]


def test_the_preference_sweep_is_rendered_and_the_quick_study_ships_its_choice():
    """docs/smollm2_dpo_sweep.json: rendered into docs/results.md by the one renderer; its chosen variant is what
    the rule (prefer.chosen_setting) picks from its rows, and both studies' params ship that variant's settings."""
    from azllm.config import load_params
    from azllm.recipes.prefer import chosen_setting

    sweep = read_record(REPO / "docs" / "smollm2_dpo_sweep.json")
    block = readme_block((REPO / "docs" / "results.md").read_text(encoding="utf-8"), "smollm2-dpo-sweep")
    assert block == markdown(sweep) and f"Chosen: **{sweep['chosen']}**" in block
    chosen = chosen_setting(sweep["variants"])
    assert chosen["name"] == sweep["chosen"] and len(sweep["variants"]) == 4
    for study in ("smollm2.yaml", "smollm2_long.yaml"):
        shipped = load_params(REPO / "params" / study).preference
        assert {k: getattr(shipped, k) for k in chosen["settings"]} == chosen["settings"], study


def test_one_changed_number_changes_the_rendering():
    rec = read_record(RECORD)
    before = markdown(rec)
    rec["adapt"]["runs"][0]["az_bpb_after"] += 0.001
    assert markdown(rec) != before
    rec = read_record(REPO / "docs" / "smollm2.json")  # the quick study deploys; the long one is the cycle alone
    speed = deploy_markdown(rec)
    rec["deploy"]["speed"][0]["gen_tokens_per_s"] += 1
    assert deploy_markdown(rec) != speed


def test_a_record_is_kept_from_a_run_folder_and_read_back(tmp_path, capsys):
    doc = {
        "run": {"run_name": "r", "git_commit": "c0ffee0", "params_hash": "h" * 16, "time_utc": "t",
                "machine": {"cpu": "x"}},
        "notebooks": [{"name": "07_sft", "seconds": 60.0, "status": "ok", "html": "07_sft.html"}],
        "artifacts": {"sft_export": "/a/export"},
        "metrics": {
            "sft": {
                "chrf_before_after": {"task": "chrF++ (held-out answers)", "metric": "chrf++", "n": 24, "before": 9.1,
                                      "after": 10.4, "delta": 1.3, "delta_se": 0.5, "verdict": "gain"},
                "tasks_before_after": [],
                "samples": ["not read by the tables"],
            }
        },
    }  # fmt: skip
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_text(json.dumps(doc))
    assert main(["results", str(tmp_path / "run"), "--record", str(tmp_path / "rec.json")]) == 0
    out = capsys.readouterr().out
    assert "| chrF++ (held-out answers) | 24 | — | 9.10 | 10.40 (+1.30 ± 0.50 ▲) | — |" in out and "`sft_export`" in out
    kept = json.loads((tmp_path / "rec.json").read_text())
    assert (
        kept == run_record(doc) and "samples" not in kept["sft"] and markdown(read_record(tmp_path / "rec.json")) == out
    )
    assert main(["results", str(tmp_path / "missing")]) == 2


def test_the_stages_the_power_and_the_genres_are_rendered():
    rec = {
        "run": {"run_name": "r", "git_commit": "c0ffee0", "params_hash": "h", "time_utc": "t", "machine": {}},
        "adapt": {"genres": [{"origin": "legal_codes.txt", "share": 0.1}, {"origin": "replay: train.txt",
                                                                           "share": 0.25}]},
        "evaluate": {"power": [{"task": "sib200_az", "metric": "acc", "n": 420, "chance": 0.143, "median_se": 0.02,
                                "mde": 0.056, "largest_change": 0.03}]},
        "sft": {
            "decoding": {"greedy": True, "max_new_tokens": 48, "repetition_penalty": 1.2},
            "stages": [
                {"model": "original base", "n": 24, "chrf": 10.0, "delta": None, "delta_se": None, "mde": None,
                 "verdict": None, "mean_words": 20.0, "loop_share": 0.25, "stopped_share": 0.5},
                {"model": "adapted + SFT", "n": 24, "chrf": 12.5, "delta": 2.5, "delta_se": 1.0, "mde": 2.8,
                 "verdict": "gain", "mean_words": 15.0, "loop_share": 0.0, "stopped_share": 1.0},
            ],
        },
    }  # fmt: skip
    out = markdown(rec)
    assert "legal_codes.txt 10.0%, replay: train.txt 25.0%" in out
    assert "| sib200_az | 420 | 0.143 | 0.020 | 0.056 | 0.030 |" in out
    assert "repetition penalty 1.2" in out and "paired against the original base" in out
    assert "| original base | 10.00 | — | 20.0 | 25% | 50% |" in out
    assert "| adapted + SFT | 12.50 (+2.50 ± 1.00 ▲) | 2.80 | 15.0 | 0% | 100% |" in out


def test_the_default_reports_first_pages_are_rendered_and_recorded():
    """Pages 00-04 of a run (the default report's corpus, tokenizers, model and training techniques) render from the
    same record, trimmed to what the tables read."""
    doc = {
        "run": {"run_name": "default", "git_commit": "c0ffee0", "params_hash": "h", "time_utc": "t", "machine": {}},
        "notebooks": [{"name": "00_corpus", "seconds": 61.0, "status": "ok"}],
        "artifacts": {},
        "metrics": {
            "corpus": {
                "sizes": {"input": {"mb": 27.12, "documents": 103237}, "cleaned": {"mb": 23.06}, "mix": {"mb": 8.37}},
                "counts": {"by_source": {
                    "legal_codes": {"input_bytes": 12_020_000, "input_docs": 9000, "quality_docs": 3071,
                                    "quality_bytes": 1_680_000, "kept_bytes": 9_170_000},
                    "total": {"input_bytes": 27_120_000, "input_docs": 103237, "quality_docs": 3880,
                              "quality_bytes": 2_230_000, "kept_bytes": 23_060_000},
                }},
                "mix": [{"source": "legal_codes", "mix_mb": 1.0}],
                "performance": {"mb_per_s_per_core": 0.5, "workers": 2, "executor": "local"},
                "decontamination_hits": 0,
                "clusters": ["not read by the tables"],
            },
            "tokenizers": {
                "best": "bpe-32k", "fertility_target": 1.45,
                "table": [
                    {"tokenizer": "bpe-32k", "eval_set": "flores", "vocab_size": 32000, "fertility": 1.44,
                     "roundtrip": 1.0, "chars_per_token": 4.1},
                    {"tokenizer": "gpt2", "eval_set": "flores", "vocab_size": 50257, "fertility": 4.85,
                     "roundtrip": 1.0},
                ],
                "recipe": [{"step": "as found", "corpus_mb": 16.3, "fertility": {"flores": 1.58}}],
                "lexicon": {"unimorph": {"n": 7046, "recall": 0.952, "precision": 0.791, "early": [["lik", 3, "x"]]},
                            "seconds": 3.1},
            },
            "train": {"source": "random init", "method": "full", "main_steps": 400, "main_parameters": 1_800_000,
                      "final": {"flores": {"bpb": 2.36, "uniform_bpb": 2.924, "loss": 7.25}}},
            "benchmark": {"device": "cpu", "batch": 4, "seq": 256, "variants": [
                {"variant": "lora", "status": "ok", "tokens_per_s_median": 900.0, "speed_ratio": 0.9,
                 "peak_mb_median": 512.0, "memory_ratio": 0.8, "loss_first": 9.0, "loss_last": 8.5}]},
        },
    }  # fmt: skip
    rec = run_record(doc)
    assert "clusters" not in rec["corpus"] and rec["tokenizers"]["lexicon"] == {
        "unimorph": {"n": 7046, "recall": 0.952, "precision": 0.791}
    }
    assert all("chars_per_token" not in r for r in rec["tokenizers"]["table"])
    out = markdown(rec)
    assert "27.12 MB in 103,237 documents, 23.06 MB kept, 8.37 MB in the training mix" in out
    assert "| legal_codes | 12.02 | 3,071 / 1.68 | 9.17 | 1.00 |" in out
    assert "| **total** | 27.12 | 3,880 / 2.23 | 23.06 | 1.00 |" in out
    assert out.index("| bpe-32k | 32,000 | 1.440 | 100.0% |") < out.index("| gpt2 | 50,257 | 4.850 | 100.0% |")
    assert "| as found | 16.30 | 1.580 |" in out and "unimorph (7,046 forms) recall 0.952, precision 0.791" in out
    assert "| flores | 2.360 | 2.924 | 7.250 |" in out and "1,800,000 parameters, full, 400 steps" in out
    assert "| lora | ok | 900 | 0.90 | 512.0 | 0.80 | 9.000 → 8.500 |" in out


def test_the_preference_title_names_an_sft_term_when_there_is_one():
    row = {"measure": "preference accuracy (24 held-out pairs)", "before": 0.5, "after": 0.9, "delta": 0.4,
           "delta_se": 0.1, "mde": 0.28, "verdict": "gain"}  # fmt: skip
    rec = {"preference": {"method": "dpo", "train_method": "lora", "steps": 24, "judgement": [row]}}
    assert "DPO (lora, 24 steps), the SFT model" in markdown(rec)
    rec["preference"]["sft_weight"] = 1.0
    assert "DPO (lora, 24 steps, plus 1.0 × the chosen answers' cross-entropy), the SFT model" in markdown(rec)


def test_the_cycle_s_last_model_against_the_original_is_rendered_with_its_chain():
    """preference.against_original (azllm.recipes.prefer.against_original): the rows original -> last model with
    their chance levels, and each stage against the original and against the stage before."""
    chain = [
        {"model": "original base", "n": 50, "chrf": 10.0, "delta": None, "chance": 18.8},
        {
            "model": "adapted + SFT",
            "n": 50,
            "chrf": 12.0,
            "delta": 2.0,
            "delta_se": 0.8,
            "verdict": "gain",
            "previous": "original base",
            "delta_previous": 2.0,
            "delta_previous_se": 0.8,
            "verdict_previous": "gain",
            "mde_previous": 2.24,
        },
        {
            "model": "adapted + SFT + preference",
            "n": 50,
            "chrf": 11.5,
            "delta": 1.5,
            "delta_se": 0.9,
            "verdict": "within noise",
            "previous": "adapted + SFT",
            "delta_previous": -0.5,
            "delta_previous_se": 0.4,
            "verdict_previous": "within noise",
            "mde_previous": 1.12,
        },
    ]
    rows = [
        {
            "task": "chrF++ (held-out answers)",
            "metric": "chrf++",
            "n": 50,
            "before": 10.0,
            "after": 11.5,
            "delta": 1.5,
            "delta_se": 0.9,
            "verdict": "within noise",
            "mde": 2.52,
            "chance": 18.8,
        },
        {
            "task": "flores_az_en",
            "metric": "chrf",
            "n": 200,
            "before": 12.9,
            "after": 6.0,
            "delta": -6.9,
            "delta_se": 0.7,
            "verdict": "loss",
            "mde": 1.96,
            "chance": 15.58,
        },
    ]
    rec = {
        "run": {"run_name": "r", "git_commit": "c0ffee0", "params_hash": "h", "time_utc": "t", "machine": {}},
        "preference": {"method": "dpo", "judgement": [], "tasks_before_after": [],
                       "against_original": {"chain": chain, "rows": rows}},
    }  # fmt: skip
    out = markdown(rec)
    assert "**The cycle's last model against the original base (09)**" in out and "Read back after" not in out
    rec["preference"]["against_original"]["note"] = "Read back after the run."  # where it was computed apart
    assert "on the same held-out items. Read back after the run." in markdown(rec)
    out = markdown({**rec, "preference": {**rec["preference"], "against_original": {"chain": chain, "rows": rows}}})
    assert headline(rec).startswith("Run `r` at commit c0ffee0") is False  # no pages: the section alone
    assert headline(rec).startswith("**The cycle's last model") and headline({"run": rec["run"]}) == "\n"
    assert "| chrF++ (held-out answers) | 50 | 18.80 | 10.00 | 11.50 (+1.50 ± 0.90 ·) | 2.52 |" in out
    assert "| flores_az_en | 200 | 15.58 | 12.90 | 6.00 (−6.90 ± 0.70 ▼) | 1.96 |" in out
    assert "| original base | 10.00 | — | — | — |" in out
    assert "| adapted + SFT + preference | 11.50 | (+1.50 ± 0.90 ·) | adapted + SFT (−0.50 ± 0.40 ·) | 1.12 |" in out


def test_the_quick_study_renders_its_forecast_and_older_records_render_without_one():
    """docs/smollm2.json keeps notebook 05's curves read forward (adapt.one_more_hour); the renderer shows each
    Azerbaijani row's numbers, and the replay control's record (made before the forecast existed) renders without the
    table."""
    quick = read_record(REPO / "docs" / "smollm2.json")
    rows = [r for r in quick["adapt"]["one_more_hour"] if r["language"] == "az"]
    text = markdown(quick)
    assert "**Still learning? One more hour (05)**" in text and len(rows) == len(quick["adapt"]["runs"]) >= 1
    for r in rows:
        assert f"| {r['way']} / {r['method']} | {r['last_step']:,} | " in text
        assert f"{r['last_bpb']:.3f} → {r['bpb_after']:.3f} (+{r['more_steps']:,} steps" in text
    older = read_record(REPO / "docs" / "smollm2_noreplay.json")
    assert older["adapt"]["runs"] and "one_more_hour" not in older["adapt"] and "One more hour" not in markdown(older)
