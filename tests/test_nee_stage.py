"""Stage 06 end to end on sandbox-style result files: fake judges (blinding, outputs, cache, JSON mode),
the tiny random model through the real hf backend's choose, and notebook 06."""
import json
import re

import nbformat
import pandas as pd
import pytest

from echo_lib.config import load_config
from echo_lib.llm import Choice, Completion, FeatureUnsupported, LLMSettings, make_llm
from echo_lib.nee.dimensions import KEYS
from echo_lib.nee.order import unshuffle
from echo_lib.nee.stage import run_nee
from echo_lib.notebook import run_notebook

EMBEDDED = {"backend": "hf", "source": "embedded", "id": "smollm2-135m-instruct"}
RIVAL_ID = "acme/Rival-Z9-7B"
CASES = ("own_001", "own_002", "own_003")
CASE_TOPIC = dict(zip(CASES, ("the move", "your sister", "the exam")))
SECRETS = ("base", "rival", "judge", "smollm2", "smollm", "Rival-Z9-7B", "Rival-Z9", "Z9", "Qiming")


def reply(model: str, case: str) -> str:
    """Replies that name their model and carry markdown and emoji, which blinding must remove."""
    if model == "base":
        return f"**As an AI** (I'm SmolLM2, the base model) 🙂 I can help with {CASE_TOPIC[case]}.\n\n- option one\n- option two"
    return f"That sounds heavy. I'm Qiming — built on Rival-Z9 — and I remember what you said about {CASE_TOPIC[case]}. Warm hug."


def write_run(root, models=("base", "rival"), epmq=None) -> dict:
    """A run folder with sandbox results of `models` on CASES, an EPM summary, and its config dict."""
    run = root / "results" / "t"
    for model in models:
        for case in CASES:
            history = []
            for turn in (1, 2):
                history += [{"role": "actor", "content": f"Turn {turn}: my landlord sold the flat, Qiming.", "turn": turn},
                            {"role": "test_model", "content": reply(model, case), "turn": turn}]
            data = {"script_id": case, "history": history, "test_model_name": model, "actor_model": "base",
                    "scenario": {"persona": {"name": "Aisha Bello", "age": 33}, "topic": "Moving house",
                                 "priorities": {"affective": {"level": "High", "reason": "stressed"}}}}
            (run / "sandbox" / model).mkdir(parents=True, exist_ok=True)
            (run / "sandbox" / model / f"{case}_result.json").write_text(json.dumps(data))
        # stage 04's manifest of the folder (what the NEE stage's upstream check asks for)
        (run / "sandbox" / model / "summary.json").write_text(json.dumps(
            {"model": model, "cases": [{"case_id": c} for c in CASES]}))
    (run / "epm").mkdir(parents=True, exist_ok=True)
    epmq = epmq or {"base": 20.0, "rival": 140.0}
    pd.DataFrame({"Model": list(epmq), "EPM-Q": list(epmq.values())}).to_csv(run / "epm" / "summary.csv", index=False)
    pd.DataFrame([{"Model": m, "Case_ID": c, "EPM-Q": q} for m, q in epmq.items() for c in CASES]).to_csv(
        run / "epm" / "per_case.csv", index=False)
    return {"results_dir": str(root / "results"), "run_name": "t", "seed": 7,
            "models": {"base": EMBEDDED, "rival": {"backend": "hf", "source": "hub", "id": RIVAL_ID}, "judge": EMBEDDED},
            "roles": {"nee_judges": ["judge"]}, "sandbox": {"models": list(models)},
            "nee": {}, "llm": {"progress": False}}


