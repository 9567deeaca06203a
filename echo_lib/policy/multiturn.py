"""Multi-turn RL of the policy inside the sandbox (METHOD.md 4.5, after MICA / MAPO, arXiv 2603.06194).

Echo-N1 trains single replies; this variant trains where EMPA evaluates. Each step:
  1. rollouts: the policy (a LoRA adapter being trained) plays the companion in `sandbox.loop.play` against
     the sandbox's own Actor, Judge and Director, `dialogues_per_case` times per case in one batch, each
     dialogue with its own seed offset (a reply depends only on its chat and seed: equal seeds would replay
     one dialogue);
  2. rewards: one per policy turn, from the finished case (`epm_progress`: the EPM distance the judge's
     evaluation after that turn gained; a positive control passes a rule instead);
  3. returns and mixed advantages (echo_lib.policy.turn_rewards);
  4. one policy-gradient update on every policy turn of the batch: loss = -sum(A * log p(token)) over the
     policy's own reply tokens, divided by their number (token mean over the batch, as DAPO), plus beta
     times the k3 estimate of the KL to the base when beta > 0. The rollouts come from the weights being
     updated and each batch is used once, so PPO's ratio is 1 and its clip never acts: it is left out.

Only the policy's own tokens are trained. A turn is its prompt (the companion's chat as the sandbox built
it, earlier companion turns included, as context) followed by the reply and the end-of-turn token; the mask
is 1 on those last alone (`turn_tokens`; tests/test_policy_multiturn.py checks it token by token, in both
history formats: huggingface/trl #4976 and #5144 are reward collapses from masks that trained the history).
The reply is trained as the sandbox kept it (`clean_reply`), re-tokenised: a reply the cleaner changed
(a speaker label cut) is trained in its cleaned form, which is the form the Judge and the next turn saw.

A step's row, adapter and optimizer state go to out_dir/checkpoint/ as it ends, so a killed run resumes at its
next step (checkpoint/state.json records the step and the settings; other settings start over). The stage's
outputs (adapter/, train_log.csv) are written from it at the end: Snakemake deletes a rule's outputs before
it runs the rule again, so a checkpoint kept there would be gone when the rerun looks for it.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import resource
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from echo_lib.epm.params import EPMParams
from echo_lib.finetune import TrainBase, as_base, load_for_training
from echo_lib.policy.params import MultiTurnRL, PolicyParams
from echo_lib.policy.train import read_log, write_log
from echo_lib.policy.turn_rewards import discounted_returns, distance_rewards, mixed_advantages
from echo_lib.provenance import write_text
from echo_lib.sandbox.actor import Actor
from echo_lib.sandbox.judge import Judge
from echo_lib.sandbox.loop import CaseState, Players, play
from echo_lib.sandbox.params import SandboxRunParams
from echo_lib.sandbox.test_model import DEFAULT_COMPANION_PROMPT, TestModel, companion_chat
from echo_lib.scenarios.schema import Scenario

log = logging.getLogger(__name__)

TurnReward = Callable[[CaseState], list[float]]   # one reward per policy turn of a finished case
LOG_COLUMNS = ["step", "reward", "reward_std", "return", "advantage_abs", "turns", "dialogues", "failed",
               "epm_ended", "kl", "loss", "reply_words", "rollout_time", "step_time"]


@dataclass
class SandboxRoles:
    """The sandbox's other roles, which stay fixed while the policy learns (model-layer LLMs and the Judge)."""
    actor: object
    judge: Judge
    director: object
    companion_prompt: str = DEFAULT_COMPANION_PROMPT


@dataclass
class MultiTurnResult:
    adapter_dir: str
    rows: list[dict] = field(default_factory=list)
    steps: int = 0
    resumed_at: int = 0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0


def epm_progress(case: CaseState) -> list[float]:
    """The EPM reward of each policy turn of a finished case (turn_rewards.distance_rewards)."""
    return distance_rewards(case.epm.points, len(case.history))


def policy_turns(case: CaseState, companion_prompt: str, run: SandboxRunParams) -> list[tuple[list[dict], str]]:
    """(chat, reply) of every turn the policy spoke, the chat rebuilt from the history as the loop built it."""
    return [(companion_chat(case.history[:i], ex.user, companion_prompt, run.test_history, run.history_turns),
             ex.reply) for i, ex in enumerate(case.history) if ex.reply]


def turn_tokens(tok, chat: list[dict], reply: str, end_id: int) -> tuple[list[int], list[int]]:
    """(input ids, loss mask) of one policy turn: the prompt exactly as the hf backend renders it for
    generation, then the reply and the end-of-turn token, which alone carry mask 1."""
    prompt = tok(tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False),
                 add_special_tokens=False)["input_ids"]
    answer = tok(reply, add_special_tokens=False)["input_ids"] + [end_id]
    return prompt + answer, [0] * len(prompt) + [1] * len(answer)


