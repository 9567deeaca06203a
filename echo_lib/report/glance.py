"""The README's "Results at a glance": the claims table of one run, compact, between two markers.

Stage 07 writes the claims table (claims.csv, claims.md; echo_lib/report/claims.py) and records which run
it came from in the paper folder's provenance.json ("claims_run"). This module renders those two files as
a short markdown block: each claim, this run's value with its 95 % interval and n under a column labelled
with the run's scale and policy model, and the published number in a column labelled "Reported (Echo-N1
paper)", the only place a published number appears. A line names the run (name, scale, config hash,
commit, date) and links the full table. The README holds the block between

    <!-- glance:begin -->
    <!-- glance:end -->

and nothing outside them is touched; the file is replaced atomically. Stage 07 rewrites it when the
run config sets `paper.readme` (config/default.yaml: README.md; null elsewhere), so after `make all` the
README and paper/claims.md agree by construction; tests/test_glance.py checks the committed pair.

By hand, from the command line:

    python -m echo_lib.report.glance                     # README.md's block from paper/claims.csv
    python -m echo_lib.report.glance --from-run results/tiny   # first rebuild paper/claims.* from a run's
                                                         # result files (stage 07's claims step only)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

from echo_lib.layout import Layout
from echo_lib.provenance import git_commit, write_json, write_text
from echo_lib.report import claims as claims_mod
from echo_lib.report import inputs

BEGIN, END = "<!-- glance:begin -->", "<!-- glance:end -->"
REPORTED = "Reported (Echo-N1 paper)"
RECORD_KEY = "claims_run"      # provenance.json's entry holding the RunConditions of the claims table
REPORTED_CLAIMS = "data/reported_claims.yaml"


class GlanceError(ValueError):
    """The README or the claims files cannot give the block (no markers, no claims table, no run record)."""


# ---- reading the claims table and its run -----------------------------------------------------------

def read_run(paper_dir: str | Path) -> tuple[pd.DataFrame, claims_mod.RunConditions]:
    """(claims.csv as its text says, the run it came from) of a paper folder."""
    paper_dir = Path(paper_dir)
    csv, record = paper_dir / "claims.csv", paper_dir / "provenance.json"
    for path in (csv, record):
        if not path.is_file():
            raise GlanceError(f"{path} does not exist: stage 07 writes it (make all, or snakemake --cores N "
                              f"{paper_dir}/claims.md); or rebuild it from a finished run with "
                              "python -m echo_lib.report.glance --from-run results/<run>")
    table = claims_mod.read_claims(csv)
    wanted = ["Claim", "Published model", claims_mod.REPORTED_COLUMN, "Reported under", "This run's model",
              claims_mod.MEASURED_COLUMN, claims_mod.INTERVAL_COLUMN, claims_mod.N_COLUMN]
    missing = [c for c in wanted if c not in table.columns]
    if missing:
        raise GlanceError(f"{csv} lacks column(s) {', '.join(missing)}: it was written by an older stage 07; "
                          "rebuild it with python -m echo_lib.report.glance --from-run results/<run>")
    data = json.loads(record.read_text(encoding="utf-8"))
    if RECORD_KEY not in data:
        raise GlanceError(f"{record} has no '{RECORD_KEY}' entry (an older stage 07 wrote it); rebuild it with "
                          "python -m echo_lib.report.glance --from-run results/<run>")
    return table, claims_mod.RunConditions.from_record(data[RECORD_KEY])


# ---- the block ----------------------------------------------------------------------------------------

def _cell(text: str) -> str:
    return text if text.strip() else claims_mod.NONE


def render(table: pd.DataFrame, run: claims_mod.RunConditions, claims_link: str) -> str:
    """The markdown between the markers (without them), from claims.csv's rows as their text says."""
    measured = f"Measured ({run.scale} · {run.policy_model})" if run.policy_model else f"Measured ({run.scale})"
    columns = ["Claim", "Paper's model", "This run's model", measured, "95% CI", "n", REPORTED]
    rows = [[r["Claim"], r["Published model"], _cell(r["This run's model"]), _cell(r[claims_mod.MEASURED_COLUMN]),
             _cell(r[claims_mod.INTERVAL_COLUMN]), _cell(r[claims_mod.N_COLUMN]), r[claims_mod.REPORTED_COLUMN]]
            for _, r in table.iterrows()]
    under = dict(zip(table["Claim"], table["Reported under"]))   # one condition per claim, in table order
    comparable = ("comparable only where scale, cases and judges agree" if run.scale == "paper"
                  else f"not comparable with this {run.scale}-scale run")
    lines = [f"<!-- written by stage 07 (echo_lib/report/glance.py) from {claims_link.removesuffix('.md')}.csv: "
             "do not edit by hand -->",
             f"From {run.identity()}. The full table, with each number's source and conditions: "
             f"[`{claims_link}`]({claims_link}).", "",
             *claims_mod.markdown_table(columns, rows), "",
             f"*{REPORTED}* holds the numbers Echo-N1 publishes, not outputs of this code, measured under: "
             + "; ".join(f"{claim}: {cond}" for claim, cond in under.items())
             + f". They are {comparable}. This run's judges: {run.epm_judge} (sandbox), {run.nee_judges} (NEE panel). "
             "`--`: not run, or no interval computed (the composite has none)."]
    return "\n".join(lines) + "\n"


