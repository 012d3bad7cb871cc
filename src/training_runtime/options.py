"""Runtime options: the ``hyperpod_cdk.options`` section of the parameters file.

What each option means, its default and its allowed values are defined once, in the dataclasses of
:mod:`training_runtime.option_types` (re-exported here); the value rules are in
:mod:`training_runtime.option_rules`, and this module parses a section and runs them. The CDK side checks a
config's ``runtime:`` section with both before deploy (``hyperpod_cdk.rules`` registers them); the node parses
the same section with :func:`parse_options` at boot.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Dict, List, Mapping, Tuple

from training_runtime.hardware import overrides_problems
from training_runtime.option_rules import OPTION_RULES
from training_runtime.option_types import (  # re-exported: callers import them from here
    ACCOUNTING_DATABASES,
    DB_USER,
    DCGM_LEVELS,
    ENROOT_CACHES,
    GROUP_NAME,
    HYPERPOD_HEALTH_ACTIONS,
    MAX_SLURM_SECONDS,
    MIN_CRED_EXPIRE,
    PIP_REQUIREMENT,
    RETURN_TO_SERVICE,
    SCRAPE_INTERVAL_DEFAULT,
    SCRAPE_INTERVAL_RANGE,
    SECRET_ARN,
    SHA256,
    SPOT_NOTICE_S,
    TCP_PORTS,
    VERSION,
    AccountingOptions,
    CheckpointOptions,
    ContainersOptions,
    HealthOptions,
    ObservabilityOptions,
    OptionsError,
    PytorchOptions,
    RuntimeOptions,
    SecurityOptions,
    SlurmOptions,
    SpotOptions,
)
from training_runtime.problems import Problem

__all__ = [
    "ACCOUNTING_DATABASES",
    "DB_USER",
    "DCGM_LEVELS",
    "ENROOT_CACHES",
    "GROUP_NAME",
    "HARDWARE_RULE",
    "HYPERPOD_HEALTH_ACTIONS",
    "KNOWN_SECTIONS",
    "MAX_SLURM_SECONDS",
    "MIN_CRED_EXPIRE",
    "PIP_REQUIREMENT",
    "RETURN_TO_SERVICE",
    "SCRAPE_INTERVAL_DEFAULT",
    "SCRAPE_INTERVAL_RANGE",
    "SECRET_ARN",
    "SHA256",
    "SHAPE_RULE",
    "SPOT_NOTICE_S",
    "TCP_PORTS",
    "VERSION",
    "AccountingOptions",
    "CheckpointOptions",
    "ContainersOptions",
    "HealthOptions",
    "ObservabilityOptions",
    "OptionsError",
    "PytorchOptions",
    "RuntimeOptions",
    "SecurityOptions",
    "SlurmOptions",
    "SpotOptions",
    "options_problems",
    "parse_options",
    "shape_problems",
]

KNOWN_SECTIONS = tuple(f.name for f in fields(RuntimeOptions))
"""The keys of the ``runtime`` section: RuntimeOptions' fields."""

_SECTIONS: Dict[str, Any] = {
    "slurm": SlurmOptions,
    "accounting": AccountingOptions,
    "pytorch": PytorchOptions,
    "health": HealthOptions,
    "spot": SpotOptions,
    "observability": ObservabilityOptions,
    "containers": ContainersOptions,
    "security": SecurityOptions,
    "checkpoint": CheckpointOptions,
}


def options_problems(raw: Any, path: str = "options") -> List[Problem]:
    """Every problem in a ``runtime`` section: its shape, then every value rule (:mod:`.option_rules`)."""
    problems: List[Problem] = []
    _parse(raw, path, problems, check_values=True)
    return problems


def shape_problems(raw: Any, path: str = "options") -> List[Problem]:
    """The problems of a ``runtime`` section's shape only (types, keys, node_hardware figures)."""
    problems: List[Problem] = []
    _parse(raw, path, problems, check_values=False)
    return problems


def parse_options(raw: Any, path: str = "options", check_values: bool = True) -> RuntimeOptions:
    """The options; raises :class:`OptionsError` naming every problem. ``check_values=False`` checks only
    the shape (types, unknown keys), for callers that run the value rules themselves."""
    problems: List[Problem] = []
    options = _parse(raw, path, problems, check_values)
    if problems:
        raise OptionsError(problems)
    return options


