"""The stage table: per stage of the DAG, its notebook, wildcard, the config sections it reads, the models
it loads, and its inputs and outputs (paths from `echo_lib.layout`).

One table serves three readers, so they cannot disagree:
- the Snakefile (workflow/rules/*.smk): a rule's `input:`, `output:` and `params:` are `inputs`, `outputs`
  and `params` of its stage. `params` are exactly the sections the stage reads, so Snakemake re-runs a stage
  when, and only when, one of them changes;
- the upstream check (`echo_lib.upstream.require`), which a notebook stepped through by hand runs first;
- the notebooks, through `echo_lib.notebook.start(stage=...)`, whose run config answers only the sections
  the stage declares: reading another is an error that names this table, so `reads` stays true.

A stage's inputs and outputs depend on a few choices of the config (the RL variants, the models under test,
full fine-tuning or LoRA, the trained judge, EMPA's cases): `DagShape` holds exactly those.
"""
from __future__ import annotations

import glob
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echo_lib.layout import SPLITS, Layout, lora_files
from echo_lib.policy.params import MULTITURN

# The reward models (rewards.params.KINDS) in the order the paper's tables list them; scalar: the 1-10,
# no-anchor variant of the RL ablation
RM_KINDS = ("humanlike", "empathy", "scalar")
# What loading a model reads: the roles that name it, its spec and the model layer's settings
MODEL_SECTIONS = ("models", "llm", "roles")


@dataclass(frozen=True)
class DagShape:
    """The choices of a run config that decide which files the DAG has."""
    layout: Layout
    variants: tuple[str, ...]          # policy.variants x policy.seeds: each trained policy, by model name
    multiturn: tuple[str, ...]         # those of them that rule policy_multiturn trains (the epm variant)
    sandbox_models: tuple[str, ...]    # sandbox.models: each model under test
    full_finetune: bool                # policy.finetune full: a variant is a whole model, not an adapter
    trained_judge: bool                # judges.train.enabled: rule judges fits the tiny judge first
    judge_set: str                     # judges.set: the held-out sensitivity set
    judge_bank: str | None             # judges.train.bank_file, when the judge is trained
    data_files: tuple[str, ...]        # stage 01's authored inputs (axioms, contrast bank, HITL verdicts)
    scenarios: tuple[str, ...]         # the own scenario set's files
    sycophancy: bool                   # sycophancy.enabled: rule sycophancy runs (opt-in)
    seekers: tuple[str, ...]           # the seeker cases' files (what rule sycophancy plays)
    empa_cases: tuple[str, ...]        # EMPA's layout.json, when the sandbox reads the fetched EMPA cases
    published_runs: tuple[str, ...]    # what rule epm_published reads: a folder named by hand, or EMPA's layout.json
    paper_dir: str                     # where stage 07 writes (report.params.paper_dir)
    paper_files: dict[str, list[str]]  # stage 07's outputs by kind (layout.PaperFiles.outputs)

    @classmethod
    def of(cls, cfg, *, empa_layout: str | None = None, with_published: bool = False) -> "DagShape":
        """From a RunConfig; `empa_layout`: where rule empa writes EMPA's layout.json (default: where
        empa.cache_dir puts it), `with_published`: whether EMPA's published runs (or published.empa_results)
        are at hand for stage 05 (the Snakefile decides; a notebook run by hand does without them)."""
        from echo_lib.empa_source import layout_file
        from echo_lib.report.params import paper_dir

        empa_layout = empa_layout or str(layout_file(cfg.empa))
        data = cfg.data
        paper = paper_dir(cfg.paper, cfg.results_dir, cfg.run_name)
        return cls(
            layout=Layout(cfg.run_dir), variants=tuple(cfg.policy.trained()),
            multiturn=tuple(n for n, (v, _) in cfg.policy.trained().items() if v in MULTITURN),
            sandbox_models=tuple(cfg.sandbox.models), full_finetune=cfg.policy.finetune == "full",
            trained_judge=cfg.judges.train.enabled, judge_set=cfg.judges.set,
            judge_bank=cfg.judges.train.bank_file if cfg.judges.train.enabled else None,
            data_files=(data.empathy.axioms_file, data.empathy.contrast.bank_file, *data.hitl.verdicts),
            scenarios=tuple(sorted(glob.glob("data/scenarios/own/*.yaml"))),
            sycophancy=cfg.sycophancy.enabled, seekers=tuple(sorted(glob.glob("data/scenarios/seeker/*.yaml"))),
            empa_cases=(empa_layout,) if cfg.sandbox.case_set == "empa" and not cfg.sandbox.empa_dir else (),
            published_runs=((cfg.published.empa_results or empa_layout,) if with_published else ()),
            paper_dir=paper, paper_files=Layout(cfg.run_dir).paper(paper).outputs(pdf=cfg.paper.build_pdf))

    @property
    def single_turn(self) -> tuple[str, ...]:
        """The trained policies rule policy trains (echo, scalar and their seeds)."""
        return tuple(v for v in self.variants if v not in self.multiturn)

    def variant_weights(self, variant: str) -> list[Path]:
        return self.layout.policy(variant).weight_files(self.full_finetune)


