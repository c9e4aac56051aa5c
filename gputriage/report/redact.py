"""Remove secrets before anything leaves gputriage (exports, reports, pasted summaries).

Incident summaries get pasted into tickets and chat. Evidence can carry bearer tokens,
kubeconfig credentials, cloud keys and the values of secret-looking environment variables;
they are replaced by ``<redacted>`` while the rest of the line stays readable.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "<redacted>"

SECRET_NAME = re.compile(
    r"(?i)(pass(word|wd)?|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|"
    r"credential|auth|session[_-]?key|client[_-]?key|signature|cookie|hf_?token)"
)

#: JSON/YAML keys whose string value is a secret as a whole.
SECRET_KEY = re.compile(
    r"(?i)(^|[-_.])(pass(word|wd)?|secret|token|api[-_]?key|client-key-data|"
    r"client-certificate-data|private[-_]?key|credentials?|id-token|refresh-token)($|[-_.])"
)

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization headers and bearer tokens
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {MASK}"),
    # kubeconfig / YAML / JSON credential fields
    (re.compile(r"(?i)((?:client-key-data|client-certificate-data|token|password|"
                r"id-token|refresh-token|access-token|client-secret|secret)"
                r"[\"']?\s*[:=]\s*[\"']?)([^\s\"',}]{4,})"), rf"\1{MASK}"),
    # JWTs
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),
    # AWS access keys, GitHub / Hugging Face / Slack tokens
    (re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b"), MASK),
    (re.compile(r"\b(ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), MASK),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), MASK),
    # PEM private keys
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
                re.S), MASK),
    # NAME=value where NAME looks secret (env dumps, command lines)
    (re.compile(r"(?i)\b([A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|ACCESS_KEY|"
                r"PRIVATE_KEY|CREDENTIALS?)[A-Z0-9_]*)=(\S+)"), rf"\1={MASK}"),
)


def redact_text(text: str) -> str:
    """``text`` with every recognised secret replaced by ``<redacted>``."""
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def redact_env(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A container ``env`` list with values of secret-looking names masked."""
    out = []
    for item in env:
        if isinstance(item, dict) and "value" in item and SECRET_NAME.search(str(item.get("name"))):
            item = {**item, "value": MASK}
        out.append(item)
    return out


def redact_obj(obj: Any) -> Any:
    """Recursively redact strings in JSON-like data; mask values under secret-looking keys."""
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, list):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if k == "env" and isinstance(v, list):
                out[k] = redact_obj(redact_env(v))
            elif isinstance(v, str) and SECRET_KEY.search(str(k)):
                out[k] = MASK
            else:
                out[k] = redact_obj(v)
        return out
    return obj
