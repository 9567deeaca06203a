"""Issue 38 probes of what the model layer stores: read-out heads that do not fit, a cache folder that
cannot be written, a provenance write the disk cuts short, results overwritten on a full disk.

A full disk is stood in for by a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) in a child process: a
write past the limit is cut short and the next one fails with EFBIG, as on a full disk (ENOSPC), whoever
runs the probe (root ignores file modes, not this limit). Where a model is needed it is the tests' tiny
random Llama (tests/tiny_lm.py), built in the scratch folder.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path

from _common import full_disk_child   # scripts/hostile/_common.py (the runner puts the folder on sys.path)

_TINY: dict[Path, Path] = {}


def _tiny(work: Path) -> Path:
    if work not in _TINY:
        sys.path.insert(0, str(work / "tests"))
        from tiny_lm import build_tiny_lm
        _TINY[work] = build_tiny_lm(work / "probe_store" / "tiny_lm")
    return _TINY[work]


def _cfg(work: Path, **models_extra):
    from echo_lib.config import load_config
    return load_config({"results_dir": str(work / "probe_store" / "results"), "run_name": "store",
                        "llm": {"progress": False, **models_extra.pop("llm", {})},
                        "models": {"base": {"backend": "hf", "source": "local", "id": str(_tiny(work)),
                                            **models_extra}}})


def _heads(hidden: int, seed: int = 0):
    import numpy as np

    from echo_lib.llm.readout import fit_heads
    x = np.random.default_rng(seed).normal(size=(40, hidden))
    return fit_heads(x, ["Score:"] * 40, list(np.where(x[:, 0] > 0, "4", "1")), layer=1, C=10.0)


ASK = [[{"role": "system", "content": "You rate a reply."},
        {"role": "user", "content": "Companion: I hear you.\n\nRate the reply.\nScore:"}]]


class _Caught(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _capture() -> _Caught:
    h = _Caught()
    logging.getLogger("echo_lib").addHandler(h)
    return h


# ---- class 1: read-out heads that do not fit ---------------------------------------------------------------

def heads_that_do_not_fit(work: Path):
    """Three hostile heads folders, each asked through the tiny judge's choose: heads of another model
    (hidden size 6, the tiny model's is 32), heads.npz of another fit beside heads.json (a save killed between
    the two files), and NaN values. Each must be an LLMError naming its folder and the fix, not probabilities."""
    from echo_lib.llm import LLMError
    from echo_lib.models import load_llm
    base = work / "probe_store" / "heads"
    _heads(6).save(base / "other_model")
    _heads(32, 0).save(base / "mixed")
    _heads(32, 1).save(base / "refit")
    shutil.copy(base / "refit" / "heads.npz", base / "mixed" / "heads.npz")
    h = _heads(32, 2)
    head = h.heads["Score:"]
    type(h)(1, {"Score:": type(head)(head.classes, head.mean * float("nan"), head.scale, head.coef,
                                     head.intercept)}).save(base / "nan")
    seen = []
    for name in ("other_model", "mixed", "nan"):
        judge = load_llm(_cfg(work, readout=str(base / name), llm={"cache": False}), "base")
        try:
            got = judge.choose(ASK, ["1", "2", "3", "4", "5"])
            seen.append((name, False, f"answered {got[0].probs}"))
        except Exception as err:   # noqa: BLE001  what the user sees, whatever it is
            msg = str(err) if isinstance(err, LLMError) else f"{type(err).__name__}: {err}"
            seen.append((name, isinstance(err, LLMError) and str(base / name) in msg and "rule judges" in msg, msg))
    ok = all(s[1] for s in seen)
    return ok, " | ".join(f"{n}: {m.replace(str(work), '<work>')[:90]}" for n, _, m in seen)


# ---- class 2: a cache folder that cannot be written; a provenance write cut short ----------------------------

def cache_folder_not_writable(work: Path):
    """The cache folder cannot be written (read-only for a user; a file where the folder belongs, which stops
    root as well): the call must still return its answers, with one warning naming the folder."""
    from echo_lib.models import load_llm
    cache = work / "probe_store" / "ro_cache"
    if os.geteuid() == 0:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("a file where the cache folder belongs\n")
    else:
        cache.mkdir(parents=True)
        cache.chmod(0o555)
    caught = _capture()
    try:
        llm = load_llm(_cfg(work, llm={"cache_dir": str(cache)}), "base")
        got = llm.choose(ASK * 3, ["1", "2", "3", "4", "5"])
    finally:
        logging.getLogger("echo_lib").removeHandler(caught)
        if cache.is_dir():
            cache.chmod(0o755)
    warned = [m for m in caught.messages if "call cache" in m]
    ok = len(got) == 3 and len(warned) == 1 and str(cache) in warned[0]
    return ok, f"{len(got)} answers; warned: {(warned or ['nothing'])[0].replace(str(work), '<work>')}"


def provenance_write_cut_short(work: Path):
    """The disk fills in the middle of a provenance record (a real short write): the record must raise naming
    the file, not report success; the next record starts its own line; a reader skips and names the half line."""
    path = work / "probe_store" / "prov" / "llm_provenance.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"op": "earlier"}) + "\n")
    record = """
        from echo_lib.llm.provenance import ProvenanceLog
        from echo_lib.llm.types import Usage
        ProvenanceLog({path!r}).record(op={op!r}, model={{"name": "tiny"}}, settings={{}}, usage=Usage(), seconds=0.1)
        print("recorded")
    """
    cut = full_disk_child(work, record.format(path=str(path), op="cut short"), path.stat().st_size + 60)
    after = full_disk_child(work, record.format(path=str(path), op="next"), 1 << 30)
    from echo_lib.llm.provenance import read_records
    caught = _capture()
    try:
        ops = [r.get("op") for r in read_records(path)]
    finally:
        logging.getLogger("echo_lib").removeHandler(caught)
    err = (cut.stderr.strip().splitlines() or ["(nothing)"])[-1]
    ok = (cut.returncode != 0 and "LLMError" in err and str(path) in err and after.returncode == 0
          and ops == ["earlier", "next"] and any(f"{path}, line 2" in m for m in caught.messages))
    shown = err.replace(str(work), "<work>")
    return ok, f"cut short: {shown[:150]} | read back: {ops}; {caught.messages[:1]}".replace(str(work), "<work>")


# ---- class 3: results lost on a fault ----------------------------------------------------------------------

def full_disk_keeps_earlier_results(work: Path):
    """On a full disk, refitting heads over a judge's folder and rewriting a result file must fail loudly
    and leave the earlier heads and file whole (they were written in place: a truncated heads.npz, half a
    JSON file); a model call whose cache write fails keeps its answers."""
    import numpy as np

    from echo_lib.llm.readout import ReadoutHeads
    from echo_lib.provenance import write_json
    folder = work / "probe_store" / "full"
    old = _heads(32, 0)
    old.save(folder / "heads")
    write_json(folder / "own_001_result.json", {"E_total": 1.5})
    code = f"""
        import numpy as np
        from echo_lib.llm.readout import fit_heads
        from echo_lib.provenance import write_json
        for what in ("heads", "result"):
            try:
                if what == "heads":
                    x = np.random.default_rng(9).normal(size=(400, 32))
                    many = [f"Question {{i}}:" for i in range(40)]
                    fit_heads(np.vstack([x] * 40), [q for q in many for _ in range(400)],
                              list(np.where(x[:, 0] > 0, "4", "1")) * 40, layer=1).save({str(folder / 'heads')!r})
                else:
                    write_json({str(folder / 'own_001_result.json')!r}, {{"E_total": 2.5, "pad": "x" * 100000}})
                print(what, "written")
            except OSError as err:
                print(what, "failed:", type(err).__name__, err.strerror)
    """
    child = full_disk_child(work, code, 4096)
    x = np.random.default_rng(3).normal(size=(2, 32))
    try:
        back = ReadoutHeads.load(folder / "heads", hidden_size=32, n_layers=2)
        heads_ok = np.allclose(back.heads["Score:"].probs(x), old.heads["Score:"].probs(x))
    except Exception as err:   # noqa: BLE001  what the user would see
        heads_ok, back = False, err
    result = json.loads((folder / "own_001_result.json").read_text())
    strays = [p.name for p in folder.rglob(".*")]
    lines = child.stdout.strip().splitlines()
    ok = (heads_ok and result == {"E_total": 1.5} and not strays and len(lines) == 2
          and all("failed" in line for line in lines))
    return ok, (f"child: {'; '.join(lines) or child.stderr[-200:]} | earlier heads intact: {heads_ok}; "
                f"result file: {result}; temp files left: {strays}")


PROBES = [
    ("heads_that_do_not_fit", heads_that_do_not_fit),
    ("cache_folder_not_writable", cache_folder_not_writable),
    ("provenance_write_cut_short", provenance_write_cut_short),
    ("full_disk_keeps_earlier_results", full_disk_keeps_earlier_results),
]