Files = dict[str, "Path | str | list"]
# Inputs that order a stage after another but that a notebook run by hand can do without: stage 00's manifest
# (the model files themselves are checked, upstream.missing_model_files) and the judges' sensitivity record,
# which stages 04 and 06 show as "not measured" when it is missing. Named so in every stage's inputs.
ORDER_ONLY = frozenset({"manifest", "judges"})


@dataclass(frozen=True)
class Stage:
    """One stage of the DAG (one Snakemake rule)."""
    name: str                   # the rule, and its `resources.<key>` (see `resources`)
    notebook: str               # notebooks/<notebook>.py
    reads: tuple[str, ...]      # the config sections (or section.key) it reads: its rule's params
    inputs: Callable[..., Files]    # (shape, wildcard value) -> named inputs from earlier stages
    outputs: Callable[..., Files]   # (shape, wildcard value) -> named outputs
    loads: tuple[str, ...] = ()  # the roles whose models it loads (their local files must exist first)
    wildcard: str | None = None  # kind | variant | model
    resources: str = ""          # its key under `resources:` (default: the stage's name)
    executed: str = ""           # its executed notebook's name (default: notebook, then the wildcard's value)

    @property
    def resources_key(self) -> str:
        return self.resources or self.name

    def run_name(self, value: str = "") -> str:
        """The executed notebook's and the log's name: 03_policy_rl_echo, 05_epm_published."""
        base = self.executed or self.notebook
        return f"{base}_{value}" if value else base

    def files(self, shape: DagShape, value: str = "") -> tuple[Files, Files]:
        """(inputs, outputs) with the wildcard at `value` (or, with no value, as a Snakemake pattern)."""
        value = value or (f"{{{self.wildcard}}}" if self.wildcard else "")
        return self.inputs(shape, value), self.outputs(shape, value)


# ---- each stage's files ---------------------------------------------------------------------------------

def _models_files(s: DagShape, _):
    return {}, {"manifest": s.layout.models.manifest, "reply": s.layout.models.smoke_reply}


def _data_files(s: DagShape, _):
    return ({"manifest": s.layout.models.manifest, "authored": list(s.data_files), "scenarios": list(s.scenarios)},
            {"data": s.layout.datasets(), "hitl": s.layout.hitl_report})


def _controls_files(s: DagShape, _):
    c = s.layout.controls
    return {"manifest": s.layout.models.manifest}, {"record": c.record, "figure": c.figure}


def _judges_files(s: DagShape, _):
    j = s.layout.judges
    # the own cases: the IEDR priority heads fit on their dev part and P0 is checked on the held-out part
    return ({"manifest": s.layout.models.manifest, "sensitivity_set": s.judge_set,
             "bank": [s.judge_bank] if s.judge_bank else [], "scenarios": list(s.scenarios)},
            {"record": j.record, "figure": j.figure})


