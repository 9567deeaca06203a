"""Issue 34: the paper's three NEE judges behind hosted OpenAI-compatible APIs, each with its vendor's request
rules (models.<name>.request_rules). A local stub (tests/openai_stub.py, vendor_rules=True) answers HTTP 400
where the real APIs do: gpt-5.2 to max_tokens or a temperature other than 1, Claude Sonnet 4.5 to temperature
and top_p together, gemini-2.5-pro to logprobs. Through the project's own code paths (the NEE panel's rate and
compare, the sandbox judge's JSON mode) every judge must answer every question; a judge that loses more than
nee.max_missing_share of its answers must stop the stage, naming itself; the config must reject a rule key it
does not know. Offline and fast: the stub is on 127.0.0.1 and answers at once."""
from __future__ import annotations

import json
import logging
import typing
from pathlib import Path

import pytest
import yaml
from openai_stub import Stub, completion, vendor_error

from echo_lib.config import ConfigError, load_config, validate
from echo_lib.epm.iedr import INDICATORS
from echo_lib.epm.mdep import FIELDS
from echo_lib.llm import LLMError, Sampling
from echo_lib.models import load_llm
from echo_lib.llm.openai_backend import RequestRules, chat_request, choose_request
from echo_lib.nee.blinding import Transcript
from echo_lib.nee.panel import Answer, Asker, MissingAnswers, check_missing, make_panel
from echo_lib.nee.stage import blinder_for, compare, rate
from echo_lib.sandbox.dialogue import Exchange
from echo_lib.sandbox.judge import Judge as SandboxJudge

ROOT = Path(__file__).resolve().parents[1]
JUDGES = ["gemini-2.5-pro", "gpt-5.2", "claude-sonnet"]
KEYS = {"GEMINI_API_KEY": "test-gemini-key", "OPENAI_API_KEY": "test-openai-key",
        "ANTHROPIC_API_KEY": "test-anthropic-key"}
CHAT = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Level?"}]


def judge_answer(body: dict, headers) -> tuple[int, dict]:
    """What a judge that follows its prompt answers: the JSON object the prompt's last lines ask for."""
    text = body["messages"][-1]["content"]
    if '"winner"' in text:
        data = {"winner": "A"}
    elif '"score"' in text:
        data = {"score": 4}
    elif "C_Prog_level" in text:   # the sandbox judge's MDEP window
        data = {f"{f}_level": 0 for f in FIELDS}
    else:                           # its IEDR rating
        data = {f"{k}_level": 1 for k in INDICATORS}
    return 200, completion(json.dumps(data))


def paper_dict() -> dict:
    return yaml.safe_load((ROOT / "config/paper.yaml").read_text())


def paper_config(tmp_path, stub, edit=None):
    """config/paper.yaml with its three judges' base_url on the stub and the run's files under tmp_path."""
    raw = paper_dict()
    for name in JUDGES:
        raw["models"][name]["base_url"] = stub.base_url
    raw["results_dir"] = str(tmp_path / "results")
    raw["llm"] = {**raw.get("llm", {}), "progress": False, "backoff_s": 0.01, "max_backoff_s": 0.05}
    if edit:
        edit(raw)
    return load_config(raw)


@pytest.fixture
def api_keys(monkeypatch):
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def transcripts(blind) -> list[Transcript]:
    turns = (("User", blind("My sister stopped calling me after the wedding.")),
             ("Companion", blind("That silence must hurt. What did the last call feel like?")))
    return [Transcript(model, "own_001", blind("Aisha, 33, feels left out by her family."), turns)
            for model in ("qwen3-32b", "echo")]


# --------------------------------------------------------------------------------------------
# (a) the paper's judges, with their rules, answer everything


def test_the_paper_judges_answer_every_nee_rating_and_ab_verdict(tmp_path, api_keys, caplog):
    with Stub(judge_answer, vendor_rules=True) as stub:
        cfg = paper_config(tmp_path, stub)
        assert cfg.roles.nee_judges == JUDGES
        blind = blinder_for(cfg)
        items = transcripts(blind)
        llms = {name: load_llm(cfg, name) for name in JUDGES}
        for judge in make_panel(cfg.roles.nee_judges, cfg.nee.prompt_variants, cfg.seed):
            asker = Asker(llms[judge.model], cfg.nee)
            with caplog.at_level(logging.WARNING):
                rows, _ = rate(judge, asker, items, blind, cfg.seed)
                pairs = compare(judge, asker, [(items[1], items[0])], blind)
            assert rows and all(r["error"] is None and r["level"] == "4" for r in rows), (judge.label, rows[0])
            # the stub always says "A": the model wins in one order, the reference in the other
            assert [r["winner"] for r in pairs] == ["echo", "qwen3-32b"], judge.label
            assert all(r["error"] is None for r in pairs)
            assert asker.mode == "json"   # all three endpoints lack logprobs: straight to JSON mode
    assert not stub.rejected, [vendor_error(b) for b in stub.rejected[:1]]
    sent = {name: [b for b in stub.requests if b["model"] == cfg.models[name].id] for name in JUDGES}
    assert all(sent.values())
    gpt = sent["gpt-5.2"]
    assert all("max_tokens" not in b and b["max_completion_tokens"] == cfg.nee.json_max_new_tokens
               and b["temperature"] == 1 for b in gpt)
    assert all(not ({"temperature", "top_p"} <= set(b)) for b in sent["claude-sonnet"])
    assert all("logprobs" not in b for bodies in sent.values() for b in bodies)
    # the forced temperature is recorded with every batch and said once in the log
    record = llms["gpt-5.2"].last_record["model"]
    assert record["request_rules"]["preset"] == "openai_reasoning" and record["request_rules"]["fixed_temperature"] == 1
    forced = [r for r in caplog.records if "temperature 0.7 -> 1" in r.getMessage()]
    assert len(forced) == 1 and "gpt-5.2" in forced[0].getMessage()
    assert not any(key in caplog.text for key in KEYS.values())


