"""Params sections -> the library's specs (azllm.recipes.specs): the specs carry no defaults of the config's, every
spec field is a params key (or a value the recipe decides), and each spec built from the default params equals the
config's defaults field by field."""

import dataclasses

import pytest

from azllm.assemble import ModelSpec
from azllm.config import load_params
from azllm.recipes.specs import build_spec, spec_sources
from azllm.sft.train import SftSpec
from azllm.train import TrainSpec

CFG = load_params(None)
# spec -> (the sections it is read from, prefixed sections, what the recipe sets itself)
SOURCES = {
    ModelSpec: ((CFG.model, CFG.train), {"lora_": CFG.model.lora, "quant_": CFG.model.quant}, {"seed", "liger"}),
    TrainSpec: ((CFG.train,), {}, {"seed"}),
    SftSpec: ((CFG.sft,), {}, {"seed"}),
}
NO_PARAMS_KEY = {(ModelSpec, "device")}  # which device the benchmark builds on: not a params key


@pytest.mark.parametrize("cls", list(SOURCES), ids=lambda c: c.__name__)
def test_a_spec_has_no_default_of_its_own(cls):
    for f in dataclasses.fields(cls):
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        assert not has_default or (cls, f.name) in NO_PARAMS_KEY, f"{cls.__name__}.{f.name} repeats a default"


@pytest.mark.parametrize("cls", list(SOURCES), ids=lambda c: c.__name__)
def test_every_spec_field_is_a_params_key(cls):
    sections, prefixed, own = SOURCES[cls]
    found = spec_sources(cls, *sections, prefixed=prefixed)
    missing = {f.name for f in dataclasses.fields(cls)} - set(found) - own - {n for c, n in NO_PARAMS_KEY if c is cls}
    assert not missing, f"{cls.__name__} fields without a params key: {sorted(missing)}"


def test_the_recipes_specs_equal_the_config_defaults():
    from azllm.recipes.sft import sft_spec
    from azllm.recipes.train import model_spec, train_spec

    t, s, m = train_spec(CFG), sft_spec(CFG), model_spec(CFG)
    for name in ("lr", "max_steps", "block_size", "eval_batch_size", "warmup_steps", "save_steps", "report_to"):
        want = getattr(CFG.train, name)
        assert getattr(t, name) == (tuple(want) if isinstance(want, list) else want), name
    assert t.betas == tuple(CFG.train.betas) and t.seed == CFG.seed
    assert (s.lr, s.eval_batch_size, s.max_length, s.betas) == (
        CFG.sft.lr,
        CFG.sft.eval_batch_size,
        CFG.sft.max_length,
        tuple(CFG.sft.betas),
    )
    assert (m.lora_r, m.lora_alpha, m.lora_dropout, m.use_rslora) == (
        CFG.model.lora.r,
        CFG.model.lora.alpha,
        CFG.model.lora.dropout,
        CFG.model.lora.use_rslora,
    )
    assert (m.quant_bits, m.quant_type, m.double_quant, m.compute_dtype) == (
        CFG.model.quant.bits,
        CFG.model.quant.quant_type,
        CFG.model.quant.double_quant,
        CFG.model.quant.compute_dtype,
    )
    assert m.swap_init == CFG.model.swap_init and m.method == CFG.train.method and m.liger == ()


def test_a_params_change_reaches_the_spec_without_a_hand_copy():
    cfg = load_params(None, overrides={"train": {"grad_clip": 0.3}, "model": {"lora": {"r": 3}}, "seed": 9})
    from azllm.recipes.train import model_spec, train_spec

    assert train_spec(cfg).grad_clip == 0.3 and model_spec(cfg).lora_r == 3 and train_spec(cfg).seed == 9


def test_a_field_nothing_sets_is_an_error_and_an_unknown_override_too():
    @dataclasses.dataclass(frozen=True)
    class Spec:
        lr: float
        nowhere: int

    with pytest.raises(ValueError, match="Spec.nowhere: no params key"):
        build_spec(Spec, CFG.train)
    with pytest.raises(ValueError, match="no field"):
        build_spec(Spec, CFG.train, nowhere=1, typo=2)
    assert build_spec(Spec, CFG.train, nowhere=1) == Spec(lr=CFG.train.lr, nowhere=1)
