"""Issue 38, hostile and malformed inputs to the run configuration and the YAML reader.

1. A model key that has no effect for the model's backend (adapter on an openai model: a served base
   model scored under the trained variant's name) is an error at load time.
2. Numbers are finite and in range at load time: no NaN or infinity, integers are whole numbers (not 2.0)
   within int64, the seed within what PYTHONHASHSEED takes.
3. The YAML reader refuses alias bombs, recursive aliases, deep nesting and non-scalar keys with a short
   message naming the file and the line; a config file that is a folder, FIFO or device is an error that
   names it, and a FIFO is never opened.
"""
import datetime
import os
import threading
from pathlib import Path

import pytest
import yaml

from echo_lib import strict_yaml
from echo_lib.config import ConfigError, load_config, validate
from echo_lib.scenarios.own import load_own_file, own_dir
from echo_lib.scenarios.schema import ScenarioError
from echo_lib.workflow import main

ROOT = Path(__file__).resolve().parents[1]
SERVED = {"backend": "openai", "source": "server", "id": "qwen-base", "base_url": "http://localhost:8000/v1"}
BOMB = "".join(f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefg", "bcdefgh"))
BOMB = 'a: &a ["xxxxxxxx", "xxxxxxxx", "xxxxxxxx", "xxxxxxxx", "xxxxxxxx", "xxxxxxxx"]\n' + BOMB


def default_dict() -> dict:
    return yaml.safe_load((ROOT / "config/default.yaml").read_text())


def problem(cfg: dict) -> str:
    with pytest.raises(ConfigError) as err:
        validate(cfg, "test.yaml")
    return str(err.value)


# ---- 1. keys that have no effect for the model's backend --------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("adapter", "results/tiny/policy/echo/adapter"), ("readout", "results/tiny/judges/readout"),
    ("load_in_4bit", True), ("revision", "main"), ("dtype", "bfloat16"), ("device", "cuda"),
    ("gradient_checkpointing", True), ("attn_implementation", "sdpa"),
])
def test_an_openai_model_refuses_a_key_only_the_hf_backend_reads(key, value):
    cfg = default_dict()
    cfg["models"]["served"] = {**SERVED, key: value}
    message = problem(cfg)
    assert "test.yaml" in message and f"'models.served.{key}'" in message and "backend openai" in message
    assert "remove it" in message


@pytest.mark.parametrize("key, value", [("base_url", "http://localhost:8000/v1"), ("api_key_env", "VLLM_API_KEY")])
def test_an_hf_model_refuses_a_key_only_the_openai_backend_reads(key, value):
    cfg = default_dict()
    cfg["models"]["base"][key] = value
    message = problem(cfg)
    assert f"'models.base.{key}'" in message and "backend hf" in message and "remove it" in message
    assert "models.echo" not in message   # the RL variants copy the base: one error, not one per copy


def test_a_revision_on_a_source_without_revisions_is_an_error():
    cfg = default_dict()
    cfg["models"]["base"]["revision"] = "main"          # source embedded
    message = problem(cfg)
    assert "'models.base.revision'" in message and "source 'embedded'" in message and "source hub" in message


def test_defaults_and_derived_models_still_validate_again():
    """The schema fills dtype/device/adapter... on every model, the RL variants copy the hf base with an
    adapter: a validated config (what the Snakefile hands the notebooks) validates again unchanged."""
    cfg = default_dict()
    cfg["models"]["served"] = {**SERVED, "dtype": "float32", "adapter": None}   # the defaults: no effect, no error
    once = validate(cfg)
    assert once["models"]["served"]["device"] == "cpu" and once["models"]["echo"]["adapter"]
    assert validate(once) == once
    for name in ("paper", "ci", "default", "hub"):
        raw = load_config(ROOT / f"config/{name}.yaml").raw
        assert validate(raw) == raw


# ---- 2. numbers finite and in range -----------------------------------------------------------------

@pytest.mark.parametrize("text, key", [
    ("epm:\n  epsilon_zone: .nan\n", "epm.epsilon_zone"),
    ("llm:\n  timeout_s: .inf\n", "llm.timeout_s"),
    ("epm:\n  regression_sum: -.inf\n", "epm.regression_sum"),
    ("smoke_chat:\n  top_p: .nan\n", "smoke_chat.top_p"),
    ("reward_models:\n  unparsed_reward: .nan\n", "reward_models.unparsed_reward"),
])
def test_nan_and_infinity_are_refused_at_every_number_key(tmp_path, text, key):
    path = tmp_path / "nan.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value) and f"'{key}'" in str(err.value) and "finite number" in str(err.value)


@pytest.mark.parametrize("edit, pieces", [
    (lambda c: c.update(seed=2**32), ["'seed'", "4294967296", "<= 4294967295", "PYTHONHASHSEED"]),
    (lambda c: c.update(seed=2**64), ["'seed'", "18446744073709551616"]),
    (lambda c: c.update(seed=2.0), ["'seed'", "2.0", "2, not 2.0"]),
    (lambda c: c.setdefault("llm", {}).update(batch_size=2.0), ["'llm.batch_size'", "2, not 2.0"]),
    (lambda c: c.setdefault("llm", {}).update(batch_size=2**70), ["'llm.batch_size'", "within"]),
    (lambda c: c.setdefault("llm", {}).update(timeout_s=10**400), ["'llm.timeout_s'", "within"]),
    (lambda c: c.setdefault("epm", {}).update(K=True), ["'epm.K'", "true"]),
])
def test_integers_are_whole_numbers_in_range(edit, pieces):
    cfg = default_dict()
    edit(cfg)
    message = problem(cfg)
    for piece in pieces:
        assert piece in message, f"{piece!r} not in:\n{message}"


