"""Run configuration: load YAML, validate against config/schema.yaml, build typed dataclasses.

Each default is written once. Where a key is read by a dataclass field that has a default (the sections'
params classes: echo_lib/*/params.py, echo_lib.llm.settings.LLMSettings, ModelSpec's optional keys), the
dataclass holds it, as TRL's GRPOConfig does, so `SandboxRunParams()` in a test samples like a run; the
schema keeps the key's type, range, enum and description. The schema's own `default:` is left only for
keys no such field covers (the top-level keys and sections, the data, smoke_chat, roles, sandbox, empa,
published and resources blocks, models' other keys). load_schema puts the dataclasses' defaults into the
schema it returns, so validation fills, and config/README.md shows, every default from where it lives
(tests/test_defaults_once.py: no key has both). A wrong key or value fails at once with a message that
names the key, the value and what is allowed.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

from echo_lib import strict_yaml
from echo_lib.embedded import EmbeddedModel   # noqa: F401  (re-exported: defined beside what uses it)
from echo_lib.empa_source import EmpaParams
from echo_lib.epm.params import EPMParams
from echo_lib.llm.registry import ModelSpec   # noqa: F401  (re-exported: the model layer's own type)
from echo_lib.llm.settings import LLMSettings
from echo_lib.layout import Layout
from echo_lib.paths import project_root
from echo_lib.provenance import RunRecord
from echo_lib.judges.params import JudgeSensitivityParams
from echo_lib.nee.params import NEEParams
from echo_lib.sycophancy.params import SycophancyParams
from echo_lib.policy.params import PolicyParams, trained_models
from echo_lib.report.params import PaperParams
from echo_lib.controls.params import ControlParams
from echo_lib.rewards.params import RewardModelParams
from echo_lib.sandbox.params import SandboxRunParams
from echo_lib.scenarios.cases import SandboxCases
from echo_lib.synthesis.params import DataConfig

SCHEMA_PATH = project_root() / "config" / "schema.yaml"
DEFAULT_CONFIG = project_root() / "config" / "default.yaml"


class ConfigError(ValueError):
    """A run configuration that cannot be used; the message says what to change."""


@dataclass(frozen=True)
class SmokeChat:
    model: str
    system_prompt: str
    message: str
    temperature: float
    top_p: float
    max_new_tokens: int


@dataclass(frozen=True)
class Roles:
    """Which model plays each role of the method."""
    policy: str
    reward_model: str
    actor: str
    director: str
    judge: str
    nee_judges: list[str]


@dataclass(frozen=True)
class Published:
    empa_results: str | None
    case_meta_source: str


@dataclass(frozen=True)
class Resources:
    threads: int
    wait_policy: str  # OpenMP idle threads: "active" (spin) or "passive" (sleep)
    mem_mb: int
    runtime: int
    gpu: int
    gpu_model: str | None


@dataclass(frozen=True)
class RunConfig:
    run_name: str
    scale: str
    seed: int
    results_dir: str
    models_dir: str
    embedded: dict[str, EmbeddedModel]
    models: dict[str, ModelSpec]
    smoke_chat: SmokeChat
    roles: Roles
    sandbox: SandboxCases
    empa: EmpaParams
    published: Published
    resources: dict[str, Resources]
    llm: LLMSettings
    epm: EPMParams
    data: DataConfig
    reward_models: RewardModelParams
    controls: ControlParams
    sandbox_run: SandboxRunParams
    policy: PolicyParams
    nee: NEEParams
    sycophancy: SycophancyParams
    judges: JudgeSensitivityParams
    paper: PaperParams
    raw: dict = dataclasses.field(repr=False, compare=False, default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return Path(self.results_dir) / self.run_name

    def resources_for(self, stage: str) -> Resources:
        return self.resources.get(stage, self.resources["default"])

    @property
    def hash(self) -> str:
        return config_hash(self.raw)

    @property
    def record(self) -> RunRecord:
        """What every artifact's provenance records of the run (echo_lib.provenance.provenance)."""
        return RunRecord(self.run_name, self.scale, self.hash, self.seed)


# --------------------------------------------------------------------------------------------
# Loading and validation


