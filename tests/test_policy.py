"""Stage 03 without training: the RL data, reward routing by domain, the anchor logic, the format
penalty, the hard-prompt filter, the monitors and the win-rate bookkeeping (fake reward models)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from echo_lib.llm import Sampling
from echo_lib.policy.data import (RLPrompt, chitchat_prompts, empathy_prompts, exchanges, mix, policy_chat,
                                  turns_as_messages)
from echo_lib.policy.hard_filter import hard_filter
from echo_lib.policy.monitors import (format_violation, group_repetition, hacking_check, half_means,
                                     is_advice_list, is_ornate, reply_monitors)
from echo_lib.policy.rewards import RolloutLog, needed_kinds, step_stats, variant_rewards
from echo_lib.policy.winrate import judge_independent, judge_with_rm, summarise
from echo_lib.provenance import write_jsonl
from echo_lib.rewards.data import DataError
from echo_lib.rewards.reward_fn import RewardModelFn
from test_rewards_data import empathy_item, humanlike_item


class ScriptedRM:
    """A reward-model LLM whose output is a function of the judged reply (the text after the last 'reply: ')."""

    def __init__(self, kind, verdict_of):
        self.kind, self.verdict_of, self.seen = kind, verdict_of, []

    def generate(self, chats, sampling):
        out = []
        for chat in chats:
            user = chat[-1]["content"]
            self.seen.append(user)
            reply = user.rsplit(": ", 1)[-1]     # every RM prompt ends with the judged reply after ": "
            verdict = self.verdict_of(reply)
            tag = "score" if self.kind == "scalar" else "answer"
            out.append(SimpleNamespace(text=verdict if verdict.startswith("<") else
                                       f"<think>ok</think>\n<{tag}>{verdict}</{tag}>"))
        return out


def rm(kind, verdict_of):
    return RewardModelFn(ScriptedRM(kind, verdict_of), kind)


EMP = RLPrompt("e1", "empathy", [{"role": "user", "content": "I failed my exam."}], "That sounds hard.")
CHAT = RLPrompt("c1", "chitchat", turns_as_messages(["hi", "hey you", "what's up"]))


def columns(prompts, replies):
    return dict(prompts=[None] * len(replies), completions=[[{"role": "assistant", "content": r}] for r in replies],
                domain=[p.domain for p in prompts], context=[json.dumps(p.context) for p in prompts],
                prompt_id=[p.id for p in prompts], reference=[p.reference for p in prompts])


def test_rewards_are_routed_by_domain():
    emp_rm, hl_rm = rm("empathy", lambda r: "better"), rm("humanlike", lambda r: "human")
    log = RolloutLog()
    emp, chat, fmt = variant_rewards("echo", {"empathy": emp_rm, "humanlike": hl_rm}, 1.0, log)
    cols = columns([EMP, CHAT, EMP], ["a", "b", "c"])
    assert emp(**cols) == [1.0, None, 1.0]
    assert chat(**cols) == [None, 1.0, None]
    assert fmt(**cols) == [0.0, 0.0, 0.0]
    # each reward model saw only its own domain's rows, and the empathy RM saw the anchor
    assert len(emp_rm.llm.seen) == 2 and all("Reference reply: That sounds hard." in s for s in emp_rm.llm.seen)
    assert len(hl_rm.llm.seen) == 1 and "what's up" in hl_rm.llm.seen[0]
    items, formats = log.take()
    assert [(j.domain, j.kind, j.verdict) for j in items] == [("empathy", "empathy", "better")] * 2 + [
        ("chitchat", "humanlike", "human")]
    assert formats == [False] * 3 and log.take() == ([], [])


def test_anchor_logic_better_tie_worse():
    verdicts = {"good": "better", "same": "tie", "bad": "worse", "garbled": "<answer>maybe"}
    emp_rm = rm("empathy", lambda r: verdicts[r])
    emp = variant_rewards("echo", {"empathy": emp_rm, "humanlike": rm("humanlike", lambda r: "machine")}, 0)[0]
    assert emp(**columns([EMP] * 4, ["good", "same", "bad", "garbled"])) == [1.0, 0.0, -1.0, 0.0]
    assert emp_rm.last_answers == ["better", "tie", "worse", None]


def test_scalar_variant_scores_empathy_without_anchor_and_keeps_the_humanlike_reward():
    sc = rm("scalar", lambda r: {"x": "10", "y": "1"}[r])
    hl = rm("humanlike", lambda r: "machine")
    funcs = variant_rewards("scalar", {"scalar": sc, "humanlike": hl}, 0.5)
    cols = columns([EMP, CHAT], ["x", "y"])
    out = [f(**cols) for f in funcs]
    assert out[0] == [1.0, None] and out[1] == [None, 0.0] and out[2] == [0.0, 0.0]
    assert needed_kinds("scalar") == ["humanlike", "scalar"]   # chit-chat: the same reward as echo's
    assert not any("Reference reply" in s for s in sc.llm.seen)
    with pytest.raises(ValueError, match="needs the 'humanlike' reward model"):
        variant_rewards("echo", {"empathy": sc}, 0)


def test_format_penalty_and_monitors():
    assert format_violation("User: hi") and format_violation("ok <think>hm</think> fine")
    assert not format_violation("That sounds hard. What happened?")
    fmt = variant_rewards("scalar", {"scalar": rm("scalar", lambda r: "5"), "humanlike": rm("humanlike", lambda r: "human")},
                          2.0)[-1]
    assert fmt(completions=["Assistant: hello", "hello"]) == [-2.0, 0.0]
    assert is_ornate("*hugs you tightly* I am here") and is_ornate("Like a storm, your soul aches")
    assert not is_ornate("That sounds exhausting. Want to tell me more?")
    assert is_advice_list("- sleep more\n- eat well") and is_advice_list("You should rest and try to eat.")
    assert not is_advice_list("I am sorry, that is hard.")
    assert group_repetition(["i hear you, that is hard"] * 3) == 1.0
    assert group_repetition(["one two three", "four five six"]) == 0.0
    m = reply_monitors(["a b c", "a b c", "x y"], ["g1", "g1", "g2"])
    assert m["repetition"] == 1.0 and m["reply_words"] == pytest.approx(8 / 3)


def test_step_stats_per_domain():
    log = RolloutLog()
    emp, chat = variant_rewards("echo", {"empathy": rm("empathy", lambda r: {"a": "better", "b": "tie"}[r]),
                                         "humanlike": rm("humanlike", lambda r: "machine")}, 0, log)
    cols = columns([EMP, EMP, CHAT], ["a", "b", "c"])
    emp(**cols), chat(**cols)
    s = step_stats(log.take()[0])
    assert s["reward_empathy"] == 0.5 and s["reward_chitchat"] == 0.0
    assert s["win_rate"] == 0.5 and s["tie_rate"] == 0.5 and s["humanlike_rate"] == 0.0 and s["unparsed_rate"] == 0


def test_data_reads_stage_01_files(tmp_path):
    emp = tmp_path / "emp.jsonl"
    write_jsonl(emp, [{**empathy_item(0), "reference": f"ref{i}", "candidate": f"c{i}"} for i in range(3)])
    prompts = empathy_prompts(emp)
    assert len(prompts) == 1 and prompts[0].reference == "ref0" and prompts[0].domain == "empathy"
    assert prompts[0].context == empathy_item(0)["context"]
    hl = tmp_path / "hl.jsonl"
    write_jsonl(hl, [{**humanlike_item(0), "context": ["hi", "hey", "how are you"]},
                     {**humanlike_item(0, "model_reply"), "context": ["hi", "hey", "how are you"]}])
    chats = chitchat_prompts(hl)
    assert len(chats) == 1 and [m["role"] for m in chats[0].context] == ["user", "assistant", "user"]
    no_reference = empathy_item(0)
    del no_reference["reference"]
    write_jsonl(emp, [no_reference])
    with pytest.raises(DataError, match=r"emp.jsonl:1: field 'reference'"):
        empathy_prompts(emp)
    write_jsonl(emp, [{**empathy_item(0), "reference": " "}])
    with pytest.raises(DataError, match=r"emp.jsonl: item 1: field 'reference' is empty"):
        empathy_prompts(emp)
    with pytest.raises(DataError, match="stage 01"):
        empathy_prompts(tmp_path / "missing.jsonl")


def test_policy_prompt_is_the_sandbox_prompt_and_trims_old_turns():
    ctx = turns_as_messages(["t1", "t2", "t3", "t4", "t5"])      # user, assistant, user, assistant, user
    past, pending = exchanges(ctx)
    assert [(e.user, e.reply) for e in past] == [("t1", "t2"), ("t3", "t4")] and pending == "t5"
    chat = policy_chat(ctx, "SYS")
    assert chat[0] == {"role": "system", "content": "SYS"} and "t1" in chat[-1]["content"]
    trimmed = policy_chat(ctx, "SYS", max_tokens=1, count=lambda c: len(c[-1]["content"]))
    assert "t1" not in trimmed[-1]["content"] and "t5" in trimmed[-1]["content"]
    # a history that opens with the companion's turn loses that orphan turn
    assert exchanges(turns_as_messages(["a", "b", "c", "d"]))[0][0].user == "b"


def test_token_counter_counts_tokens_and_long_histories_get_trimmed(tiny_lm_dir, monkeypatch):
    """token_counter counted the keys of transformers 5's BatchEncoding (2), so nothing was ever trimmed."""
    import echo_lib.models
    from echo_lib.policy.stage import token_counter
    from transformers import AutoTokenizer
    monkeypatch.setattr(echo_lib.models, "registry", lambda cfg: SimpleNamespace(weights=lambda name: tiny_lm_dir))
    cfg = SimpleNamespace(models={"pol": SimpleNamespace(name="pol")}, roles=SimpleNamespace(policy="pol"))
    count = token_counter(cfg)
    turns = [f"turn {i}: I failed my exam again and I feel like a total failure." for i in range(12)] + ["last"]
    ctx = turns_as_messages(turns)
    full = policy_chat(ctx, "SYS")
    tok = AutoTokenizer.from_pretrained(str(tiny_lm_dir))
    expected = len(tok.apply_chat_template(full, add_generation_prompt=True, tokenize=True, return_dict=False))
    floor = count(policy_chat(ctx[-1:], "SYS"))         # the chat with no history left
    assert count(full) == expected > floor + 200
    limit = floor + 100
    trimmed = policy_chat(ctx, "SYS", max_tokens=limit, count=count)
    assert count(trimmed) <= limit < count(full)
    assert "turn 0:" not in trimmed[-1]["content"] and "last" in trimmed[-1]["content"]