def test_the_largest_seed_pythonhashseed_takes_loads():
    assert load_config(default_dict() | {"seed": 4294967295}).seed == 4294967295


def test_values_no_json_holds_are_errors_not_tracebacks():
    """What Snakemake's own YAML reading (or a Python caller) hands validate: a date, a non-text key."""
    message = problem(default_dict() | {"run_name": datetime.date(2024, 1, 1)})
    assert "'run_name'" in message and "date" in message and "quote" in message
    message = problem({**default_dict(), 1: "x", None: "y"})
    assert "is 1, not text" in message and "is null, not text" in message


# ---- 3. the YAML reader and the files it is given ---------------------------------------------------

def short_one_line_error(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert str(path) in message and len(message) < 600 and "\n" not in message
    return message


def test_an_alias_bomb_is_a_short_error(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB + "seed: *h\n")
    assert "line" in short_one_line_error(path) and "alias" in short_one_line_error(path)


def test_an_alias_of_a_long_text_repeated_is_a_short_error(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text(f"note: &n \"{'x' * 30000}\"\nrun_name: [*n, *n, *n, *n]\n")
    assert "alias" in short_one_line_error(path)


@pytest.mark.parametrize("text, pieces", [
    ("[a, b]: 1\n", ["line 1", "is a list", "plain text"]),
    ("seed: 1\n? {a: 1}\n: 2\n", ["line 2", "is a mapping"]),
    ("r: &r [*r]\n", ["line 1", "*r"]),
    ("seed: " + "[" * 5000 + "]" * 5000 + "\n", ["line 1", "deeper than"]),
    ("seed: !!binary aGk=\n", ["line 1", "!!binary"]),
    ("seed: *" + "x" * 5000 + "\n", ["line 1", "undefined alias"]),
])
def test_malformed_yaml_is_a_short_error_naming_file_and_line(tmp_path, text, pieces):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    message = short_one_line_error(path)
    for piece in pieces:
        assert piece in message, f"{piece!r} not in:\n{message}"


def test_merges_and_unquoted_dates_still_read():
    data = strict_yaml.safe_load("d: &d {x: 1, y: 2}\ne:\n  <<: *d\n  y: 3\nwhen: 2024-01-01\n")
    assert data == {"d": {"x": 1, "y": 2}, "e": {"x": 1, "y": 3}, "when": "2024-01-01"}


def test_a_config_file_too_large_is_refused(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("note: " + "x" * (strict_yaml.MAX_BYTES + 10) + "\n")
    assert "larger than" in short_one_line_error(path)


def scenario_error(path: Path) -> str:
    with pytest.raises(ScenarioError) as err:
        load_own_file(path)
    message = str(err.value)
    assert str(path) in message and "fix:" in message and len(message) < 1000
    return message


def test_a_scenario_alias_bomb_or_list_key_is_a_short_error(tmp_path):
    text = (own_dir() / "own_001.yaml").read_text(encoding="utf-8")
    (tmp_path / "own_001.yaml").write_text(BOMB + text, encoding="utf-8")
    assert "alias" in scenario_error(tmp_path / "own_001.yaml")
    (tmp_path / "own_002.yaml").write_text("[a, b]: 1\n" + text.replace("own_001", "own_002"), encoding="utf-8")
    assert "is a list" in scenario_error(tmp_path / "own_002.yaml")


def run_echo(argv: list[str]) -> tuple[int | None, list]:
    """echo-run's main in a thread: a test that would hang on a FIFO fails instead."""
    calls, result = [], {}
    thread = threading.Thread(target=lambda: result.update(rc=main(argv, run=lambda exe, a: calls.append(a))),
                              daemon=True)
    thread.start()
    thread.join(timeout=30)
    return result.get("rc"), calls


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_echo_run_refuses_a_folder_a_fifo_and_a_device_without_opening_them(tmp_path, capsys):
    folder, fifo = tmp_path / "folder.yaml", tmp_path / "fifo.yaml"
    folder.mkdir()
    os.mkfifo(fifo)
    try:
        rc, calls = run_echo(["--cores", "1", "--configfile", str(folder), str(fifo), "/dev/null"])
    finally:   # should main be blocked opening the FIFO, a writer releases it so the test ends
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass   # no reader: nothing was blocked
    assert rc == 2 and calls == []
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (f"echo-run: config file {folder} is a folder, not a regular file; replace it with a "
                        "regular YAML file, or name one")
    assert lines[1].startswith(f"echo-run: config file {fifo} is a FIFO (named pipe), not a regular file")
    assert lines[2].startswith("echo-run: config file /dev/null is a character device")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_scenario_is_an_invalid_case_not_a_hang(tmp_path):
    fifo = tmp_path / "own_001.yaml"
    os.mkfifo(fifo)
    result = {}

    def load():
        try:
            load_own_file(fifo)
        except ScenarioError as err:
            result["message"] = str(err)
    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(timeout=30)
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))   # release a reader blocked on it, if any
    except OSError:
        pass
    assert "FIFO" in result.get("message", "(hung or loaded)") and str(fifo) in result["message"]