def end_of_turn(model, tok) -> int:
    """The token that ends an assistant turn: the model's first end-of-sequence id (<|im_end|> for ChatML)."""
    eos = model.generation_config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    return eos if eos is not None else tok.eos_token_id


def training_run(run: SandboxRunParams, mt: MultiTurnRL) -> SandboxRunParams:
    """The sandbox settings of a training dialogue: mt.max_turns turns, the policy sampling as mt says."""
    sampling = dataclasses.replace(run.test_model, temperature=mt.temperature, top_p=mt.top_p,
                                   max_new_tokens=mt.max_new_tokens)
    min_turns = min(run.min_turns or mt.max_turns, mt.max_turns)
    return dataclasses.replace(run, max_turns=mt.max_turns, min_turns=min_turns, test_model=sampling)


def rollout(scenarios: Sequence[Scenario], policy, roles: SandboxRoles, run: SandboxRunParams,
            epm_params: EPMParams, seed: int, group: int) -> list[tuple[int, CaseState]]:
    """Every scenario played `group` times by `policy` (an LLM), all in one batch of the sandbox loop, each
    dialogue with its own seed offset; (dialogue index in its group, final state) per dialogue."""
    players = Players(actor=Actor(roles.actor, run.actor, seed=seed), test=TestModel(policy, run.test_model, seed=seed),
                      judge=roles.judge, director=roles.director, companion_prompt=roles.companion_prompt)
    played = [(g, sc) for g in range(group) for sc in scenarios]
    cases = play([sc for _, sc in played], players, run, epm_params, progress=False, seeds=[g for g, _ in played])
    return [(g, c) for (g, _), c in zip(played, cases)]


def step_seed(seed: int, step: int) -> int:
    """The sampling seed of a step's rollouts (its dialogues add 0 .. group - 1)."""
    return seed * 1_000_003 + step * 1_009


def policy_update(model, batch: list[tuple[list[int], list[int]]], advantages: list[float], params: MultiTurnRL,
                  pad_id: int) -> dict:
    """One gradient step's gradients (the caller steps the optimizer): -A log p over the masked tokens, token
    mean over the whole batch, in micro-batches; plus beta * k3 KL to the base when beta > 0."""
    import torch
    n_tokens = sum(sum(m) for _, m in batch)
    loss_sum, kl_sum = 0.0, 0.0
    for start in range(0, len(batch), params.micro_batch):
        part = batch[start:start + params.micro_batch]
        width = max(len(ids) for ids, _ in part)
        ids = torch.tensor([i + [pad_id] * (width - len(i)) for i, _ in part])
        attn = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in part])
        picked = torch.tensor([m[1:] + [0] * (width - len(m)) for _, m in part], dtype=torch.bool)   # t scores t + 1
        adv = torch.tensor(advantages[start:start + params.micro_batch])[:, None].expand_as(picked)[picked]
        logp = token_logprobs(model, ids, attn, picked)
        loss = -(adv * logp).sum() / n_tokens
        if params.beta > 0:
            with torch.no_grad(), model.disable_adapter():
                d = token_logprobs(model, ids, attn, picked) - logp
            kl = (torch.exp(d) - d - 1).sum() / n_tokens
            loss = loss + params.beta * kl
            kl_sum += float(kl.detach())
        loss.backward()
        loss_sum += float(loss.detach())
    return {"loss": loss_sum, "kl": kl_sum if params.beta > 0 else None}


def token_logprobs(model, ids, attn, picked):
    """log p of the picked next tokens (`picked[:, t]`: position t scores token t + 1), flattened. The LM head
    runs on those positions only: a turn's reply is a few dozen of its hundreds of tokens, and the head (49k x 576
    for SmolLM2) over every position was most of the update's time and memory."""
    import torch

    from echo_lib.rewards.train import picked_logits
    logits = picked_logits(model, ids, attn, picked).float()
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:][picked][:, None]).squeeze(-1)


