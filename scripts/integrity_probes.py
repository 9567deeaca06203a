"""Issue 18's probes, tried as a user would, on a scratch copy of a finished run (default: the ci run).

    .venv/bin/python scripts/integrity_probes.py [--config config/ci.yaml] [--keep DIR]

Copies the checkout (without .git, .venv and other runs) and results/<run> into a temporary folder and,
there, one probe at a time:

1. retrained adapter: the echo policy's adapter is changed in place (its LoRA B matrices get noise), the
   sandbox rule is run for that model: are its cases played again, and do its replies change?
2. edited scenario: one case of the run gets a new sentence; the base model's sandbox is run: is that case
   (and only that one) played again?
3. fewer cases: sandbox.case_ids names one case; stages 04 and 05 are run: do the tables hold only it?
4. a model that cannot answer: a model at a closed port is put under test; does stage 04 fail, naming
   the first error, with an error file per case?
5. config files: echo-run with a missing and a malformed --configfile.
6. a non-UTF-8 scenario file beside the others: is it named while the other cases go on?

Each prints one line: the probe, what happened, PASS or FAIL. Exit status 1 when any probe fails.
Needs a finished run of the config (`snakemake --cores 2 --configfile config/ci.yaml`); takes a few
minutes at the ci scale.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns(".git", ".venv", "results", ".snakemake", ".cache", "__pycache__", "*.egg-info",
                                ".pytest_cache")


def snakemake(work: Path, configs: list[str], *targets: str, forcerun: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Targets go first: --configfile and --forcerun each take every word after them."""
    cmd = [sys.executable, "-m", "snakemake", *targets, "--cores", "2", "--configfile", *configs,
           *(["--forcerun", *forcerun] if forcerun else [])]
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True)


def replies(folder: Path) -> dict[str, list[str]]:
    """case -> the tested model's replies, from its result files."""
    out = {}
    for path in sorted(folder.glob("*_result.json")):
        data = json.loads(path.read_text())
        out[data["script_id"]] = [m["content"] for m in data["history"] if m["role"] == "test_model"]
    return out


def played(run: Path, model: str) -> str:
    """The stage's own line on what it played, from its log."""
    log = run / "logs" / f"04_sandbox_{model}.log"
    lines = [ln.split(" ", 2)[-1].strip() for ln in log.read_text().splitlines() if "case(s) played" in ln] \
        if log.is_file() else []
    return lines[-1] if lines else "(no 'played' line)"


@contextmanager
def edited(path: Path, text: bytes):
    """`path` holds `text` inside the block; then its old content and dates come back (or, new, it goes)."""
    old = path.read_bytes() if path.exists() else None
    dates = path.stat() if old is not None else None
    path.write_bytes(text)
    try:
        yield path
    finally:
        if old is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(old)
            os.utime(path, ns=(dates.st_atime_ns, dates.st_mtime_ns))