def test_mix_follows_the_share_and_the_seed():
    emp = [RLPrompt(f"e{i}", "empathy", []) for i in range(20)]
    chat = [RLPrompt(f"c{i}", "chitchat", []) for i in range(20)]
    a = mix(emp, chat, 0.6, 10, seed=1)
    assert sum(p.domain == "empathy" for p in a) == 6 and len(a) == 10
    assert [p.id for p in a] == [p.id for p in mix(emp, chat, 0.6, 10, seed=1)]
    assert [p.id for p in a] != [p.id for p in mix(emp, chat, 0.6, 10, seed=2)]
    assert len(mix(emp[:2], chat, 0.6, 10, seed=0)) == 6     # a short domain gives what it has


class ReplyLLM:
    """A policy whose k-th sample for a prompt is a scripted reply (by the seed)."""

    def __init__(self, replies):
        self.replies = replies

    def generate(self, chats, samplings):
        return [SimpleNamespace(text=self.replies[chat[-1]["content"]][s.seed])
                for chat, s in zip(chats, samplings)]


def test_hard_filter_drops_all_win_and_all_lose_groups():
    prompts = [RLPrompt(f"p{i}", "empathy", [{"role": "user", "content": f"m{i}"}], "ref") for i in range(3)]
    chats = [[{"role": "user", "content": f"m{i}"}] for i in range(3)]
    policy = ReplyLLM({"m0": ["good", "good"], "m1": ["bad", "bad"], "m2": ["good", "bad"]})
    funcs = variant_rewards("echo", {"empathy": rm("empathy", lambda r: "better" if r == "good" else "worse"),
                                     "humanlike": rm("humanlike", lambda r: "human")}, 0)
    kept, report = hard_filter(prompts, chats, policy, funcs, 2, Sampling(seed=0))
    assert [p.id for p in kept] == ["p2"]
    assert report.all_win == ["p0"] and report.all_lose == ["p1"] and report.rewards["p2"] == [1.0, -1.0]


