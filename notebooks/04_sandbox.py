# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · The sandbox: a simulated user talks with the model under test
#
# Echo-N1 is evaluated *dynamically*: not on single replies but on whole conversations with a simulated
# person who has a history, a hidden story and a threshold for feeling understood. We re-implement the
# multi-agent sandbox of EMPA (arXiv 2603.00552, Algorithm 2), which Echo-N1 calls its "anthropomorphic
# cognitive sandbox":
#
# * **Actor** (the simulated user) plays a persona from a scenario card: who they are, what they want to get
#   off their chest, how hard they are to reach, the chat topic and what just happened. It knows nothing of
#   the rest of its story until the Director releases it, and writes short messages that never repeat.
# * **Director** (the "central executive") watches the dialogue and the EPM state after every turn and acts
#   through one of seven logged function calls: release a story stage or a memory, give acting advice,
#   shift which kind of empathy the user asks for, wait, or end (only when the EPM conditions are met).
# * **Judge** rates, never decides: once before the dialogue it fills the nine-indicator IEDR, which places
#   the user at a deficit point $P_0=(C,A,P)$ (cognitive, affective, motivational; at the tiny scale the three
#   priority indicators come from the scenario file, `sandbox_run.judge.iedr_priorities: declared`, and the
#   result file's `iedr_details.source` says so); every $K$ turns it fills
#   the six-indicator MDEP rubric (progress and regress on each axis), giving the move $v_t$.
# * **EPM engine** moves the user, $P_t = P_{t-1} + v_t$, books the work $\Delta E_t = v_t\cdot v^*_0$ along
#   the ideal direction $v^*_0=-P_0/\lVert P_0\rVert$, and from `min_turns` on ends the run as SUCCESS (the
#   deficit paid off and the target reached or crossed) or EPM_FAILURE (directional collapse, stagnation with
#   regression, oscillation); at `max_turns` it is MAX_TURNS, and a Director stop is DIRECTOR_END.
#
# All cases of the tested model advance in lockstep, so each role's calls for every active case go out as
# one batch per turn. Each case leaves one result file in EMPA's schema (`<case>_result.json`), which
# stage 05 and `echo-epmq` replay from the judge's levels alone; a case that cannot run leaves
# `<case>_error.json` with the reason, and a rerun plays only the cases without a result.
#
# **Scale.** At the tiny scale one 135M-parameter model plays every role for a few short turns, so the
# dialogues are not meaningful. Its judge is the read-out judge of stage 04_judges (`tiny_judge`): the same
# model and rubric prompts, with the rubric levels read from its layer-20 state by heads fit on the dev
# items of the judge sensitivity set, because the digit it writes itself is the same whatever the reply
# (a prompted judge can instead be calibrated, `sandbox_run.judge.calibrate`). Its sensitivity figures
# are printed first, below. The numbers check the machinery and the judge, not the models; comparisons with the EMPA leaderboard need its judge (Gemini 2.5 Pro) and the
# published loop settings (`sandbox_run.max_turns: null`, `min_turns: null`, `director.interval: 1`).

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand
config = {}                            # Snakemake passes the validated run config here
model = "base"                         # which model of the config is under test

# %%
from echo_lib.notebook import start
from echo_lib.upstream import require
cfg = start(config or config_path, stage="sandbox")
require(cfg, "sandbox", model=model)   # the judge's check (and a policy's adapter); a missing file names the command

# %%
import matplotlib.pyplot as plt
import pandas as pd

from echo_lib.report.epm_figures import save_figure
from echo_lib.sandbox.stage import run_sandbox
from echo_lib.sandbox.figures import energy_plot, trajectory_table, transcript

print("model under test:", model, "| actor:", cfg.roles.actor, "| director:", cfg.roles.director,
      "| judge:", cfg.roles.judge)
print("cases:", cfg.sandbox.case_set, "| loop:", cfg.sandbox_run.epm(cfg.epm))

# %% [markdown]
# ## Can the judges see the reply?
# The judge sensitivity stage (notebook 04_judges) measured the instruments on items with a known better
# reply. Its figures come first: every comparison below is only as good as the judge that made it.

# %%
from echo_lib.judges.stage import trust_note

print(trust_note(cfg.run_dir))

# %% [markdown]
# ## Run every case
# Finished cases are skipped; the model layer's cache answers any call an earlier, interrupted run made.

# %%
report = run_sandbox(cfg, model)
print(f"{len(report.ran)} case(s) played in {report.seconds:.0f} s; {len(report.skipped)} already finished; "
      f"{len(report.invalid)} invalid scenario file(s)")
table = report.table()
table

# %% [markdown]
# Which model answered each role: the ids the servers said they served (API models) and their system
# fingerprints, from this stage's provenance records; a local model is its configured id (`local`).

# %%
from echo_lib.llm.served import served_rows
pd.DataFrame(served_rows(report.served))

# %% [markdown]
# ## One dialogue, turn by turn
# The user's message, the model's reply, and after each judged turn the move $v_t$, the position $P_t$ and
# the energy. Lines marked `[director]` are the guidance the Actor followed for its next message.

# %%
finished = table[table["status"] == "finished"]
if finished.empty:
    print("no finished case to show")
else:
    shown = report.out_dir / f"{finished['case_id'].iloc[0]}_result.json"
    print(transcript(shown))
    display(trajectory_table(shown)[["turn", "v_t", "P_t", "delta_E", "E_total", "judge"]])

# %% [markdown]
# ## Energy over turns
# $E_{total}$ after each judged turn, one line per case, labelled with how the case ended. Success needs
# $E_{total} \ge \lVert P_0\rVert$; a line that keeps falling is a model whose replies push the user away.

# %%
if not finished.empty:
    fig = energy_plot(report.out_dir)
    save_figure(fig, report.out_dir, "energy", close=False)
    plt.show()

# %% [markdown]
# ## Endings and judge failures
# A judge answer that fails after its retries scores all levels 0 (the turn still counts); METHOD.md
# recommends rerunning a case where more than 5% of its turns failed.

# %%
print(table.groupby(["status", "termination"], dropna=False).size().rename("cases").to_string())
print("judge failures:", int(pd.to_numeric(table["judge_failures"], errors="coerce").fillna(0).sum()))