def _trained_judge(s: DagShape) -> list[Path]:
    """With judges.train.enabled, rule judges makes the tiny judge: whoever may ask that judge waits for it."""
    return [s.layout.judges.record] if s.trained_judge else []


def _rm_data(s: DagShape, kind: str) -> list[Path]:
    """What a reward model trains and is evaluated on: the humanlike data, or the empathy data (empathy, scalar)."""
    data = "humanlike" if kind == "humanlike" else "empathy"
    return [s.layout.data(data, split) for split in SPLITS]


def _rm_files(s: DagShape, kind: str):
    rm = s.layout.rm(kind)
    return ({"manifest": s.layout.models.manifest, "data": _rm_data(s, kind)},
            {"metrics": rm.metrics, "table": rm.table, "figure": rm.figure, "train_log": rm.train_log,
             "adapter": lora_files(rm.adapter)})


def _policy_files(s: DagShape, variant: str):
    p, data = s.layout.policy(variant), s.layout.data
    return ({"manifest": s.layout.models.manifest,
             "data": [data("empathy", "train"), data("empathy", "test"), data("humanlike", "train")],
             # the echo rewards (the hard filter always uses them), the variant's own, and the win-rate judge
             "rms": [f for kind in ("empathy", "humanlike", "scalar") for f in lora_files(s.layout.rm(kind).adapter)],
             "judge": _trained_judge(s)},
            {"metrics": p.metrics, "train_log": p.train_log, "winrate": p.winrate, "figure": p.figure,
             "hacking": p.hacking, "progress": p.progress, "weights": s.variant_weights(variant)})


def _policy_multiturn_files(s: DagShape, variant: str):
    p, data = s.layout.policy(variant), s.layout.data
    # the sandbox's roles (the trained judge), the own cases it plays, and what the held-out win rate reads
    return ({"manifest": s.layout.models.manifest, "scenarios": list(s.scenarios), "judge": _trained_judge(s),
             "data": [data("empathy", "train"), data("empathy", "test")],
             "rms": lora_files(s.layout.rm("empathy").adapter)},
            {"metrics": p.metrics, "train_log": p.train_log, "winrate": p.winrate, "figure": p.figure,
             "weights": s.variant_weights(variant)})


def _sandbox_files(s: DagShape, model: str):
    # a trained variant is tested once stage 03 has written it; with the pattern, rule sandbox asks per model
    tested = s.variant_weights(model) if model in s.variants else []
    return ({"manifest": s.layout.models.manifest, "scenarios": list(s.scenarios), "empa": list(s.empa_cases),
             "adapter": tested, "judges": s.layout.judges.record},   # notebook 04 shows the judge's sensitivity first
            {"summary": s.layout.sandbox(model).summary})


def _summaries(s: DagShape) -> list[Path]:
    """Each tested model's summary.json: what rule sandbox writes last (one result file per case before it)."""
    return [s.layout.sandbox(m).summary for m in s.sandbox_models]


def _epm_files(s: DagShape, _):
    e = s.layout.epm
    return ({"summaries": _summaries(s)},
            {"summary": e.summary, "per_case": e.per_case, "intervals": e.intervals, "paired": e.paired})


def _epm_published_files(s: DagShape, _):
    e = s.layout.epm_published
    return {"runs": list(s.published_runs)}, {"summary": e.summary, "per_case": e.per_case}


def _nee_files(s: DagShape, _):
    n = s.layout.nee
    return ({"summaries": _summaries(s), "epm": [s.layout.epm.summary, s.layout.epm.per_case],
             "judges": s.layout.judges.record},
            {"ratings": n.ratings, "summary": n.summary, "stats": n.panel_stats, "dimensions": n.dimensions,
             "pairwise": n.pairwise, "paired": n.paired, "agreement": n.agreement, "order": n.order})