def train_in_sandbox(base: TrainBase | str | Path, cases: Sequence[Scenario], roles: SandboxRoles, reward: TurnReward,
                     params: PolicyParams, run: SandboxRunParams, epm_params: EPMParams, out_dir: str | Path,
                     seed: int = 0, progress: bool = True) -> MultiTurnResult:
    """Multi-turn RL of the LoRA adapter params.lora on `base` (params.multiturn); writes out_dir/adapter/,
    out_dir/train_log.csv and out_dir/rollouts/ (and out_dir/checkpoint/ as it goes, to resume)."""
    from tqdm.auto import tqdm

    from echo_lib.llm.hf import HFBackend
    from echo_lib.llm.registry import make_llm
    from echo_lib.llm.settings import LLMSettings

    mt, out = params.multiturn, Path(out_dir)
    if len(cases) < mt.cases_per_step:
        raise ValueError(f"policy.multiturn.cases_per_step={mt.cases_per_step} but only {len(cases)} training cases")
    run = training_run(run, mt)
    epm_params = run.epm(epm_params)
    # what a resumed run must share with the one it goes on from (not steps: a longer run extends a shorter)
    settings = {"multiturn": {k: v for k, v in dataclasses.asdict(mt).items() if k != "steps"},
                "lora": dataclasses.asdict(params.lora), "seed": seed, "cases": [c.id for c in cases]}
    ckpt = out / "checkpoint"
    done = resume_point(ckpt, settings)
    t0 = time.perf_counter()
    model, tok, optimizer = load_policy(base, params, ckpt, seed, resume=bool(done))
    backend = HFBackend.serving("policy", model, tok, LLMSettings(cache=False, provenance=False, progress=False))
    policy = make_llm(backend, backend.settings, out / ".no-cache", None)   # the weights change: no call cache
    result = MultiTurnResult(adapter_dir=str(out / "adapter"), resumed_at=done,
                             rows=read_log(ckpt / "train_log.csv")[:done] if done else [])
    if done:
        log.info("resuming multi-turn RL at step %d of %d (%s)", done + 1, mt.steps, out)
    schedule = case_schedule(len(cases), mt, seed)
    end_id = end_of_turn(model, tok)
    for step in tqdm(range(done + 1, mt.steps + 1), desc="multi-turn RL", disable=not progress,
                     initial=done, total=mt.steps):
        t_step = time.perf_counter()
        picked = [cases[i] for i in schedule[(step - 1) * mt.cases_per_step: step * mt.cases_per_step]]
        model.eval()
        played = rollout(picked, policy, roles, run, epm_params, step_seed(seed, step), mt.dialogues_per_case)
        t_roll = time.perf_counter() - t_step
        batch = StepBatch.of(played, reward, roles.companion_prompt, run, mt, step)
        model.train()
        optimizer.zero_grad(set_to_none=True)
        stats = policy_update(model, batch.tokens(tok, end_id), batch.flat_advantages, mt,
                              tok.pad_token_id)
        optimizer.step()
        backend.forget()   # keys and values kept from the old weights are stale
        write_rollouts(out / "rollouts" / f"step_{step:03d}.jsonl", batch.played, batch.rewards, batch.advantages)
        row = {"step": step, **batch.stats(len(played)), "rollout_time": round(t_roll, 2),
               "step_time": round(time.perf_counter() - t_step, 2), **stats}
        result.rows.append(row)
        save_step(model, optimizer, ckpt, result.rows, settings, step)
        log.info("multi-turn step %d: reward %.3f (sd %.3f) over %d turns, loss %.4f, %.0f s (rollouts %.0f s)",
                 step, row["reward"], row["reward_std"], row["turns"], row["loss"], row["step_time"], t_roll)
    model.save_pretrained(str(out / "adapter"))        # the stage's outputs, from the last step
    write_log(result.rows, out / "train_log.csv", LOG_COLUMNS)
    result.steps = mt.steps
    result.seconds = time.perf_counter() - t0
    result.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    check_adapter(out / "adapter")
    return result


def load_policy(base: TrainBase | str | Path, params: PolicyParams, ckpt: Path, seed: int, resume: bool):
    """(model, tokenizer, optimizer): the base with a new LoRA adapter (params.lora), or with the adapter and
    optimizer state of the checkpoint folder `ckpt` to go on training."""
    import torch
    from peft import PeftModel, get_peft_model

    from echo_lib.rewards.train import lora_config   # reads params.lora only
    torch.manual_seed(seed)
    model, tok = load_for_training(as_base(base))
    if resume:
        model = PeftModel.from_pretrained(model, str(ckpt / "adapter"), is_trainable=True)
    else:
        model = get_peft_model(model, lora_config(params, model.config.num_hidden_layers))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                  lr=params.multiturn.learning_rate)
    if resume and (ckpt / "optimizer.pt").exists():
        optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt"))
    return model, tok, optimizer