def replace_block(text: str, block: str, where: str = "README.md") -> str:
    """`text` with what lies between the markers replaced by `block`; everything else byte for byte."""
    begins, ends = text.count(BEGIN), text.count(END)
    fix = (f"put the two lines {BEGIN} and {END} where the table goes (under '## Results at a glance'), "
           "or set paper.readme: null in the run config")
    if begins == 0 or ends == 0:
        raise GlanceError(f"{where} has no {BEGIN if begins == 0 else END} marker: {fix}")
    if begins > 1 or ends > 1:
        raise GlanceError(f"{where} has {begins} {BEGIN} and {ends} {END} markers; keep one of each: {fix}")
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    if stop < start:
        raise GlanceError(f"{where}: {END} comes before {BEGIN}: {fix}")
    return text[:start] + "\n" + block + text[stop:]


def block_of(text: str) -> str:
    """What lies between the markers now (as replace_block would have put it)."""
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:stop].removeprefix("\n")


def claims_link(readme: str | Path, paper_dir: str | Path) -> str:
    """The claims.md of `paper_dir` as a link relative to the README's folder (POSIX separators)."""
    rel = os.path.relpath(Path(paper_dir).resolve() / "claims.md", Path(readme).resolve().parent)
    return Path(rel).as_posix()


def update_readme(readme: str | Path, paper_dir: str | Path) -> Path:
    """Rewrite `readme`'s block from `paper_dir`'s claims.csv and provenance.json (atomically; only when it
    changed, so an unchanged README keeps its time stamp)."""
    readme = Path(readme)
    if not readme.is_file():
        raise GlanceError(f"{readme} does not exist (paper.readme names it): point paper.readme at the README, "
                          "or set it to null")
    table, run = read_run(paper_dir)
    text = readme.read_text(encoding="utf-8")
    new = replace_block(text, render(table, run, claims_link(readme, paper_dir)), str(readme))
    if new != text:
        write_text(readme, new)
    return readme


# ---- stage 07's claims step, also from a finished run's folder ------------------------------------------

def run_conditions(cfg, record: dict) -> claims_mod.RunConditions:
    """The RunConditions of `cfg`'s run; `record` (a provenance record) gives the hash, commit and date the
    results were made with."""
    return claims_mod.RunConditions(
        run_name=record.get("run_name", cfg.run_name), scale=record.get("scale", cfg.scale),
        epm_judge=cfg.models[cfg.roles.judge].id,
        nee_judges=", ".join(dict.fromkeys(cfg.models[j].id for j in cfg.roles.nee_judges)),
        policy_model=cfg.models[cfg.roles.policy].id, config_hash=record.get("config_hash") or "",
        git_commit=record.get("git_commit") or "", created_at=record.get("created_at") or "")