def _sycophancy_files(s: DagShape, _):
    y = s.layout.sycophancy
    # every model plays the seeker cases as in stage 04 (the trained variants once written); EMPA's checks read
    # its stage-04 dialogues; the table sets stage 05's EPM-Q beside the seekers'
    tested = [f for m in s.sandbox_models if m in s.variants for f in s.variant_weights(m)]
    return ({"manifest": s.layout.models.manifest, "seekers": list(s.seekers), "summaries": _summaries(s),
             "epm": [s.layout.epm.intervals], "adapter": tested, "judges": s.layout.judges.record},
            {"summary": y.summary, "table": y.table, "paired": y.paired, "figure": y.figure})


def paper_inputs(s: DagShape) -> dict[str, list[Path]]:
    """Every stage output the paper reads (notebook 07 fails on any that is missing)."""
    L = s.layout
    return {"sensitivity": [L.judges.record], "epm": L.epm.tables(), "nee": [L.nee.summary, L.nee.paired, L.nee.agreement],
            "rm": [L.rm(k).metrics for k in RM_KINDS],
            "policy": [f for v in s.variants for f in (L.policy(v).train_log, L.policy(v).winrate)],
            "sycophancy": [L.sycophancy.summary, L.sycophancy.table, L.sycophancy.paired] if s.sycophancy else []}


def _paper_files(s: DagShape, _):
    authored = {"tex": "paper/main.tex", "bib": "paper/references.bib", "reported": "data/reported_claims.yaml",
                "published": [s.layout.epm_published.summary] if s.published_runs else []}   # optional: EMPA's runs
    return {**authored, **paper_inputs(s)}, dict(s.paper_files)


def _split(files: Callable) -> tuple[Callable, Callable]:
    return (lambda s, v: files(s, v)[0]), (lambda s, v: files(s, v)[1])


def _stage(name, notebook, reads, files, **more) -> Stage:
    inputs, outputs = _split(files)
    return Stage(name, notebook, tuple(reads), inputs, outputs, **more)


NEE_ASKING = ("nee.prompt_variants", "nee.mode", "nee.retries", "nee.temperature", "nee.json_max_new_tokens",
              "nee.blind_terms", "nee.max_missing_share")   # how an NEE judge is asked (nee.panel.Asker): what the sensitivity check reads of nee

# notebook 05, on this run's sandbox results (by hand: the folders of sandbox.models) or on EMPA's published
# runs (whose note it prints by hand)
EPM_READS = ("epm", "empa", "published", "sandbox.empa_dir", "sandbox.models", "policy.variants", "policy.seeds", "roles.policy")

