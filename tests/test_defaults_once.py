"""No default is written twice (issue 35): a key that a dataclass field with a default reads takes its
default from the dataclass alone; config/schema.yaml writes `default:` only for the other keys. And the
config a run gets is the dataclasses' defaults: an empty section fills to exactly `Dataclass()`."""
from __future__ import annotations

import dataclasses
import json
import typing

import pytest

from echo_lib.config import RunConfig, _as_json, load_config, load_schema, put_dataclass_defaults, validate


def test_no_key_has_a_default_both_in_the_schema_and_in_a_dataclass():
    both = put_dataclass_defaults(load_schema(defaults=False))
    assert not both, ("defaults written twice, in config/schema.yaml and in the dataclass field that reads the key; "
                      f"delete the schema's `default:` of: {', '.join(both)}")


def test_the_walk_finds_a_default_written_twice():
    schema = load_schema(defaults=False)
    schema["properties"]["sandbox_run"]["properties"]["actor"]["properties"]["top_p"]["default"] = 0.8
    schema["properties"]["models"]["additionalProperties"]["properties"]["readout"]["default"] = None
    assert put_dataclass_defaults(schema) == ["models.<name>.readout", "sandbox_run.actor.top_p"]
    assert schema["properties"]["sandbox_run"]["properties"]["actor"]["properties"]["top_p"]["default"] == 0.95


def _default_sections() -> list[str]:
    """The top-level sections read by a dataclass whose every field has a default."""
    def all_defaults(cls):
        return all(f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
                   for f in dataclasses.fields(cls))
    hints = typing.get_type_hints(RunConfig)
    return [f.name for f in dataclasses.fields(RunConfig)
            if dataclasses.is_dataclass(hints[f.name]) and all_defaults(hints[f.name])]


SECTIONS = _default_sections()


def test_the_sections_with_dataclass_defaults_are_the_params_blocks():
    assert set(SECTIONS) == {"llm", "epm", "reward_models", "controls", "sandbox_run", "policy", "nee", "judges",
                             "paper", "sycophancy"}


@pytest.fixture(scope="module")
def empty():
    return validate({}, "empty config")


def _absent_steps_by_kind(section: str, data: dict) -> dict:
    """reward_models.sft.steps_by_kind: SFTParams' default is {}, and the schema fills each kind the config
    leaves out with null, which steps_for reads as absent too (the schema's own defaults, below a field
    whose default is a plain dict)."""
    if section == "reward_models":
        sft = data["sft"]
        data = {**data, "sft": {**sft, "steps_by_kind": {k: v for k, v in sft["steps_by_kind"].items()
                                                          if v is not None}}}
    return data


@pytest.mark.parametrize("section", SECTIONS)
def test_an_empty_section_fills_to_its_dataclass_defaults(section, empty):
    cls = typing.get_type_hints(RunConfig)[section]
    filled = _absent_steps_by_kind(section, empty[section])
    # as JSON text: 1 and 1.0 differ there (and in the config hash), though not for ==
    assert json.dumps(filled, sort_keys=True) == json.dumps(_as_json(cls()), sort_keys=True)
    built = getattr(load_config({}), section)
    if section == "reward_models":
        assert built.sft.steps_by_kind == {"humanlike": None, "empathy": None, "scalar": None}
        built = dataclasses.replace(built, sft=dataclasses.replace(built.sft, steps_by_kind={}))
    assert built == cls()


def test_sandbox_run_defaults_are_the_runs_sampling():
    """The two defaults that schema and dataclass once disagreed on (or seemed to): the run's values."""
    run = load_config({}).sandbox_run
    assert run.test_model.presence_penalty == 1.5 and run.test_model.top_p == 0.8   # EMPA Table 7
    assert run.actor.top_p == 0.95 and run.actor.presence_penalty == 0.0
    from echo_lib.sandbox.params import SandboxRunParams
    assert run == SandboxRunParams()


def test_a_partly_set_nested_block_keeps_the_dataclass_defaults_below_it():
    cfg = load_config({"sandbox_run": {"actor": {"temperature": 0.5}}, "models": {"base": {
        "backend": "hf", "source": "embedded", "id": "smollm2-135m-instruct"}}})
    assert cfg.sandbox_run.actor.top_p == 0.95 and cfg.sandbox_run.actor.temperature == 0.5
    assert cfg.models["base"].gradient_checkpointing is False and cfg.models["base"].request_rules is None


def test_the_loaded_schema_shows_every_default():
    schema = load_schema()
    block = schema["properties"]["sandbox_run"]["properties"]
    assert block["actor"]["default"] == {} and block["actor"]["properties"]["top_p"]["default"] == 0.95
    assert schema["properties"]["llm"]["properties"]["batch_size"]["default"] == 32
    assert schema["properties"]["paper"]["properties"]["counterparts"]["default"]["Echo-N1"] == "echo"
    assert schema["properties"]["run_name"]["default"] == "tiny"   # the schema's own, no dataclass default
