"""Small views of one sandbox run: a dialogue with its per-turn EPM state, and energy over turns."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from echo_lib.sandbox.results import RESULT


def trajectory_table(path: str | Path) -> pd.DataFrame:
    """Per evaluated turn of one result file: the user's message, the reply, v_t, P_t, delta-E, E_total."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    said = {}
    for h in data["history"]:
        said.setdefault(h.get("turn"), {})[h["role"]] = h["content"]
    rows = []
    for pt in data["epj"]["trajectory"]:
        t, epm = pt["turn"], pt["epm"]
        judged = pt.get("mdep_analysis")
        rows.append({"turn": t, "user": said.get(t, {}).get("actor", ""), "reply": said.get(t, {}).get("test_model", ""),
                     "v_t": tuple(pt["v_t"]), "P_t": tuple(pt["P_t"]), "delta_E": epm.get("delta_E", 0.0),
                     "E_total": epm["E_total"],
                     "judge": "IEDR (P0)" if t == 0 else "ok" if judged else "failed (scored 0)"})
    return pd.DataFrame(rows)


def transcript(path: str | Path) -> str:
    """The dialogue of one result file as text, with the EPM state after each judged turn."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    table = trajectory_table(path).set_index("turn")
    lines = [f"{data['script_id']}: {data['termination_reason']} "
             f"(P0 = {tuple(data['epj']['P_0_initial_deficit'])}, {data['total_turns']} turns)"]
    for h in data["history"]:
        if h["role"] == "actor" and h.get("director_guidance"):
            lines.append(f"    [director] {h['director_guidance']}")
        lines.append(f"{'USER' if h['role'] == 'actor' else 'MODEL'} (turn {h.get('turn')}): {h['content']}")
        t = h.get("turn")
        if h["role"] == "test_model" and t in table.index:
            r = table.loc[t]
            lines.append(f"    [epm] v = {r.v_t}, P = {r.P_t}, dE = {r.delta_E:+.2f}, E_total = {r.E_total:.2f}")
    return "\n".join(lines)


def energy_plot(out_dir: str | Path, ax=None):
    """E_total over turns, one line per case of a model's folder, each ending with its termination type."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for path in sorted(Path(out_dir).glob(f"*{RESULT}")):
        data = json.loads(path.read_text(encoding="utf-8"))
        table = trajectory_table(path)
        line, = ax.plot(table["turn"], table["E_total"], marker="o", ms=3, label=data["script_id"])
        kind = data.get("sandbox", {}).get("termination_type", "")
        ax.annotate(kind, (table["turn"].iloc[-1], table["E_total"].iloc[-1]), fontsize=7, color=line.get_color(),
                    xytext=(3, 0), textcoords="offset points", va="center")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.margins(x=0.15)                                  # room for the ending labels
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel("dialogue turn")
    ax.set_ylabel("E_total (work done)")
    ax.set_title(f"Energy over turns: {Path(out_dir).name}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2)
    return ax.figure
