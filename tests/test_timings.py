"""echo_lib.report.timings: a run's cost per stage from Snakemake's benchmark files."""
import os

import pytest

from echo_lib.report import timings

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def bench(logs, name, seconds, rss_mb, cpu, ended):
    f = logs / f"{name}.benchmark.tsv"
    f.write_text(HEADER + f"{seconds}\t-\t{rss_mb}\t0\t0\t0\t0\t0\t0\t{cpu}\n")
    os.utime(f, (ended, ended))


def test_rows_come_in_the_order_the_stages_ended_with_the_sum_and_the_span(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    bench(logs, "01_data_synthesis", 400.0, 2700.0, 330.0, ended=1_000_400)
    bench(logs, "02_controls", 700.0, 5900.0, 580.0, ended=1_000_700)      # beside 01: they overlap
    bench(logs, "00_models", 35.0, 900.0, 20.0, ended=1_000_000)
    table = timings.read(tmp_path)
    assert list(table["Stage"]) == ["00_models", "01_data_synthesis", "02_controls"]
    assert list(table["Peak RSS (GB)"]) == [0.9, 2.7, 5.9] and table["Wall"].iloc[2] == "0:11:40"
    assert timings.span(table) == 735.0                                    # 999,965 to 1,000,700
    assert timings.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 02_controls | 700 | 0:11:40 | 580 | 5.9 |" in out
    assert "3 stage calls: 0:18:55 of stage time, 0:12:15 from the first start to the last end, peak RSS 5.9 GB" in out


def test_a_run_without_benchmarks_or_with_a_foreign_file_names_the_fix(tmp_path, capsys):
    assert timings.main([str(tmp_path)]) == 2
    assert "holds no *.benchmark.tsv: run the DAG" in capsys.readouterr().err
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "03_policy.benchmark.tsv").write_text("seconds\tpeak\n1\t2\n")
    with pytest.raises(timings.TimingsError, match=r"03_policy.benchmark.tsv lacks s, max_rss, cpu_time.*rerun its rule"):
        timings.read(tmp_path)