def test_the_paper_judges_answer_in_json_mode_as_the_sandbox_judge_asks(tmp_path, api_keys):
    history = [Exchange(1, "I failed my exam and my parents will know tonight.", "That is a heavy evening ahead.")]
    with Stub(judge_answer, vendor_rules=True) as stub:
        cfg = paper_config(tmp_path, stub)
        for name in JUDGES:
            judge = SandboxJudge(load_llm(cfg, name, dialogues=True), cfg.sandbox_run.judge, seed=cfg.seed)
            assert judge.mode == "json"
            verdict, = judge.mdep([("Aisha, 33, a nurse who fears disappointing her parents.", history)], k=1)
            assert verdict.ok and verdict.attempts == 1, (name, verdict.error)
            assert verdict.details["C_Prog_level"] == 0
    assert not stub.rejected
    claude = [b for b in stub.requests if b["model"] == "claude-sonnet-4-5"]
    assert claude and all("top_p" not in b and b["temperature"] == 0.7 for b in claude)   # temperature kept


# --------------------------------------------------------------------------------------------
# (b) a judge whose answers are missing beyond nee.max_missing_share stops the panel, named


@pytest.mark.parametrize("name, server_says", [
    ("claude-sonnet", "`temperature` and `top_p` cannot both be specified"),   # every JSON-mode request
    ("gemini-2.5-pro", "Logprobs is not enabled for models/gemini-2.5-pro"),    # every choose request (a list body)
])
def test_a_judge_whose_server_rejects_its_requests_stops_the_panel_naming_it(tmp_path, api_keys, name, server_says):
    """The defect as it was: a judge without its rules gets HTTP 400 for every request."""
    def no_rules(raw):
        del raw["models"][name]["request_rules"]
    with Stub(judge_answer, vendor_rules=True) as stub:
        cfg = paper_config(tmp_path, stub, no_rules)
        blind = blinder_for(cfg)
        judge = next(j for j in make_panel(cfg.roles.nee_judges, 1, cfg.seed) if j.model == name)
        asker = Asker(load_llm(cfg, name), cfg.nee)
        with pytest.raises(MissingAnswers) as err:
            rate(judge, asker, transcripts(blind), blind, cfg.seed)
    message = str(err.value)
    n = 2 * 6   # two transcripts x six dimensions
    assert f"NEE judge {name}/v1: {n} of {n} ratings missing" in message
    assert "nee.max_missing_share 0.1" in message
    assert server_says in message   # the server's own words
    assert not any(key in message for key in KEYS.values())


def test_missing_answers_within_the_budget_warn_and_beyond_it_raise(caplog):
    ok, bad = Answer(4.0, "4", "json"), Answer(None, None, "json", error="HTTP 400: no")
    with caplog.at_level(logging.WARNING):
        check_missing("j/v1", [ok] * 9 + [bad], 0.1, "ratings")   # 10 %: at the budget, allowed
    assert "NEE judge j/v1: 1 of 10 ratings missing" in caplog.text and "HTTP 400: no" in caplog.text
    with pytest.raises(MissingAnswers, match=r"NEE judge j/v1: 2 of 10 A/B verdicts missing .*first error: HTTP 400"):
        check_missing("j/v1", [ok] * 8 + [bad] * 2, 0.1, "A/B verdicts")
    with pytest.raises(MissingAnswers):
        check_missing("j/v1", [ok] * 99 + [bad], 0.0, "ratings")   # 0: none may be missing
    check_missing("j/v1", [ok] * 3, 0.0, "ratings")


# --------------------------------------------------------------------------------------------
# (c) the config checks the rules