def load_schema(defaults: bool = True) -> dict:
    """The run config's schema, with every key's default in place: config/schema.yaml's own (for keys no
    dataclass field with a default covers) and those of the dataclasses that read the config (RunConfig's
    tree; put_dataclass_defaults). `defaults=False`: the file as written."""
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    if defaults:
        put_dataclass_defaults(schema)
    return schema


def put_dataclass_defaults(schema: dict, cls: type | None = None) -> list[str]:
    """Write into `schema` (in place) the default of every key that a dataclass field with a default reads:
    a section's defaults live once, in its dataclass (echo_lib/*/params.py, ...), as plain JSON data (a
    tuple as a list, a nested dataclass as `default: {}` with its own values as its keys' defaults, so a
    field's default_factory instance, e.g. SandboxRunParams.actor, gives the keys below it). Keys whose field
    has no default keep the schema's `default:` (top-level sections, map entries such as resources.<name>).
    Returns the keys (dotted; `<name>` for a map's entries) whose default the schema also wrote, where the
    dataclass's wins; tests/test_defaults_once.py keeps that list empty."""
    both: list[str] = []
    _put_defaults(schema, RunConfig if cls is None else cls, None, "", both)
    return both


def _put_defaults(node: dict, cls: type, instance: Any, path: str, both: list[str]) -> None:
    """`node`'s keys read by dataclass `cls`: their defaults from `instance` (a default value of the whole
    node) or else from `cls`'s field defaults."""
    props = node.get("properties") or {}
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        sub = props.get(field.name)
        if sub is None:   # a field the config does not set (RunConfig.raw, ModelSpec.name)
            continue
        key = f"{path}{field.name}"
        if instance is not None:
            has, value = True, getattr(instance, field.name)
        elif field.default is not dataclasses.MISSING:
            has, value = True, field.default
        elif field.default_factory is not dataclasses.MISSING:
            has, value = True, field.default_factory()
        else:
            has, value = False, None
        if has:
            if "default" in sub:
                both.append(key)
            if dataclasses.is_dataclass(value):
                sub["default"] = {}
                _put_defaults(sub, type(value), value, f"{key}.", both)
            else:
                sub["default"] = _as_json(value)
            continue
        tp = _without_none(hints[field.name])
        if dataclasses.is_dataclass(tp):
            _put_defaults(sub, tp, None, f"{key}.", both)
        elif typing.get_origin(tp) is dict and isinstance(sub.get("additionalProperties"), dict):
            item = typing.get_args(tp)[1]
            if dataclasses.is_dataclass(item):
                _put_defaults(sub["additionalProperties"], item, None, f"{key}.<name>.", both)


def _without_none(tp: Any) -> Any:
    """X for `X | None`; anything else as it is."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return tp


def _as_json(value: Any) -> Any:
    """A dataclass default as the config holds it: dataclasses as dicts, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:   # a regular file of a config's size; a folder, FIFO or device is refused unopened (strict_yaml)
        data = strict_yaml.safe_load(strict_yaml.read_text(path))   # a key twice, an alias bomb: errors
    except strict_yaml.FileRefused as err:
        raise ConfigError(f"config file {path} {err.problem}; {err.fix}") from None
    except OSError as err:
        raise ConfigError(f"config file {path} cannot be read ({err.strerror or err}); "
                          "make it a file you can read") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {err.start})") from None
    except yaml.YAMLError as err:   # one line: the file, the line and what PyYAML found there
        mark = getattr(err, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        what = " ".join(str(getattr(err, "problem", None) or err).split())[:300]
        raise ConfigError(f"config file {path}{where} is not valid YAML: {what}") from None
    if data is None:   # an empty file: every key at its default
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of keys, not {type(data).__name__}; "
                          "write `key: value` lines at the top level")
    return data


