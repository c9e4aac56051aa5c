"""Render an incident summary as JSON (DESIGN 3.2): one object, stable keys."""

from __future__ import annotations

import json
from typing import Any


def render_json(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
