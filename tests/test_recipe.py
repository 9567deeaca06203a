"""The method section's recipe follows the run config (report.recipe -> macro RMRecipe of main.tex)."""
from dataclasses import replace

from echo_lib.config import load_config
from echo_lib.report.recipe import reward_model_recipe


def test_the_tiny_recipe_says_verdict_first_sft_without_reasoning_or_grpo():
    text = reward_model_recipe(load_config("config/default.yaml").reward_models)
    assert "verdict alone" in text and "no GRPO stage" in text and "reasoning-and-verdict" not in text
    assert "the top 10 decoder layers" in text and "humanlike 100, empathy 80, scalar 40 steps" in text


def test_the_paper_recipe_says_warm_start_then_grpo():
    text = reward_model_recipe(load_config("config/paper.yaml").reward_models)
    assert "warm start on reasoning-and-verdict targets (500 steps), then GRPO" in text and "(300 steps)" in text
    assert "every decoder layer" in text


def test_editing_the_config_changes_the_text():
    p = load_config("config/default.yaml").reward_models
    think = replace(p, decision="think_first", grpo=replace(p.grpo, steps=7))
    assert "then GRPO with a reward for the correct verdict (7 steps)" in reward_model_recipe(think)
    assert "no GRPO stage" in reward_model_recipe(replace(think, grpo=replace(p.grpo, steps=0)))
    assert "(12 steps)" in reward_model_recipe(replace(p, sft=replace(p.sft, steps=12, steps_by_kind={})))
