"""The EMPA sandbox (METHOD.md 5): a simulated user (Actor) steered by a Director talks with the model
under test; a Judge rates the IEDR once and the MDEP rubric every K turns; the EPM engine decides the end.

Reading order: params -> dialogue -> actor, test_model, judge, director (each a prompt builder and a
call through echo_lib.llm) -> batch -> loop (Algorithm 2, all cases in lockstep) -> results (EMPA
result files) -> run (stage 04 for one model) -> figures.
"""
from echo_lib.sandbox.loop import DIRECTOR_END, EPM_FAILURE, MAX_TURNS, SUCCESS, CaseState, Players, play
from echo_lib.sandbox.params import DirectorParams, JudgeParams, ReplySampling, SandboxRunParams
from echo_lib.sandbox.results import summary_rows
from echo_lib.sandbox.run import SandboxFailed, SandboxReport, model_dir, run_sandbox

__all__ = ["CaseState", "DIRECTOR_END", "DirectorParams", "EPM_FAILURE", "JudgeParams", "MAX_TURNS", "Players",
           "ReplySampling", "SUCCESS", "SandboxFailed", "SandboxReport", "SandboxRunParams", "model_dir", "play", "run_sandbox",
           "summary_rows"]
