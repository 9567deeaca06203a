"""Sandbox scenarios: the schema, the project's own English set, EMPA's importer, case selection."""
from echo_lib.scenarios.cases import CaseSelection, InvalidCase, load_cases, select_cases, stratified_order
from echo_lib.scenarios.empa_import import import_empa
from echo_lib.scenarios.own import load_own
from echo_lib.scenarios.schema import Scenario, ScenarioError, scenario_from_dict

__all__ = ["CaseSelection", "InvalidCase", "Scenario", "ScenarioError", "import_empa", "load_cases", "load_own",
           "scenario_from_dict", "select_cases", "stratified_order"]