def test_winrate_counts_a_pair_only_when_both_orders_agree():
    ctx = [[{"role": "user", "content": "I failed."}]] * 2
    # the RM calls a reply starting "v" better than its reference and any other worse: on p1 the variant
    # ("v") wins in both orders; on p2 both replies are "b", each order favours the reference: a tie
    emp_rm = rm("empathy", lambda r: "better" if r.startswith("v") else "worse")
    js = judge_with_rm(emp_rm, ["p1", "p2"], ctx, ["v", "b"], ["b", "b"])
    assert [(j.prompt_id, j.order, j.score, j.first, j.second, j.consistent) for j in js] == [
        ("p1", "both", 1.0, 1.0, 1.0, True), ("p2", "both", 0.5, 0.0, 1.0, False)]

    class AlwaysA:                       # a judge with pure position bias
        def choose(self, chats, options):
            return [SimpleNamespace(probs={"A": 0.9, "B": 0.1}) for _ in chats]
    ind = judge_independent(AlwaysA(), ["p1"], ctx[:1], ["v"], ["b"])
    assert [(j.order, j.score, j.consistent) for j in ind] == [("both", 0.5, False)]   # win as A, loss as B

    class BiasedButSeeing:               # prefers A, and a little more when A is the variant's reply "v"
        def choose(self, chats, options):
            return [SimpleNamespace(probs={"A": 0.95, "B": 0.05} if "Reply A: v" in c[-1]["content"]
                                    else {"A": 0.8, "B": 0.2}) for c in chats]
    ind = judge_independent(BiasedButSeeing(), ["p1", "p2"], ctx, ["v", "v"], ["b", "b"])
    assert [j.score for j in ind] == [0.5, 0.5]   # the letter preference decides each order: no verdict
    s = summarise("echo", "independent", "base", ind)
    assert s["win_rate"] == 0.5 and s["ties"] == 2 and s["wins"] == s["losses"] == 0 and s["n"] == 2
    assert s["position_consistency"] == 0.0 and s["ci_degenerate"]


