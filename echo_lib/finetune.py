"""The base model as training loads it, and the weights as training leaves them (stages 02 and 03).

One code path for both scales, set by the model spec (`models.<name>` in the config):

    tiny   float32 on the CPU, LoRA;
    paper  bf16, 4-bit NF4 (QLoRA: `load_in_4bit`) spread over the node's GPUs (`device: auto`), or all
           parameters under DeepSpeed ZeRO-3 (`policy.finetune: full`, `policy.launcher: accelerate`).

Under ZeRO-3 the order matters: the training arguments must exist before the weights load (they switch
on `zero.Init`, which shards the model while it loads), and saving must go through the trainer (it
gathers the shards; `model.save_pretrained` on a ZeRO-3 model writes tensors of shape (0,)).
`check_saved` reads every saved file back, so a run that saved nothing usable fails where it ran.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEIGHT_FILES = ("adapter_model.safetensors", "model.safetensors")


class EmptyWeightsError(RuntimeError):
    """Training saved no usable weights (nothing, or tensors with no elements)."""


@dataclass(frozen=True)
class TrainBase:
    """What training needs of a model spec: where the weights are and how to load them."""
    weights: str                     # a folder or hub id (echo_lib.llm.weights_path)
    dtype: str = "float32"           # float32 | bfloat16 | float16: also the trainer's precision
    device: str = "cpu"              # cpu | cuda | auto (device_map auto: layers over the node's GPUs)
    load_in_4bit: bool = False       # QLoRA: the frozen base in 4-bit NF4 (bitsandbytes)
    gradient_checkpointing: bool = False   # recompute activations in the backward pass (long contexts)
    attn_implementation: str | None = None  # null: transformers' default (sdpa); flash_attention_2 needs flash-attn

    @classmethod
    def of(cls, spec, weights: str) -> "TrainBase":
        """An hf-backend model's spec (echo_lib.llm.ModelSpec) with its weights' folder or hub id, as training
        loads it (ModelRegistry.train_base(name) gives both)."""
        return cls(str(weights), spec.dtype, spec.device, spec.load_in_4bit,
                   spec.gradient_checkpointing, spec.attn_implementation)

    @property
    def use_cpu(self) -> bool:
        return self.device == "cpu"


CPU_FLOAT32 = TrainBase(weights="")   # the trainers' flags of a float32 CPU run (the tests' tiny models)


def distributed() -> bool:
    """Inside `accelerate launch` / torchrun with more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def as_base(base: TrainBase | str | Path) -> TrainBase:
    """A TrainBase, or a checkpoint folder loaded as float32 on the CPU (the tests' tiny models)."""
    return base if isinstance(base, TrainBase) else TrainBase(str(base))


def load_for_training(base: TrainBase | str | Path):
    """(model, tokenizer) of `base` (as_base), loaded as its spec says. Call after the training arguments
    exist (TRL's GRPOConfig / SFTConfig): under DeepSpeed ZeRO-3 they make this load shard the weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    base = as_base(base)
    tok = AutoTokenizer.from_pretrained(base.weights)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    kwargs: dict[str, Any] = {"dtype": getattr(torch, base.dtype)}
    if base.attn_implementation:
        kwargs["attn_implementation"] = base.attn_implementation
    if not base.use_cpu and not distributed():
        kwargs["device_map"] = base.device    # one process: the layers over the GPUs; else accelerate places them
    if base.load_in_4bit:
        from transformers import BitsAndBytesConfig
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=getattr(torch, base.dtype))
        if not base.use_cpu and distributed():    # one 4-bit copy per process, on its own GPU
            kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    model = AutoModelForCausalLM.from_pretrained(base.weights, **kwargs)
    if base.load_in_4bit:
        from peft import prepare_model_for_kbit_training
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=base.gradient_checkpointing)
    return model, tok


def sharded(model) -> bool:
    """Whether DeepSpeed ZeRO-3 partitioned the weights as they loaded (its parameters carry a ds_id)."""
    return any(hasattr(p, "ds_id") for p in model.parameters())


def precision_args(base: TrainBase) -> dict[str, Any]:
    """The trainer arguments that follow the spec: device, mixed precision, gradient checkpointing.
    (DeepSpeed's `"bf16": "auto"` resolves from `bf16` here.)"""
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing; TRL still reads the old name
    checkpointing = base.gradient_checkpointing
    args = dict(use_cpu=base.use_cpu, bf16=base.dtype == "bfloat16", fp16=base.dtype == "float16",
                activation_checkpointing=checkpointing, gradient_checkpointing=checkpointing)
    if base.gradient_checkpointing:   # reentrant checkpointing loses the LoRA gradients of a frozen base
        args["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    return args


def save_trained(trainer, out_dir: str | Path) -> Path:
    """Save what the trainer trained (a LoRA adapter, or the whole model) to out_dir through the trainer,
    which gathers ZeRO-3 shards and writes on the main process only; then read it back there."""
    from transformers.trainer import TRAINING_ARGS_NAME
    out_dir = Path(out_dir)
    trainer.save_model(str(out_dir))
    if trainer.is_world_process_zero():
        # the pickled arguments name a temporary folder: they would change the folder's content fingerprint
        # (llm.hf.fingerprint, the call cache's key) at every run although the weights are the same
        (out_dir / TRAINING_ARGS_NAME).unlink(missing_ok=True)
        check_saved(out_dir)
    return out_dir


def check_saved(out_dir: str | Path) -> dict[str, int]:
    """{tensor name: number of elements} of the weights saved in out_dir; raises EmptyWeightsError when
    there are none, or any tensor is empty (ZeRO-3 shards saved without gathering)."""
    from safetensors import safe_open
    out_dir = Path(out_dir)
    files = [out_dir / f for f in WEIGHT_FILES if (out_dir / f).exists()] or sorted(out_dir.glob("model-*.safetensors"))
    if not files:
        raise EmptyWeightsError(f"{out_dir} holds no saved weights ({' or '.join(WEIGHT_FILES)}); the training "
                                "run saved nothing usable")
    sizes: dict[str, int] = {}
    for f in files:
        with safe_open(str(f), framework="pt") as fh:
            for name in fh.keys():
                sizes[name] = math.prod(fh.get_slice(name).get_shape())
    empty = [n for n, size in sizes.items() if not size]
    if not sizes or empty:
        raise EmptyWeightsError(f"{files[0]}: {len(empty) or 'all'} of {len(sizes)} saved tensors are empty "
                                f"(e.g. {(empty or ['-'])[0]}): ZeRO-3 shards saved without gathering them. Save "
                                "through the trainer (trainer.save_model) with stage3_gather_16bit_weights_on_model_save")
    return sizes