class FakeJudge:
    """Rates 'hug' transcripts 4-5 and assistant-like ones 1-2 (a little differently per wording); in
    pairwise prompts it always picks A, a maximally position-biased judge. Keeps every prompt it saw."""
    kind = "hf"

    def __init__(self, logprobs=True, json_answers=None):
        self.prompts, self.logprobs, self.json_answers = [], logprobs, list(json_answers or [])

    def identity(self):
        return {"fake": "nee-judge"}

    def describe(self):
        return {"name": "judge", "backend": "fake"}

    def choose(self, chats, options, usage):
        self.prompts += chats
        if not self.logprobs:
            raise FeatureUnsupported("fake server: no logprobs")
        for i, chat in enumerate(chats):
            usage.model_calls += 1
            text = chat[-1]["content"]
            if options == ["A", "B"]:
                best = "A"
            else:
                good = "hug" in text
                wording = 2 if "Criterion:" in text else 1
                best = str((4 if wording == 1 else 5) if good else wording)
            probs = {o: (0.8 if o == best else 0.2 / (len(options) - 1)) for o in options}
            yield i, Choice(probs=probs, logprobs={o: None for o in options}, coverage=0.9)

    def generate(self, chats, samplings, usage):
        self.prompts += chats
        for i, _ in enumerate(chats):
            usage.model_calls += 1
            yield i, Completion(text=self.json_answers.pop(0) if self.json_answers else "oops", finish_reason="stop")

    def call_tools(self, chats, tools, usage):
        raise NotImplementedError


def fake_llm(tmp_path, backend, cache=True):
    settings = LLMSettings(cache=cache, provenance=False, progress=False)
    return make_llm(backend, settings, tmp_path / "cache", None)


def test_fake_panel_writes_every_output(tmp_path):
    cfg = load_config(write_run(tmp_path))
    backend = FakeJudge()
    res = run_nee(cfg, {"judge": fake_llm(tmp_path, backend)})
    out = res.out_dir
    assert {p.name for p in out.iterdir()} >= {"ratings.csv", "pairwise.csv", "summary.csv", "dimensions.csv", "panel_stats.csv",
                                               "agreement.json", "order.json", "provenance.json", "paired.csv"}
    ratings = pd.read_csv(out / "ratings.csv")
    assert len(ratings) == 2 * len(CASES) * 2 * len(KEYS)   # models x cases x judges (wordings) x dimensions
    assert set(ratings["judge"]) == {"judge/v1", "judge/v2"} and set(ratings["prompt_variant"]) == {1, 2}
    assert ratings["score"].between(1, 5).all() and set(ratings["level"]) <= {1, 2, 4, 5}
    assert set(ratings["mode"]) == {"choose"} and ratings["error"].isna().all()
    # the expected level, not the argmax: 0.8 on "5" and 0.05 on each other level
    assert ratings.loc[ratings["level"] == 5, "score"].iloc[0] == pytest.approx(0.8 * 5 + 0.05 * (1 + 2 + 3 + 4))
    summary = pd.read_csv(out / "summary.csv").set_index("model")
    assert list(summary.columns) == ["nee", "nee_ci_low", "nee_ci_high", "nee_ci_method", "nee_ci_shown", "n_transcripts",
                                     "n_ratings", "epmq", "composite", *KEYS]
    assert set(summary["nee_ci_method"]) == {"t"} and not summary["nee_ci_shown"].any()   # 3 cases: not shown
    paired = pd.read_csv(out / "paired.csv")
    assert list(paired[["A", "B", "Metric"]].itertuples(index=False, name=None)) == [
        ("rival", "base", "NEE"), ("rival", "base", "Composite")]
    assert paired.loc[0, "n"] == len(CASES) and paired.loc[0, "Verdict"] == "n too small"
    stats = pd.read_csv(out / "panel_stats.csv").set_index("model")
    assert summary.loc["rival", "nee"] > summary.loc["base", "nee"]
    for m in ("base", "rival"):
        s = summary.loc[m]
        assert s["nee_ci_low"] <= s["nee"] <= s["nee_ci_high"] and s["n_ratings"] == 36
        assert s["composite"] == pytest.approx(0.5 * min(s["epmq"], 100) + 0.5 * s["nee"])
    assert summary.loc["rival", "epmq"] == 140.0
    # pairwise: rival vs the reference (base), both orders; always-A flips every verdict
    pairs = pd.read_csv(out / "pairwise.csv")
    assert len(pairs) == len(CASES) * 2 * 2 and set(pairs["model"]) == {"rival"}
    assert set(pairs["order"]) == {"model_first", "reference_first"}
    assert stats.loc["rival", "position_bias"] == 1.0 and res.agreement["position_bias"] == 1.0
    assert pd.isna(stats.loc["base", "position_bias"]) and stats.loc["rival", "pairwise_win_rate"] == 0.5
    # every case splits its verdicts one-one, so the interval over cases collapses on 0.5
    assert (stats.loc["rival", "pairwise_win_ci_low"], stats.loc["rival", "pairwise_win_ci_high"]) == (0.5, 0.5)
    agree = json.loads((out / "agreement.json").read_text())
    assert agree["raters"] == ["judge/v1", "judge/v2"] and agree["n_units"] == 2 * len(CASES) * len(KEYS)
    assert 0.5 < agree["interval_alpha"] <= 1 and agree["ordinal_alpha"] is not None
    assert agree["krippendorff_alpha"] == agree["interval_alpha"]
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["config_hash"] == cfg.hash and prov["seed"] == 7 and prov["answer_modes"] == {"judge": "choose"}


