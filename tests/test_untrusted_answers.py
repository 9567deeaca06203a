"""Issue 18, section 4: answers a model or a file may give that used to stop a stage now fail one
answer (or one file) with a message, and the rest go on: 1,000-deep JSON from a judge, an NEE judge,
a server in JSON mode or a result file (RecursionError), and Director tool arguments that are not an
object (AttributeError in the Director; now an error at the openai backend and defaults in apply)."""
from __future__ import annotations

import pytest
from openai_stub import Stub, completion

from echo_lib.config import load_config
from echo_lib.epm.empa_io import ResultFileError, read_result
from echo_lib.epm.engine import EPM
from echo_lib.epm.params import EPMParams
from echo_lib.llm import LLMError, Sampling, ToolCall
from echo_lib.models import load_llm
from echo_lib.llm.tools import parse_arg
from echo_lib.nee.prompts import parse_score, parse_winner
from echo_lib.sandbox import director as dr
from echo_lib.sandbox.dialogue import StoryState
from echo_lib.sandbox.judge import MDEP_ALLOWED, parse_json
from echo_lib.sandbox.results import finished
from echo_lib.scenarios import load_own

DEEP = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"score": ' + "[" * 1000 + "]" * 1000 + "}"
CHAT = [{"role": "system", "content": "You direct."}, {"role": "user", "content": "next?"}]


@pytest.mark.parametrize("text", [DEEP, DEEP_OBJECT, '{"a": ' * 1000 + "1" + "}" * 1000])
def test_deep_json_from_a_judge_is_an_unusable_answer(text):
    for parse in (lambda t: parse_json(t, MDEP_ALLOWED), parse_score, parse_winner):
        with pytest.raises(ValueError):
            parse(text)
    assert parse_arg(text, {"type": "object"}) is None


def test_deep_json_in_a_file_names_the_file(tmp_path):
    path = tmp_path / "base" / "script_001_result.json"
    path.parent.mkdir()
    path.write_text('{"epj": ' * 1000 + "1" + "}" * 1000)
    with pytest.raises(ResultFileError, match=r"script_001_result\.json: not a readable JSON file"):
        read_result(path)
    # the resume check reads the file before it looks at the run's settings (any object here)
    assert finished(path.parent, "script_001", meta=object()) is False     # played again, not a crash


def test_director_arguments_that_are_not_an_object_use_the_defaults():
    sc = load_own()[0]
    story, epm = StoryState(), EPM((-14, -18, -18), EPMParams(min_turns=3, max_turns=6))
    d = dr.apply(ToolCall("select_and_reveal_fragment", [2, "x"]), sc, story, epm, 1)
    assert "not an object" in d.log["arguments_error"] and story.stages == [0]   # the first unreleased stage
    d = dr.apply(ToolCall("reveal_memory", "childhood"), sc, story, epm, 2)
    assert d.log["arguments_error"] and story.memories == ["childhood"]


def stub_cfg(tmp_path, stub):
    return load_config({"results_dir": str(tmp_path / "results"), "llm": {"progress": False, "max_retries": 0},
                        "models": {"base": {"backend": "openai", "source": "server", "id": "m",
                                            "base_url": stub.base_url, "api_key_env": None}}})


@pytest.mark.parametrize("arguments", ["[1, 2]", '"reveal"', "3", DEEP])
def test_server_tool_arguments_that_are_not_an_object_are_an_llm_error(tmp_path, arguments):
    tool = {"type": "function", "function": {"name": "reveal_memory", "description": "d",
                                             "parameters": {"type": "object", "properties": {}}}}
    with Stub(lambda body, headers: (200, completion(tool_call={"name": "reveal_memory",
                                                                "arguments": arguments}))) as stub:
        with pytest.raises(LLMError, match="not a JSON object|not JSON"):
            load_llm(stub_cfg(tmp_path, stub), "base").call_tools([CHAT], [tool])


def test_server_json_mode_answer_nested_too_deeply_is_refused(tmp_path):
    from echo_lib.llm import FeatureUnsupported
    with Stub(lambda body, headers: (200, completion(DEEP))) as stub:
        with pytest.raises(FeatureUnsupported, match="does not parse as JSON"):
            load_llm(stub_cfg(tmp_path, stub), "base").generate([CHAT], Sampling(max_new_tokens=4, json_mode=True))