def report(name: str, ok: bool, what: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {what}", flush=True)
    return ok


def perturb_adapter(folder: Path, scale: float = 0.05, seed: int = 0) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    path = folder / "adapter_model.safetensors"
    tensors = load_file(path)
    gen = torch.Generator().manual_seed(seed)
    for name, t in tensors.items():
        if "lora_B" in name:
            tensors[name] = t + scale * torch.randn(t.shape, generator=gen, dtype=t.dtype)
    save_file(tensors, path, metadata={"format": "pt"})


def probe_retrained_adapter(work: Path, config: str, run: Path) -> bool:
    folder = run / "sandbox" / "echo"
    before = replies(folder)
    perturb_adapter(run / "policy" / "echo" / "adapter")
    res = snakemake(work, [config], str(folder.relative_to(work) / "summary.json"))
    after = replies(folder)
    changed = [c for c in before if after.get(c) != before[c]]
    return report("retrained adapter, same path", res.returncode == 0 and changed == sorted(before),
                  f"rc {res.returncode}; {played(run, 'echo')}; replies changed in {len(changed)} of {len(before)} cases")


def probe_edited_scenario(work: Path, config: str, run: Path) -> bool:
    folder = run / "sandbox" / "base"
    cases = sorted(replies(folder))
    scenario = work / "data" / "scenarios" / "own" / f"{cases[0]}.yaml"
    text = scenario.read_text(encoding="utf-8").replace("topic: ", "topic: Lately, ", 1).encode()
    with edited(scenario, text):
        res = snakemake(work, [config], str(folder.relative_to(work) / "summary.json"))
    line = played(run, "base")
    return report("edited scenario", res.returncode == 0 and line.startswith("1 case(s) played") and
                  f"{len(cases) - 1} already finished" in line, f"edited {cases[0]}; rc {res.returncode}; {line}")


def probe_fewer_cases(work: Path, config: str, run: Path) -> bool:
    import pandas as pd

    keep = sorted(replies(run / "sandbox" / "base"))[0]
    overlay = work / "config" / "probe_fewer.yaml"
    overlay.write_text(f"sandbox: {{case_ids: [{keep}], models: [base, echo]}}\n")
    res = snakemake(work, [config, str(overlay)], str((run / "epm" / "per_case.csv").relative_to(work)),
                    forcerun=("sandbox", "epm"))   # the overlay's params: the copy has no metadata to compare
    per_case = pd.read_csv(run / "epm" / "per_case.csv")
    listed = [c["case_id"] for c in json.loads((run / "sandbox" / "base" / "summary.json").read_text())["cases"]]
    cases, models = sorted(set(per_case["Case_ID"])), sorted(set(per_case["Model"]))
    ok = res.returncode == 0 and listed == [keep] and cases == [keep] and models == ["base", "echo"]
    return report("sandbox.case_ids shrunk to one case, scalar dropped", ok,
                  f"rc {res.returncode}; base's summary.json lists {listed}; epm/per_case.csv holds cases {cases} "
                  f"of models {models}")


def probe_dead_model(work: Path, config: str, run: Path) -> bool:
    overlay = work / "config" / "probe_dead.yaml"
    overlay.write_text("models:\n  unreachable: {backend: openai, source: server, id: nobody, "
                       "base_url: 'http://127.0.0.1:9/v1', api_key_env: ECHO_PROBE_NO_KEY}\n"
                       "llm: {max_retries: 0}\n")
    folder = run / "sandbox" / "unreachable"
    os.environ["ECHO_PROBE_NO_KEY"] = "no-key"   # so that the failure is the closed port's
    res = snakemake(work, [config, str(overlay)], str((folder / "summary.json").relative_to(work)))
    out = res.stdout + res.stderr
    first = next((ln.strip() for ln in out.splitlines() if "SandboxFailed:" in ln), "(no SandboxFailed line)")
    first = first[first.find("SandboxFailed:"):]
    errors = sorted(p.name for p in folder.glob("*_error.json"))
    return report("a model that cannot answer", res.returncode != 0 and "SandboxFailed" in out and len(errors) >= 1,
                  f"rc {res.returncode}; {first[:220]}; error files: {errors}")


def probe_config_files(work: Path) -> bool:
    (work / "config" / "probe_bad.yaml").write_text("seed: 1\nsandbox:\n  case_ids: [own_001\n")
    lines = []
    for name in ("probe_missing.yaml", "probe_bad.yaml"):
        res = subprocess.run([sys.executable, "-m", "echo_lib.workflow", "-n", "--configfile", f"config/{name}"],
                             cwd=work, capture_output=True, text=True)
        lines.append((res.returncode, res.stderr.strip()))
    ok = all(rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err for rc, err in lines)
    return report("missing / malformed --configfile (echo-run)", ok, " | ".join(f"rc {rc}: {err}" for rc, err in lines))


def probe_non_utf8_scenario(work: Path, config: str, run: Path) -> bool:
    """A broken file is one more failed case: with the ci run's two cases it is over the failure budget,
    so the stage fails after playing the others (their result files are there), and names the file."""
    own = work / "data" / "scenarios" / "own"
    text = (own / "own_001.yaml").read_text(encoding="utf-8").replace("own_001", "own_998").encode() + b"# caf\xe9\n"
    folder = run / "sandbox" / "base"
    cases = sorted(replies(folder))
    with edited(own / "own_998.yaml", text):
        res = snakemake(work, [config], str(folder.relative_to(work) / "summary.json"))
    out = res.stdout + res.stderr + (run / "logs" / "04_sandbox_base.log").read_text()
    named = next((ln[ln.find("own_998.yaml"):] for ln in out.splitlines() if "own_998.yaml" in ln and "UTF-8" in ln), "")
    failed = next((ln[ln.find("SandboxFailed:"):] for ln in out.splitlines() if "SandboxFailed:" in ln), "")
    others = sorted(replies(folder)) == cases and not any((folder / f"{c}_error.json").exists() for c in cases)
    return report("non-UTF-8 scenario file", bool(named) and others,
                  f"rc {res.returncode}; {named[:150] or '(not named)'}; {failed[:120] or played(run, 'base')}; "
                  f"result files of {', '.join(cases)}: {'there' if others else 'MISSING'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="config/ci.yaml")
    ap.add_argument("--keep", help="work in this folder (kept) instead of a temporary one")
    args = ap.parse_args()
    from echo_lib.config import load_config
    cfg = load_config(ROOT / args.config)
    source = ROOT / cfg.results_dir / cfg.run_name
    if not (source / "epm" / "per_case.csv").is_file():
        print(f"no finished run at {source}: run `snakemake --cores 2 --configfile {args.config}` first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="echo-probes-") as tmp:
        work = Path(args.keep or tmp) / "echo"
        shutil.copytree(ROOT, work, ignore=IGNORE)
        run = work / cfg.results_dir / cfg.run_name
        shutil.copytree(source, run, symlinks=True)
        if (ROOT / cfg.models_dir).is_dir() and not (work / cfg.models_dir).exists():   # converted checkpoints
            (work / cfg.models_dir).parent.mkdir(parents=True, exist_ok=True)
            (work / cfg.models_dir).symlink_to(ROOT / cfg.models_dir)
        results = [probe_config_files(work),
                   probe_retrained_adapter(work, args.config, run),
                   probe_edited_scenario(work, args.config, run),
                   probe_non_utf8_scenario(work, args.config, run),
                   probe_fewer_cases(work, args.config, run),
                   probe_dead_model(work, args.config, run)]
    print(f"{sum(results)} of {len(results)} probes pass")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
