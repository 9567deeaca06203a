"""The EPM figures draw what they are given (a few fixture runs), and the notebook runs end to end."""
import matplotlib

matplotlib.use("Agg")

import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from echo_lib.epm.empa_io import write_result  # noqa: E402
from echo_lib.epm.engine import replay  # noqa: E402
from echo_lib.epm.epmq import per_case_table, summary_table  # noqa: E402
from echo_lib.epm.slices import slice_table, slice_wide  # noqa: E402
from echo_lib.report import epm_figures as figs  # noqa: E402
from fixtures.epm.runs import as_case_run, case_meta, load_runs  # noqa: E402

CASES = {"script_003", "script_020", "script_042", "script_128", "script_263", "script_391"}


@pytest.fixture(scope="module")
def small():
    reps = [replay(as_case_run(r)) for r in load_runs() if r["case_id"] in CASES]
    per_case = per_case_table(reps)
    summary = summary_table(per_case)
    return reps, per_case, summary, figs.model_order(summary)


def test_order_and_outcome_bars(small, tmp_path):
    reps, per_case, summary, order = small
    assert order == ["claude-4.6-opus", "doubao-1.5-character", "qwen3-32b"]
    fig = figs.outcome_bars(summary)
    stacks = [sum(p.get_height() for p in c) for c in fig.axes[0].containers]
    assert stacks == [summary["Success"].sum(), summary["Failure"].sum(), summary["Timeout"].sum()]
    paths = figs.save_figure(fig, tmp_path, "bars")
    assert [p.name for p in paths] == ["bars.png", "bars.pdf"] and all(p.stat().st_size > 1000 for p in paths)


def test_index_panel_shows_means(small):
    _, per_case, _, order = small
    fig = figs.index_panel(per_case, order)
    assert len(fig.axes) == 9
    heights = [p.get_height() for p in fig.axes[0].patches]
    expected = [per_case.loc[per_case.Model == m, "Idx_RDI"].mean() for m in order]
    assert np.allclose(heights, expected)


def test_radar_marks_empty_slices(small):
    _, per_case, _, order = small
    wide = slice_wide(slice_table(per_case, case_meta()), "mechanism")
    assert wide.isna().any().any()                       # 6 cases cannot fill all six mechanism slices
    fig = figs.radar_grid(wide, "mechanism", order)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert any("(n/a)" in lab for lab in labels) and len([a for a in fig.axes if a.get_visible()]) == 3


def test_heatmap_and_trajectories(small, tmp_path):
    reps, per_case, _, order = small
    heat = figs.case_heatmap(per_case, order)
    assert [t.get_text() for t in heat.axes[0].get_yticklabels()] == order
    grid = figs.trajectory_grid(reps, order)
    assert len(grid.axes) == 12
    assert len(grid.axes[1].lines) == len(CASES) + 2       # one C-A path per case, plus the two axes through 0
    pytest.importorskip("plotly")
    html = figs.trajectory_html(reps, order, tmp_path / "t.html")
    assert html.stat().st_size > 100_000 and "script_391" in html.read_text()


@pytest.mark.slow
def test_notebook_writes_tables_and_figures(tmp_path):
    from echo_lib.config import load_config
    from echo_lib.notebook import run_notebook
    from conftest import EMPA_FIXTURE
    cfg = load_config().raw | {"sandbox": {**load_config().raw["sandbox"], "empa_dir": str(EMPA_FIXTURE)}}
    runs = tmp_path / "runs"
    for rec in load_runs():
        if rec["case_id"] in CASES:
            write_result(replay(as_case_run(rec)), runs / rec["model"] / f"{rec['case_id']}_result.json")
    out = tmp_path / "epm"
    nb = run_notebook("notebooks/05_epm_analysis.py", tmp_path / "05.ipynb",
                      {"config": cfg, "result_dirs": [str(runs)], "out_dir": str(out)})
    assert nbformat.read(nb, as_version=4).cells
    summary = pd.read_csv(out / "summary.csv")
    assert summary["Model"].tolist() == ["claude-4.6-opus", "doubao-1.5-character", "qwen3-32b"]
    assert summary["Cases"].tolist() == [6, 6, 6] and set(summary["Constants"]) == {"code"}
    assert len(pd.read_csv(out / "per_case.csv")) == 18
    for name in ("fig_outcomes", "fig_indices", "fig_case_heatmap", "fig_trajectories"):
        assert (out / f"{name}.png").is_file() and (out / f"{name}.pdf").is_file(), name
    radar = [(out / f"fig_radar_{s}.png").is_file() for s in ("mechanism", "persona", "domain")]
    assert all(radar)            # the fixture's metadata covers three of these EMPA cases
    slices = pd.read_csv(out / "slices.csv")
    assert set(slices.loc[slices["Slicing"] == "domain", "Slice"]) == {"Leisure", "Values", "Relations"}


def test_known_case_meta_has_own_and_fixture_cases(empa_fixture):
    from echo_lib.epm.scoring import known_case_meta
    own = known_case_meta(None)
    both = known_case_meta(empa_fixture.root, priorities="empa_stats")
    assert set(both) - set(own) == {"script_003", "script_042", "script_128"}
    assert both["script_128"].priorities == {"C": "Medium", "A": "High", "P": "Medium"}


def test_known_case_meta_has_own_and_empa_cases(empa):
    from echo_lib.epm.scoring import known_case_meta
    own = known_case_meta(None)
    assert len(own) >= 30 and all(not k.startswith("script_") for k in own)
    both = known_case_meta(empa.root, priorities="empa_stats")
    assert set(own) < set(both) and both["script_042"].priorities == {"C": "High", "A": "High", "P": "High"}