def validate(config: Mapping[str, Any], source: str = "config") -> dict:
    """Return a copy of `config` with schema defaults filled in; raise ConfigError on any problem."""
    schema = load_schema()
    filled = fill_defaults(copy.deepcopy(dict(config)), schema)
    # values no schema keyword catches (NaN, a 2**64, a date, a key that is not text) come first, alone:
    # the schema check assumes JSON data
    problems = _value_problems(filled)
    if not problems:
        errors = sorted(_Validator(schema).iter_errors(filled), key=lambda e: list(map(str, e.absolute_path)))
        problems = [_explain(err) for err in errors]
    problems += _backend_key_problems(filled, schema) if not problems else []   # before the derived copies
    problems += _add_policy_models(filled) if not problems else []
    problems += _add_trained_judge(filled) if not problems else []
    problems += _cross_reference_problems(filled) if not problems else []
    from echo_lib.llm.secrets import config_problems   # credentials in base_url; a key pasted into api_key_env
    problems = config_problems(filled, problems)        # is not shown (issue 38)
    if problems:
        raise ConfigError(f"invalid run configuration ({source}):\n  - " + "\n  - ".join(problems))
    return filled


def load_config(source: str | Path | Mapping[str, Any] | None = None, **overrides: Any) -> RunConfig:
    """Load a run config from a YAML path or a dict (e.g. Snakemake's), validate it, build dataclasses.

    `overrides` replace top-level keys (e.g. `run_name="x"`), after which the result is validated again.
    """
    if source is None:
        source = DEFAULT_CONFIG
    if isinstance(source, Mapping):
        data, label = dict(source), "config dict"
    else:
        data, label = read_yaml(source), str(source)
    data.update(overrides)
    raw = validate(data, label)
    return _build(RunConfig, {**raw, "raw": raw})


def config_hash(raw: Mapping[str, Any]) -> str:
    """Short content hash of a validated config, recorded in every artifact's provenance."""
    return hashlib.sha256(json.dumps(raw, sort_keys=True).encode()).hexdigest()[:16]


def fill_defaults(instance: Any, schema: dict) -> Any:
    """Recursively insert the defaults of `schema` for missing keys (objects and maps of objects); given
    load_schema()'s schema, the dataclasses' defaults and the schema file's own."""
    if not isinstance(instance, dict) or schema.get("type") != "object":
        return instance
    for key, sub in schema.get("properties", {}).items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance:
            instance[key] = fill_defaults(instance[key], sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in set(instance) - set(schema.get("properties", {})):
            instance[key] = fill_defaults(instance[key], extra)
    return instance


# Numbers a run can use: finite, and whole numbers within int64 (numpy, torch and JSON readers take no more)
# unless the schema bounds a key more tightly (seed: PYTHONHASHSEED's 0..4294967295).
INT_MIN, INT_MAX = -2**63, 2**63 - 1
_JSON_SCALARS = (str, bool, int, float, type(None))


def _is_integer(_checker, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)   # 2.0 is not an integer (jsonschema: it is)


def _is_number(_checker, value: Any) -> bool:
    return _is_integer(_checker, value) or (isinstance(value, float) and math.isfinite(value))   # no NaN, inf


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_number}))


def _show(value: Any, limit: int = 80) -> str:
    """A value as the message quotes it: JSON where it can be, never longer than `limit` characters."""
    if isinstance(value, dict):
        return "{...}"
    if isinstance(value, (list, tuple)) and len(value) > 8:   # never dump a huge list to cut it short
        value = [*value[:8], f"... ({len(value)} items)"]
    elif isinstance(value, str) and len(value) > limit:
        return json.dumps(value[:limit]) + f"... ({len(value)} characters)"
    text = json.dumps(value, default=repr)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _value_problems(value: Any, where: str = "") -> list[str]:
    """Every value anywhere in the config that is not finite JSON data: NaN or infinity, an integer beyond
    int64, a date, bytes or a set (what YAML or a Python caller can make), a key that is not text."""
    key = where or "(top level)"
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            if not isinstance(k, str):
                quoted = json.dumps(str(k) if not isinstance(k, (bool, type(None))) else json.dumps(k))[:42]
                out.append(f"a key in {key} is {_show(k, 40)}, not text; write it in quotes ({quoted}:), or fix the "
                           "indentation that made it a key")
                continue
            out += _value_problems(v, f"{where}.{k}" if where else k)
        return out
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _value_problems(v, f"{where}[{i}]")]
    if isinstance(value, float) and not math.isfinite(value):
        return [f"key '{key}' has value {value}; allowed: a finite number (YAML's .nan and .inf are no "
                "value a run can use: write the number meant)"]
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        return [f"key '{key}' has value {_show(value, 40)}; allowed: a whole number within "
                f"{INT_MIN}..{INT_MAX} (and the key's own range)"]
    if not isinstance(value, _JSON_SCALARS):
        return [f"key '{key}' has value {_show(str(value), 60)}, a {type(value).__name__}; allowed: text, a "
                "number, true/false, null, a list or a mapping (quote a date or a time to keep it as text)"]
    return []


