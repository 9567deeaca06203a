"""GRPO of the policy with TRL (METHOD.md 4.2 [DEFAULT]): LoRA on the frozen base, group-relative
advantages over num_generations replies per prompt, PPO-clip (DAPO-style upper bound), a small KL to
the reference (the base itself: with LoRA, TRL computes it with the adapter switched off).
`policy.finetune: full` trains every parameter instead (Echo-N1's setting, under DeepSpeed ZeRO-3 at
paper scale) and saves the whole model; the base loads as its model spec says (echo_lib.finetune).

Only the policy's own tokens are trained: TRL computes log-probabilities for the completion positions
alone (logits_to_keep) and masks everything after the end of turn; the history in the prompt, earlier
companion turns included, is context, never a target. tests/test_policy_train.py checks this.

Every step appends one row to train_log.csv: TRL's loss, reward, KL and entropy beside this package's
monitors (rewards per domain, win and tie rate, humanlike rate, reply length, repetition, ornament,
advice lists, format violations), so a reward that rises while the monitors drift is visible at once.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from echo_lib.policy.data import RLPrompt
from echo_lib.policy.monitors import reply_monitors, signal_stats
from echo_lib.policy.params import PolicyParams
from echo_lib.policy.rewards import RolloutLog, step_stats
from echo_lib.policy.vllm import vllm_args
from echo_lib.finetune import CPU_FLOAT32, TrainBase, as_base, load_for_training, precision_args, save_trained, sharded
from echo_lib.progress import interactive
from echo_lib.provenance import write_text
from echo_lib.rewards.train import lora_config   # reads params.lora only

log = logging.getLogger(__name__)

LOG_COLUMNS = ["step", "reward", "reward_std", "reward_empathy", "reward_chitchat", "win_rate", "tie_rate",
               "humanlike_rate", "unparsed_rate", "format_violation_rate", "kl", "entropy", "reply_length",
               "reply_words", "repetition", "ornate_rate", "advice_list_rate", "frac_reward_zero_std",
               "spread_empathy", "signal_empathy", "spread_chitchat", "signal_chitchat", "loss",
               "step_time", "learning_rate"]
TRL_KEYS = {"reward": "reward", "reward_std": "reward_std", "kl": "kl", "entropy": "entropy",
            "reply_length": "completions/mean_length", "frac_reward_zero_std": "frac_reward_zero_std",
            "loss": "loss", "step_time": "step_time", "learning_rate": "learning_rate"}


@dataclass
class PolicyTrainResult:
    adapter_dir: str          # what training saved: the LoRA adapter, or the whole model (finetune full)
    rows: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0
    peak_rss_mb: float = 0.0
    sharded_at_load: bool = False   # DeepSpeed ZeRO-3 partitioned the weights while they loaded


def grpo_rows(prompts: Sequence[RLPrompt], chats: Sequence[list[dict]]) -> list[dict]:
    """The trainer's dataset: the policy chat, plus the columns the reward functions read."""
    return [{"prompt": chat, "prompt_id": p.id, "domain": p.domain, "reference": p.reference,
             "context": json.dumps(p.context, ensure_ascii=False)} for p, chat in zip(prompts, chats)]


def saved_dir(params: PolicyParams, out_dir: str | Path) -> Path:
    """Where training leaves its weights: out_dir/adapter/ (LoRA) or out_dir/model/ (full fine-tuning)."""
    return Path(out_dir) / ("model" if params.finetune == "full" else "adapter")


def grpo_config(params: PolicyParams, work_dir: Path, seed: int, base: TrainBase = CPU_FLOAT32):
    """TRL's GRPOConfig; build it before the weights load (under ZeRO-3 it makes the load shard them)."""
    from trl import GRPOConfig
    g = params.grpo
    return GRPOConfig(**vllm_args(g), output_dir=str(work_dir), max_steps=g.steps, learning_rate=g.learning_rate,
                      per_device_train_batch_size=g.prompts_per_step * g.num_generations,
                      gradient_accumulation_steps=g.gradient_accumulation_steps, num_generations=g.num_generations, max_completion_length=g.max_completion_length,
                      temperature=g.temperature, top_p=g.top_p, beta=g.beta, epsilon=g.epsilon,
                      epsilon_high=g.epsilon_high, scale_rewards=g.scale_rewards, lr_scheduler_type="constant", warmup_steps=0, seed=seed,
                      data_seed=seed, **precision_args(base), report_to="none", save_strategy="no", dataloader_num_workers=0, logging_steps=1,
                      disable_tqdm=not interactive())   # the Monitor below logs every step in the DAG


