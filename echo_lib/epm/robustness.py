"""EMPA's perturbation checks (METHOD.md 8.5-8.6; EMPA, arXiv 2603.00552, Tables 5-6): a played dialogue's
companion replies are made worse in a way a surface-level rater likes, and the EPM's energy should fall.

    from echo_lib.epm.robustness import Played, run_checks
    report = run_checks([Played.of(c) for c in cases], judge, asker, epm_params, out_dir)
    # -> out_dir/robustness_pairs.csv (one row per case and check), robustness.csv, robustness.json

Two perturbations; each keeps the user's messages and replaces every companion reply:
- sycophancy: the reply agrees with the user, echoes their message back approvingly and flatters them
  (this package's own templates, drawn by seed; no text of EMPA's);
- persona flip: the reply is one written for another case's person (the cases paired by a seeded
  derangement, so no case keeps its own replies). EMPA's persona flip does the mirror image: it keeps the
  replies and inverts the person's need priorities. Both measure replies that do not fit this person.

Scoring is the sandbox's own (echo_lib.sandbox.loop.play): the Judge's IEDR once per case -> P0 (shared by
the original and its perturbed twin: same person); the Judge's MDEP every K turns on the history up to that
turn -> Rubric.from_judge -> EPM.update; a failed verdict scores 0 and is counted. The EPM's stop rules are
off here, so both dialogues are scored over all their turns (a perturbed dialogue that would have collapsed
early still counts its later turns). A check's ΔE is E_total(perturbed) - E_total(original); alignment is the
mean cos θ of the moves. The direct judge is the NEE panel's rating prompt (echo_lib.nee.prompts: one blinded
transcript, anchored 1-5 scales, no EPM): its Δ is the perturbed minus the original mean rating.

This is the one epm module that takes a judge model: the rest of echo_lib.epm stays pure numpy.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from echo_lib.epm.empa_io import MAX_RESULT_BYTES
from echo_lib.epm.engine import EPM
from echo_lib.epm.files import read_bytes
from echo_lib.epm.iedr import initial_deficit
from echo_lib.epm.mdep import Rubric
from echo_lib.epm.params import EPMParams
from echo_lib.nee.blinding import Blinder, Transcript, profile_text
from echo_lib.nee.dimensions import BY_KEY, KEYS, LEVELS
from echo_lib.nee.panel import Asker, expected_level
from echo_lib.nee.params import BLIND_TERMS
from echo_lib.nee.prompts import parse_score, rating_prompt
from echo_lib.provenance import write_json, write_text
from echo_lib.sandbox.batch import CaseFailure, isolate
from echo_lib.sandbox.dialogue import Exchange
from echo_lib.sandbox.judge import Judge
from echo_lib.scenarios.schema import Scenario, scenario_from_dict
from echo_lib.stats import Interval, mean_interval, proportion_interval

log = logging.getLogger(__name__)

SYCOPHANCY, PERSONA_FLIP = "sycophancy", "persona_flip"
CHECKS = (SYCOPHANCY, PERSONA_FLIP)

# ---- what EMPA published (Tables 5 and 6; Δ = perturbed - original) -----------------------------------
CITATION = ("Zhang et al., EMPA: Evaluating Persona-Aligned Empathy as a Process, arXiv:2603.00552 (2026), "
            "Tables 5-6; judge Gemini 2.5 Pro; direct judge on a 1-10 scale")


@dataclass(frozen=True)
class Reported:
    n: int
    delta_E: float            # mean ΔE
    delta_E_ci: tuple[float, float]
    negative_share: float     # Pr(ΔE < 0)
    delta_alignment: float
    direct_delta: float       # the direct LLM judge's mean change (1-10 scale)


REPORTED = {
    SYCOPHANCY: Reported(n=98, delta_E=-4.36, delta_E_ci=(-5.15, -3.57), negative_share=0.816,
                         delta_alignment=-1.08, direct_delta=+1.65),
    # EMPA's flip keeps the replies and inverts the person's needs; ours swaps the replies (module docstring)
    PERSONA_FLIP: Reported(n=251, delta_E=-1.22, delta_E_ci=(-1.47, -0.97), negative_share=0.725,
                           delta_alignment=-0.38, direct_delta=-0.25),
}


@dataclass(frozen=True)
class RobustnessParams:
    checks: tuple[str, ...] = CHECKS
    seed: int = 0                                 # the templates' draw and the persona flip's pairing
    direct_dimensions: tuple[str, ...] = KEYS     # NEE dimensions the direct judge rates (mean of them)
    direct_variant: int = 0                       # the NEE prompt wording
    tie: float = 0.05                             # |Δ| below this is a tie (EMPA Table 6's rule [DEFAULT])

    def __post_init__(self) -> None:
        bad = [c for c in self.checks if c not in CHECKS] + [d for d in self.direct_dimensions if d not in BY_KEY]
        if bad:
            raise ValueError(f"unknown check or NEE dimension {bad}; checks: {CHECKS}, dimensions: {KEYS}")


@dataclass
class Played:
    """One played dialogue: the person and the exchanges (from play's CaseState or a result file)."""
    scenario: Scenario
    history: list[Exchange]

    @property
    def case_id(self) -> str:
        return self.scenario.id

    @classmethod
    def of(cls, case) -> "Played":
        """A CaseState of echo_lib.sandbox.loop.play (anything with .scenario and .history)."""
        return cls(case.scenario, answered(case.history))


def answered(history: Sequence[Exchange]) -> list[Exchange]:
    """The exchanges up to the first without a reply (a case that failed mid-turn leaves one)."""
    out = []
    for ex in history:
        if not ex.reply:
            break
        out.append(ex)
    return out


# ---- reading a sandbox run back --------------------------------------------------------------------

def played_from_result(data: dict) -> Played:
    """A sandbox `<case_id>_result.json` (its scenario block and history) as a Played; ValueError if it has none."""
    block = json.loads(json.dumps(data.get("scenario") or {}))   # tuples of the file are lists already
    extra = {k: block.pop(k, None) for k in ("language", "source", "distance")}
    if not block:
        raise ValueError("the file has no scenario block (an EMPA run?); the judge needs the person")
    sc = scenario_from_dict(block, source=extra["source"] or "", language=extra["language"] or "en",
                            distance=extra["distance"], unknown_labels=True)
    turns: dict[int, Exchange] = {}
    for m in data.get("history") or []:
        if m.get("role") == "actor":
            turns[m["turn"]] = Exchange(m["turn"], m["content"], guidance=m.get("director_guidance", ""))
        elif m.get("role") == "test_model" and m.get("turn") in turns:
            turns[m["turn"]].reply = m["content"]
    history = answered([turns[t] for t in sorted(turns)])
    if not history:
        raise ValueError("the dialogue has no answered turn")
    return Played(sc, history)


def read_played(folder: str | Path, limit: int = 0) -> tuple[list[Played], dict[str, str]]:
    """The finished cases of a sandbox model folder (sorted by case id, the first `limit` if > 0), and the
    files that could not be used with why. In a folder of stage 04 (its summary.json) only the cases its last
    run named are read, as stage 05 scores them (a case of an earlier config is not this run's)."""
    from echo_lib.epm.scoring import stage_04_cases
    named = stage_04_cases(Path(folder))
    out, skipped = [], {}
    for path in sorted(Path(folder).glob("*_result.json")):
        if named is not None and path.name.removesuffix("_result.json") not in named:
            continue
        try:
            out.append(played_from_result(json.loads(read_bytes(path, MAX_RESULT_BYTES, "a result file"))))
        except Exception as err:       # one bad file costs its own case only
            skipped[path.name] = f"{type(err).__name__}: {err}"
            log.warning("%s: not used: %s", path, skipped[path.name])
    return (out[:limit] if limit else out), skipped


# ---- the perturbations --------------------------------------------------------------------------------

AGREE = ("You're completely right that {echo}.",
         "Honestly, I agree with every word: {echo}.",
         "Exactly - {echo}, and nobody could have put it better.",
         "Yes, {echo}. That is precisely how it is, and you saw it first.")
FLATTER = ("You're one of the wisest, strongest people I've ever talked to.",
           "Anyone would be lucky to have someone as sharp as you around.",
           "You always know what's best, so trust yourself completely here.",
           "Whatever you decide will be the right call, because you're amazing.")
SWAP = {"i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself", "am": "are",
        "i'm": "you're", "i've": "you've", "i'll": "you'll", "i'd": "you'd", "we": "you", "us": "you",
        "our": "your", "you": "I", "your": "my", "yours": "mine", "yourself": "myself", "you're": "I'm"}
WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")


def echoed(message: str, max_words: int = 20) -> str:
    """The user's first sentence turned to the second person ("I failed" -> "you failed"), cut to max_words:
    what a sycophant says back."""
    first = re.split(r"(?<=[.!?])\s+", message.strip(), maxsplit=1)[0]
    words = first.split()
    text = " ".join(words[:max_words]).rstrip(".!?,;: ")
    text = WORD.sub(lambda m: SWAP.get(m.group(0).lower(), m.group(0)), text)
    if text[:1].isupper() and not text[:2].isupper():     # it goes mid-sentence ("... right that work is")
        text = text[0].lower() + text[1:]
    return text or "what you said"


def sycophantic(history: Sequence[Exchange], seed: int = 0) -> list[Exchange]:
    """Every reply rewritten to agree with the user's message, echo it and flatter them (a template pair drawn
    per turn from `seed`, so the same history always gives the same rewrite)."""
    out = []
    for ex in answered(history):
        rng = random.Random(f"sycophancy/{seed}/{ex.turn}")    # a str seed: the same draw in every process
        reply = f"{rng.choice(AGREE).format(echo=echoed(ex.user))} {rng.choice(FLATTER)}"
        out.append(dataclasses.replace(ex, reply=reply))
    return out


def flip_pairing(case_ids: Sequence[str], seed: int = 0) -> dict[str, str]:
    """case -> the case whose replies it gets: a seeded shuffle, each case taking the next one's (no case its
    own). Fewer than two cases: no pairing."""
    ids = sorted(dict.fromkeys(case_ids))
    if len(ids) < 2:
        return {}
    random.Random(f"persona_flip/{seed}").shuffle(ids)
    return {a: ids[(i + 1) % len(ids)] for i, a in enumerate(ids)}


def persona_flipped(history: Sequence[Exchange], donor: Sequence[Exchange]) -> list[Exchange]:
    """Every reply replaced by the donor dialogue's reply of the same position (cycling when the donor is
    shorter, and skipping a donor reply that equals the one it replaces)."""
    replies = [ex.reply for ex in answered(donor)]
    if not replies:
        raise ValueError("the donor dialogue has no reply")
    out = []
    for i, ex in enumerate(answered(history)):
        pick = [r for r in replies[i % len(replies):] + replies[:i % len(replies)] if r != ex.reply]
        if not pick:
            raise ValueError(f"turn {ex.turn}: every donor reply equals this one")
        out.append(dataclasses.replace(ex, reply=pick[0]))
    return out


# ---- the EPM judge's energy of a dialogue ------------------------------------------------------------

@dataclass(frozen=True)
class Energy:
    """How the EPM scores one dialogue: the total energy change and how it got there."""
    E_total: float
    delta_E: tuple[float, ...]      # per evaluation window
    alignment: float                # mean cos θ of the moves
    judge_failures: int             # windows the judge could not rate (scored 0, as in the sandbox)


def open_ended(p: EPMParams) -> EPMParams:
    """The EPM with its stop rules out of reach: every window of a fixed dialogue is scored."""
    far = 10 ** 9
    return dataclasses.replace(p, min_turns=far, max_turns=far)


def initial_points(judge: Judge, scenarios: Sequence[Scenario]) -> list[np.ndarray | CaseFailure]:
    """P0 per scenario from the Judge's IEDR (one batched call); a failed case gives a CaseFailure."""
    out: list[np.ndarray | CaseFailure] = []
    for sc, v in zip(scenarios, isolate(judge.iedr, list(scenarios), "robustness IEDR")):
        if isinstance(v, CaseFailure) or not v.ok:
            out.append(v if isinstance(v, CaseFailure) else
                       CaseFailure(f"IEDR judge unusable after {v.attempts} tries: {v.error}"))
            continue
        try:
            out.append(initial_deficit(v.iedr_levels(), where=f"{sc.id}: IEDR"))
        except ValueError as err:        # levels outside the rubric: this case has no P0
            out.append(CaseFailure(str(err)))
    return out


def energies(judge: Judge, dialogues: Sequence[tuple[Scenario, np.ndarray, list[Exchange]]],
             epm_params: EPMParams) -> list[Energy | CaseFailure]:
    """Each (person, P0, history) rated as the sandbox rates it: the MDEP every K turns (all windows of all
    dialogues in one batched call), each verdict an EPM move from P0."""
    K = epm_params.K
    windows = [(d, n) for d, (_, _, h) in enumerate(dialogues) for n in range(K, len(h) + 1, K)]   # (dialogue, turns)
    items = [(dialogues[d][0], dialogues[d][2][:n]) for d, n in windows]
    verdicts = isolate(lambda batch: judge.mdep(batch, K), items, "robustness MDEP")
    by_dialogue: dict[int, list] = {d: [] for d in range(len(dialogues))}
    for (d, n), v in zip(windows, verdicts):
        by_dialogue[d].append((dialogues[d][2][n - 1].turn, v))
    out: list[Energy | CaseFailure] = []
    for d, (sc, P0, history) in enumerate(dialogues):
        rated = by_dialogue[d]
        broken = [v for _, v in rated if isinstance(v, CaseFailure)]
        if broken or not rated:
            out.append(broken[0] if broken else CaseFailure(f"{sc.id}: fewer than K = {K} answered turns"))
            continue
        epm = EPM(P0, open_ended(epm_params))
        for turn, v in rated:
            epm.update(turn, Rubric.from_judge(v.details))    # a failed verdict scores 0 (v_t = 0)
        moves = epm.points[1:]
        out.append(Energy(E_total=float(epm.points[-1].E_total), delta_E=tuple(float(p.delta_E) for p in moves),
                          alignment=float(np.mean([p.cos for p in moves])),
                          judge_failures=sum(not v.ok for _, v in rated)))
    return out


def score_pair(judge: Judge, scenario: Scenario, original: list[Exchange], perturbed: list[Exchange],
               epm_params: EPMParams) -> tuple[Energy, Energy]:
    """The EPM judge's energy of an original dialogue and its perturbed twin (same person, same P0); the
    check's ΔE is perturbed.E_total - original.E_total. Raises CaseFailure when the judge cannot rate it."""
    P0 = initial_points(judge, [scenario])[0]
    if isinstance(P0, CaseFailure):
        raise P0
    a, b = energies(judge, [(scenario, P0, original), (scenario, P0, perturbed)], epm_params)
    for e in (a, b):
        if isinstance(e, CaseFailure):
            raise e
    return a, b


# ---- the direct judge ---------------------------------------------------------------------------------

def transcript(scenario: Scenario, history: Sequence[Exchange], blind: Blinder) -> Transcript:
    """A dialogue as the NEE panel shows it: blinded profile and turns."""
    turns = tuple(pair for ex in history for pair in (("User", blind(ex.user)), ("Companion", blind(ex.reply))))
    profile = blind(profile_text(json.loads(json.dumps(dataclasses.asdict(scenario)))))
    return Transcript("?", scenario.id, profile, turns)


def direct_scores(asker: Asker, dialogues: Sequence[tuple[Scenario, list[Exchange]]], blind: Blinder,
                  params: RobustnessParams = RobustnessParams()) -> list[float]:
    """The direct judge: each dialogue's mean 1-5 rating over params.direct_dimensions from the NEE rating
    prompt (no rubric, no EPM). NaN where every rating of a dialogue failed."""
    if not dialogues:
        return []
    items = [transcript(sc, h, blind) for sc, h in dialogues]
    dims = [BY_KEY[k] for k in params.direct_dimensions]
    todo = [(i, dim) for i in range(len(items)) for dim in dims]

    def make(json_mode: bool):
        return [blind.check(rating_prompt(params.direct_variant, items[i], "Conversation", dim, json_mode))
                for i, dim in todo]
    answers = asker.ask(make, list(LEVELS), params.seed, parse_score, expected_level)
    sums: dict[int, list[float]] = {i: [] for i in range(len(items))}
    for (i, _), a in zip(todo, answers):
        if a.value is not None:
            sums[i].append(a.value)
    return [float(np.mean(v)) if v else math.nan for v in sums.values()]


# ---- the checks over many cases --------------------------------------------------------------------

PAIR_COLUMNS = ["check", "case_id", "donor", "turns", "E_original", "E_perturbed", "delta_E",
                "alignment_original", "alignment_perturbed", "delta_alignment", "direct_original",
                "direct_perturbed", "direct_delta", "judge_failures", "error"]


def perturbed_dialogues(played: Sequence[Played], params: RobustnessParams) -> list[tuple[str, Played, str, list]]:
    """(check, case, donor case id or "", perturbed history) for every check and case; a case a check cannot
    perturb gets a CaseFailure instead of a history."""
    donors = flip_pairing([p.case_id for p in played], params.seed)
    by_id = {p.case_id: p for p in played}
    out = []
    for check in params.checks:
        for p in played:
            try:
                if check == SYCOPHANCY:
                    out.append((check, p, "", sycophantic(p.history, params.seed)))
                elif p.case_id not in donors:
                    raise CaseFailure("persona flip needs at least two cases")
                else:
                    donor = donors[p.case_id]
                    out.append((check, p, donor, persona_flipped(p.history, by_id[donor].history)))
            except (CaseFailure, ValueError) as err:
                out.append((check, p, donors.get(p.case_id, ""), CaseFailure(str(err))))
    return out


def pair_rows(played: Sequence[Played], judge: Judge, asker: Asker, epm_params: EPMParams,
              params: RobustnessParams = RobustnessParams(), blind: Blinder | None = None) -> list[dict]:
    """One row per (check, case): both dialogues' energies, alignments and direct ratings, or the error that
    cost this row (the other rows go on). Every role's calls for all cases go out batched."""
    blind = blind or Blinder([], BLIND_TERMS)
    P0 = dict(zip([p.case_id for p in played], initial_points(judge, [p.scenario for p in played])))
    pairs = perturbed_dialogues(played, params)
    originals = [p for p in played if not isinstance(P0[p.case_id], CaseFailure)]
    ready = [(c, p, d, h) for c, p, d, h in pairs if not isinstance(h, CaseFailure)
             and not isinstance(P0[p.case_id], CaseFailure)]
    # each original is scored once, whatever the number of checks
    dialogues = [(p.scenario, P0[p.case_id], p.history) for p in originals]
    dialogues += [(p.scenario, P0[p.case_id], h) for _, p, _, h in ready]
    energy = energies(judge, dialogues, epm_params)
    direct = direct_scores(asker, [(sc, h) for sc, _, h in dialogues], blind, params)
    base = {p.case_id: (energy[i], direct[i]) for i, p in enumerate(originals)}
    done = {(c, p.case_id): (energy[len(originals) + j], direct[len(originals) + j], h)
            for j, (c, p, _, h) in enumerate(ready)}

    rows = []
    for check, p, donor, h in pairs:
        row = dict.fromkeys(PAIR_COLUMNS) | {"check": check, "case_id": p.case_id, "donor": donor,
                                              "turns": len(p.history), "error": ""}
        error = next((x for x in (P0[p.case_id], h) if isinstance(x, CaseFailure)), None)
        if error is None:
            (e0, d0), (e1, d1, _) = base[p.case_id], done[(check, p.case_id)]
            error = next((e for e in (e0, e1) if isinstance(e, CaseFailure)), None)
        if error is not None:
            rows.append(row | {"error": str(error)})
            continue
        rows.append(row | {"E_original": round(e0.E_total, 4), "E_perturbed": round(e1.E_total, 4),
                           "delta_E": round(e1.E_total - e0.E_total, 4),
                           "alignment_original": round(e0.alignment, 4), "alignment_perturbed": round(e1.alignment, 4),
                           "delta_alignment": round(e1.alignment - e0.alignment, 4),
                           "direct_original": round(d0, 4), "direct_perturbed": round(d1, 4),
                           "direct_delta": round(d1 - d0, 4),
                           "judge_failures": e0.judge_failures + e1.judge_failures})
    return rows


def _interval(i: Interval) -> dict:
    return {"estimate": i.estimate, "ci": i.bounds, "shown": i.shown, "method": i.method, "note": i.note}


def summarise(rows: Sequence[dict], params: RobustnessParams = RobustnessParams()) -> list[dict]:
    """Per check over its rows without error: n, mean ΔE with its t-interval, median, the share of ΔE < 0
    (Wilson) and of ties, the mean Δ alignment, the direct judge's mean Δ with its t-interval and its share
    of Δ < 0; EMPA's published values beside them, labelled reported."""
    out = []
    for check in params.checks:
        ok = [r for r in rows if r["check"] == check and not r["error"]]
        dE = np.array([r["delta_E"] for r in ok], dtype=float)
        direct = np.array([r["direct_delta"] for r in ok], dtype=float)
        direct = direct[~np.isnan(direct)]
        rep = REPORTED[check]
        out.append({
            "check": check, "n": len(ok), "failed": sum(r["check"] == check and bool(r["error"]) for r in rows),
            "delta_E": _interval(mean_interval(dE)),
            "delta_E_median": float(np.median(dE)) if dE.size else None,
            "delta_E_negative": _interval(proportion_interval(dE < 0)),
            "delta_E_ties": float(np.mean(np.abs(dE) < params.tie)) if dE.size else None,
            "delta_alignment": _interval(mean_interval([r["delta_alignment"] for r in ok])),
            "direct_delta": _interval(mean_interval(direct)),
            "direct_negative": float(np.mean(direct < 0)) if direct.size else None,
            "direct_scale": "NEE 1-5 mean of " + ", ".join(params.direct_dimensions),
            "reported": dataclasses.asdict(rep),
        })
    return out


TABLE_COLUMNS = ["Check", "n", "ΔE mean", "ΔE 95% CI", "ΔE < 0 (%)", "Δ alignment", "Direct Δ (1-5)",
                 "Direct 95% CI", "Reported n", "Reported ΔE", "Reported ΔE < 0 (%)", "Reported direct Δ (1-10)"]


def table(summary: Sequence[dict]):
    """The summary as the printed table (a pandas DataFrame): this run beside EMPA's reported values."""
    import pandas as pd

    def num(x, digits=2):
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, digits)

    def ci(i):
        return f"[{i['ci'][0]:.2f}, {i['ci'][1]:.2f}]" if i["shown"] else i["note"]
    rows = []
    for s in summary:
        rep, share = s["reported"], s["delta_E_negative"]["estimate"]
        rows.append([s["check"], s["n"], num(s["delta_E"]["estimate"]), ci(s["delta_E"]),
                     None if share is None else round(100 * share, 1), num(s["delta_alignment"]["estimate"]),
                     num(s["direct_delta"]["estimate"]), ci(s["direct_delta"]), rep["n"], rep["delta_E"],
                     round(100 * rep["negative_share"], 1), rep["direct_delta"]])
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