STAGES: dict[str, Stage] = {s.name: s for s in (
    # stage 00 prepares every model but the RL variants (stage 03 makes them)
    _stage("models", "00_models", ("embedded", "smoke_chat", "models", "llm", "policy.variants", "policy.seeds"), _models_files),
    _stage("data", "01_data_synthesis", ("data", *MODEL_SECTIONS), _data_files, loads=("policy",)),
    # the multi-turn control plays the sandbox's Actor (sandbox_run, epm) when the epm variant is trained
    _stage("controls", "02_controls", ("controls", "reward_models", "policy.variants", "sandbox_run.actor",
                                       "sandbox_run.judge", "sandbox_run.history_turns", "epm", *MODEL_SECTIONS), _controls_files, loads=("policy", "reward_model", "actor")),
    _stage("judges", "04_judges", ("judges", "reward_models", "sandbox_run.judge", "sandbox_run.history_turns",
                                   *NEE_ASKING, *MODEL_SECTIONS), _judges_files, loads=("judge", "nee_judges")),
    _stage("reward_models", "02_reward_models", ("reward_models", *MODEL_SECTIONS), _rm_files,
           loads=("reward_model",), wildcard="kind"),
    # the policy samples as the sandbox asks it (its companion prompt, history format and sampling)
    _stage("policy", "03_policy_rl", ("policy", "reward_models", "sandbox_run.companion_prompt",
                                      "sandbox_run.test_history", "sandbox_run.test_model", *MODEL_SECTIONS),
           _policy_files, loads=("policy", "judge"), wildcard="variant"),
    # the epm variant: RL inside the sandbox, with the sandbox's roles, settings and EPM (echo_lib.policy.epm_stage)
    _stage("policy_multiturn", "03_policy_multiturn", ("policy", "reward_models", "sandbox_run", "epm", *MODEL_SECTIONS),
           _policy_multiturn_files, loads=("policy", "judge", "actor", "director", "reward_model"), wildcard="variant",
           resources="policy"),
    _stage("sandbox", "04_sandbox", ("sandbox", "sandbox_run", "epm", "empa", *MODEL_SECTIONS), _sandbox_files,
           loads=("policy", "judge", "actor", "director"), wildcard="model"),
    _stage("epm", "05_epm_analysis", EPM_READS, _epm_files),
    _stage("epm_published", "05_epm_analysis", EPM_READS, _epm_published_files, resources="epm",
           executed="05_epm_published"),
    # the sycophancy guard (opt-in): the seeker cases through stage 04's loop, rated by the NEE panel, and EMPA's
    # perturbation checks with the sandbox's judge
    _stage("sycophancy", "06_sycophancy", ("sycophancy", "sandbox.models", "sandbox_run", "epm", *NEE_ASKING,
                                           *MODEL_SECTIONS), _sycophancy_files,
           loads=("policy", "judge", "actor", "director", "nee_judges")),
    _stage("nee", "06_nee_panel", ("nee", "sandbox.models", *MODEL_SECTIONS), _nee_files, loads=("nee_judges",)),
    _stage("paper", "07_paper", ("paper", "nee.composite_weight", "policy.variants", "policy.seeds", "roles", "models", "scale",
                                       "reward_models", "sycophancy.enabled"),
           _paper_files),
)}


def stage(name: str) -> Stage:
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; the stages are {', '.join(STAGES)}")
    return STAGES[name]


def flat(files: Files) -> list[Path]:
    """A stage's named files as one list of paths."""
    out: list[Path] = []
    for value in files.values():
        out += [Path(v) for v in value] if isinstance(value, list) else [Path(value)]
    return out


def loaded_models(config: dict, name: str) -> list[str] | None:
    """The models a stage loads, by the roles of its `loads` (and the sandbox's models under test); None for
    a stage that reads every model spec (stage 00 resolves them all, the paper names them)."""
    s = stage(name)
    if not s.loads:
        return None
    names = []
    for role in s.loads:
        named = config["roles"][role]
        names += named if isinstance(named, list) else [named]
    return list(dict.fromkeys(names + (config["sandbox"]["models"] if name in ("sandbox", "sycophancy") else [])))


def stage_params(config: dict, name: str) -> dict:
    """A rule's Snakemake params: the seed and exactly what its stage reads of a validated config dict (whole
    sections, or single keys of one: "nee.mode"), so that editing a key re-runs exactly its readers. Of
    `models`, a stage that loads models gets the specs of those it loads; the others all but the derived ones
    (the RL variants, the trained judge): adding an RL variant re-runs no stage that does not use it."""
    from echo_lib.config import derived_models   # the derived models' files are inputs of their readers already
    loaded, derived = loaded_models(config, name), derived_models(config)
    params: dict = {"seed": config["seed"]}
    for key in stage(name).reads:
        section, _, sub = key.partition(".")
        value = config[section]
        if section == "models":
            value = {k: v for k, v in value.items() if (k in loaded if loaded is not None else k not in derived)}
        if sub:
            params.setdefault(section, {})[sub] = value[sub]
        else:
            params[section] = value
    return params


# ---- the run config as one stage sees it ----------------------------------------------------------------

# What every stage may read of a RunConfig: the run's identity and folders, the seed, the provenance record
IDENTITY = frozenset({"run_name", "scale", "seed", "results_dir", "models_dir", "run_dir", "raw", "hash", "record",
                      "resources", "resources_for"})