def monitor_callback(rollouts: RolloutLog, log_path: Path, rows: list[dict]):
    """A TrainerCallback that turns each logged step into a train_log.csv row (written as it goes)."""
    from transformers import TrainerCallback

    class Monitor(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            logs = logs or {}
            if "train_runtime" in logs:        # the end-of-training summary, not a step
                return
            items, formats = rollouts.take()
            if not state.is_world_process_zero:   # under accelerate, one process writes the log
                return
            row = {"step": state.global_step, **{k: logs.get(v) for k, v in TRL_KEYS.items()}}
            row |= step_stats(items)
            row |= reply_monitors([j.reply for j in items], [j.group for j in items])
            row |= signal_stats(items)
            if formats:
                row["format_violation_rate"] = sum(formats) / len(formats)
            rows.append(row)
            write_log(rows, log_path)
            log.info("step %d: reward %.3f, empathy %s, chitchat %s, kl %s, %.1f s", row["step"],
                     row["reward"] or 0.0, _fmt(row["reward_empathy"]), _fmt(row["reward_chitchat"]),
                     _fmt(row["kl"]), row["step_time"] or 0.0)

    return Monitor()


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def write_log(rows: list[dict], path: Path, columns: Sequence[str] = LOG_COLUMNS) -> None:
    """train_log.csv, rewritten atomically after every step (a killed run keeps the steps it finished)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, list(columns), extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    write_text(path, buf.getvalue())


def read_log(path: Path) -> list[dict]:
    """train_log.csv back as rows of numbers (empty cells as None)."""
    with open(path, newline="") as fh:
        return [{k: (float(v) if v not in ("", None) else None) for k, v in r.items()} for r in csv.DictReader(fh)]


def make_trainer(model, tok, rows: list[dict], reward_funcs: list, params: PolicyParams, work_dir: Path,
                 seed: int, callbacks: Sequence = (), args=None):
    """TRL's GRPOTrainer on `rows`: a LoRA adapter on the frozen `model`, or all of its parameters
    (finetune full). `args` (grpo_config) default to a float32 CPU run."""
    from datasets import Dataset
    from trl import GRPOTrainer
    need = params.grpo.prompts_per_step
    if len(rows) < need:
        raise ValueError(f"GRPO needs at least policy.grpo.prompts_per_step={need} prompts, got {len(rows)}; "
                         "lower it, raise policy.max_prompts, or turn off policy.hard_filter")
    peft_config = lora_config(params, model.config.num_hidden_layers) if params.finetune == "lora" else None
    return GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args or grpo_config(params, work_dir, seed),
                       train_dataset=Dataset.from_list(rows), processing_class=tok,
                       peft_config=peft_config, callbacks=list(callbacks))


def train_policy(base: TrainBase | str | Path, rows: list[dict], reward_funcs: list, rollouts: RolloutLog,
                 params: PolicyParams, out_dir: str | Path, seed: int = 0) -> PolicyTrainResult:
    """GRPO on `rows` (grpo_rows), on the base as its spec says (a bare folder: float32 on the CPU);
    writes out_dir/adapter/ (or out_dir/model/ with finetune full) and out_dir/train_log.csv."""
    import tempfile

    from transformers import PrinterCallback
    base, out_dir = as_base(base), Path(out_dir)
    if params.finetune == "full" and base.load_in_4bit:
        raise ValueError("policy.finetune is full, but the policy model has load_in_4bit: 4-bit weights cannot be "
                         "trained; set load_in_4bit: false on the policy model (full fine-tuning runs under "
                         "DeepSpeed ZeRO-3), or policy.finetune: lora for QLoRA")
    result = PolicyTrainResult(adapter_dir=str(saved_dir(params, out_dir)))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="policy-grpo-") as work:   # TRL wants an output_dir; nothing is kept
        args = grpo_config(params, Path(work), seed, base)   # before the load: ZeRO-3 shards while loading
        model, tok = load_for_training(base)
        result.sharded_at_load = sharded(model)
        cb = monitor_callback(rollouts, out_dir / "train_log.csv", result.rows)
        trainer = make_trainer(model, tok, rows, reward_funcs, params, Path(work), seed, [cb], args)
        trainer.remove_callback(PrinterCallback)   # the Monitor logs one readable line per step instead
        trainer.train()
        save_trained(trainer, result.adapter_dir)   # gathered under ZeRO-3, read back: an empty save fails here
        result.steps = trainer.state.global_step
    result.seconds = time.perf_counter() - t0
    result.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result
