"""scripts/hostile_probes.py (issue 38): one hostile input of each class, on a scratch copy; every probe passes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_every_hostile_probe_passes():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "hostile_probes.py")], capture_output=True,
                         text=True, timeout=900)
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith(("PASS", "FAIL"))]
    areas = {ln.split()[1].split("/")[0] for ln in lines}
    assert {"config", "llm", "store", "empa"} <= areas, run.stdout[-2000:]
    assert run.returncode == 0 and not [ln for ln in lines if ln.startswith("FAIL")], run.stdout[-3000:]