@pytest.mark.parametrize("edit, expected", [
    (lambda m: m["gpt-5.2"]["request_rules"].update(max_token_field="max_completion_tokens"),
     ["unknown key", "'max_token_field'", "models.gpt-5.2.request_rules", "max_tokens_field"]),
    (lambda m: m["gpt-5.2"]["request_rules"].update(preset="openai"),
     ["models.gpt-5.2.request_rules.preset", '"openai"', '"openai_reasoning"']),
    (lambda m: m["claude-sonnet"]["request_rules"].update(drop=["top_k", "frequency_penalty"]),
     ["models.claude-sonnet.request_rules.drop.1", '"frequency_penalty"']),
    (lambda m: m["qwen3-32b"].update(request_rules={"preset": "anthropic"}),
     ["models.qwen3-32b.request_rules", "backend 'hf'"]),
])
def test_the_config_rejects_bad_request_rules_naming_model_and_field(edit, expected):
    raw = paper_dict()
    edit(raw["models"])
    with pytest.raises(ConfigError) as err:
        validate(raw, "paper.yaml")
    for piece in expected:
        assert piece in str(err.value), f"{piece!r} not in:\n{err.value}"


def test_the_paper_config_sets_each_judges_rules():
    cfg = load_config(ROOT / "config/paper.yaml")
    presets = {name: cfg.models[name].request_rules["preset"] for name in JUDGES}
    assert presets == {"gemini-2.5-pro": "gemini", "gpt-5.2": "openai_reasoning", "claude-sonnet": "anthropic"}
    assert cfg.models["qwen3-32b-vllm"].request_rules is None and cfg.nee.max_missing_share == 0.1


# --------------------------------------------------------------------------------------------
# the rules themselves


def test_rules_reshape_requests_into_what_each_vendor_accepts():
    sampled = chat_request("m", CHAT, Sampling(temperature=0.7, top_p=0.9, seed=3, presence_penalty=1.5, top_k=20,
                                               max_new_tokens=64, json_mode=True))
    reasoning = RequestRules.from_config({"preset": "openai_reasoning"}).apply(sampled)
    assert reasoning["max_completion_tokens"] == 64 and reasoning["temperature"] == 1.0
    assert not {"max_tokens", "top_p", "presence_penalty"} & set(reasoning)
    assert reasoning["seed"] == 3 and reasoning["extra_body"] == {"top_k": 20} and reasoning["response_format"]
    claude = RequestRules.from_config({"preset": "anthropic"}).apply(sampled)
    assert claude["temperature"] == 0.7 and "top_p" not in claude and claude["max_tokens"] == 64
    own = RequestRules.from_config({"preset": "anthropic", "one_of": ["top_p", "temperature"], "drop": ["top_k"]})
    shaped = own.apply(sampled)
    assert shaped["top_p"] == 0.9 and "temperature" not in shaped and "extra_body" not in shaped
    assert RequestRules.from_config(None).apply(sampled) == sampled
    assert "logprobs" not in RequestRules.from_config({"preset": "gemini"}).apply(choose_request("m", CHAT, 5))
    with pytest.raises(LLMError, match=r"models.x.request_rules.drop names \['max_tokens'\]"):
        RequestRules.from_config({"drop": ["max_tokens"]}, "x")


def test_reshaped_requests_still_match_the_openai_types():
    import pydantic
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming as Params

    for preset in ("openai_reasoning", "anthropic", "gemini"):
        req = RequestRules.from_config({"preset": preset}).apply(
            chat_request("m", CHAT, Sampling(temperature=0.7, max_new_tokens=8, json_mode=True)))
        assert set(req) <= set(typing.get_type_hints(Params)), preset
        pydantic.TypeAdapter(Params).validate_python(req)


def test_a_model_without_rules_keeps_its_cache_key_and_record(tmp_path):
    from echo_lib.llm.openai_backend import OpenAIBackend
    plain = OpenAIBackend("j", "m", "http://x/v1", None)
    assert plain.identity() == {"backend": "openai", "model": "m", "base_url": "http://x/v1"}
    assert "request_rules" not in plain.describe()
    ruled = OpenAIBackend("j", "m", "http://x/v1", None, request_rules={"preset": "anthropic"})
    assert ruled.identity()["request_rules"]["one_of"] == ["temperature", "top_p"]


def test_the_stub_keeps_its_default_and_refuses_like_the_vendors():
    assert vendor_error({"model": "gpt-5.2", "max_completion_tokens": 8, "temperature": 1}) is None
    status, body = vendor_error({"model": "gpt-5.2", "max_tokens": 8})
    assert status == 400 and "Use 'max_completion_tokens' instead" in body["error"]["message"]
    status, body = vendor_error({"model": "gpt-5.2", "max_completion_tokens": 8, "temperature": 0.7})
    assert "Only the default (1) value is supported" in body["error"]["message"]
    assert vendor_error({"model": "claude-sonnet-4-5", "temperature": 0.7}) is None
    assert vendor_error({"model": "claude-sonnet-4-5", "temperature": 0.7, "top_p": 1.0})[0] == 400
    assert vendor_error({"model": "gemini-2.5-pro", "logprobs": True})[0] == 400
    assert Stub(lambda body, headers: (200, completion("fine"))).vendor_rules is False   # the default: none
