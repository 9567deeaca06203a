"""The README's "Results at a glance" (echo_lib/report/glance.py): the committed block is the rendering of
the committed claims table (paper/claims.csv + provenance.json), which paper/claims.md renders too; the
reported column holds exactly data/reported_claims.yaml's numbers; a rewrite touches nothing outside the
markers; a README without them is an error naming the file and the fix. No run is needed."""
import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from paper_fixtures import EPM, NEE, make_run  # noqa: E402

from echo_lib.report import claims as claims_mod  # noqa: E402
from echo_lib.report import glance  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
README, PAPER = ROOT / "README.md", ROOT / "paper"


def table_rows(block: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the markdown table in a block."""
    lines = [line for line in block.splitlines() if line.startswith("|")]
    split = lambda line: [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]   # noqa: E731
    return split(lines[0]), [split(line) for line in lines[2:]]


def readme_block() -> str:
    return glance.block_of(README.read_text(encoding="utf-8"))


# ---- the committed files agree ------------------------------------------------------------------------

def test_the_readme_block_is_the_rendering_of_the_committed_claims_table():
    table, run = glance.read_run(PAPER)
    assert glance.claims_link(README, PAPER) == "paper/claims.md"
    assert readme_block() == glance.render(table, run, "paper/claims.md"), (
        "README.md's 'Results at a glance' is not paper/claims.csv's rendering: after a run, "
        "python -m echo_lib.report.glance rewrites it (and commit README.md with paper/claims.*)")


def test_the_committed_claims_md_is_the_rendering_of_claims_csv():
    table, run = glance.read_run(PAPER)
    assert (PAPER / "claims.md").read_text(encoding="utf-8") == claims_mod.to_markdown(table, run)


def test_the_readme_block_shows_claims_md_row_for_row():
    """Each row of the block is a row of paper/claims.md: the same claim, models, values, interval, n."""
    md_header, md_rows = table_rows((PAPER / "claims.md").read_text(encoding="utf-8"))
    header, rows = table_rows(readme_block())
    assert len(rows) == len(md_rows) > 0
    pick = ["Claim", "Published model", "This run's model", claims_mod.MEASURED_COLUMN, claims_mod.INTERVAL_COLUMN,
            claims_mod.N_COLUMN, claims_mod.REPORTED_COLUMN]
    for row, md_row in zip(rows, md_rows):
        assert row == [md_row[md_header.index(c)] for c in pick]


def test_the_reported_column_is_data_reported_claims_and_labelled_as_reported():
    reported = yaml.safe_load((ROOT / "data" / "reported_claims.yaml").read_text())["claims"]
    want = {(c["quantity"], model): value for c in reported for model, value in c["reported"].items()}
    header, rows = table_rows(readme_block())
    assert header[-1] == "Reported (Echo-N1 paper)" and sum("eported" in h for h in header) == 1
    got = {(r[0], r[1]): float(r[-1]) for r in rows}
    assert got == want
    published = {str(v) for v in want.values()} - {"0.0"}   # 0.0 is also a value a tiny run measures
    for r in rows:
        assert not published & set(r[2:-1]), f"a published number outside the reported column: {r}"


def test_the_block_names_its_run_scale_and_model_and_links_the_full_table():
    record = json.loads((PAPER / "provenance.json").read_text())[glance.RECORD_KEY]
    block = readme_block()
    first = [line for line in block.splitlines() if line and not line.startswith("<!--")][0]
    assert f"run `{record['run_name']}`" in first and f"({record['scale']} scale" in first
    assert record["config_hash"] in first and record["git_commit"][:12] in first and record["created_at"][:10] in first
    assert "[`paper/claims.md`](paper/claims.md)" in first
    header, _ = table_rows(block)
    assert f"Measured ({record['scale']} · {record['policy_model']})" in header


def test_the_readme_has_one_block_under_its_heading_near_the_top():
    text = README.read_text(encoding="utf-8")
    assert text.count(glance.BEGIN) == 1 and text.count(glance.END) == 1
    heading = text.index("## Results at a glance\n")
    assert heading < text.index(glance.BEGIN) < text.index(glance.END) < text.index("\n## ", heading + 1)
    assert text.index("## Results at a glance") < text.index("## Two commands")


# ---- rewriting ---------------------------------------------------------------------------------------

@pytest.fixture()
def paper(tmp_path):
    """A copy of the committed claims table (claims.csv, claims.md, provenance.json)."""
    folder = tmp_path / "paper"
    folder.mkdir()
    for name in ("claims.csv", "claims.md", "provenance.json"):
        shutil.copy(PAPER / name, folder / name)
    return folder


def test_a_rewrite_changes_only_what_lies_between_the_markers(paper, tmp_path):
    readme = tmp_path / "README.md"
    before, after = "# Title\n\nintro <!-- x -->\n\n## Results at a glance\n\n", "\n\n## Next\n\ntext\n"
    readme.write_text(before + glance.BEGIN + "\nstale table\n" + glance.END + after, encoding="utf-8")
    glance.update_readme(readme, paper)
    text = readme.read_text(encoding="utf-8")
    assert text.startswith(before + glance.BEGIN + "\n") and text.endswith(glance.END + after)
    table, run = glance.read_run(paper)
    assert glance.block_of(text) == glance.render(table, run, "paper/claims.md")
    assert "stale table" not in text
    mtime = readme.stat().st_mtime_ns
    glance.update_readme(readme, paper)   # the same block again: the file is not rewritten
    assert readme.read_text(encoding="utf-8") == text and readme.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "paper"]   # no temporary file left


def test_a_rewrite_of_the_repository_readme_keeps_every_other_byte(paper, tmp_path):
    readme = tmp_path / "README.md"
    original = README.read_text(encoding="utf-8")
    readme.write_text(original, encoding="utf-8")
    (paper / "claims.csv").write_text((paper / "claims.csv").read_text().replace("46.7", "99.9"))
    glance.update_readme(readme, paper)
    text = readme.read_text(encoding="utf-8")
    start = original.index(glance.BEGIN) + len(glance.BEGIN)
    assert text[:start] == original[:start]
    assert text[text.index(glance.END):] == original[original.index(glance.END):]
    assert "| 99.9 |" in text and "| 99.9 |" not in original


@pytest.mark.parametrize("content, says", [
    ("# No markers\n", "has no <!-- glance:begin --> marker"),
    (f"# One\n{glance.BEGIN}\n", "has no <!-- glance:end --> marker"),
    (f"{glance.BEGIN}\n{glance.END}\n{glance.BEGIN}\n{glance.END}\n", "keep one of each"),
    (f"{glance.END}\n{glance.BEGIN}\n", "comes before"),
])
def test_a_readme_without_its_markers_is_an_error_naming_the_file_and_the_fix(paper, tmp_path, content, says):
    readme = tmp_path / "MY_README.md"
    readme.write_text(content, encoding="utf-8")
    with pytest.raises(glance.GlanceError) as err:
        glance.update_readme(readme, paper)
    message = str(err.value)
    assert says in message and str(readme) in message
    assert "put the two lines" in message and "paper.readme: null" in message
    assert readme.read_text(encoding="utf-8") == content


def test_a_claims_table_of_an_older_stage_07_is_refused_with_the_fix(paper, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"{glance.BEGIN}\n{glance.END}\n")
    old = pd.read_csv(paper / "claims.csv").drop(columns=[claims_mod.INTERVAL_COLUMN, claims_mod.N_COLUMN])
    old.to_csv(paper / "claims.csv", index=False)
    with pytest.raises(glance.GlanceError, match="lacks column.*--from-run"):
        glance.update_readme(readme, paper)
    (paper / "claims.csv").unlink()
    with pytest.raises(glance.GlanceError, match="claims.csv does not exist"):
        glance.update_readme(readme, paper)


# ---- the command line ---------------------------------------------------------------------------------

def test_the_command_rewrites_the_block_from_an_existing_claims_table(paper, tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"top\n{glance.BEGIN}\n{glance.END}\nend\n")
    assert glance.main(["--paper-dir", str(paper), "--readme", str(readme)]) == 0
    table, run = glance.read_run(paper)
    assert glance.block_of(readme.read_text()) == glance.render(table, run, "paper/claims.md")
    readme.write_text("no markers\n")
    assert glance.main(["--paper-dir", str(paper), "--readme", str(readme)]) == 1
    assert "has no <!-- glance:begin --> marker" in capsys.readouterr().err


def test_the_command_rebuilds_the_claims_table_from_a_run_folder(tmp_path):
    """--from-run: stage 07's claims step on a run's result files (the fixture run), named by the run's record."""
    run_dir = make_run(tmp_path / "ci")
    (run_dir / "nee" / "provenance.json").write_text(json.dumps(
        {"run_name": "ci", "scale": "tiny", "config_hash": "feedc0de12345678", "git_commit": "0123456789abcdef" * 2,
         "created_at": "2031-02-03T04:05:06+0000"}))
    paper, readme = tmp_path / "paper", tmp_path / "README.md"
    readme.write_text(f"{glance.BEGIN}\n{glance.END}\n")
    assert glance.main(["--config", "config/ci.yaml", "--from-run", str(run_dir), "--paper-dir", str(paper),
                        "--readme", str(readme)]) == 0
    _, rows = table_rows(glance.block_of(readme.read_text()))
    echo_success = next(r for r in rows if r[0] == "Success rate (%)" and r[1] == "Echo-N1")
    s, f, t, _ = EPM["echo"]
    assert echo_success[2:] == ["echo", str(round(100 * s / (s + f + t), 1)), "n too small (n = 3)", "3 cases", "46.7"]
    base_composite = next(r for r in rows if r[0].startswith("Composite") and r[1] == "Qwen3-32B (base)")
    assert base_composite[2:] == ["base", str(NEE["base"][1]), "--", "12 ratings", "29.66"]
    first = glance.block_of(readme.read_text()).splitlines()[1]
    assert "run `ci` (tiny scale" in first and "feedc0de12345678" in first and "2031-02-03" in first
    record = json.loads((paper / "provenance.json").read_text())
    assert record["claims_run"]["config_hash"] == "feedc0de12345678" and record["claims_rebuilt"]["from"]
    table, run = glance.read_run(paper)
    assert (paper / "claims.md").read_text() == claims_mod.to_markdown(table, run)
    assert (paper / "claims.tex").is_file()


def test_the_command_refuses_a_record_of_another_run(tmp_path):
    run_dir = make_run(tmp_path / "ci")
    (run_dir / "nee" / "provenance.json").write_text(json.dumps({"run_name": "tiny", "scale": "tiny"}))
    readme = tmp_path / "README.md"
    readme.write_text(f"{glance.BEGIN}\n{glance.END}\n")
    assert glance.main(["--config", "config/ci.yaml", "--from-run", str(run_dir), "--paper-dir",
                        str(tmp_path / "paper"), "--readme", str(readme)]) == 1
    assert not (tmp_path / "paper").exists()
