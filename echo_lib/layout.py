"""Where every stage's files are: the run's file layout, written once.

    layout = Layout("results/tiny")
    layout.rm("empathy").adapter        # results/tiny/rm/empathy/adapter
    layout.policy("{variant}").metrics  # a Snakemake pattern: a wildcard in place of the name

The Snakefile's rules, the upstream check (`echo_lib.upstream`), the stages and the notebooks all take their
paths from here, so what a stage writes is named in one place and what reads it cannot disagree. Every name
may be a Snakemake wildcard ("{kind}"); nothing here checks that a kind or variant exists (the stages do).
This module imports nothing of the project: any layer may use it.

The files between the stages (docs/STAGES.md has the whole picture):

    models/manifest.json, smoke_chat.md            00 models
    data/<kind>/{train,test}.jsonl                 01 data (kind: humanlike | empathy)
    controls/controls.json                         positive controls
    judges/sensitivity.json, adapter/, readout/    judge sensitivity (and the trained tiny judge)
    rm/<kind>/adapter/, metrics.json               02 reward models (kind: humanlike | empathy | scalar)
    policy/<variant>/adapter/ (or model/), ...     03 policy RL (variant: echo | scalar)
    sandbox/<model>/<case>_result.json, summary.json  04 sandbox
    epm/summary.csv, per_case.csv, ...             05 EPM (epm_published/: EMPA's own runs)
    nee/summary.csv, agreement.json, ...           06 NEE panel
    paper/tables/, figures/, claims.*, main.pdf    07 paper (or paper.dir)
    notebooks/<stage>.ipynb, logs/<stage>.log      every stage's executed notebook and log
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA_KINDS = ("humanlike", "empathy")   # the datasets of stage 01
SPLITS = ("train", "test")
LORA_FILES = ("adapter_model.safetensors", "adapter_config.json")   # what PEFT writes into an adapter folder
EPM_TABLES = ("summary", "per_case", "intervals", "paired")
NEE_TABLES = ("ratings", "summary", "panel_stats", "dimensions", "pairwise")


@dataclass(frozen=True)
class ModelFiles:
    """Stage 00: the manifest of resolved models and one sampled reply."""
    dir: Path
    manifest = property(lambda self: self.dir / "manifest.json")
    smoke_reply = property(lambda self: self.dir / "smoke_chat.md")


@dataclass(frozen=True)
class ControlFiles:
    """The positive controls' record and figure."""
    dir: Path
    record = property(lambda self: self.dir / "controls.json")
    figure = property(lambda self: self.dir / "controls.png")


@dataclass(frozen=True)
class JudgeFiles:
    """Judge sensitivity, and with judges.train the tiny judge it fits first (adapter or read-out heads)."""
    dir: Path
    record = property(lambda self: self.dir / "sensitivity.json")
    figure = property(lambda self: self.dir / "sensitivity.png")
    adapter = property(lambda self: self.dir / "adapter")
    readout = property(lambda self: self.dir / "readout")


@dataclass(frozen=True)
class RMFiles:
    """Stage 02, one reward model kind (and its label-shuffle twin under shuffled/)."""
    dir: Path
    adapter = property(lambda self: self.dir / "adapter")
    metrics = property(lambda self: self.dir / "metrics.json")
    table = property(lambda self: self.dir / "metrics.csv")
    train_log = property(lambda self: self.dir / "train_log.csv")
    figure = property(lambda self: self.dir / "training.png")
    eval_rows = property(lambda self: self.dir / "eval_rows.jsonl")

    @property
    def shuffled(self) -> "RMFiles":
        return RMFiles(self.dir / "shuffled")


