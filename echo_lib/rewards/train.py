"""Training a generative reward model with TRL and LoRA: a short SFT warm start, then GRPO.

    sft_stage   reasoning-plus-verdict targets (targets.py) teach the format and where evidence goes;
                with `decision: verdict_first` the target is the verdict alone, and SFT is the whole
                training (its loss falls on the decision tokens; the verdict is read by `choose`);
    grpo_stage  think_first only: the model judges each training prompt num_generations times and is
                rewarded for correct + process_weight * process + format_weight * format (rm_rewards.py).

Both stages train one LoRA adapter on the frozen base; GRPO continues the SFT adapter in memory.
The base loads as its model spec says (echo_lib.finetune: float32 on CPU at tiny scale, 4-bit NF4 with
bf16 on GPUs for QLoRA at paper scale), and the trainers' precision and gradient checkpointing follow
the same spec. TRL's own log history becomes train_log.csv.
"""
from __future__ import annotations

import csv
import logging
import resource
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from echo_lib.finetune import CPU_FLOAT32, TrainBase, as_base, load_for_training, precision_args, save_trained
from echo_lib.rewards.data import Example, grpo_rows, sft_rows
from echo_lib.rewards.params import RewardModelParams
from echo_lib.rewards.rm_rewards import rm_reward_funcs

from echo_lib.progress import interactive, step_logger

log = logging.getLogger(__name__)

LOG_COLUMNS = ["stage", "step", "loss", "reward", "correct", "process", "format", "consistency",
               "completion_length", "step_time", "learning_rate"]


@dataclass
class TrainResult:
    adapter_dir: str
    log: list[dict] = field(default_factory=list)     # one row per logged step (LOG_COLUMNS)
    seconds: dict[str, float] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)
    peak_rss_mb: float = 0.0


def trainer_flags(base: TrainBase) -> dict[str, Any]:
    """Arguments both trainers share: precision and checkpointing from the model spec; no checkpoints,
    no reporting services, a log entry every step."""
    return dict(**precision_args(base), report_to="none", save_strategy="no",
                dataloader_num_workers=0, logging_steps=1, disable_tqdm=not interactive())


def lora_config(params: RewardModelParams, num_layers: int | None = None):
    """The LoRA adapter of `params.lora`; with `top_layers`, only the last layers of a `num_layers`-layer
    model are adapted, so the backward pass (two thirds of a training step's compute) stops there."""
    from peft import LoraConfig
    p = params.lora
    layers = None
    if p.top_layers:
        if num_layers is None:
            raise ValueError("lora.top_layers needs the model's number of layers")
        layers = list(range(max(0, num_layers - p.top_layers), num_layers))
    return LoraConfig(r=p.r, lora_alpha=p.alpha, lora_dropout=p.dropout, target_modules=list(p.target_modules),
                      layers_to_transform=layers, task_type="CAUSAL_LM")


def target_nll(model, inputs: dict, num_items_in_batch=None):
    """Mean next-token loss over the labelled positions only (labels -100 elsewhere), with the LM head
    applied to those positions alone. A verdict-first target is about ten of an example's ~250 tokens,
    and the LM head (49k x 576 for SmolLM2) is a fifth of a token's compute; TRL's own tiled
    `fused_lm_head` does the same selection but measured 2-4x slower than this on a 2-core CPU."""
    import torch
    import torch.nn.functional as F
    targets = inputs["labels"][:, 1:]
    picked = targets != -100  # position t predicts token t + 1
    logits = picked_logits(model, inputs["input_ids"], inputs.get("attention_mask"), picked)
    n = picked.sum() if num_items_in_batch is None else num_items_in_batch
    return F.cross_entropy(logits.float(), targets[picked], reduction="sum") / torch.as_tensor(n).clamp(min=1)


