"""Which model actually answered: the served ids a stage's summary lists, per role.

A server says in each reply which model it answered with (`model`, e.g. a dated snapshot behind an alias)
and its `system_fingerprint`; the openai backend keeps the distinct pairs of each batch in the batch's
provenance record (`served`). `served_by_role` reads them back from a stage's own records (labelled while it
ran, provenance.labelled) for each role's model as it is configured now (name and id): an id the server
swapped behind a configured name shows here, beside the configured one. A local (hf) model is what its
configured weights are: its entry names the configured id, served "local".
"""
from __future__ import annotations

from typing import Any

from echo_lib.llm.provenance import labelled_records, log_files

LOCAL = "local"   # the system_fingerprint listed for a local (hf) model: its configured weights answered
NOT_SEEN = ("no record of this stage lists a served id for this model: every answer came from the call cache "
            "of a run before records named their stage, the server sends no model id, or no call was made")


def _is_this_model(record: dict, name: str, spec: Any) -> bool:
    model = record.get("model")
    return isinstance(model, dict) and model.get("name") == name and model.get("model") == spec.id


def served_ids(records: list[dict], name: str, spec: Any) -> list[dict]:
    """The distinct {model, system_fingerprint} pairs the records of model `name` (configured as `spec`: its
    backend and id) say the server answered with, in the order first seen; for a local model, its own."""
    if spec.backend != "openai":
        return [{"model": spec.id or name, "system_fingerprint": LOCAL}]
    out = []
    for record in records:
        if not _is_this_model(record, name, spec):
            continue
        for item in record.get("served") or []:
            pair = {"model": item.get("model"), "system_fingerprint": item.get("system_fingerprint")} \
                if isinstance(item, dict) else None
            if pair is not None and pair not in out:
                out.append(pair)
    return out


def served_by_role(roles: dict[str, str], specs: dict[str, Any], records: list[dict]) -> dict[str, dict]:
    """role -> {model (its config name), backend, configured_id, served: [{model, system_fingerprint}]}, plus
    `differs` (a served id other than the configured one) and, where nothing was recorded, a note."""
    out = {}
    for role, name in roles.items():
        spec = specs[name]
        served = served_ids(records, name, spec)
        entry = {"model": name, "backend": spec.backend, "configured_id": spec.id, "served": served,
                 "differs": any(s["model"] not in (None, spec.id, name) for s in served)}
        if not served:
            entry["note"] = NOT_SEEN
        out[role] = entry
    return out


def served_in_stage(roles: dict[str, str], specs: dict[str, Any], llms, **labels: str) -> dict[str, dict]:
    """served_by_role over the provenance records `llms` wrote while a stage labelled them with `labels`
    (provenance.labelled), over every run of that stage."""
    return served_by_role(roles, specs, labelled_records(log_files(llms), **labels))


def served_rows(by_role: dict[str, dict]) -> list[dict]:
    """One row per (role, served id) for a table: role, model, configured id, served id, system fingerprint."""
    rows = []
    for role, e in by_role.items():
        for s in e["served"] or [{"model": None, "system_fingerprint": None}]:
            rows.append({"role": role, "model": e["model"], "configured_id": e["configured_id"],
                         "served_id": s["model"], "system_fingerprint": s["system_fingerprint"]})
    return rows
