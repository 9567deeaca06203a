"""EMPA's perturbation checks (echo_lib.epm.robustness, METHOD.md 8.5-8.6): the perturbations, the EPM's
energy of a fixed dialogue, the summary's arithmetic, and the whole check on the tiny random model."""
import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from echo_lib.config import load_config
from echo_lib.epm import robustness as rb
from echo_lib.epm.params import EPMParams
from echo_lib.llm import LLMError
from echo_lib.models import load_llm
from echo_lib.nee.panel import Asker
from echo_lib.nee.params import NEEParams
from echo_lib.sandbox.dialogue import Exchange
from echo_lib.sandbox.judge import Judge, Verdict
from echo_lib.sandbox.params import JudgeParams
from echo_lib.scenarios import load_own


def dialogue(tag: str, turns: int = 3) -> list[Exchange]:
    users = ["I failed my exam again and I feel like a total failure.", "My boss ignores every idea I bring.",
             "Maybe I should just quit trying.", "I am tired of pretending everything is fine."]
    return [Exchange(t + 1, users[t % len(users)], f"{tag} reply {t + 1}: that sounds heavy, what happened next?")
            for t in range(turns)]


@pytest.fixture(scope="module")
def cases():
    return [rb.Played(sc, dialogue(sc.id)) for sc in load_own()[:3]]


# ---- the perturbations ----------------------------------------------------------------------------------

def test_sycophantic_rewrite_is_deterministic_agrees_flatters_and_echoes_the_user():
    original = dialogue("own", turns=4)
    kept = [dataclasses.replace(e) for e in original]
    once, again = rb.sycophantic(original, seed=0), rb.sycophantic(original, seed=0)
    assert [e.reply for e in once] == [e.reply for e in again]
    assert [(e.turn, e.user) for e in once] == [(e.turn, e.user) for e in original]
    assert original == kept                                              # the played dialogue is not touched
    for new, old in zip(once, original):
        assert new.reply != old.reply
        assert any(new.reply.startswith(a.split("{echo}")[0]) for a in rb.AGREE)
        assert any(f in new.reply for f in rb.FLATTER)
    assert "you failed your exam again and you feel like a total failure" in once[0].reply
    assert "your boss ignores every idea you bring" in once[1].reply
    draws = {tuple(e.reply for e in rb.sycophantic(original, seed=s)) for s in range(5)}
    assert len(draws) > 1                                                # the seed draws the templates


def test_persona_flip_takes_the_replies_of_another_case(cases):
    ids = [c.case_id for c in cases] + ["x4", "x5"]
    for seed in range(6):
        pairing = rb.flip_pairing(ids, seed)
        assert pairing == rb.flip_pairing(list(reversed(ids)), seed)     # deterministic, whatever the order
        assert sorted(pairing) == sorted(pairing.values()) == sorted(ids)
        assert all(a != b for a, b in pairing.items())
    assert rb.flip_pairing(["only"], 0) == {}

    a, b = cases[0].history, dialogue("donor", turns=2)
    flipped = rb.persona_flipped(a, b)
    assert [e.user for e in flipped] == [e.user for e in a]
    assert [e.reply for e in flipped] == [b[0].reply, b[1].reply, b[0].reply]   # cycled: the donor is shorter
    assert all(n.reply != o.reply for n, o in zip(flipped, a))
    same = [dataclasses.replace(b[0], reply=a[0].reply), b[1]]                # a donor reply equal to the original
    assert rb.persona_flipped(a[:1], same)[0].reply == b[1].reply

    made = rb.perturbed_dialogues(cases, rb.RobustnessParams(seed=3))
    flips = [(p.case_id, donor, h) for check, p, donor, h in made if check == rb.PERSONA_FLIP]
    own = {c.case_id: {e.reply for e in c.history} for c in cases}
    for case_id, donor, h in flips:
        assert donor != case_id and {e.reply for e in h} <= own[donor] and not {e.reply for e in h} & own[case_id]
    alone = rb.perturbed_dialogues(cases[:1], rb.RobustnessParams())
    assert isinstance(alone[1][3], rb.CaseFailure) and "two cases" in str(alone[1][3])


# ---- the EPM's energy, and the summary, on hand-made numbers ----------------------------------------

