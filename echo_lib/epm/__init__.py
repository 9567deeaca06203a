"""The Empathy Potential Model (EMPA, arXiv 2603.00552): the user's state as a point in C-A-P space,
replies as moves, empathy as directed work. Pure numpy + pandas; no model needed.

Reading order: params -> iedr (P0) -> mdep (v_t) -> physics -> termination -> trajectory / engine
(replay) -> epmq (indices, EPM-Q) -> slices -> case_meta, empa_io (EMPA files) -> cli (echo-epmq).
"""
from echo_lib.epm.engine import EPM, Replay, replay
from echo_lib.epm.params import EPMParams
from echo_lib.epm.trajectory import CaseRun

__all__ = ["EPM", "EPMParams", "CaseRun", "Replay", "replay"]