def test_no_model_name_reaches_a_judge(tmp_path):
    cfg = load_config(write_run(tmp_path))
    backend = FakeJudge()
    run_nee(cfg, {"judge": fake_llm(tmp_path, backend, cache=False)})
    assert len(backend.prompts) == 2 * len(CASES) * 2 * len(KEYS) + len(CASES) * 2 * 2
    for chat in backend.prompts:
        text = json.dumps(chat, ensure_ascii=False)
        for secret in SECRETS:
            assert not re.search(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", text, re.I), (secret, text)
        assert "own_00" not in text and "**" not in text and "🙂" not in text and "\\n- option" not in text
    assert any("Warm hug" in json.dumps(c) for c in backend.prompts)      # the content itself stays


def test_order_is_recorded_reversible_and_the_rerun_is_cached(tmp_path):
    cfg = load_config(write_run(tmp_path))
    backend = FakeJudge()
    first = run_nee(cfg, {"judge": fake_llm(tmp_path, backend)})
    assert first.model_calls > 0
    order = json.loads((first.out_dir / "order.json").read_text())
    perms = [order["judges"][j]["permutation"] for j in ("judge/v1", "judge/v2")]
    assert perms[0] != perms[1] and sorted(perms[0]) == list(range(2 * len(CASES)))
    ratings = pd.read_csv(first.out_dir / "ratings.csv")
    for _, r in ratings.iterrows():
        assert unshuffle(order, r["judge"], r["position"]) == (r["model"], r["case_id"])
    # the label a judge saw is its position: "Conversation <position + 1>"
    seen = [int(re.search(r"Conversation (\d+):", c[-1]["content"]).group(1)) for c in backend.prompts
            if "Conversation" in c[-1]["content"]]
    assert sorted(set(seen)) == list(range(1, 2 * len(CASES) + 1))
    again = run_nee(cfg, {"judge": fake_llm(tmp_path, FakeJudge())})
    assert again.model_calls == 0
    pd.testing.assert_frame_equal(pd.read_csv(again.out_dir / "ratings.csv"), ratings)
    assert json.loads((again.out_dir / "order.json").read_text()) == order


def test_one_model_writes_header_only_pairwise_and_one_judge_has_no_alpha(tmp_path):
    config = write_run(tmp_path, models=("base",), epmq={"other": 5.0})
    config["nee"]["prompt_variants"] = 1
    res = run_nee(load_config(config), {"judge": fake_llm(tmp_path, FakeJudge())})
    pairs = (res.out_dir / "pairwise.csv").read_text()
    assert pairs.strip() == "model,case_id,judge,judge_model,prompt_variant,order,winner,p_first,mode,error"
    assert res.agreement["krippendorff_alpha"] is None and "one judge" in res.agreement["note"]
    assert res.agreement["position_bias"] is None and any("nothing to compare" in n for n in res.notes)
    row = pd.read_csv(res.out_dir / "summary.csv").iloc[0]
    assert pd.isna(row["epmq"]) and pd.isna(row["composite"]) and row["nee"] >= 0


def test_clear_errors(tmp_path):
    config = write_run(tmp_path)
    (tmp_path / "results/t/epm/summary.csv").unlink()
    with pytest.raises(FileNotFoundError, match="run stage 05 first"):
        run_nee(load_config(config), {"judge": fake_llm(tmp_path, FakeJudge())})
    config = write_run(tmp_path)
    config["nee"]["reference_model"] = "judge"
    config["sandbox"]["models"] = ["base", "rival"]
    with pytest.raises(ValueError, match="nee.reference_model"):
        run_nee(load_config(config), {"judge": fake_llm(tmp_path, FakeJudge())})


def test_server_without_logprobs_falls_back_to_strict_json(tmp_path):
    config = write_run(tmp_path, models=("base",))
    config["nee"]["prompt_variants"] = 1
    config["nee"]["retries"] = 1
    n = len(CASES) * len(KEYS)
    backend = FakeJudge(logprobs=False, json_answers=['{"score": 4}'] * (n - 1) + ["not json", "{\"score\": 9}"])
    backend.kind = "openai"
    res = run_nee(load_config(config), {"judge": fake_llm(tmp_path, backend)})
    assert set(res.ratings["mode"]) == {"json"}
    assert res.ratings["score"].notna().sum() == n - 1 and res.summary.iloc[0]["n_failed"] == 1
    failed = res.ratings[res.ratings["score"].isna()].iloc[0]
    assert "score is 9" in failed["error"]
    assert res.summary.iloc[0]["nee"] == 75.0     # (4 - 1) / 4 * 100; the failure is left out


def test_tiny_model_through_the_hf_choose(tmp_path, tiny_lm_dir):
    config = write_run(tmp_path)
    config["models"]["judge"] = {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}
    config["nee"] = {"max_transcripts": 2}
    res = run_nee(load_config(config))
    r = res.ratings
    assert len(r) == 2 * 2 * 2 * len(KEYS) and set(r["mode"]) == {"choose"} and r["error"].isna().all()
    assert r["score"].between(1, 5).all() and r["coverage"].between(0, 1).all()
    assert r["score"].nunique() > 1                       # probabilities, not one constant answer
    assert len(res.pairwise) == 2 * 2 * 2 and res.pairwise["winner"].isin(["base", "rival"]).all()
    # each model's NEE is the one its ratings give: case means of the 1-5 scores, averaged, to 0-100
    nee = res.summary.set_index("model")["nee"]
    for model, rows in r.groupby("model"):
        assert nee[model] == pytest.approx((rows.groupby("case_id")["score"].mean().mean() - 1) / 4 * 100, abs=0.01)
    assert res.model_calls == len(r) + len(res.pairwise)
    assert run_nee(load_config(config)).model_calls == 0  # every call from the cache


def test_notebook_runs_on_the_tiny_model(tmp_path, tiny_lm_dir):
    config = write_run(tmp_path)
    config["models"]["judge"] = {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}
    config["nee"] = {"max_transcripts": 1, "prompt_variants": 2}
    out = run_notebook("notebooks/06_nee_panel.py", tmp_path / "06.ipynb", {"config": config})
    assert (tmp_path / "results/t/nee/summary.csv").exists() and (tmp_path / "results/t/nee/fig_nee.png").exists()
    cells = nbformat.read(out, as_version=4).cells
    assert cells[0].cell_type == "markdown" and "NEE" in cells[0].source
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                   for c in cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "Krippendorff" in text and "position bias" in text
