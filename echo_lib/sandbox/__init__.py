"""The EMPA sandbox (METHOD.md 5): a simulated user (Actor) steered by a Director talks with the model
under test; a Judge rates the IEDR once and the MDEP rubric every K turns; the EPM engine decides the end.

Reading order: params -> dialogue -> actor, test_model, judge, director (each a prompt builder and a
call through echo_lib.llm) -> batch -> loop (Algorithm 2, all cases in lockstep) -> results (EMPA
result files) -> figures. Stage 04 for one model (run_sandbox, in the stage layer) is echo_lib.sandbox.stage.
"""
from echo_lib.sandbox.loop import DIRECTOR_END, EPM_FAILURE, MAX_TURNS, SUCCESS, CaseState, Players, play
from echo_lib.sandbox.params import DirectorParams, JudgeParams, ReplySampling, SandboxRunParams
from echo_lib.sandbox.results import summary_rows

__all__ = ["CaseState", "DIRECTOR_END", "DirectorParams", "EPM_FAILURE", "JudgeParams", "MAX_TURNS", "Players",
           "ReplySampling", "SUCCESS", "SandboxRunParams", "play", "summary_rows"]