def test_each_variant_is_a_model_the_sandbox_can_test():
    from echo_lib.config import ConfigError, load_config
    cfg = load_config(policy={"variants": ["echo", "scalar"]}, sandbox={"models": ["base", "echo", "scalar"]})
    echo = cfg.models["echo"]
    assert echo.adapter == f"{cfg.results_dir}/{cfg.run_name}/policy/echo/adapter"
    assert (echo.backend, echo.id) == (cfg.models["base"].backend, cfg.models["base"].id)
    assert load_config(cfg.raw).hash == cfg.hash                 # validating again changes nothing
    with pytest.raises(ConfigError, match="'models.echo' names a model, but 'echo' is reserved"):
        load_config(models={"base": cfg.raw["models"]["base"], "echo": {"backend": "hf", "source": "local",
                                                                        "id": "/x"}})
    with pytest.raises(ConfigError, match=r"sandbox.models\[1\]' has value 'scalar'"):
        load_config(policy={"variants": ["echo"]}, sandbox={"models": ["base", "scalar"]})


def test_accelerate_launcher_needs_its_config(tmp_path):
    from echo_lib.config import load_config
    from echo_lib.policy.launch import command
    import dataclasses

    from echo_lib.config import ConfigError
    with pytest.raises(ConfigError, match="'policy.accelerate_config' is null"):   # at load time now
        load_config(policy={"launcher": "accelerate"})
    cfg = load_config()
    cfg = dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, launcher="accelerate", accelerate_config=None))
    with pytest.raises(ValueError, match="policy.accelerate_config is null"):     # and still at launch
        command(cfg, "echo_lib.policy.stage:launched", ["echo"], tmp_path / "c.json")
    acc = tmp_path / "zero3.yaml"
    acc.write_text("distributed_type: DEEPSPEED\n")
    cfg = load_config(policy={"launcher": "accelerate", "accelerate_config": str(acc)})
    cmd = command(cfg, "echo_lib.policy.stage:launched", ["scalar"], tmp_path / "c.json")
    assert cmd[:4] == ["accelerate", "launch", "--config_file", str(acc)]
    assert cmd[4:] == ["-m", "echo_lib.policy.launch", "--config", str(tmp_path / "c.json"),
                       "--entry", "echo_lib.policy.stage:launched", "scalar"]