def build_claims(cfg, run_dir: str | Path, conditions: claims_mod.RunConditions,
                 reported: str | Path = REPORTED_CLAIMS) -> pd.DataFrame:
    """The claims table of a run folder (stage 05's epm/summary.csv, intervals.csv and paired.csv, stage
    06's summary and paired.csv)."""
    run_dir = Path(run_dir)
    layout = Layout(run_dir)
    epm = inputs.read_csv(layout.epm.summary, inputs.EPM_SUMMARY)
    intervals = inputs.read_csv(layout.epm.intervals, inputs.EPM_INTERVALS)
    nee = inputs.read_csv(layout.nee.summary, inputs.NEE_SUMMARY)
    paired = pd.concat([inputs.read_csv(layout.epm.paired, inputs.PAIRED),
                        inputs.read_csv(layout.nee.paired, inputs.PAIRED)], ignore_index=True)
    return claims_mod.claims_table(claims_mod.load_reported(reported), cfg.paper.counterparts, epm, nee,
                                   conditions, intervals, paired, reference=cfg.roles.policy)


def rebuild_from_run(cfg, run_dir: str | Path, record_path: str | Path, paper_dir: str | Path) -> Path:
    """claims.{md,tex,csv} and provenance.json of `paper_dir` from a finished run's result files, named by
    that run's own provenance record (stage 06's, or its paper folder's): no stage runs again."""
    record_path = Path(record_path)
    if not record_path.is_file():
        raise GlanceError(f"{record_path} does not exist: name the run's provenance record with --provenance "
                          "(stage 06 writes <run>/nee/provenance.json)")
    record = json.loads(record_path.read_text(encoding="utf-8"))
    if record.get("run_name", cfg.run_name) != cfg.run_name:
        raise GlanceError(f"{record_path} is of run {record['run_name']!r}, the config's run is {cfg.run_name!r}: "
                          "pass that run's config with --config")
    conditions = run_conditions(cfg, record)
    table = build_claims(cfg, run_dir, conditions)
    claims_mod.write_claims(table, paper_dir, conditions)
    rebuilt = {"by": "python -m echo_lib.report.glance --from-run", "git_commit": git_commit(),
               "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "from": str(record_path)}
    write_json(Path(paper_dir) / "provenance.json",
               {**record, "stage": "07_paper (claims only)", RECORD_KEY: conditions.record(), "claims_rebuilt": rebuilt})
    return Path(paper_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m echo_lib.report.glance", description=(
        "Rewrite the README's 'Results at a glance' block from a paper folder's claims table "
        "(claims.csv + provenance.json); with --from-run, first rebuild that claims table from a finished "
        "run's result files."))
    parser.add_argument("--config", default="config/default.yaml", help="the run config (default: %(default)s)")
    parser.add_argument("--paper-dir", help="the paper folder (default: the config's paper.dir)")
    parser.add_argument("--readme", help="the README to rewrite (default: the config's paper.readme, else README.md)")
    parser.add_argument("--from-run", metavar="RUN_DIR", help="rebuild claims.* from this run folder first")
    parser.add_argument("--provenance", help="with --from-run: the run's provenance record "
                                             "(default: RUN_DIR/nee/provenance.json)")
    args = parser.parse_args(argv)

    from echo_lib.config import ConfigError, load_config
    from echo_lib.paths import enter_project_root
    from echo_lib.report.params import paper_dir as default_paper_dir
    here = Path.cwd()
    resolve = lambda p: p if p is None or Path(p).is_absolute() else str(here / p)   # noqa: E731
    config, paper, readme = resolve(args.config), resolve(args.paper_dir), resolve(args.readme)
    run, record = resolve(args.from_run), resolve(args.provenance)
    enter_project_root()   # data/reported_claims.yaml and the config's relative paths
    try:
        cfg = load_config(config)
        paper = paper or default_paper_dir(cfg.paper, cfg.results_dir, cfg.run_name)
        readme = readme or cfg.paper.readme or "README.md"
        if run:
            rebuild_from_run(cfg, run, record or Layout(run).nee.provenance, paper)
            print(f"rebuilt {paper}/claims.md, claims.tex, claims.csv, provenance.json from {run}")
        update_readme(readme, paper)
    except (GlanceError, inputs.PaperInputError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{readme}: 'Results at a glance' from {paper}/claims.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
