"""The JSON Schema: generated from the same table the loader checks against, shipped in the
package, and in agreement with the loader on valid and invalid playbooks."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from playbook_facts import INVALID, VALID

from gputriage.playbook.schema import build_schema, schema_text, shipped_schema_text

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_schema_file_is_the_generated_one() -> None:
    assert shipped_schema_text() == schema_text(), (
        "regenerate: python -c 'from gputriage.playbook.schema import schema_text; "
        'print(schema_text(), end="")\' > gputriage/playbook/playbook.schema.json'
    )


def test_schema_shape() -> None:
    schema = build_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["required"] == ["format_version", "id", "title", "start", "steps"]
    assert schema["properties"]["format_version"]["const"] == 1
    branch = schema["definitions"]["branch"]
    assert branch["oneOf"] == [{"required": ["goto"]}, {"required": ["conclude"]}]
    assert branch["additionalProperties"] is False
    assert schema["definitions"]["finding"]["properties"]["severity"]["enum"] == [
        "critical",
        "high",
        "medium",
        "low",
        "info",
    ]
    assert set(schema["definitions"]) == {
        "route",
        "step",
        "branch",
        "otherwise",
        "ask",
        "choice",
        "finding",
        "rule_out",
        "fix",
        "command",
    }


def test_playbooks_point_editors_at_the_schema() -> None:
    first = (ROOT / "playbooks" / "triage.yaml").read_text().splitlines()[0]
    m = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
    assert m is not None
    assert (ROOT / "playbooks" / m.group(1)).resolve() == (
        ROOT / "gputriage" / "playbook" / "playbook.schema.json"
    )


def _validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft7Validator(build_schema())


@pytest.mark.parametrize(
    "path",
    [*sorted(VALID.glob("*.yaml")), ROOT / "playbooks" / "triage.yaml"],
    ids=lambda p: p.name,
)
def test_valid_playbooks_pass_the_schema(path: Path) -> None:
    errors = list(_validator().iter_errors(yaml.safe_load(path.read_text())))
    assert errors == []


@pytest.mark.parametrize(
    ("name", "keyword"),
    [
        ("unknown-key", "additionalProperties"),
        ("unknown-branch-key", "additionalProperties"),
        ("bad-enum", "enum"),
        ("bad-severity", "enum"),
        ("bad-playbook-id", "pattern"),
        ("bad-step-id", "pattern"),
        ("bad-finding-id", "pattern"),
        ("bad-choice-value", "pattern"),
        ("bool-choice-value", "type"),
        ("wrong-kind", "type"),
        ("missing-required", "required"),
        ("missing-because", "required"),
        ("format-version", "const"),
        ("goto-and-conclude", "oneOf"),
        ("no-target", "oneOf"),
    ],
)
def test_schema_rejects_what_the_loader_rejects(name: str, keyword: str) -> None:
    data = yaml.safe_load((INVALID / f"{name}.yaml").read_text())
    found = {e.validator for e in _validator().iter_errors(data)}
    found |= {c.validator for e in _validator().iter_errors(data) for c in e.context}
    assert keyword in found


def test_schema_is_valid_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft7Validator.check_schema(json.loads(shipped_schema_text()))