def _explain(err: jsonschema.ValidationError) -> str:
    where = ".".join(map(str, err.absolute_path)) or "(top level)"
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = sorted(err.schema.get("properties", {}))
        unknown = sorted(map(str, set(err.instance) - set(allowed)))
        return (f"unknown key(s) {', '.join(map(repr, unknown))} in {where}; "
                f"allowed keys: {', '.join(allowed)}")
    if err.validator == "required":
        return f"{where}: {err.message}"
    value = _show(err.instance)
    types = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
    allowed = {
        "enum": lambda: "one of " + ", ".join(map(json.dumps, err.validator_value)),
        "type": lambda: ("a whole number, written without a decimal point (2, not 2.0)"
                         if isinstance(err.instance, float) and "integer" in types
                         else f"a value of type {err.validator_value}"),
        "pattern": lambda: f"a string matching {err.validator_value}",
        "minimum": lambda: f"a number >= {err.validator_value}",
        "maximum": lambda: f"a number <= {err.validator_value}",
        "exclusiveMinimum": lambda: f"a number > {err.validator_value}",
        "minLength": lambda: "a non-empty string",
        "minProperties": lambda: f"at least {err.validator_value} entry",
    }.get(err.validator, lambda: err.message[:200])()
    hint = err.schema.get("description", "")
    return f"key '{where}' has value {value}; allowed: {allowed}" + (f" ({hint})" if hint else "")


def policy_weights_dir(cfg: Mapping[str, Any], variant: str) -> str:
    """Where stage 03 writes a variant's weights (the file contract): policy/<variant>/adapter/, its LoRA
    adapter, or policy/<variant>/model/, the whole model, with policy.finetune full."""
    layout = Layout.of(cfg["results_dir"], cfg["run_name"])
    return str(layout.policy(variant).weights(full=cfg["policy"]["finetune"] == "full"))


def _add_policy_models(cfg: dict) -> list[str]:
    """Each RL variant becomes a model of its own name: the policy base with the variant's adapter, so
    `sandbox.models: [base, echo, scalar]` evaluates the trained policies like any other model.
    Idempotent (a validated config validates again unchanged); a user model of the same name is an error."""
    base = cfg["models"].get(cfg["roles"]["policy"])
    if base is None or base["backend"] != "hf":
        return []   # no trainable policy: the cross-reference check names any use of a variant; stage 03 says why
    problems = []
    for name in trained_model_names(cfg):    # each RL seed of each variant: echo, echo-s1, ...
        weights = policy_weights_dir(cfg, name)
        derived = ({**base, "source": "local", "id": weights, "revision": None, "adapter": None}
                   if cfg["policy"]["finetune"] == "full" else {**base, "adapter": weights})
        if name in cfg["models"] and cfg["models"][name] != derived:
            problems.append(f"key 'models.{name}' names a model, but {name!r} is reserved for a trained policy of "
                            f"policy.variants and policy.seeds (roles.policy + its trained adapter); rename that model")
        else:
            cfg["models"][name] = derived
    return problems


def trained_model_names(cfg: Mapping[str, Any]) -> list[str]:
    """The models stage 03 trains (policy.variants x policy.seeds), by name."""
    return list(trained_models(cfg["policy"]["variants"], cfg["policy"]["seeds"]))


def derived_models(cfg: Mapping[str, Any]) -> set[str]:
    """The models a stage makes (the RL variants of every seed, the trained judge): their specs follow from the
    base model's and the layout, and the files that make them are the run's own outputs."""
    from echo_lib.judges.params import TRAINED_JUDGE
    return set(trained_model_names(cfg)) | ({TRAINED_JUDGE} if cfg["judges"]["train"]["enabled"] else set())