def _parse(raw: Any, path: str, problems: List[Problem], check_values: bool) -> RuntimeOptions:
    shape: List[str] = []
    options = _parse_shape(raw, path, shape)
    problems.extend(p.tagged(SHAPE_RULE) if isinstance(p, Problem) else Problem.from_text(p, SHAPE_RULE) for p in shape)
    if check_values:
        problems.extend(OPTION_RULES.run(options, path))
    return options


def _parse_shape(raw: Any, path: str, problems: List[str]) -> RuntimeOptions:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        problems.append("{}: got {!r}; expected a mapping".format(path, raw))
        return RuntimeOptions()
    _unknown_keys(raw, KNOWN_SECTIONS, path, problems)
    slurm = _section(raw.get("slurm"), SlurmOptions, path + ".slurm", problems) or SlurmOptions()
    accounting = _section(raw.get("accounting"), AccountingOptions, path + ".accounting", problems)
    accounting = accounting or AccountingOptions()
    pytorch = None
    if raw.get("pytorch") is not None:
        pytorch = _section(raw.get("pytorch"), PytorchOptions, path + ".pytorch", problems)
    health = _section(raw.get("health"), HealthOptions, path + ".health", problems) or HealthOptions()
    spot = _section(raw.get("spot"), SpotOptions, path + ".spot", problems) or SpotOptions()
    observability = _section(raw.get("observability"), ObservabilityOptions, path + ".observability", problems)
    observability = observability or ObservabilityOptions()
    containers = _section(raw.get("containers"), ContainersOptions, path + ".containers", problems)
    containers = containers or ContainersOptions()
    security = _section(raw.get("security"), SecurityOptions, path + ".security", problems) or SecurityOptions()
    checkpoint = _section(raw.get("checkpoint"), CheckpointOptions, path + ".checkpoint", problems)
    checkpoint = checkpoint or CheckpointOptions()
    install = raw.get("install_accelerator_software", True)
    if not isinstance(install, bool):
        problems.append("{}.install_accelerator_software: got {!r}; expected true or false".format(path, install))
        install = True
    hardware = raw.get("node_hardware") or {}
    hardware_problems = overrides_problems(hardware, path + ".node_hardware")
    problems.extend(Problem.from_text(p, rule=HARDWARE_RULE) for p in hardware_problems)
    if hardware_problems:
        hardware = {}
    return RuntimeOptions(
        slurm=slurm,
        accounting=accounting,
        pytorch=pytorch,
        health=health,
        spot=spot,
        observability=observability,
        containers=containers,
        security=security,
        checkpoint=checkpoint,
        install_accelerator_software=install,
        node_hardware={str(k): dict(v) for k, v in hardware.items()},
    )


HARDWARE_RULE = "RT-NODE-HARDWARE"
"""The id of the node_hardware check (figures that replace the hardware table's)."""
SHAPE_RULE = "RT-SHAPE"
"""The id of the shape check (types, unknown keys, required keys, node_hardware figures)."""


def _section(raw: Any, cls: Any, path: str, problems: List[str]) -> Any:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append("{}: got {!r}; expected a mapping".format(path, raw))
        return None
    defaults = cls.__dataclass_fields__
    _unknown_keys(raw, tuple(defaults), path, problems)
    values: Dict[str, Any] = {}
    for name, spec in defaults.items():
        if name not in raw:
            continue
        value = raw[name]
        expected = _expected_type(spec.type)
        if expected is tuple and isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = tuple(value)
        ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
        if value is None and "Optional" in str(spec.type):
            ok = True
        if not ok:
            problems.append("{}.{}: got {!r}; expected {}".format(path, name, value, _type_words(expected)))
            continue
        values[name] = value
    missing = [n for n, s in defaults.items() if _required(s) and n not in values]
    if missing:
        if not any(p.startswith("{}.{}".format(path, m)) for m in missing for p in problems):
            problems.append("{}: missing {}".format(path, ", ".join(missing)))
        return None
    return cls(**values)


def _required(spec: Any) -> bool:
    from dataclasses import MISSING

    return bool(spec.default is MISSING and spec.default_factory is MISSING)


def _expected_type(annotation: Any) -> type:
    text = str(annotation)
    if "bool" in text:
        return bool
    if "int" in text:
        return int
    if "Tuple" in text:
        return tuple
    return str


def _type_words(expected: type) -> str:
    return {bool: "true or false", int: "an integer", tuple: "a list of strings", str: "a string"}[expected]


def _unknown_keys(raw: Mapping[str, Any], known: Tuple[str, ...], path: str, problems: List[str]) -> None:
    for key in raw:
        if key not in known:
            problems.append("{}.{}: unknown option; allowed: {}".format(path, key, ", ".join(known)))