def test_a_failed_launch_names_the_ranks_last_lines(capfd):
    """The ranks' output is echoed as it comes, and a launch that fails raises with its last lines, so the
    cause (a rank's traceback) is in the error, not only in a log that scrolled away."""
    import sys

    from echo_lib.policy.launch import LaunchFailed, run_echoed
    script = "import sys\nfor i in range(60): print('line', i)\nprint('rank 1: boom', file=sys.stderr)\nsys.exit(3)"
    with pytest.raises(LaunchFailed) as failed:
        run_echoed([sys.executable, "-c", script])
    assert failed.value.returncode == 3 and failed.value.output[-1] == "rank 1: boom"
    assert len(failed.value.output) == 40 and "line 59" in str(failed.value) and "line 10" not in str(failed.value)
    assert "line 0\n" in capfd.readouterr().out        # echoed live
    run_echoed([sys.executable, "-c", "print('fine')"])   # exit 0: no error


def test_rl_data_is_built_once_and_rebuilt_when_its_settings_change(tmp_path, monkeypatch):
    from echo_lib.config import load_config
    from echo_lib.policy import stage
    run = tmp_path / "t"
    for kind, split in (("empathy", "train"), ("empathy", "test"), ("humanlike", "train")):
        f = run / "data" / kind / f"{split}.jsonl"
        f.parent.mkdir(parents=True, exist_ok=True)
        if kind == "empathy":
            rows = [{**empathy_item(i), "scenario_id": f"s{i}", "context": [{"role": "user", "content": f"m{i}"}]}
                    for i in range(5)]
        else:
            rows = [{**humanlike_item(i), "context": ["hi", f"q{i}"]} for i in range(5)]
        write_jsonl(f, rows)
    cfg = load_config(results_dir=str(tmp_path), run_name="t",
                      policy={"max_prompts": 5, "hard_filter": {"enabled": False}, "winrate": {"max_prompts": 2}})
    train, heldout, report = stage.rl_data(cfg)
    assert report["kept"] == {"empathy": 3, "chitchat": 2} and len(heldout) == 2
    assert (run / "policy" / "data" / "train.jsonl").exists()

    def fail(*_):
        raise AssertionError("rebuilt although nothing changed")
    monkeypatch.setattr(stage, "empathy_prompts", fail)
    again, _, _ = stage.rl_data(cfg)
    assert [p.id for p in again] == [p.id for p in train]
    monkeypatch.undo()
    cfg2 = load_config(cfg.raw | {"policy": {**cfg.raw["policy"], "max_prompts": 4}})
    assert len(stage.rl_data(cfg2)[0]) == 4