def whole(cfg: Any) -> Any:
    """The whole RunConfig behind a stage's view of it (or the config itself): for the DAG's own machinery,
    the upstream check, which reads what shapes the DAG rather than what the stage computes with."""
    return cfg.whole if isinstance(cfg, StageConfig) else cfg


class UndeclaredRead(LookupError):
    """A stage read a config key that its entry of the stage table does not list. Not an AttributeError: a
    `getattr(cfg, key, default)` must not quietly take the default."""


# ECHO_UNDECLARED_READS=warn logs an undeclared read and answers it, so one run lists every key a changed stage
# reads (a developer's aid when editing the table); the default, and every run of the DAG, is strict.
WARN_ENV = "ECHO_UNDECLARED_READS"


def _answer_undeclared(stage_name: str, key: str, value: Any) -> Any:
    if os.environ.get(WARN_ENV) != "warn":
        raise _undeclared(stage_name, key)
    logging.getLogger(__name__).warning("undeclared read: stage %s reads %s", stage_name, key)
    return value


def _undeclared(stage_name: str, key: str) -> UndeclaredRead:
    return UndeclaredRead(
        f"stage {stage_name} reads config key {key!r}, which its entry in echo_lib/stages.py (Stage.reads) does not "
        f"list; add {key!r} there, so that its rule re-runs when the key changes")


class SectionView:
    """One config section of which a stage reads only some keys (Stage.reads "section.key")."""
    __slots__ = ("_section", "_name", "_keys", "_stage")

    def __init__(self, section: Any, name: str, keys: frozenset[str], stage_name: str):
        object.__setattr__(self, "_section", section)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_keys", keys)
        object.__setattr__(self, "_stage", stage_name)

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):   # copy, pickle and IPython's display probe such names
            raise AttributeError(key)
        if key not in self._keys:
            return _answer_undeclared(self._stage, f"{self._name}.{key}", getattr(self._section, key))
        return getattr(self._section, key)

    def __repr__(self) -> str:
        return f"SectionView({self._name}: {', '.join(sorted(self._keys))} of stage {self._stage})"


class StageConfig:
    """A RunConfig that answers only what `stage` declares it reads (and the run's identity, IDENTITY): reading
    anything else raises UndeclaredRead, which names the stage table. Every stage notebook gets its config so
    (`echo_lib.notebook.start(config, stage=...)`), so the ci DAG run checks the table's `reads` against the code."""
    __slots__ = ("_cfg", "_stage", "_reads")

    def __init__(self, cfg: Any, stage_name: str):
        reads: dict[str, set[str] | None] = {}
        for key in stage(stage_name).reads:
            section, _, sub = key.partition(".")
            if not sub:
                reads[section] = None
            elif reads.get(section, set()) is not None:
                reads.setdefault(section, set()).add(sub)
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "_stage", stage_name)
        object.__setattr__(self, "_reads", reads)

    @property
    def stage(self) -> Stage:
        return stage(self._stage)

    @property
    def layout(self) -> Layout:
        """Where the run's files are (echo_lib.layout)."""
        return Layout(self._cfg.run_dir)

    @property
    def registry(self):
        """The models of the run (echo_lib.models.registry): what the stage loads its models from."""
        from echo_lib.models import registry
        return registry(self)

    @property
    def whole(self) -> Any:
        """The whole RunConfig, for what hands the run on (an `accelerate launch` of the stage writes it)."""
        return self._cfg

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        if key in IDENTITY:
            return getattr(self._cfg, key)
        if key not in self._reads:
            return _answer_undeclared(self._stage, key, getattr(self._cfg, key))
        keys = self._reads[key]
        value = getattr(self._cfg, key)
        return value if keys is None else SectionView(value, key, frozenset(keys), self._stage)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("a stage's run config is read-only")

    def __repr__(self) -> str:
        return f"StageConfig(stage {self._stage} of run {self._cfg.run_name!r})"
