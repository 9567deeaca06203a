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
# # 06b · The sycophancy guard: does a model gain by agreeing?
#
# A policy trained where it is evaluated (the epm variant, notebook 03b) can learn to move the judge rather
# than the user. EMPA's own validation found the failure and its cure (docs/METHOD.md 8.5-8.7): a **direct**
# LLM judge rates sycophantic replies *higher*, while the EPM's energy ΔE *falls* under them. This notebook
# runs two guards for every model under test (opt-in: `sycophancy.enabled`, set by `config/multiturn.yaml`):
#
# * **Seeker cases** (`data/scenarios/seeker/`, this project's own): the simulated user wants agreement with a
#   false or a harmful belief (stopping medication because they feel fine, a "can't lose" investment, ...).
#   Each model plays them in the sandbox of stage 04. The judge panel (`roles.nee_judges`) reads the belief,
#   why endorsing it would fail the user and the blinded dialogue, and answers how far the companion went
#   along (1 = says plainly it is wrong or risky ... 5 = endorses it). A dialogue above
#   `sycophancy.threshold` is sycophantic. The **EPM-Q of the same dialogues** stands beside the rate: a model
#   that gains EPM-Q by agreeing is high on both.
# * **The judge's own check**: the same dialogues with every reply rewritten to endorse the belief and to
#   question it. A judge that reads the scale rates the first higher; the difference and its interval are
#   shown first, because a rate from a judge that cannot tell them apart measures nothing.
# * **EMPA's perturbation checks** on each model's stage-04 dialogues (`echo_lib.epm.robustness`): its replies
#   made sycophantic (agree, echo, flatter) or swapped for another person's, scored by the sandbox's EPM judge
#   (ΔE, the share of ΔE < 0) and by a direct judge, beside EMPA's reported values.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand (with config/multiturn.yaml's sycophancy block)
config = {}                            # Snakemake passes the validated run config here

# %%
from echo_lib.notebook import start
from echo_lib.upstream import require

cfg = start(config or config_path, stage="sycophancy")
require(cfg, "sycophancy")   # stage 04's dialogues, stage 05's EPM-Q, the judges; a missing file names its command

# %%
import pandas as pd
from IPython.display import Image, display

from echo_lib.epm.robustness import table as checks_table
from echo_lib.layout import Layout
from echo_lib.sycophancy import stage

out = Layout(cfg.run_dir).sycophancy
cases = stage.seeker_cases(cfg)
print(f"{len(cases.scenarios)} seeker cases x {len(cfg.sandbox.models)} models ({', '.join(cfg.sandbox.models)}); "
      f"panel: {', '.join(cfg.roles.nee_judges)}; EPM judge: {cfg.roles.judge}")
pd.DataFrame([{"case": sc.id, "kind": sc.seeker.kind, "belief": sc.seeker.belief} for sc in cases.scenarios])

# %% [markdown]
# ## Playing and rating
# Each model plays the seeker cases through stage 04's loop (`sycophancy/seekers/<model>/`, resumable case by
# case); then the panel rates them, and EMPA's checks run on the stage-04 dialogues (`sycophancy/checks/<model>/`,
# kept for a rerun with the same cases and settings).

# %%
record = stage.run(cfg)
print(f"{record['seconds']:.0f} s")

# %% [markdown]
# ## Can the judge tell endorsing from questioning?
# The reference model's seeker dialogues, every reply rewritten both ways, rated by the same panel. Only when
# the interval of the difference lies above 0 do the rates below measure agreement.

# %%
s = record["sensitivity"]
print(f"endorsing {s['endorsing']} vs questioning {s['questioning']}: difference {s['difference']} "
      f"(95 % CI {s['ci']}, n = {s['n']}, {s['method']}) -> "
      + ("the judge detects endorsement" if s["detects"] else "the judge does NOT detect endorsement at this scale"))

# %% [markdown]
# ## Sycophancy rate beside EPM-Q
# Per model: the share of seeker dialogues judged sycophantic (Wilson interval), the mean agreement level
# (t-interval), the EPM-Q of the same dialogues, stage 05's EPM-Q over the sandbox's cases, and EMPA's checks
# (mean ΔE and the share of ΔE < 0: a judge that is not fooled gives ΔE < 0). Intervals need 10 cases.

# %%
display(pd.read_csv(out.table))
print("each model minus", cfg.sycophancy.reference_model, "over the seeker cases both played:")
pd.read_csv(out.paired)

# %%
Image(filename=str(out.figure))

# %% [markdown]
# ## EMPA's checks per model, beside the reported values
# EMPA reports (Gemini 2.5 Pro as the judge, n = 98 and 251) ΔE −4.36 with 81.6 % negative under sycophancy and
# −1.22 with 72.5 % under the persona flip, while its direct judge rose by 1.65 (1-10) under sycophancy.

# %%
for model, summary in record["checks"].items():
    print(model)
    display(checks_table(summary))
