"""azllm.publish: the refusals (a repository name, a token, an incomplete export), staging a folder whole, the
corpus as parquet, the plan, and the upload through the real huggingface_hub client with only its network boundary
replaced (tests/hub_helpers.py): which requests it sends, weights and GGUF as large files."""

import json

import pytest

from azllm import publish as pub


@pytest.mark.parametrize("bad", ["name-only", "a/b/c", "", "me/bad name", "me/-x-", "me/x..y"])
def test_a_repository_that_is_not_owner_slash_name_is_refused(bad):
    with pytest.raises(pub.PublishError, match="repository"):
        pub.check_repo_id(bad)
    assert pub.check_repo_id("azllm-user/az-135m.v2") == "azllm-user/az-135m.v2"


def test_the_token_comes_from_hf_token_or_the_cached_login_and_its_lack_is_a_clear_error(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "token"))
    with pytest.raises(pub.PublishError, match="HF_TOKEN.*hf auth login"):
        pub.require_token()
    (tmp_path / "token").write_text("hf_cachedlogin\n")
    assert pub.require_token() == "hf_cachedlogin"
    monkeypatch.setenv("HF_TOKEN", "hf_fromenv")
    assert pub.require_token() == "hf_fromenv"


def _export(folder, weights=True, tokenizer=True):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    if weights:
        (folder / "model.safetensors").write_bytes(b"\0" * 64)
    if tokenizer:
        (folder / "tokenizer.json").write_text("{}")
        (folder / "chat_template.jinja").write_text("{{ x }}")
    return folder


def test_an_incomplete_export_names_what_is_missing(tmp_path):
    ok = pub.export_files(_export(tmp_path / "ok"))
    assert sorted(ok) == ["chat_template.jinja", "config.json", "model.safetensors", "tokenizer.json"]
    with pytest.raises(pub.PublishError, match="missing model.safetensors"):
        pub.export_files(_export(tmp_path / "noweights", weights=False))
    with pytest.raises(pub.PublishError, match="missing a tokenizer"):
        pub.export_files(_export(tmp_path / "notok", tokenizer=False))
    sharded = _export(tmp_path / "sharded", weights=False)
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    (sharded / "model-00001-of-00002.safetensors").write_bytes(b"1")
    with pytest.raises(pub.PublishError, match="missing model-00002-of-00002.safetensors"):
        pub.export_files(sharded)
    (sharded / "model-00002-of-00002.safetensors").write_bytes(b"2")
    assert "model.safetensors.index.json" in pub.export_files(sharded)
    adapter = _export(tmp_path / "adapter")
    (adapter / "adapter_config.json").write_text("{}")
    with pytest.raises(pub.PublishError, match="unmerged adapter"):
        pub.export_files(adapter)


def test_staging_writes_the_whole_folder_or_leaves_the_old_one(tmp_path):
    files = pub.export_files(_export(tmp_path / "m"))
    out = pub.stage(files, "# card\n", tmp_path / "stage" / "model")
    assert sorted(p.name for p in out.iterdir()) == sorted([*files, "README.md"])
    assert (out / "README.md").read_text() == "# card\n"
    with pytest.raises(pub.PublishError, match="missing"):
        pub.stage({**files, "x.gguf": tmp_path / "nope.gguf"}, "# new\n", out)
    assert (out / "README.md").read_text() == "# card\n"  # the failed staging left the complete one
    assert [p.name for p in (tmp_path / "stage").iterdir()] == ["model"]  # and no half-built folder


def test_the_corpus_becomes_parquet_with_text_id_and_source_only(tmp_path):
    import pyarrow.parquet as pq

    shard = tmp_path / "00000.jsonl"
    rows = [
        {"text": f"mətn {i}", "id": f"s/{i}", "metadata": {"source": "s", "file_path": "/secret/x"}} for i in range(5)
    ]
    shard.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    files = pub.corpus_parquet([shard], tmp_path / "pq", rows_per_file=2)
    assert sorted(files) == [f"data/train-0000{i}-of-00003.parquet" for i in range(3)]
    table = [r for f in sorted(files) for r in pq.read_table(files[f]).to_pylist()]
    assert table == [{"text": r["text"], "id": r["id"], "source": "s"} for r in rows]


@pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")  # huggingface_hub's LFS PUT
def test_the_upload_sends_weights_and_gguf_as_large_files_through_the_real_client(hub, tmp_path):
    files = pub.export_files(_export(tmp_path / "m"))
    gguf = tmp_path / "m-Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF" + b"\1" * 100)
    model = pub.Staged(
        "me/az", "model", pub.stage({**files, "az-Q4_K_M.gguf": gguf}, "---\n---\n# az\n", tmp_path / "s1"), True
    )
    data = pub.Staged(
        "me/az-corpus", "dataset", pub.stage({"data/train.parquet": gguf}, "# c\n", tmp_path / "s2"), False
    )
    urls = pub.upload([model, data], "hf_test")
    assert urls == [
        "https://huggingface.co/me/az/commit/c0ffee",
        "https://huggingface.co/datasets/me/az-corpus/commit/c0ffee",
    ]
    assert [(c["name"], c["organization"], c["visibility"], c.get("type", "model")) for c in hub.created] == [
        ("az", "me", "private", "model"),
        ("az-corpus", "me", "public", "dataset"),
    ]
    committed = hub.committed()
    assert committed["model.safetensors"] == committed["az-Q4_K_M.gguf"] == committed["data/train.parquet"] == "lfsFile"
    assert committed["config.json"] == committed["README.md"] == committed["tokenizer.json"] == "file"
    assert len(hub.lfs_puts()) == 3  # the weights, the GGUF file, the parquet shard: each PUT to the large-file store
    hub_calls = [url for _, url, _ in hub.calls if "huggingface.co" in url]
    assert all("/api/" in u or ".git/info/lfs" in u for u in hub_calls)
    plan = pub.plan([model])
    assert plan[0].startswith("model me/az (private): 6 files")
    assert any(line.strip().startswith("model.safetensors") and "(large file)" in line for line in plan)
    assert any(line.strip().startswith("config.json") and "large" not in line for line in plan)
