"""What each stage notebook cannot run without, from the stages before it.

Snakemake checks its rules' inputs before it runs a stage. A notebook stepped through by hand checks
with `require` right after `start`, so a missing file stops it with one message that names the files and
the `snakemake` command that makes them, instead of a traceback deep inside a loader. Inputs a stage can
do without (the judge sensitivity record, which stages 04 and 06 report as "not measured") are not
required here.
"""
from __future__ import annotations

from pathlib import Path

from echo_lib.layout import Layout

from echo_lib import stages


def stage_inputs(cfg, stage: str, *, kind: str = "", variant: str = "", model: str = "",
                 required: bool = False) -> list[Path]:
    """The files that `stage` reads (kind / variant / model: its wildcard): the stage table's inputs, exactly
    what the Snakefile's rule for it declares; `required`: without those a notebook run by hand can do
    without (stages.ORDER_ONLY)."""
    cfg, s = stages.whole(cfg), stages.stage(stage)
    value = {"kind": kind, "variant": variant, "model": model}.get(s.wildcard or "", "")
    if s.wildcard == "kind" and kind not in stages.RM_KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(stages.RM_KINDS)}")
    inputs = s.inputs(stages.DagShape.of(cfg), value)
    return stages.flat({k: v for k, v in inputs.items() if not (required and k in stages.ORDER_ONLY)})


def sandbox_dirs(cfg) -> list[Path]:
    """This run's sandbox results, one folder per model of `sandbox.models`: what stage 05 analyses (the DAG's
    rule epm passes exactly these to notebook 05, which reads them by hand too) and stage 06 rates."""
    return [Layout(cfg.run_dir).sandbox(m).dir for m in cfg.sandbox.models]


def published_note(cfg) -> str:
    """One line on EMPA's published runs for stage 05 run by hand, which analyses this run's own results: where
    they are and the parameters that analyse them (the DAG's rule epm_published), or why that part is skipped.
    Nothing is fetched or probed: offline, with EMPA never fetched, the note says so."""
    from echo_lib.empa_source import published_runs_here

    folder, why = published_runs_here(cfg.published.empa_results, cfg.empa)
    if folder is None:
        return f"note: {why}; the published comparison (stage 05 on EMPA's runs) is skipped"
    return (f"note: EMPA's published runs are in {folder}; the DAG analyses them with this notebook (rule "
            f"epm_published). By hand: result_dirs = [{str(folder)!r}], out_dir = "
            f"{str(Path(cfg.run_dir) / 'epm_published')!r}, case_meta_source = {cfg.published.case_meta_source!r}")


def stage_models(cfg, stage: str, model: str = "") -> list[str]:
    """The models a stage loads (the stage table's roles, and the sandbox's model under test), whose local
    files must exist before it runs. The EPM analysis and the paper load none: a run copied without its
    checkpoints still gives its paper."""
    cfg, names = stages.whole(cfg), []
    for role in stages.stage(stage).loads:
        named = getattr(cfg.roles, role)
        names += list(named) if isinstance(named, list) else [named]
    if stage == "judges" and cfg.judges.train.enabled:   # it trains the tiny judge on its base first
        from echo_lib.judges.params import TRAINED_JUDGE
        names = [cfg.judges.train.base, *(n for n in names if n != TRAINED_JUDGE)]
    return names + ([model] if stage == "sandbox" and model else [])


def missing_model_files(cfg, names) -> dict[Path, Path]:
    """{missing path: the target that makes it} for the local files of these models: an embedded
    checkpoint (stage 00), a policy adapter (stage 03), the trained judge's heads or adapter (rule judges)."""
    from echo_lib.judges.params import TRAINED_JUDGE
    from echo_lib.llm.registry import weights_path
    cfg, layout = stages.whole(cfg), Layout(cfg.run_dir)
    out = {}
    for name in dict.fromkeys(n for n in names if n in cfg.models):
        spec = cfg.models[name]
        if spec.backend != "hf":
            continue
        weights = Path(weights_path(spec, cfg.models_dir)) if spec.source == "embedded" else None
        if weights is not None and not weights.is_dir():
            out[weights] = layout.models.manifest
        for part in (spec.adapter, spec.readout):   # rule judges makes the trained judge's; a policy adapter is its rule's output
            if part and not Path(part).exists():
                out[Path(part)] = layout.judges.record if name == TRAINED_JUDGE else Path(part)
    return out


def require(cfg, stage: str, **which: str) -> None:
    """Raise FileNotFoundError naming the missing inputs of `stage` and the command that makes them."""
    cfg = stages.whole(cfg)   # the check reads what decides the DAG, not only what the stage reads
    missing = {p: p for p in stage_inputs(cfg, stage, **which, required=True) if not p.exists()}
    missing |= missing_model_files(cfg, stage_models(cfg, stage, which.get("model", "")))
    if not missing:
        return
    configfile = "" if cfg.run_name == "tiny" else f" --configfile <the config of run {cfg.run_name!r}>"
    targets = " ".join(dict.fromkeys(str(t) for t in missing.values()))
    raise FileNotFoundError(f"stage {stage} reads what earlier stages write, and {len(missing)} of its inputs are "
                            "missing:\n  " + "\n  ".join(map(str, missing)) + "\nmake them first (from the project "
                            f"root):\n  snakemake --cores 2{configfile} {targets}")