def case_schedule(n_cases: int, mt: MultiTurnRL, seed: int) -> list[int]:
    """The cases' order over the run: seeded permutations end to end, so every case is played before any
    twice, and a longer run's schedule starts as a shorter one's."""
    import torch
    order = torch.Generator().manual_seed(seed)
    rounds = -(-mt.steps * mt.cases_per_step // n_cases)
    return [i for _ in range(rounds) for i in torch.randperm(n_cases, generator=order).tolist()]


@dataclass
class StepBatch:
    """One step's usable dialogues and what the update reads of them: per dialogue its policy turns, their
    rewards, returns and advantages."""
    played: list[tuple[int, CaseState]]
    turns: list[list[tuple[list[dict], str]]]
    rewards: list[list[float]]
    returns: list[list[float]]
    advantages: list[list[float]]

    @classmethod
    def of(cls, played, reward: TurnReward, companion_prompt: str, run: SandboxRunParams, mt: MultiTurnRL,
           step: int) -> "StepBatch":
        usable = [(g, c) for g, c in played if c.error is None and any(ex.reply for ex in c.history)]
        if not usable:   # a run with nothing to learn from is no run (an unreachable model, a broken role)
            raise RuntimeError(f"multi-turn RL step {step}: every dialogue failed; the first: "
                               f"{played[0][1].error if played else 'none played'}")
        turns = [policy_turns(c, companion_prompt, run) for _, c in usable]
        rewards = [reward(c)[:len(t)] for (_, c), t in zip(usable, turns)]
        returns = [discounted_returns(r, mt.gamma) for r in rewards]
        advantages = mixed_advantages(returns, [c.scenario.id for _, c in usable], mt.turn_weight)
        return cls(usable, turns, rewards, returns, advantages)

    @property
    def flat_advantages(self) -> list[float]:
        return [a for row in self.advantages for a in row]

    def tokens(self, tok, end_id: int) -> list[tuple[list[int], list[int]]]:
        return [turn_tokens(tok, chat, reply, end_id) for ts in self.turns for chat, reply in ts]

    def stats(self, n_played: int) -> dict:
        """The step's train_log.csv columns of rewards and replies."""
        flat = [x for r in self.rewards for x in r]
        return {"reward": statistics.fmean(flat), "reward_std": statistics.pstdev(flat),
                "return": statistics.fmean(x for r in self.returns for x in r),
                "advantage_abs": statistics.fmean(abs(a) for a in self.flat_advantages), "turns": len(flat),
                "dialogues": len(self.played), "failed": n_played - len(self.played),
                "epm_ended": sum(c.ending is not None and c.ending.kind in ("SUCCESS", "EPM_FAILURE")
                                 for _, c in self.played),
                "reply_words": statistics.fmean(len(reply.split()) for ts in self.turns for _, reply in ts)}


def write_rollouts(path: Path, played: list[tuple[int, CaseState]], rewards: list[list[float]],
                   advantages: list[list[float]]) -> None:
    """One step's policy turns, a JSON line each: case, dialogue (its seed's index), turn, the user's message, the reply, reward,
    advantage (what the update saw, for reading a run back)."""
    lines = []
    for (g, c), rs, adv in zip(played, rewards, advantages):
        spoken = [ex for ex in c.history if ex.reply]
        for ex, r, a in zip(spoken, rs, adv):
            lines.append(json.dumps({"case": c.scenario.id, "dialogue": g, "turn": ex.turn, "user": ex.user,
                                     "reply": ex.reply, "reward": round(r, 4), "advantage": round(a, 4)},
                                    ensure_ascii=False))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, "\n".join(lines) + "\n")


def save_step(model, optimizer, out: Path, rows: list[dict], settings: dict, step: int) -> None:
    """Into the checkpoint folder `out`: the adapter, the optimizer's state and the log after `step`, then
    state.json (written last: a run killed while saving resumes from the step before)."""
    import torch
    from echo_lib.provenance import write_json
    model.save_pretrained(str(out / "adapter"))
    torch.save(optimizer.state_dict(), out / "optimizer.pt")
    write_log(rows, out / "train_log.csv", LOG_COLUMNS)
    write_json(out / "state.json", {"step": step, "settings": settings})


def resume_point(ckpt: Path, settings: dict) -> int:
    """The last finished step of an earlier run with the same settings, kept in the checkpoint folder `ckpt`
    (0: start over)."""
    state_path, log_path, adapter = ckpt / "state.json", ckpt / "train_log.csv", ckpt / "adapter"
    if not state_path.exists():
        return 0
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError) as err:
        log.warning("%s unreadable (%s): multi-turn RL starts over", state_path, err)
        return 0
    if state.get("settings") != json.loads(json.dumps(settings)):
        log.info("%s: other settings than this run's; multi-turn RL starts over", state_path)
        return 0
    step = int(state.get("step", 0))
    if not (adapter / "adapter_config.json").exists() or not log_path.exists() or len(read_log(log_path)) < step:
        return 0
    return step


def check_adapter(adapter: Path) -> None:
    """Fail loudly when training left no usable adapter: no weights or empty tensors (finetune.check_saved), or
    every LoRA B matrix still zero."""
    from safetensors.torch import load_file

    from echo_lib.finetune import check_saved
    check_saved(adapter)
    weights = adapter / "adapter_model.safetensors"
    tensors = load_file(str(weights))
    if not any(float(t.abs().max()) > 0 for k, t in tensors.items() if "lora_B" in k):
        raise RuntimeError(f"multi-turn RL: every LoRA B matrix in {weights} is zero; the policy never moved")