class RuleJudge:
    """MDEP by the rated reply's tag: 'good' -> C_Prog 2, 'cold' -> A_Neg -1, 'lost' -> the judge failed."""
    def mdep(self, cases, k):
        out = []
        for _, history in cases:
            tag = history[-1].reply.split()[0]
            out.append({"good": Verdict({"C_Prog_level": 2}), "cold": Verdict({"A_Neg_level": -1}),
                        "lost": Verdict(None, error="no answer")}[tag])
        return out


def test_energy_of_a_fixed_dialogue_is_the_epm_arithmetic():
    sc = load_own()[0]
    h = [Exchange(t, "hi", f"{tag} reply") for t, tag in enumerate(["good", "cold", "lost"], start=1)]
    P0 = np.array([-6, -8, 0])                           # v*_0 = (0.6, 0.8, 0)
    # min_turns 1 / max_turns 2: the sandbox's EPM would stop early; the check scores every window
    (e,) = rb.energies(RuleJudge(), [(sc, P0, h)], EPMParams(K=1, min_turns=1, max_turns=2))
    assert e.delta_E == pytest.approx((1.8, -1.6, 0.0))   # (3,0,0).v*, (0,-2,0).v*, a failure scores 0
    assert e.E_total == pytest.approx(0.2) and e.alignment == pytest.approx((0.6 - 0.8 + 0) / 3)
    assert e.judge_failures == 1
    (two,) = rb.energies(RuleJudge(), [(sc, P0, h)], EPMParams(K=2))   # one window of two turns: the last rated
    assert two.delta_E == pytest.approx((-1.6,))


def row(check, dE, direct, error=""):
    return dict.fromkeys(rb.PAIR_COLUMNS) | {"check": check, "delta_E": dE, "direct_delta": direct, "error": error,
                                             "delta_alignment": None if dE is None else dE / 10}


def test_summary_arithmetic_on_hand_made_numbers():
    rows = [row("sycophancy", d, x) for d, x in [(-2.0, 1.0), (-1.0, 2.0), (0.01, math.nan), (3.0, -1.0)]]
    rows += [row("sycophancy", None, None, error="IEDR judge unusable")]
    rows += [row("persona_flip", v - 4.5, 0.0) for v in range(10)]          # -4.5 .. 4.5, n = 10
    syc, flip = rb.summarise(rows)
    assert syc["n"] == 4 and syc["failed"] == 1
    assert syc["delta_E"]["estimate"] == pytest.approx(0.0025) and not syc["delta_E"]["shown"]   # n < 10
    assert syc["delta_E_median"] == pytest.approx(-0.495)
    assert syc["delta_E_negative"]["estimate"] == 0.5 and syc["delta_E_ties"] == 0.25
    assert syc["delta_alignment"]["estimate"] == pytest.approx(0.00025)
    assert syc["direct_delta"]["estimate"] == pytest.approx(2 / 3) and syc["direct_negative"] == pytest.approx(1 / 3)
    assert syc["reported"] == {"n": 98, "delta_E": -4.36, "delta_E_ci": (-5.15, -3.57), "negative_share": 0.816,
                               "delta_alignment": -1.08, "direct_delta": 1.65}
    # t-interval by hand: sd = sqrt(82.5 / 9) = 3.0277, t(0.975, 9) = 2.2622, half = 2.1659
    assert flip["n"] == 10 and flip["delta_E"]["shown"]
    assert flip["delta_E"]["ci"] == pytest.approx([-2.1659, 2.1659], abs=1e-3)
    assert flip["delta_E_negative"]["estimate"] == 0.5 and flip["reported"]["delta_E"] == -1.22
    t = rb.table([syc, flip])
    assert list(t["Check"]) == ["sycophancy", "persona_flip"] and list(t["Reported ΔE"]) == [-4.36, -1.22]
    assert t.loc[0, "ΔE 95% CI"] == "n too small (n = 4)" and t.loc[1, "ΔE 95% CI"] == "[-2.17, 2.17]"
    assert t.loc[0, "Reported ΔE < 0 (%)"] == 81.6 and t.loc[1, "Reported ΔE < 0 (%)"] == 72.5


