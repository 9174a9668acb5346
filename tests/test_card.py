"""azllm.card: the cards parse with huggingface_hub's own classes, the model-index holds every score as given, and
the text says what did not move, what fell and what sits at chance."""

from huggingface_hub import DatasetCard, ModelCard
from huggingface_hub.repocard_data import model_index_to_eval_results

from azllm import card as c
from azllm.licenses import DataInput

SCORES = [
    c.Score(task="preference accuracy (24 held-out pairs)", before=0.5, after=0.958, delta=0.458, delta_se=0.102,
            verdict="gain", chance=0.5),
    c.Score(task="chrF++ (24 held-out answers)", before=10.62, after=9.1, delta=-1.52, delta_se=1.0,
            verdict="within noise", original=8.58),
    c.Score(task="mean answer words", before=12.0, after=14.0, delta=2.0),
    c.Score(task="tumlu_az", metric="acc", n=35, chance=0.25, before=0.2, after=0.2, after_se=0.07, delta=0.0,
            delta_se=0.03, verdict="within noise", split="dev"),
    c.Score(task="flores_az_en", metric="chrf", n=100, before=8.0, after=4.0, after_se=0.5, delta=-4.0, delta_se=0.7,
            verdict="loss", split="dev"),
]  # fmt: skip


def facts(**over):
    base = dict(
        repo="me/az-135m",
        base_model="HuggingFaceTB/SmolLM2-135M-Instruct",
        license="Apache-2.0",
        stages=[c.StageFacts(stage="sft", settings="lora, 60 steps", seconds=406.2)],
        scores=SCORES,
        inputs=[DataInput("sft", "sft.sources.native", "data/az/sft/native_train.jsonl", "MIT", "azllm")],
        run={"run_name": "smollm2", "git_commit": "d83c0195d6e1abc", "params_hash": "97c686d0", "machine": {}},
        compared_with="the SFT model",
    )
    return c.ModelFacts(**{**base, **over})


def test_the_model_index_holds_every_score_and_no_length_or_rate():
    card = ModelCard(c.model_card(facts()))
    name, results = model_index_to_eval_results(card.data.to_dict()["model-index"])
    assert name == "az-135m"
    assert [(r.dataset_name, r.metric_type, r.metric_value) for r in results] == [
        ("preference accuracy (24 held-out pairs)", "accuracy", 0.958),
        ("chrF++ (24 held-out answers)", "chrf", 9.1),
        ("TUMLU-mini", "accuracy", 0.2),
        ("FLORES-200 az→en", "chrf", 4.0),
    ]
    assert results[3].dataset_type == "openlanguagedata/flores_plus" and results[3].dataset_split == "dev"
    assert (card.data.base_model, card.data.license, card.data.library_name) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "apache-2.0",
        "transformers",
    )


def test_the_run_line_names_the_machine_that_utils_machine_info_recorded():
    machine = {"processor": "AMD EPYC", "cpu_count": 16, "cuda": True, "gpus": ["NVIDIA H200"]}
    text = c.model_card(facts(run={**facts().run, "time_utc": "2026-12-04T21:19:28Z", "machine": machine}))
    assert "2026-12-04T21:19:28Z on NVIDIA H200, AMD EPYC (16 cores)." in text
    assert "on a machine not recorded." in c.model_card(facts())


def test_the_text_names_what_did_not_move_what_fell_and_what_sits_at_chance():
    text = ModelCard(c.model_card(facts())).text
    assert "- Did not move beyond the noise against the SFT model: chrF++ (24 held-out answers), tumlu_az." in text
    assert "- Moved down against the SFT model: flores_az_en." in text
    assert "- At or below chance: tumlu_az." in text
    assert "| chrF++ (24 held-out answers) | — | — | 8.58 | 10.62 | 9.10 (−1.52 ± 1.00 ·) | — |" in text
    assert "| sft | lora, 60 steps | 406 s |" in text and "`d83c0195d6e1`" in text
    assert "| sft | sft.sources.native | `data/az/sft/native_train.jsonl` | MIT |" in text


def test_a_license_the_hub_does_not_list_is_other_with_its_name():
    card = ModelCard(c.model_card(facts(license="LicenseRef-official-texts")))
    assert (card.data.license, card.data.license_name) == ("other", "licenseref-official-texts")


def test_a_gguf_repository_card_points_at_the_model_and_has_no_transformers_snippet():
    gguf = [c.GGUFFile(name="az-135m-Q4_K_M.gguf", quant="Q4_K_M", size_bytes=105_000_000, bits_per_weight=6.1)]
    text = c.model_card(facts(repo="me/az-135m-GGUF", base_model="me/az-135m", weights=False, gguf=gguf))
    card = ModelCard(text)
    assert card.data.library_name == "gguf" and card.data.base_model == "me/az-135m"
    assert "from_pretrained" not in text and "llama-cli -hf me/az-135m-GGUF:Q4_K_M" in text


def test_the_dataset_card_parses_with_its_counts_and_licenses():
    f = c.DatasetFacts(
        repo="me/az-corpus",
        sources=[{"source": "wiki", "input_docs": 10, "quality_docs": 2, "kept_docs": 8, "kept_bytes": 4000}],
        steps=["quality"],
        decontamination={"flores": "abc"},
        decontamination_n=13,
        inputs=[DataInput("corpus", "data.train", "data/az/train/wiki_literature.txt", "CC-BY-SA-4.0", "azllm")],
        run={"run_name": "r", "git_commit": "c", "params_hash": "h"},
        shards=["data/train-00000-of-00001.parquet"],
    )
    card = DatasetCard(c.dataset_card(f))
    assert card.data.license == "cc-by-sa-4.0" and card.data.size_categories == "n<1K"
    assert card.data.configs[0]["data_files"][0]["path"] == "data/*.parquet"
    assert "| wiki | 10 | 2 | 8 | 0.00 | 100.0% |" in card.text and "`flores`" in card.text