def picked_logits(model, input_ids, attention_mask, picked):
    """The LM head's logits at the picked positions only (`picked[:, t]`: position t predicts token t + 1), of a
    model or a PeftModel (its LoRA layers sit inside the backbone, so the adapter applies)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(base, base.base_model_prefix)
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    return base.get_output_embeddings()(hidden[:, :-1][picked])


def sft_trainer_class():
    """TRL's SFTTrainer with `target_nll` as its loss (same value as TRL's completion-only loss)."""
    from trl import SFTTrainer

    class TargetLossSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = target_nll(model, inputs, num_items_in_batch)
            return (loss, None) if return_outputs else loss

    return TargetLossSFTTrainer


def sft_args(params: RewardModelParams, work_dir: Path, seed: int, base: TrainBase = CPU_FLOAT32):
    from trl import SFTConfig
    p = params.sft
    return SFTConfig(output_dir=str(work_dir / "sft"), max_steps=p.steps, learning_rate=p.learning_rate,
                     per_device_train_batch_size=p.batch_size, max_length=p.max_length, packing=False,
                     lr_scheduler_type="constant", warmup_steps=0, seed=seed, data_seed=seed, **trainer_flags(base))


def sft_stage(model, tok, exs: Sequence[Example], params: RewardModelParams, work_dir: Path, seed: int,
              peft_config=None, args=None):
    """Supervised warm start; `model` is a PeftModel, or the base with `peft_config`; `args` (sft_args)
    default to a float32 CPU run. Returns the trainer."""
    from datasets import Dataset
    p = params.sft
    check_lengths(tok, exs, p.max_length)
    args = args or sft_args(params, work_dir, seed)
    trainer = sft_trainer_class()(model=model, args=args, train_dataset=Dataset.from_list(sft_rows(list(exs))),
                         processing_class=tok, peft_config=peft_config,
                         callbacks=[step_logger(__name__, p.steps)])
    trainer.train()
    return trainer


def check_lengths(tok, exs: Sequence[Example], max_length: int) -> None:
    """TRL cuts prompt+target from the right and drops rows whose target is gone: say so up front."""
    def n(text: str) -> int:
        return len(tok(text, add_special_tokens=False)["input_ids"])
    over = [e.id for e in exs if n(tok.apply_chat_template(e.prompt, add_generation_prompt=True, tokenize=False))
            + n(e.target) + 2 > max_length]
    if len(over) == len(exs):
        raise ValueError(f"every SFT example is longer than reward_models.sft.max_length={max_length} tokens "
                         "(prompt + target); raise it, or shorten the contexts in stage 01")
    if over:
        log.warning("%d of %d SFT examples exceed reward_models.sft.max_length=%d and lose the end of their "
                    "target (e.g. %s)", len(over), len(exs), max_length, over[0])


COMPLETION_HEADROOM = 1.25  # sampled judgments run longer than the templated targets they were taught


def check_completion_room(tok, exs: Sequence[Example], max_completion_length: int) -> None:
    """GRPO cuts a judgment at max_completion_length, and a cut judgment has no verdict (no reward but
    the format's 0): the longest target, with headroom for sampling, must fit."""
    longest = max(len(tok(e.target, add_special_tokens=False)["input_ids"]) for e in exs)
    need = int(longest * COMPLETION_HEADROOM) + 1
    if max_completion_length < need:
        raise ValueError(f"reward_models.grpo.max_completion_length={max_completion_length} leaves no room for the "
                         f"verdict: the longest target is {longest} tokens and sampled judgments run longer; set it "
                         f"to at least {need}, or shorten the targets (reward_models.target_field_words)")


def grpo_args(params: RewardModelParams, reward_weights: list[float], work_dir: Path, seed: int,
              base: TrainBase = CPU_FLOAT32):
    from trl import GRPOConfig
    p = params.grpo
    return GRPOConfig(output_dir=str(work_dir / "grpo"), max_steps=p.steps, learning_rate=p.learning_rate,
                      per_device_train_batch_size=p.prompts_per_step * p.num_generations,
                      num_generations=p.num_generations, max_completion_length=p.max_completion_length,
                      temperature=p.temperature, beta=p.beta, reward_weights=list(reward_weights),
                      lr_scheduler_type="constant", warmup_steps=0, seed=seed, data_seed=seed, **trainer_flags(base))


def grpo_stage(model, tok, exs: Sequence[Example], reward_funcs: list[Callable], reward_weights: list[float],
               params: RewardModelParams, work_dir: Path, seed: int, peft_config=None, args=None):
    """GRPO on the reward model; `model` is the SFT PeftModel (or the base with `peft_config`); `args`
    (grpo_args) default to a float32 CPU run."""
    from datasets import Dataset
    from trl import GRPOTrainer
    p = params.grpo
    check_completion_room(tok, exs, p.max_completion_length)
    if len(exs) < p.prompts_per_step:
        raise ValueError(f"GRPO needs at least reward_models.grpo.prompts_per_step={p.prompts_per_step} training "
                         f"items, got {len(exs)}; lower it or make more data in stage 01")
    args = args or grpo_args(params, reward_weights, work_dir, seed)
    trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args,
                          train_dataset=Dataset.from_list(grpo_rows(list(exs))), processing_class=tok,
                          peft_config=peft_config)
    trainer.train()
    return trainer


