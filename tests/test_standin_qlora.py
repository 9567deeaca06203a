"""QLoRA stand-in: stages 02 and 03 train on a 4-bit NF4 base (bitsandbytes' CPU backend), as the paper
config's `load_in_4bit: true` asks, through the stage functions the notebooks call; then the trained
policy and reward model answer through the 4-bit base + adapter (generate and choose)."""
from __future__ import annotations

import pytest

from standin import KINDS, build_lm64, standin_config, write_stage01_data

pytestmark = pytest.mark.slow

pytest.importorskip("bitsandbytes", reason="the QLoRA stand-in needs bitsandbytes (make setup installs it)")


@pytest.fixture(scope="module")
def qlora_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qlora")
    cfg = standin_config(tmp / "results", build_lm64(tmp / "lm64"),
                         model={"load_in_4bit": True, "gradient_checkpointing": True})
    write_stage01_data(cfg.run_dir)
    return cfg


def is_4bit(model) -> bool:
    import bitsandbytes as bnb
    return any(isinstance(m, bnb.nn.Linear4bit) for m in model.modules())


def test_stage_02_loads_the_base_4bit_and_trains_sft_and_grpo(qlora_run, monkeypatch):
    import echo_lib.rewards.train as rt
    from echo_lib.finetune import check_saved
    from echo_lib.rewards import stage
    loaded = []
    real = rt.load_for_training
    monkeypatch.setattr(rt, "load_for_training", lambda base: loaded.append(real(base)) or loaded[-1])
    for kind in KINDS:
        result = stage.train(qlora_run, kind)
        assert result.steps == {"sft": 1, "grpo": 1}
        assert check_saved(result.adapter_dir)            # non-empty LoRA tensors
    model, _ = loaded[0]
    assert is_4bit(model), "stage 02 trained on a full-precision base although the model spec says load_in_4bit"
    assert model.is_gradient_checkpointing


def test_stage_03_runs_grpo_on_the_4bit_base(qlora_run, monkeypatch):
    import echo_lib.policy.train as pt
    from echo_lib.finetune import check_saved
    from echo_lib.policy import stage
    loaded = []
    real = pt.load_for_training
    monkeypatch.setattr(pt, "load_for_training", lambda base: loaded.append(real(base)) or loaded[-1])
    prompts, _, _ = stage.rl_data(qlora_run, "echo")
    result = stage.train(qlora_run, "echo", prompts)
    assert result.steps == 1 and result.rows and result.rows[0]["reward"] is not None
    assert check_saved(result.adapter_dir)
    assert is_4bit(loaded[0][0])


def test_the_4bit_base_and_adapters_generate_and_choose(qlora_run):
    from echo_lib.llm import Sampling
    from echo_lib.models import load_llm
    from echo_lib.rewards.stage import rm_llm, rm_paths
    chat = [{"role": "system", "content": "You are a friend."}, {"role": "user", "content": "I failed my exam again."}]
    for llm in (load_llm(qlora_run, "echo"), rm_llm(qlora_run, rm_paths(qlora_run, "empathy").adapter)):
        model, _ = llm.backend.load()
        assert is_4bit(model)
        [reply] = [c.text for c in llm.generate([chat], Sampling(temperature=0, max_new_tokens=6))]
        [choice] = list(llm.choose([chat], ["better", "worse"]))
        assert isinstance(reply, str) and choice.best in ("better", "worse")
        assert abs(sum(choice.probs.values()) - 1) < 1e-4
