"""The params section of preference tuning (``azllm prefer PARAMS``). See :mod:`azllm.recipes.prefer`.

The loop's settings this section does not name (betas, clipping, the optimizer, precision, checkpoints, logging,
resume, trackers) are the ``sft`` section's; the adapters and QLoRA's base are the ``model`` section's, as for SFT.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .data import Method, Section, SourceConfig


class PreferenceConfig(Section):
    """Preference tuning with TRL's ``DPOTrainer`` or ``KTOTrainer``: pairs (a user's, or built from the SFT data),
    training from the SFT model, held-out judgement, export."""

    base: str | None = None
    """The model tuned: a folder (safetensors) or a hub id, with its chat template. None: the SFT stage's merged
    export of this run (``azllm sft`` makes it first when it is missing)."""
    sources: dict[str, SourceConfig] = Field(default_factory=dict)
    """Your own preference data, by name: jsonl files (or a hub dataset) in TRL's formats (prompt / chosen /
    rejected, standard or conversational; prompt / completion / label for KTO). Checked on reading."""
    build: bool = True
    """Build pairs from the SFT data: each training conversation's reference answer chosen over the SFT model's own
    answer to its prompt (on-policy), and native answers over machine-translated ones where a prompt has both."""
    build_prompts: int = 48
    """Training conversations the SFT model answers to build on-policy pairs from (generation is the cost)."""
    build_sources: list[str] = Field(default_factory=lambda: ["native"])
    """The ``sft.sources`` whose references are chosen in built pairs (native text makes better references)."""
    held_out_pairs: int = 15
    """Held-out pairs (never trained on) built from the SFT stage's held-out conversations: the reference over the
    SFT model's answer. Preference accuracy is measured on them."""
    judge_on: Literal["verdict", "selection"] = "verdict"
    """What the held-out judgement reads when ``sft.verdict_size`` draws a verdict split: the verdict (a study's
    answer) or the selection split (a sweep's choice, ``azllm sweep``: settings are chosen where no verdict is
    read). The run's key follows the pairs judged, so the two never share a run folder."""
    method: Literal["dpo", "kto", "orpo"] = "dpo"
    """dpo: paired (TRL's DPOTrainer) | kto: unpaired good / bad labels (TRL's KTOTrainer; pairs are split into a
    good and a bad completion) | orpo: paired, no reference model (TRL's experimental ORPOTrainer: the SFT loss plus
    an odds-ratio term; ``beta`` is its weight)."""
    beta: float = Field(default=0.1, gt=0)
    """How far the policy may move from the reference (SambaLingo's 0.1)."""
    loss_type: Literal["sigmoid", "ipo", "hinge", "robust"] = "sigmoid"
    """DPO's loss (TRL's names)."""
    sft_weight: float = Field(default=0.0, ge=0)
    """The weight of the chosen answers' own cross-entropy (mean over their tokens) added to DPO's loss, as RPO
    does (TRL's ``loss_type`` "sft" beside the DPO loss, ``loss_weights`` [1, sft_weight]): it keeps the chosen
    answers likely while the margin grows, where DPO alone can lower both. 0: DPO alone. DPO only."""
    precompute_ref_log_probs: bool = False
    """Score the reference once before training (less memory while training, one pass more)."""
    max_length: int = 512
    """Tokens of prompt + completion; a prompt that fills it is refused."""
    train_method: Method = "lora"
    """full | lora (the reference is the adapter disabled) | qlora."""
    max_steps: int = 30
    """Optimizer steps."""
    batch_size: int = 2
    """Pairs per device and step."""
    grad_accum: int = 1
    """Gradient accumulation steps."""
    lr: float = 5e-4
    """Peak learning rate (for LoRA on the stand-in; a pretrained 1B base wants about 5e-6 to 5e-5)."""
    warmup_steps: int = 3
    """Linear warm-up steps."""
    eval_steps: int = 15
    """Held-out loss every this many steps (a checkpoint is saved at each)."""
    eval_batch_size: int = 4
    """Held-out pairs per evaluation batch."""
    export: bool = True
    """Write the merged standalone folder."""

    @model_validator(mode="after")
    def _sft_weight_is_dpos(self):
        if self.sft_weight and self.method != "dpo":
            raise ValueError(
                f"preference.sft_weight is DPO's (method {self.method!r}: ORPO has its own SFT term, KTO none); "
                "set it to 0 or use method: dpo"
            )
        return self
