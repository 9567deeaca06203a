"""The `epm:` block of the run config: schema defaults are EPMParams' defaults, every key documented."""
import dataclasses

import pytest

from echo_lib.config import ConfigError, load_config, load_schema
from echo_lib.epm.params import EPMParams


def test_schema_block_mirrors_the_dataclass():
    block = load_schema()["properties"]["epm"]
    assert block["additionalProperties"] is False and block["default"] == {}
    fields = {f.name: f.default for f in dataclasses.fields(EPMParams)}
    assert set(block["properties"]) == set(fields)
    for key, spec in block["properties"].items():
        assert spec.get("description"), key
        assert spec["default"] == fields[key], key


def test_run_config_carries_epm_params():
    cfg = load_config({"epm": {"alpha": 0.05, "direction": "dynamic"}})
    assert isinstance(cfg.epm, EPMParams)
    assert (cfg.epm.alpha, cfg.epm.direction, cfg.epm.min_turns) == (0.05, "dynamic", 12)
    assert load_config().epm == EPMParams()
    with pytest.raises(ConfigError, match="unknown key.*'alfa' in epm"):
        load_config({"epm": {"alfa": 0.1}})
    with pytest.raises(ConfigError, match="epm.constants"):
        load_config({"epm": {"constants": "mine"}})