def judge_adapter_dir(cfg: Mapping[str, Any]) -> str:
    """Where rule judges writes the tiny judge's LoRA adapter (judges/adapter/, judges.train.method sft)."""
    return str(Layout.of(cfg["results_dir"], cfg["run_name"]).judges.adapter)


def judge_readout_dir(cfg: Mapping[str, Any]) -> str:
    """Where rule judges writes the tiny judge's read-out heads (judges/readout/, judges.train.method readout)."""
    return str(Layout.of(cfg["results_dir"], cfg["run_name"]).judges.readout)


def _add_trained_judge(cfg: dict) -> list[str]:
    """With judges.train.enabled, the trained judge becomes the model TRAINED_JUDGE: judges.train.base with the
    adapter (method sft) or the read-out heads (method readout) rule judges fits first, so roles.judge and
    roles.nee_judges can name it. Idempotent, like the policy variants."""
    from echo_lib.judges.params import TRAINED_JUDGE
    t = cfg["judges"]["train"]
    if not t["enabled"]:
        return []
    base = cfg["models"].get(t["base"])
    if base is None or base["backend"] != "hf":
        return [f"key 'judges.train.base' has value {t['base']!r}, which is not an hf-backend model of this config; "
                "name one (the judge is trained on local weights)"]
    trained = {"adapter": judge_adapter_dir(cfg)} if t["method"] == "sft" else {"readout": judge_readout_dir(cfg)}
    derived = {**base, **trained}
    if TRAINED_JUDGE in cfg["models"] and cfg["models"][TRAINED_JUDGE] != derived:
        return [f"key 'models.{TRAINED_JUDGE}' names a model, but {TRAINED_JUDGE!r} is reserved for the trained "
                "judge (judges.train); rename that model"]
    cfg["models"][TRAINED_JUDGE] = derived
    return []


# Model keys only one backend reads; set on a model of the other, they are ignored, while the run's records
# (stage 04's result file, describe()) still name them: a served base model scored as its trained variant.
HF_ONLY_KEYS = ("revision", "adapter", "readout", "dtype", "device", "load_in_4bit", "gradient_checkpointing",
                "attn_implementation")
OPENAI_ONLY_KEYS = ("base_url", "api_key_env")   # request_rules: _cross_reference_problems, its own message


def _backend_key_problems(cfg: dict, schema: dict) -> list[str]:
    """A model key that has no effect for the model's backend (or, revision, its source) is an error. The
    schema fills every key with its default, so a key counts as set when its value is not that default: a
    validated config (defaults filled) validates again unchanged, and `dtype: float32` on an openai model
    changes nothing either way."""
    defaults = {k: v.get("default") for k, v in
                schema["properties"]["models"]["additionalProperties"]["properties"].items()}
    problems = []
    for name, spec in cfg["models"].items():
        backend = spec["backend"]
        ignored = HF_ONLY_KEYS if backend == "openai" else OPENAI_ONLY_KEYS
        for key in ignored:
            if spec.get(key, defaults.get(key)) == defaults.get(key):
                continue
            if backend == "openai":
                why = ("backend openai sends requests to a server, which decides the weights, adapter, precision and "
                       "device, while the run would still record this key, naming the served model as something it "
                       "is not; remove it")
                if key == "adapter":
                    why += (" (serve the adapter under a model id of its own, e.g. vLLM --lora-modules, and give "
                            f"that id as models.{name}.id)")
            else:
                why = "backend hf loads the weights in this process and sends no requests; remove it"
            problems.append(f"key 'models.{name}.{key}' has value {_show(spec[key], 60)}, but {why}")
        if backend == "hf" and spec["source"] != "hub" and spec.get("revision") is not None:
            problems.append(f"key 'models.{name}.revision' has value {_show(spec['revision'], 60)}, but source "
                            f"{spec['source']!r} has no revisions (only a hub download picks one); remove it, or "
                            "use source hub")
    return problems


