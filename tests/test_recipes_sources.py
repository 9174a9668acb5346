"""Which data a run gets (azllm.recipes.sources): local files, the hub (with and without HF_TOKEN) or the shipped
sample, and a sample run's pages that say so in their first line."""

import json

import nbformat
import yaml
from nbformat.v4 import new_code_cell, new_notebook

from azllm.config import load_params
from azllm.recipes import sources
from azllm.recipes.paths import Paths
from conftest import FIXTURES, REPO


def test_a_data_root_changes_nothing(monkeypatch):
    cfg = load_params(None, overrides={"data": {"root": str(FIXTURES)}})
    assert sources.choose(cfg, probe=lambda: 1 / 0) == {"mode": "local", "overrides": {}, "notes": []}


def test_the_hub_without_a_token_drops_what_is_gated(monkeypatch):
    monkeypatch.setenv("AZLLM_DATA_ROOT", "")  # set but empty: no data root
    cfg = load_params(None)
    d = sources.choose(cfg, environ={}, probe=lambda: True)
    assert d["mode"] == "hub"
    flores = d["overrides"]["data"]["eval"]["flores"]
    assert flores["path"].startswith(str(sources.SAMPLE_ROOT)) and flores["hub"] is None
    assert d["overrides"]["data"]["parallel"]["flores"]["en"]["path"].endswith("flores200.dev.eng_Latn.txt")
    assert "llama3" not in d["overrides"]["baselines"] and "gpt2" in d["overrides"]["baselines"]
    assert d["overrides"]["corpus"] == {"count_with": None}  # llama3 counted the tokens: gated
    assert any("gated" in n and "HF_TOKEN" in n for n in d["notes"])
    assert load_params(None, overrides=d["overrides"])  # the overrides are valid params
    with_token = sources.choose(cfg, environ={"HF_TOKEN": "hf_x"}, probe=lambda: True)
    assert with_token["mode"] == "hub" and with_token["overrides"] == {}


def test_no_root_no_hub_is_the_sample(monkeypatch):
    monkeypatch.setenv("AZLLM_DATA_ROOT", "")  # set but empty: no data root
    d = sources.choose(load_params(REPO / "params/default.yaml"), environ={}, probe=lambda: False)
    assert d["mode"] == "sample" and sources.banner(d).startswith("SAMPLE DATA")
    cfg = load_params(None, overrides=d["overrides"])
    assert Paths(cfg).data_root == sources.SAMPLE_ROOT
    assert cfg.baselines == {} and cfg.corpus.count_with is None  # the sample ships no tokenizer files
    assert cfg.adapt.extend_bases == []
    for src in (cfg.data.train, *cfg.data.eval.values()):  # every default source has files in the sample
        assert list(sources.SAMPLE_ROOT.glob(src.path)), src.path
    assert (sources.SAMPLE_ROOT / cfg.adapt.english.path).is_file()


def test_hub_reachable_honours_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert sources.hub_reachable() is False


def test_every_page_of_a_sample_run_says_so_first(tmp_path, monkeypatch):
    from azllm.report import run_report

    monkeypatch.setenv("AZLLM_DATA_ROOT", "")  # set but empty: no data root
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    nb = new_notebook(
        cells=[
            new_code_cell('params_file = ""\nout_dir = ""', metadata={"tags": ["parameters"]}),
            new_code_cell(
                "from azllm import recipes\nfrom azllm.recipes.paths import Paths\n"
                "print('root', Paths(recipes.load(params_file)).data_root)"
            ),
        ]
    )
    nbformat.write(nb, str(nb_dir / "page.ipynb"))
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"run_name": "s", "notebooks": ["page"]}))
    run_dir, ok = run_report(params, reports_dir=tmp_path / "reports", notebooks_dir=nb_dir)
    assert ok
    for page in ("page.html", "index.html"):
        body = (run_dir / page).read_text()
        first = body[body.index("<body") :]
        assert first[first.index(">") + 1 :].lstrip().startswith("<p style="), page
        assert first.index("SAMPLE DATA") < first.index("</p>"), page
    assert f"root {sources.SAMPLE_ROOT}" in (run_dir / "page.html").read_text()
    meta = json.loads((run_dir / "metrics.json").read_text())["run"]
    assert meta["data"]["mode"] == "sample" and meta["data_root"] == str(sources.SAMPLE_ROOT)
