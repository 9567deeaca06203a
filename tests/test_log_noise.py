"""Issue 39 §4: `make all`'s terminal and the stage logs read as a story, not as noise.

No "Kernel is running over TCP without encryption" warning per stage (the kernel runs over IPC), and a
progress bar in a stage kernel (or a process it starts) writes a line at most every TQDM_MININTERVAL.
"""
import os
import subprocess
import sys
from pathlib import Path

import nbformat

from echo_lib.notebook import run_notebook
from echo_lib.progress import BAR_INTERVAL_S, TQDM_INTERVAL_ENV, TQDM_MINITERS_ENV, pipeline_env

FAST_LOOP = '''
import time
from tqdm.auto import tqdm
for _ in tqdm(range(40), desc="fast loop"):
    time.sleep(0.025)
'''

STAGE = '''# %% tags=["parameters"]
model_dir = ""

# %%
import os
from ipykernel.kernelapp import IPKernelApp
print("interval", os.environ.get("TQDM_MININTERVAL"))
print("ipc folder", os.path.dirname(IPKernelApp.instance().ip))

# %%
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(model_dir)
print("params", sum(p.numel() for p in model.parameters()) > 0)

# %%
''' + FAST_LOOP


def outputs(path):
    nb = nbformat.read(path, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_a_stage_kernel_is_quiet(tmp_path, tiny_lm_dir, capfd, monkeypatch):
    monkeypatch.delenv(TQDM_INTERVAL_ENV, raising=False)
    py = tmp_path / "stage.py"
    py.write_text(STAGE)
    log = tmp_path / "stage.log"
    out = run_notebook(py, tmp_path / "stage.ipynb", {"model_dir": str(tiny_lm_dir)}, log=log, threads=1)
    captured = capfd.readouterr()
    text, logged = outputs(out), log.read_text()
    assert "params True" in text
    for where in (captured.out, captured.err, logged, text):
        assert "without encryption" not in where
        assert "IProgress not found" not in where      # tqdm.auto's ipywidgets warning, once per stage
    assert f"interval {BAR_INTERVAL_S}" in text            # the kernel's environment, not this process's
    assert TQDM_INTERVAL_ENV not in os.environ
    # a 1 s loop over a 30 s interval: its first and last state, not one line per 0.1 s
    assert 1 <= logged.count("fast loop") <= 2, logged
    assert logged.count("Loading weights") <= 2, logged
    # the kernel's IPC sockets lived in a private folder, gone with the kernel
    folder = next(line.split(" ", 2)[2] for line in text.splitlines() if line.startswith("ipc folder"))
    assert Path(folder).name.startswith("echo-kernel-") and not Path(folder).exists()


def _bar_lines(env):
    done = subprocess.run([sys.executable, "-c", FAST_LOOP], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stderr.count("fast loop")


def test_a_tqdm_bar_in_the_pipeline_env_writes_a_couple_of_lines(monkeypatch):
    monkeypatch.delenv(TQDM_INTERVAL_ENV, raising=False)
    base = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
    assert _bar_lines({**base, **pipeline_env()}) <= 2
    assert _bar_lines(base) > 2          # tqdm's own default (0.1 s): the noise the pipeline avoids


def test_an_interval_set_outside_wins(monkeypatch):
    monkeypatch.setenv(TQDM_INTERVAL_ENV, "5")
    assert pipeline_env()[TQDM_INTERVAL_ENV] == "5"


# A bar that first runs fast (tqdm's dynamic miniters grows) and then stalls: tqdm's monitor thread redraws it
# once `maxinterval` has passed without a line. Scaled down: a 2 s interval, the monitor checking every 0.2 s.
STALLING_BAR = '''
import time
from tqdm import tqdm
tqdm.monitor_interval = 0.2
stamps = []
class Log:
    def write(self, s):
        if "stalling" in s:
            stamps.append(time.monotonic())
    def flush(self):
        pass
bar = tqdm(total=10**6, desc="stalling", file=Log())
start = time.monotonic()
while time.monotonic() - start < 1.0:
    time.sleep(0.001); bar.update()
while time.monotonic() - start < 6.0:
    time.sleep(0.3); bar.update()
bar.close()
gaps = [b - a for a, b in zip(stamps[1:-1], stamps[2:-1])]   # between the first and the closing line
print(min(gaps) if gaps else 99.0)
'''


def _min_gap(env):
    done = subprocess.run([sys.executable, "-c", STALLING_BAR], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    return float(done.stdout.split()[-1])


def test_a_stalling_bar_writes_no_more_than_one_line_per_interval(monkeypatch):
    monkeypatch.delenv(TQDM_INTERVAL_ENV, raising=False)
    monkeypatch.delenv(TQDM_MINITERS_ENV, raising=False)
    base = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
    env = pipeline_env()
    assert env[TQDM_INTERVAL_ENV] == str(BAR_INTERVAL_S) and env[TQDM_MINITERS_ENV] == "1"
    scaled = {**base, **env, TQDM_INTERVAL_ENV: "2", "TQDM_MAXINTERVAL": "0.5"}   # 30 s / 10 s, scaled down
    assert _min_gap(scaled) >= 1.9
    # only the minimum interval set (as before): the monitor's redraw and the next update come in pairs
    assert _min_gap({**base, TQDM_INTERVAL_ENV: "2", "TQDM_MAXINTERVAL": "0.5"}) < 1.9