def _cross_reference_problems(cfg: dict) -> list[str]:
    """Checks the schema cannot express: names that must refer to other entries."""
    problems = []
    for name, spec in cfg["models"].items():
        if spec["source"] == "embedded" and spec["id"] not in cfg["embedded"]:
            problems.append(f"key 'models.{name}.id' has value {spec['id']!r}, which is not in 'embedded'; "
                            f"allowed: {', '.join(sorted(cfg['embedded']))}")
        if (spec["backend"] == "openai") != (spec["source"] == "server"):
            problems.append(f"models.{name}: backend {spec['backend']!r} does not go with source "
                            f"{spec['source']!r}; use backend openai exactly with source server")
        if spec["backend"] == "openai" and not spec["base_url"]:
            problems.append(f"key 'models.{name}.base_url' is missing; an openai-backend model needs "
                            "the server URL, e.g. http://localhost:8000/v1")
        if spec.get("request_rules") is not None and spec["backend"] != "openai":
            problems.append(f"key 'models.{name}.request_rules' is set, but backend {spec['backend']!r} sends no "
                            "requests; request rules shape an openai-backend model's requests: remove them")
    references = {"smoke_chat.model": cfg["smoke_chat"]["model"]}
    references |= {f"roles.{role}": name for role, name in cfg["roles"].items() if isinstance(name, str)}
    references |= {f"roles.nee_judges[{i}]": name for i, name in enumerate(cfg["roles"]["nee_judges"])}
    references |= {f"sandbox.models[{i}]": name for i, name in enumerate(cfg["sandbox"]["models"])}
    for key, name in references.items():
        if name not in cfg["models"]:
            problems.append(f"key '{key}' has value {name!r}, which is not a model of this config; "
                            f"allowed: {', '.join(sorted(cfg['models']))}")
    from echo_lib.epm.case_meta import CASE_ID_RULE, case_id_problem   # ids become file names (issue 38)
    problems += [f"key 'sandbox.case_ids[{i}]' has value {cid!r}, which is not a case id; {CASE_ID_RULE}"
                 for i, cid in enumerate(cfg["sandbox"]["case_ids"]) if case_id_problem(cid)]
    if cfg["sandbox"]["case_set"] == "empa" and not (cfg["sandbox"]["empa_dir"] or cfg["empa"]["source"]):
        problems.append("keys 'sandbox.empa_dir' and 'empa.source' are null but 'sandbox.case_set' is empa; set "
                        "empa.source to EMPA's git URL or a local clone (or sandbox.empa_dir to its data folder)")
    if "default" not in cfg["resources"]:
        problems.append("key 'resources.default' is missing; add `default: {}` to use the schema's defaults")
    return problems + _run_problems(cfg) + _local_file_problems(cfg)


def _local_file_problems(cfg: dict) -> list[str]:
    """The local weights, adapters and read-out heads a user's model names must be there at load time, not
    found missing when stage 04 loads them. The models the stages derive (the RL variants, the trained judge)
    are the run's own outputs and are left out. A path counts relative to the working folder or the project."""
    derived = derived_models(cfg)
    problems = []
    for name, spec in cfg["models"].items():
        if name in derived or spec["backend"] != "hf":
            continue
        paths = {"id": spec["id"]} if spec["source"] == "local" else {}
        paths |= {key: spec[key] for key in ("adapter", "readout") if spec.get(key)}
        for key, path in paths.items():
            if not (Path(path).exists() or (project_root() / path).exists()):
                problems.append(f"key 'models.{name}.{key}' has value {path!r}, which does not exist here; give "
                                "the folder it names (a compute node's path must exist where the config is loaded)")
    return problems


