"""The distill and deploy params sections: defaults, refused values, and the params files that use them (the GPU
file's student built on the meta device: a 135M-class model with the teacher's 128k vocabulary)."""

from pathlib import Path

import pytest
from config_helpers import check_sections

from azllm.config import ParamsError, distill, load_params

REPO = Path(__file__).resolve().parent.parent


def test_every_field_is_documented_and_the_defaults_validate():
    check_sections(distill)
    cfg = load_params(None)
    assert cfg.distill.teacher == "adapt" and cfg.distill.init == "pruned" and 0 < cfg.distill.kd_weight < 1
    assert cfg.deploy.quants[0] == "F16" and "Q4_K_M" in cfg.deploy.quants and cfg.deploy.threads == 2


def test_bad_values_are_refused_with_their_key():
    with pytest.raises(ParamsError, match="distill.kd_weight"):
        load_params(None, overrides={"distill": {"kd_weight": 1.5}})
    with pytest.raises(ParamsError, match="distill.init"):
        load_params(None, overrides={"distill": {"init": "zeros"}})
    with pytest.raises(ParamsError, match="unknown params key deploy.quant"):
        load_params(None, overrides={"deploy": {"quant": ["Q4_0"]}})


@pytest.mark.parametrize("name", ["tiny", "smollm2", "gpu_distill", "default"])
def test_the_params_files_validate(name):
    cfg = load_params(REPO / "params" / f"{name}.yaml")
    assert cfg.distill.max_steps > 0 and cfg.deploy.quants


def test_the_gpu_student_is_135m_class_with_the_teachers_vocabulary():
    import torch

    from azllm.distill import check_vocab, random_student
    from azllm.model import model_config

    cfg = load_params(REPO / "params" / "gpu_distill.yaml")
    teacher_cfg = model_config("1b", 128256)  # the shape of meta-llama/Llama-3.2-1B
    with torch.device("meta"):
        student = random_student(teacher_cfg, seed=cfg.seed, **cfg.distill.student_config)
        teacher = type(student)(teacher_cfg)
    n = sum(p.numel() for p in student.parameters())
    assert 100e6 < n < 170e6 and check_vocab(student, teacher) == 128256
    assert n < sum(p.numel() for p in teacher.parameters()) / 3
