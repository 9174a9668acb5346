"""The params sections of distillation and deployment (notebook 08, ``azllm distill PARAMS``, ``azllm deploy``).

See :mod:`azllm.distill`, :mod:`azllm.deploy` and :mod:`azllm.recipes.distill`. The loop's other settings
(batch, block, schedule, precision, evaluation) are the ``train`` section's; the fields of ``distill`` that share a
name with ``train``'s replace them for distillation runs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .data import Section


class DistillConfig(Section):
    """Knowledge distillation of a small student from a teacher, on the Azerbaijani token files."""

    teacher: str = "adapt"
    """adapt: the adaptation run with the lowest Azerbaijani bits per byte (notebook 05's export) | sft: the
    instruction-tuned model of notebook 07 (its export) | a model folder or hub id."""
    init: Literal["pruned", "random"] = "pruned"
    """The student's weights: pruned from the teacher (every ``keep_every``-th layer, its embeddings and head) or a
    random init of the same shape."""
    keep_every: int = Field(default=2, ge=1)
    """Depth pruning: keep decoder layers 0, k, 2k, ... of the teacher (SmolLM2-135M with 8: 4 of 30 layers, a
    third of its parameters)."""
    student_config: dict[str, Any] = Field(default_factory=dict)
    """LlamaConfig fields laid over the student's shape (a random init only; e.g. {num_hidden_layers: 2})."""
    kd_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """Weight of the teacher's term: loss = (1 - kd_weight) CE + kd_weight T^2 KL(teacher || student)."""
    temperature: float = Field(default=2.0, gt=0.0)
    """Softmax temperature of both distributions in the KL term."""
    chunk_tokens: int = Field(default=256, ge=1)
    """Positions whose vocabulary-wide logits are alive at once (per model)."""
    baseline: bool = True
    """Also train the same student on cross-entropy alone, at equal tokens and steps (the comparison)."""
    max_steps: int = 60
    """Optimizer steps of each student."""
    lr: float = 2e-3
    """Peak learning rate of the students."""
    warmup_steps: int = 6
    """Linear warm-up steps."""
    eval_steps: int = 20
    """Evaluate every this many steps."""
    save_steps: int = 20
    """Checkpoint every this many steps (a run resumes from the last complete one)."""
    train_bytes: int | None = None
    """Azerbaijani training text read (None: ``adapt.az_train_bytes``, the adaptation study's)."""
    export: bool = True
    """Write each student as a standalone folder (safetensors, the teacher's tokenizer and chat template)."""


class DeployConfig(Section):
    """GGUF files for llama.cpp with their checks (:func:`azllm.deploy.deploy`)."""

    models: list[str] = Field(default_factory=lambda: ["student"])
    """What notebook 08 deploys: student (the distilled student) | baseline (the cross-entropy student) | teacher |
    sft (notebook 07's export) | a model folder."""
    quants: list[str] = Field(default_factory=lambda: ["F16", "Q8_0", "Q4_K_M"])
    """Files written (F16 first: the reference of the others)."""
    parity_sets: list[str] | None = None
    """Names of ``data.eval`` sets and ``data.parallel`` pairs whose every line is tokenized by both llama.cpp and
    the Hugging Face tokenizer (None: every eval set and both sides of every parallel pair)."""
    quality_lines: int = Field(default=64, ge=1)
    """Azerbaijani lines (of the first eval set) on which each quantization is compared with F16."""
    generate_lines: int = Field(default=3, ge=0)
    """Held-out instructions answered by the Q4 file and by the PyTorch model, side by side."""
    threads: int = Field(default=2, ge=1)
    """llama.cpp threads (2: the phone stand-in)."""
    pre_tokenizer: str | None = None
    """A llama.cpp pre-tokenizer name for a tokenizer it does not recognise (azllm's registry maps its own
    extensions; an unknown one is an error, never a guess)."""
    speed: bool = True
    """Measure prompt and generation tokens/s and peak RSS of the Q4 file and of transformers (fresh processes)."""