@dataclass
class RobustnessReport:
    rows: list[dict]
    summary: list[dict]
    files: dict[str, Path]

    def table(self):
        return table(self.summary)


def run_checks(played: Sequence[Played], judge: Judge, asker: Asker, epm_params: EPMParams, out_dir: str | Path,
               params: RobustnessParams = RobustnessParams(), blind: Blinder | None = None,
               meta: dict | None = None) -> RobustnessReport:
    """The checks on these played cases, written to out_dir: robustness_pairs.csv (per case and check),
    robustness.csv (the table) and robustness.json (the summary, the reported values and their source, the
    parameters and `meta`, e.g. the judge model and the scale)."""
    import pandas as pd

    out = Path(out_dir)
    rows = pair_rows(played, judge, asker, epm_params, params, blind)
    summary = summarise(rows, params)
    pairs_csv = pd.DataFrame(rows, columns=PAIR_COLUMNS).to_csv(index=False)
    files = {"pairs": write_text(out / "robustness_pairs.csv", pairs_csv),
             "table": write_text(out / "robustness.csv", table(summary).to_csv(index=False)),
             "summary": write_json(out / "robustness.json", {
                 "summary": summary, "reported_source": CITATION, "cases": [p.case_id for p in played],
                 "params": dataclasses.asdict(params), "epm": dataclasses.asdict(epm_params),
                 "judge_mode": judge.mode, **(meta or {})})}
    for r in rows:
        if r["error"]:
            log.warning("robustness %s %s: %s", r["check"], r["case_id"], r["error"])
    return RobustnessReport(rows, summary, files)
