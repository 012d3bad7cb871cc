"""A small evaluator of a template's parameter constraints: what CloudFormation does with a value a team
enters at launch (AllowedValues, AllowedPattern, MinLength/MaxLength, MinValue/MaxValue), and a template
with its parameters replaced by values (to read it as CloudFormation will)."""

from __future__ import annotations

import copy
import re
from typing import Any


def rejections(parameter: dict[str, Any], value: str | int) -> list[str]:
    """Why CloudFormation rejects ``value`` for ``parameter`` (its template entry); empty when it accepts it."""
    text = str(value)
    found = []
    allowed = parameter.get("AllowedValues")
    if allowed is not None and text not in [str(v) for v in allowed]:
        found.append(f"{text!r} is not one of {allowed}")
    if parameter["Type"] == "Number":
        try:
            number = float(text)
        except ValueError:
            return [*found, f"{text!r} is not a number"]
        if "MinValue" in parameter and number < float(parameter["MinValue"]):
            found.append(f"{text} is below MinValue {parameter['MinValue']}")
        if "MaxValue" in parameter and number > float(parameter["MaxValue"]):
            found.append(f"{text} is above MaxValue {parameter['MaxValue']}")
    else:
        pattern = parameter.get("AllowedPattern")
        # CloudFormation matches the whole value against the pattern.
        if pattern is not None and not re.fullmatch(pattern, text):
            found.append(f"{text!r} does not match {pattern}")
        if "MinLength" in parameter and len(text) < parameter["MinLength"]:
            found.append(f"{text!r} is shorter than {parameter['MinLength']}")
        if "MaxLength" in parameter and len(text) > parameter["MaxLength"]:
            found.append(f"{text!r} is longer than {parameter['MaxLength']}")
    return found


def resolved(template: dict[str, Any], values: dict[str, Any] | None = None) -> dict[str, Any]:
    """``template`` with each ``{"Ref": <parameter>}`` replaced by ``values[parameter]`` or its default
    (a Number's as a number) and each ``Fn::If`` by its branch, so tests read resource properties as
    CloudFormation will."""
    parameters = template.get("Parameters", {})
    chosen = {name: p["Default"] for name, p in parameters.items() if "Default" in p}
    chosen.update(values or {})

    def condition(name: str) -> bool:
        """A condition of the template (only ``Fn::Equals`` of resolved values)."""
        left, right = walk(template["Conditions"][name]["Fn::Equals"])
        return bool(left == right)

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("Ref")
            if len(node) == 1 and ref in chosen and not parameters[ref]["Type"].startswith("AWS::"):
                value = chosen[ref]
                return int(value) if parameters[ref]["Type"] == "Number" else value
            if len(node) == 1 and "Fn::If" in node:
                name, when_true, when_false = node["Fn::If"]
                return walk(when_true if condition(name) else when_false)
            return {key: walk(item) for key, item in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(copy.deepcopy(template))  # type: ignore[no-any-return]