def train_reward_model(base: TrainBase | str | Path, kind: str, exs: Sequence[Example], params: RewardModelParams,
                       out_dir: str | Path, seed: int = 0, judge=None) -> TrainResult:
    """SFT then GRPO on `exs`, on the base as its spec says (a bare folder: float32 on the CPU);
    writes out_dir/adapter/ and out_dir/train_log.csv."""
    if params.sft.steps == 0 and params.grpo.steps == 0:
        raise ValueError("no training steps configured (reward_models.sft.steps and grpo.steps are both 0)")
    if params.decision == "verdict_first" and params.grpo.steps > 0:
        raise ValueError(f"reward_models.grpo.steps is {params.grpo.steps}, but decision verdict_first trains by SFT "
                         "on the verdict alone (there is no reasoning to reward); set grpo.steps: 0, or use "
                         "decision: think_first for SFT + GRPO")
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="rm-trainer-") as work:  # TRL wants an output_dir; nothing is saved there
        return _train(as_base(base), kind, exs, params, out_dir, Path(work), seed, judge)


def _train(base: TrainBase, kind, exs, params, out_dir: Path, work: Path, seed, judge) -> TrainResult:
    result = TrainResult(adapter_dir=str(out_dir / "adapter"))
    t0 = time.perf_counter()
    g = params.grpo
    weights = [1.0, g.process_weight, g.format_weight, g.consistency_weight]
    # the arguments before the weights: under DeepSpeed ZeRO-3 they make the load shard (finetune.py)
    args = {"sft": sft_args(params, work, seed, base) if params.sft.steps > 0 else None,
            "grpo": grpo_args(params, weights, work, seed, base) if params.grpo.steps > 0 else None}
    model, tok = load_for_training(base)
    peft_config = lora_config(params, model.config.num_hidden_layers)
    if params.sft.steps > 0:
        t = time.perf_counter()
        trainer = sft_stage(model, tok, exs, params, work, seed, peft_config, args["sft"])
        result.seconds["sft"] = time.perf_counter() - t
        result.steps["sft"] = trainer.state.global_step
        result.log += log_rows("sft", trainer.state.log_history)
        model, peft_config = trainer.model, None
    if params.grpo.steps > 0:
        t = time.perf_counter()
        trainer = grpo_stage(model, tok, exs, rm_reward_funcs(kind, judge), weights,
                             params, work, seed, peft_config, args["grpo"])
        result.seconds["grpo"] = time.perf_counter() - t
        result.steps["grpo"] = trainer.state.global_step
        result.log += log_rows("grpo", trainer.state.log_history)
    save_trained(trainer, out_dir / "adapter")   # the adapter; read back, so an empty one fails here
    result.seconds["total"] = time.perf_counter() - t0
    result.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    write_log(result.log, out_dir / "train_log.csv")
    return result


def log_rows(stage: str, history: list[dict]) -> list[dict]:
    """TRL's per-step log entries as flat rows (the final summary entry is left out)."""
    rows = []
    for h in history:
        if "train_runtime" in h:
            continue
        rows.append({"stage": stage, "step": h.get("step"), "loss": h.get("loss"), "reward": h.get("reward"),
                     "correct": h.get("rewards/correct/mean"), "process": h.get("rewards/process/mean"),
                     "format": h.get("rewards/format/mean"), "consistency": h.get("rewards/consistency/mean"),
                     "completion_length": h.get("completions/mean_length"),
                     "step_time": h.get("step_time"), "learning_rate": h.get("learning_rate")})
    return rows


def write_log(rows: list[dict], path: Path) -> None:
    import io

    from echo_lib.provenance import write_text
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, LOG_COLUMNS)
    w.writeheader()
    w.writerows(rows)
    write_text(path, buf.getvalue())   # atomic: a kill mid-write leaves the old log whole