@dataclass(frozen=True)
class PolicyFiles:
    """Stage 03, one RL variant."""
    dir: Path
    adapter = property(lambda self: self.dir / "adapter")   # policy.finetune lora
    model = property(lambda self: self.dir / "model")       # policy.finetune full: the whole model
    metrics = property(lambda self: self.dir / "metrics.json")
    train_log = property(lambda self: self.dir / "train_log.csv")
    winrate = property(lambda self: self.dir / "winrate.csv")
    winrate_rows = property(lambda self: self.dir / "winrate_rows.jsonl")
    figure = property(lambda self: self.dir / "training.png")
    hacking = property(lambda self: self.dir / "hacking.png")
    progress = property(lambda self: self.dir / "progress.png")
    run_config = property(lambda self: self.dir / "run_config.json")   # what an `accelerate launch` rank loads

    def weights(self, full: bool) -> Path:
        """The folder the variant's model loads from: its LoRA adapter, or with full fine-tuning the model."""
        return self.model if full else self.adapter

    def weight_files(self, full: bool) -> list[Path]:
        """The weights as files (what the DAG dates): a sharded full checkpoint is named by its config.json."""
        return [self.model / "config.json"] if full else lora_files(self.adapter)


@dataclass(frozen=True)
class SandboxFiles:
    """Stage 04, one model under test: one EMPA-schema result file per case, then summary.json."""
    dir: Path
    summary = property(lambda self: self.dir / "summary.json")


@dataclass(frozen=True)
class EPMFiles:
    """Stage 05: EPM-Q per model and case, its intervals and the paired differences."""
    dir: Path
    summary = property(lambda self: self.dir / "summary.csv")
    per_case = property(lambda self: self.dir / "per_case.csv")
    intervals = property(lambda self: self.dir / "intervals.csv")
    paired = property(lambda self: self.dir / "paired.csv")

    def tables(self) -> list[Path]:
        return [self.dir / f"{name}.csv" for name in EPM_TABLES]


@dataclass(frozen=True)
class NEEFiles:
    """Stage 06: the judge panel's ratings, scores, agreement and the blinding order."""
    dir: Path
    ratings = property(lambda self: self.dir / "ratings.csv")
    summary = property(lambda self: self.dir / "summary.csv")
    panel_stats = property(lambda self: self.dir / "panel_stats.csv")
    dimensions = property(lambda self: self.dir / "dimensions.csv")
    pairwise = property(lambda self: self.dir / "pairwise.csv")
    paired = property(lambda self: self.dir / "paired.csv")
    agreement = property(lambda self: self.dir / "agreement.json")
    order = property(lambda self: self.dir / "order.json")
    provenance = property(lambda self: self.dir / "provenance.json")
    figure = property(lambda self: self.dir / "fig_nee.png")


@dataclass(frozen=True)
class SycophancyFiles:
    """Stage 06b, the sycophancy guard (opt-in): the seeker dialogues, their agreement levels and EMPA's
    perturbation checks, per model under test."""
    dir: Path
    summary = property(lambda self: self.dir / "summary.json")
    table = property(lambda self: self.dir / "summary.csv")
    paired = property(lambda self: self.dir / "paired.csv")
    agreement = property(lambda self: self.dir / "agreement.csv")
    controls = property(lambda self: self.dir / "controls.csv")
    figure = property(lambda self: self.dir / "fig_sycophancy.png")

    def seekers(self, model: str) -> Path:
        """One model's seeker dialogues: stage 04's result files and summary.json (not declared: resumable)."""
        return self.dir / "seekers" / model

    def checks(self, model: str) -> Path:
        """EMPA's checks on one model's stage-04 dialogues (echo_lib.epm.robustness's files)."""
        return self.dir / "checks" / model


# Every file stage 07 writes into the paper folder: rule paper declares them as outputs, paper/main.tex uses
# them, and a test checks that the two agree.
PAPER_TABLES = ("judge_sensitivity", "main_results", "sandbox_differences", "seed_spread", "nee_dimensions",
                "rm_accuracy", "rl_winrate", "empa_replay", "sycophancy_guard", "sycophancy_checks",
                "sycophancy_differences", "macros")
PAPER_FIGURES = ("epm_outcomes", "epm_indices", "epm_case_heatmap", "rm_accuracy", "rl_curves")
PAPER_CLAIMS = ("claims.md", "claims.tex", "claims.csv")