def test_each_variant_filters_with_its_own_reward_unless_told_otherwise(tmp_path):
    from echo_lib.config import load_config
    from echo_lib.policy import stage
    own = load_config(results_dir=str(tmp_path), run_name="t")
    assert own.policy.hard_filter.per_variant and own.policy.grpo.scale_rewards == "group"
    assert [stage.filter_variant(own, v) for v in ("echo", "scalar")] == ["echo", "scalar"]
    assert stage.data_dir(own, "scalar") == tmp_path / "t" / "policy" / "data" / "scalar"
    shared = load_config(results_dir=str(tmp_path), run_name="t", policy={"hard_filter": {"per_variant": False}})
    assert stage.filter_variant(shared, "scalar") == "echo" and stage.data_dir(shared, "scalar") == tmp_path / "t" / "policy" / "data"
    off = load_config(results_dir=str(tmp_path), run_name="t", policy={"hard_filter": {"enabled": False}})
    assert stage.filter_variant(off, "scalar") is None and stage.data_dir(off, "scalar") == stage.data_dir(off, "echo")


def test_scale_rewards_reaches_grpo_config(tmp_path):
    from echo_lib.policy.params import PolicyGRPO, PolicyParams
    from echo_lib.policy.train import grpo_config
    cfg = grpo_config(PolicyParams(grpo=PolicyGRPO(scale_rewards="none")), tmp_path, 0)
    assert cfg.scale_rewards == "none"


def test_signal_gate_counts_only_spreads_of_parsed_verdicts():
    from echo_lib.policy.monitors import learning_signal, signal_stats
    from echo_lib.policy.rewards import Judged
    J = lambda g, d, verdict, r: Judged(g, d, "x", "empathy", verdict, r)   # noqa: E731
    items = [J("p1", "empathy", "better", 1.0), J("p1", "empathy", "worse", -1.0),     # real spread
             J("p2", "empathy", "tie", 0.0), J("p2", "empathy", None, 0.5),             # spread from a parse failure only
             J("p3", "empathy", "tie", 0.0), J("p3", "empathy", "tie", 0.0),            # all tied
             J("c1", "chitchat", "human", 1.0), J("c1", "chitchat", "human", 1.0)]
    s = signal_stats(items)
    assert s["spread_empathy"] == pytest.approx(2 / 3) and s["signal_empathy"] == pytest.approx(1 / 3)
    assert s["spread_chitchat"] == 0.0 and s["signal_chitchat"] == 0.0
    gate = learning_signal([s, {**s, "signal_empathy": 0.5}])
    assert gate["signal_by_domain"] == {"empathy": pytest.approx(0.4167, abs=1e-4), "chitchat": 0.0}
    assert not gate["has_signal"] and "no learning signal" in gate["verdict"]
    assert learning_signal([{"signal_empathy": 0.75, "signal_chitchat": None}])["has_signal"]


def test_hacking_check_flags_a_reward_the_independent_judge_does_not_share():
    rows = [{"reward": r, "reply_length": n, "repetition": 0.2} for r, n in ((0.1, 20), (0.2, 20), (0.5, 30), (0.7, 34))]
    assert half_means([0.1, None, 0.3, float("nan")]) == (0.1, 0.3) and half_means([1.0]) is None
    flat = {"judge": "independent", "n": 40, "win_rate": 0.5, "ci_low": 0.3, "ci_high": 0.7}
    check = hacking_check(rows, flat)
    assert check["halves"]["reward"] == pytest.approx([0.15, 0.6]) and len(check["findings"]) == 2
    assert check["verdict"].startswith("possible reward hacking: the training reward rose (0.150 -> 0.600")
    assert "replies grew longer (reply_length 20.000 -> 32.000)" in check["verdict"]
    # the judge that never trained the policy agrees (interval above 0.5) and the length holds: no flag
    steady = [{**r, "reply_length": 20} for r in rows]
    assert hacking_check(steady, {**flat, "win_rate": 0.8, "ci_low": 0.6, "ci_high": 0.95})["findings"] == []
    # too few prompts for a verdict (stats.MIN_N): not read as no gain either
    assert hacking_check(steady, {**flat, "n": 5, "ci_degenerate": True})["findings"] == []
    # no independent judgment: the reward trend alone is not read as hacking
    assert hacking_check(steady, None)["verdict"] == "no sign of reward hacking at this scale"