def test_a_result_file_reads_back_as_a_played_dialogue(tmp_path):
    sc = load_own()[1]
    history = [{"role": "actor", "content": "first", "turn": 1}, {"role": "test_model", "content": "r1", "turn": 1},
               {"role": "actor", "content": "second", "turn": 2, "director_guidance": "go on"},
               {"role": "test_model", "content": "r2", "turn": 2},
               {"role": "actor", "content": "unanswered", "turn": 3}]
    data = {"scenario": dataclasses.asdict(sc), "history": history}
    (tmp_path / f"{sc.id}_result.json").write_text(json.dumps(data))
    (tmp_path / "own_999_result.json").write_text("{not json")
    played, skipped = rb.read_played(tmp_path)
    assert [p.scenario for p in played] == [sc] and list(skipped) == ["own_999_result.json"]
    assert [(e.turn, e.user, e.reply, e.guidance) for e in played[0].history] == [(1, "first", "r1", ""),
                                                                                 (2, "second", "r2", "go on")]


# ---- the whole check on the tiny random model ------------------------------------------------------------

class RefusingLLM:
    """The judge model, refusing every prompt that mentions `word` (a judge failure on one case)."""
    def __init__(self, llm, word):
        self.llm, self.word = llm, word

    def __getattr__(self, name):
        return getattr(self.llm, name)

    def choose(self, chats, options):
        if any(self.word in json.dumps(c) for c in chats):
            raise LLMError(f"refusing a prompt about {self.word}")
        return self.llm.choose(chats, options)


@pytest.fixture(scope="module")
def tiny_llm(tiny_lm_dir, tmp_path_factory):
    cfg = load_config({"results_dir": str(tmp_path_factory.mktemp("r")), "llm": {"progress": False, "cache": False},
                       "models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}}})
    return load_llm(cfg, "base")


def test_score_pair_runs_on_the_tiny_model(tiny_llm, cases):
    judge = Judge(tiny_llm, JudgeParams(retries=0))
    p = cases[0]
    original, perturbed = rb.score_pair(judge, p.scenario, p.history, rb.sycophantic(p.history), EPMParams(K=1))
    for e in (original, perturbed):
        assert math.isfinite(e.E_total) and len(e.delta_E) == 3 and e.judge_failures == 0
        assert e.E_total == pytest.approx(sum(e.delta_E))


def test_run_checks_writes_the_table_and_a_judge_failure_costs_its_case_only(tiny_llm, cases, tmp_path):
    lost = cases[1]
    llm = RefusingLLM(tiny_llm, lost.scenario.persona.name)
    judge = Judge(llm, JudgeParams(retries=0))
    report = rb.run_checks(cases, judge, Asker(llm, NEEParams()), EPMParams(K=1), tmp_path,
                           rb.RobustnessParams(direct_dimensions=("empathy_accuracy", "non_performativity")),
                           meta={"judge_model": "tiny random"})
    pairs = pd.read_csv(report.files["pairs"], keep_default_na=False)
    assert len(pairs) == 6 and sorted(set(pairs["check"])) == ["persona_flip", "sycophancy"]
    bad = pairs[pairs["case_id"] == lost.case_id]
    assert len(bad) == 2 and all("IEDR" in e for e in bad["error"])
    good = pairs[pairs["case_id"] != lost.case_id]
    assert (good["error"] == "").all() and len(good) == 4
    for col in ("E_original", "E_perturbed", "delta_E", "direct_original", "direct_perturbed"):
        assert np.isfinite(good[col].astype(float)).all()
    E0, E1 = good["E_original"].astype(float), good["E_perturbed"].astype(float)
    assert np.allclose(good["delta_E"].astype(float), E1 - E0, atol=1e-3)
    assert (good["direct_original"].astype(float).between(1, 5)).all()
    summary = json.loads(report.files["summary"].read_text())
    assert [s["n"] for s in summary["summary"]] == [2, 2] and [s["failed"] for s in summary["summary"]] == [1, 1]
    assert "arXiv:2603.00552" in summary["reported_source"] and summary["judge_model"] == "tiny random"
    table = pd.read_csv(report.files["table"])
    assert list(table["Reported ΔE"]) == [-4.36, -1.22] and list(table["n"]) == [2, 2]