def _run_problems(cfg: dict) -> list[str]:
    """What stage 04 would only find days in: turn limits that contradict each other, a folder or a case
    the config names that is not there."""
    problems = []
    run, epm, sandbox = cfg["sandbox_run"], cfg["epm"], cfg["sandbox"]
    # the sandbox's own limit where it sets one, else the epm block's (SandboxRunParams.epm)
    lo, hi = (("sandbox_run." + k, run[k]) if run[k] is not None else ("epm." + k, epm[k])
              for k in ("min_turns", "max_turns"))
    if lo[1] > hi[1]:
        problems.append(f"key '{lo[0]}' is {lo[1]} but '{hi[0]}' is {hi[1]}; a run must be allowed to reach "
                        "its first success or failure turn (min_turns <= max_turns)")
    if sandbox["empa_dir"] and not Path(sandbox["empa_dir"]).is_dir():
        problems.append(f"key 'sandbox.empa_dir' has value {sandbox['empa_dir']!r}, which is not a folder here; "
                        "give EMPA's data folder (or a clone), or null to use the fetched copy")
    if sandbox["case_set"] == "own":
        from echo_lib.scenarios import cases   # the folder stage 04 reads (cases.own_dir), imported late: no cycle
        own = cases.own_dir()
        missing = [cid for cid in sandbox["case_ids"] if not (own / f"{cid}.yaml").is_file()]
        if missing:
            problems.append(f"key 'sandbox.case_ids' names {', '.join(map(repr, missing))}, which the own case set "
                            f"does not have ({own}); allowed: the file names there, e.g. own_001")
    syc = cfg["sycophancy"]
    if syc["enabled"] and syc["reference_model"] not in sandbox["models"]:
        problems.append(f"key 'sycophancy.reference_model' is {syc['reference_model']!r}, which is not in "
                        f"'sandbox.models' ({', '.join(sandbox['models'])}); the guard compares every model with it: "
                        "name one of them")
    policy = cfg["policy"]
    if policy["anchor"] == "policy_median" and not policy["hard_filter"]["enabled"]:
        problems.append("key 'policy.anchor' is policy_median but 'policy.hard_filter.enabled' is false; the "
                        "anchor is chosen among the filter's samples: enable the filter or use anchor: reference")
    elif policy["anchor"] == "policy_median" and policy["hard_filter"]["samples"] < 3:
        problems.append(f"key 'policy.hard_filter.samples' is {policy['hard_filter']['samples']} but "
                        "'policy.anchor' is policy_median, which needs at least 3 (the anchor is one of them, and "
                        "the filter reads the others' verdicts against it)")
    if policy["openings"] > 1 and policy["anchor"] == "reference" and "echo" in policy["variants"]:
        problems.append(f"key 'policy.openings' is {policy['openings']} but 'policy.anchor' is reference: an authored "
                        "opening has no stage-01 reference reply to anchor echo's Empathy reward; use anchor: "
                        "policy_median or openings: 1")
    policy_spec = cfg["models"].get(cfg["roles"]["policy"]) or {}
    if policy["finetune"] == "full" and policy_spec.get("load_in_4bit"):
        problems.append(f"key 'policy.finetune' is full but 'models.{cfg['roles']['policy']}.load_in_4bit' is true: "
                        "4-bit weights cannot be trained; set load_in_4bit: false (full fine-tuning runs under "
                        "DeepSpeed ZeRO-3), or finetune: lora for QLoRA")
    accelerate = policy["accelerate_config"]
    if policy["launcher"] == "accelerate" and not accelerate:
        problems.append("key 'policy.accelerate_config' is null but 'policy.launcher' is accelerate; name an "
                        "accelerate config file, e.g. config/accelerate/zero3_multinode.yaml")
    elif accelerate and not (project_root() / accelerate).is_file():   # relative to the repository (or absolute)
        problems.append(f"key 'policy.accelerate_config' has value {accelerate!r}, which is not a file")
    from echo_lib.policy.vllm import config_problems   # vLLM with the policy model and launcher, launch vs resources
    return problems + config_problems(cfg)


# --------------------------------------------------------------------------------------------
# dict -> dataclass


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        values[field.name] = _convert(hints[field.name], data[field.name])
    return cls(**values)


def _convert(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value)
    if origin is dict:
        _, item_tp = typing.get_args(tp)
        if dataclasses.is_dataclass(item_tp) and "name" in {f.name for f in dataclasses.fields(item_tp)}:
            return {k: _build(item_tp, {**v, "name": k}) for k, v in value.items()}
        return {k: _convert(item_tp, v) for k, v in value.items()}
    return value
