"""The JSON Schema of the playbook format, generated from :data:`model.SHAPES`.

Editors use it through yaml-language-server: put this first line in a playbook::

    # yaml-language-server: $schema=<path or URL of playbook.schema.json>

``gputriage playbooks schema`` prints it; the package ships it as ``playbook.schema.json`` next
to this module (a test keeps that file equal to :func:`build_schema`). The loader's own checks
go further than the schema can (CEL syntax, fact names, references between steps), so the
schema is for completion and early squiggles, ``gputriage playbooks validate`` for the verdict.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from gputriage.playbook.model import (
    FINDING_ID_PATTERN,
    FORMAT_VERSION,
    ID_PATTERN,
    SHAPES,
    KeySpec,
    Shape,
)

SCHEMA_FILE = "playbook.schema.json"
SCHEMA_ID = "https://github.com/gputriage/gputriage/blob/main/gputriage/playbook/" + SCHEMA_FILE


def build_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07, what yaml-language-server reads best) for a playbook file."""
    definitions = {name: _object(shape) for name, shape in SHAPES.items() if name != "playbook"}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": SCHEMA_ID,
        "title": "gputriage playbook",
        **_object(SHAPES["playbook"]),
        "definitions": definitions,
    }


def schema_text() -> str:
    """:func:`build_schema` as the text of the shipped file."""
    return json.dumps(build_schema(), indent=2) + "\n"


def shipped_schema_text() -> str:
    """The schema file shipped in the package."""
    return resources.files("gputriage.playbook").joinpath(SCHEMA_FILE).read_text("utf-8")


def _object(shape: Shape) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "object",
        "description": shape.doc,
        "properties": {key: _property(key, spec) for key, spec in shape.keys.items()},
        "additionalProperties": False,
    }
    required = [key for key, spec in shape.keys.items() if spec.required]
    if required:
        out["required"] = required
    if shape.one_of:
        out["oneOf"] = [{"required": [key]} for key in shape.one_of]
    return out


def _property(key: str, spec: KeySpec) -> dict[str, Any]:
    kind, _, inner = spec.kind.partition(":")
    out: dict[str, Any] = {"description": spec.doc}
    if kind == "object":
        out["$ref"] = f"#/definitions/{inner}"
    elif kind == "list" and inner == "command":  # a plain string is read-only shorthand
        out.update(
            type="array", items={"anyOf": [{"type": "string"}, {"$ref": f"#/definitions/{inner}"}]}
        )
    elif kind == "list":
        out.update(type="array", items={"$ref": f"#/definitions/{inner}"})
    elif kind == "map":
        pattern = FINDING_ID_PATTERN if inner == "finding" else ID_PATTERN
        out.update(
            type="object",
            propertyNames={"pattern": pattern},
            additionalProperties={"$ref": f"#/definitions/{inner}"},
        )
    elif kind == "strings":
        out.update(type="array", items={"type": "string"})
    elif kind == "integer":
        out["type"] = "integer"
        if key == "format_version":
            out["const"] = FORMAT_VERSION
    elif kind == "cel":
        out["type"] = ["string", "boolean"]
    elif kind == "boolean":
        out["type"] = "boolean"
    elif kind == "cels":
        out["anyOf"] = [
            {"type": ["string", "boolean"]},
            {"type": "array", "items": {"type": "string"}, "minItems": 1},
        ]
    else:
        out["type"] = "string"
        if spec.required:
            out["minLength"] = 1
    if spec.enum and kind != "integer":
        out["enum"] = list(spec.enum)
    if spec.pattern:
        out["pattern"] = spec.pattern
    if spec.default is not None:
        out["default"] = spec.default
    return out