@dataclass(frozen=True)
class PaperFiles:
    """Stage 07: the paper's tables, figures, claims and PDF (paper.dir, or the run's paper/)."""
    dir: Path
    pdf = property(lambda self: self.dir / "main.pdf")
    provenance = property(lambda self: self.dir / "provenance.json")

    def outputs(self, pdf: bool = True) -> dict[str, list[str]]:
        """The generated files by kind (tables: .tex + .csv; figures: .pdf + .png; pdf: main.pdf, unless
        paper.build_pdf is off), as text (what Snakemake and LaTeX take)."""
        folder = str(self.dir)
        return {"tables": [f"{folder}/tables/{t}.{ext}" for t in PAPER_TABLES for ext in ("tex", "csv")],
                "figures": [f"{folder}/figures/{f}.{ext}" for f in PAPER_FIGURES for ext in ("pdf", "png")],
                "claims": [f"{folder}/{c}" for c in PAPER_CLAIMS],
                "pdf": [str(self.pdf)] if pdf else []}


def lora_files(folder: Path) -> list[Path]:
    """A LoRA adapter as the files PEFT writes. The DAG declares these, not the folder: Snakemake dates a
    directory output by a .snakemake_timestamp it leaves there, so weights rewritten in place (a notebook run
    by hand) would not make their readers run again; files are dated by themselves."""
    return [Path(folder) / name for name in LORA_FILES]


@dataclass(frozen=True)
class Layout:
    """The files of one run, under `run` (results_dir/run_name)."""
    run: Path

    def __post_init__(self):
        object.__setattr__(self, "run", Path(self.run))

    @classmethod
    def of(cls, results_dir: str | Path, run_name: str) -> "Layout":
        return cls(Path(results_dir) / run_name)

    # ---- per stage
    @property
    def models(self) -> ModelFiles:
        return ModelFiles(self.run / "models")

    def data_dir(self, kind: str) -> Path:
        return self.run / "data" / kind

    def data(self, kind: str, split: str) -> Path:
        return self.data_dir(kind) / f"{split}.jsonl"

    def datasets(self) -> list[Path]:
        """Every file stage 01 writes for the later stages."""
        return [self.data(kind, split) for kind in DATA_KINDS for split in SPLITS]

    @property
    def hitl_report(self) -> Path:
        return self.data_dir("empathy") / "hitl" / "report.json"

    @property
    def controls(self) -> ControlFiles:
        return ControlFiles(self.run / "controls")

    @property
    def judges(self) -> JudgeFiles:
        return JudgeFiles(self.run / "judges")

    def rm(self, kind: str) -> RMFiles:
        return RMFiles(self.run / "rm" / kind)

    def policy(self, variant: str) -> PolicyFiles:
        return PolicyFiles(self.run / "policy" / variant)

    def policy_data(self, variant: str | None = None) -> Path:
        """The RL prompts after the hard filter: policy/data/, or policy/data/<variant>/ when each variant
        filters with its own reward."""
        shared = self.run / "policy" / "data"
        return shared / variant if variant else shared

    def sandbox(self, model: str) -> SandboxFiles:
        return SandboxFiles(self.run / "sandbox" / model)

    @property
    def epm(self) -> EPMFiles:
        return EPMFiles(self.run / "epm")

    @property
    def epm_published(self) -> EPMFiles:
        """Stage 05 on EMPA's published runs."""
        return EPMFiles(self.run / "epm_published")

    @property
    def nee(self) -> NEEFiles:
        return NEEFiles(self.run / "nee")

    @property
    def sycophancy(self) -> SycophancyFiles:
        return SycophancyFiles(self.run / "sycophancy")

    def paper(self, folder: str | Path | None = None) -> PaperFiles:
        """Stage 07's folder: paper.dir where the config names one (the tiny run: the repository's paper/)."""
        return PaperFiles(Path(folder) if folder else self.run / "paper")

    # ---- every stage
    @property
    def llm_provenance(self) -> Path:
        """One record per batch of model calls, all stages (echo_lib.llm.provenance)."""
        return self.run / "llm_provenance.jsonl"

    def notebook(self, name: str) -> Path:
        """A stage's executed notebook (name: the notebook's stem, with its wildcard, e.g. 03_policy_rl_echo)."""
        return self.run / "notebooks" / f"{name}.ipynb"

    def log(self, name: str) -> Path:
        return self.run / "logs" / f"{name}.log"

    def benchmark(self, name: str) -> Path:
        return self.run / "logs" / f"{name}.benchmark.tsv"
