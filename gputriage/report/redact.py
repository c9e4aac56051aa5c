"""The redaction catalogue: secrets removed before anything leaves gputriage.

Incident summaries get pasted into tickets and chat. Evidence can carry bearer tokens,
kubeconfig credentials, cloud keys, connection strings, private key blocks and the values of
secret-looking environment variables; each is replaced by ``<redacted>`` while the rest of the
line stays readable. The rules follow the common secret scanners (gitleaks, trufflehog): a
rule either recognises a token by its own shape (``AKIA...``, ``ghp_...``, ``AIza...``) or
masks the value that follows a secret-looking name (``password=``, ``Authorization:``,
``--api-key``). :data:`CATALOGUE` names every rule; ``tests/hostile/test_redaction.py`` plants
one secret per rule and checks it is gone.

Callers do not use this module directly: :func:`gputriage.textsafe.clean` runs it after
terminal escapes are stripped and before any cut, so a colour code inside a key, or a cut
through a PEM block, can never expose a fragment.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "<redacted>"

#: Names whose value is a secret (env vars, JSON/YAML keys, CLI flags, headers).
_SECRETISH = (
    r"pass(?:word|wd|phrase)?|pwd|secret|token|api[-_]?key|apikey|access[-_]?key|"
    r"private[-_]?key|credentials?|auth|session[-_]?key|client[-_]?key|signature|"
    r"cookie|account[-_]?key|sas|dsn|connection[-_]?string|hf_?token"
)
SECRET_NAME = re.compile(rf"(?i)({_SECRETISH})")
#: The narrower set used where a name sits in free text (``name: value``, ``--flag value``):
#: words like "signature" or "auth" are prose there far more often than a secret.
_VALUE_NAMES = (
    r"password|passwd|passphrase|secret|token|api[-_]?key|apikey|access[-_]?key|"
    r"private[-_]?key|credentials?|session[-_]?key|client[-_]?key|account[-_]?key|"
    r"auth[-_]?token|connection[-_]?string"
)
#: Names that mention a secret but hold none: a reference to one (its name, key, path).
_NOT_A_VALUE = re.compile(
    r"(?i)(name|ref|path|file|dir|mount|expiration\w*|seconds|ttl|"
    r"type|kind|id|count|length|size|required|mode|enabled|"
    r"volume|source|selector|items)$"
)

#: JSON/YAML keys whose string value is a secret as a whole.
SECRET_KEY = re.compile(
    r"(?i)(^|[-_.])(pass(word|wd)?|secret|token|api[-_]?key|client-key-data|"
    r"client-certificate-data|private[-_]?key|credentials?|id-token|refresh-token|auth|"
    r"account[-_]?key|connection[-_]?string)($|[-_.])"
)


#: Values that are never the secret itself (``automountServiceAccountToken: true``).
_NOT_SECRET_VALUES = frozenset({"true", "false", "null", "none", '""', "''", MASK.lower()})


def is_secret_name(name: str) -> bool:
    """Whether ``name`` (an env var, a key, a flag) looks like it holds a secret."""
    return bool(SECRET_NAME.search(name)) and not _NOT_A_VALUE.search(name.rstrip("_-. "))


def _named(m: re.Match[str]) -> str:
    """Mask group ``value`` when group ``name`` is a secret-looking name."""
    if not is_secret_name(m.group("name")) or m.group("value").lower() in _NOT_SECRET_VALUES:
        return m.group(0)
    start, end = m.span("value")
    return m.group(0)[: start - m.start()] + MASK + m.group(0)[end - m.start() :]


_Repl = str | Callable[[re.Match[str]], str]

#: (rule id, pattern, replacement), applied in this order.
CATALOGUE: tuple[tuple[str, re.Pattern[str], _Repl], ...] = (
    # Private key blocks (PEM, OpenSSH, PGP); a block cut before its END line is masked to the
    # end of the text, and bare base64 body lines (64 chars) are masked on their own.
    (
        "private-key-block",
        re.compile(
            r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)",
            re.S,
        ),
        MASK,
    ),
    ("private-key-body", re.compile(r"(?m)^[ \t]*[A-Za-z0-9+/]{60,76}={0,2}[ \t]*$"), MASK),
    # Authorization-style headers: any scheme, any value.
    (
        "authorization-header",
        re.compile(
            r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
            r"(?:(?:bearer|basic|token|digest|negotiate|apikey|aws4-hmac-sha256)\s+)?[^\s\"',}]+"
        ),
        rf"\1{MASK}",
    ),
    (
        "api-key-header",
        re.compile(
            r"(?i)\b((?:x-)?(?:api-?key|auth-?token|access-?token|amz-security-token|"
            r"goog-api-key|functions-key|vault-token)[\"']?\s*:\s*[\"']?)[^\s\"',}]+"
        ),
        rf"\1{MASK}",
    ),
    ("bearer-token", re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {MASK}"),
    # Credentials inside URLs and connection strings: scheme://user:pw@host.
    (
        "url-credentials",
        re.compile(
            r"(?i)\b([a-z][a-z0-9+.-]{1,20}://[^/\s:@\"']{0,256}:)"
            r"[^@\s/\"']{1,256}@"
        ),
        rf"\1{MASK}@",
    ),
    (
        "azure-account-key",
        re.compile(r"(?i)\b(AccountKey|SharedAccessKey|SharedAccessSignature)=[^;\s\"']+"),
        rf"\1={MASK}",
    ),
    # docker config.json: "auth": "base64(user:pw)"
    (
        "docker-auth",
        re.compile(
            r'(?i)(\\?"(?:auth|identitytoken|registrytoken)\\?"\s*:\s*\\?")'
            r'[^"\\]+'
        ),
        rf"\1{MASK}",
    ),
    # env entries as JSON: {"name": "DB_PASSWORD", "value": "..."} (compact or spaced).
    # (also JSON inside a JSON string: the last-applied-configuration annotation)
    (
        "env-json",
        re.compile(
            r'(?i)(\\?"name\\?"\s*:\s*\\?"(?P<name>[^"\\]*)\\?"\s*,\s*'
            r'\\?"value\\?"\s*:\s*\\?")(?P<value>(?:\\[^"]|[^"\\])*)'
        ),
        _named,
    ),
    # Command-line flags: --password X, --api-key=X, sshpass -p X.
    (
        "cli-flag",
        re.compile(
            r"(?i)(?<![\w-])(?P<name>--?[a-z0-9_-]{0,48}(?:"
            + _VALUE_NAMES
            + r")[a-z0-9_-]{0,48})(?:=|\s+)"
            r"(?P<value>(?!-)[^\s\"']+|\"[^\"]*\"|'[^']*')"
        ),
        _named,
    ),
    ("sshpass", re.compile(r"\b(sshpass\s+(?:-[a-oq-zA-Z]\S*\s+)*-p\s*)\S+"), rf"\1{MASK}"),
    # name = value, name: value, "name": "value" (kubeconfig, YAML, JSON, ini, env dumps).
    (
        "named-value",
        re.compile(
            r"(?i)(?<![\w.-])(?P<name>[a-z0-9_.-]{0,48}(?:" + _VALUE_NAMES + r")[a-z0-9_.-]{0,48})"
            r"[\"']?"
            r"(?P<sep>\s*=\s*|:\s*)(?P<q>[\"']?)(?P<value>[^\s\"',;}]{3,})"
        ),
        _named,
    ),
    # Tokens recognised by their own shape.
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),
    ("aws-access-key-id", re.compile(r"\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b"), MASK),
    ("github-token", re.compile(r"\b(ghp|gho|ghs|ghu|ghr|github_pat)_[A-Za-z0-9_]{20,}"), MASK),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), MASK),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{20,}"), MASK),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), MASK),
    (
        "slack-webhook",
        re.compile(r"hooks\.slack\.com/services/[A-Za-z0-9/]+"),
        f"hooks.slack.com/services/{MASK}",
    ),
    ("openai-key", re.compile(r"\bsk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), MASK),
    ("stripe-key", re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"), MASK),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35,}"), MASK),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}"), MASK),
)


def redact_text(text: str) -> str:
    """``text`` with every recognised secret replaced by ``<redacted>``."""
    if not text:
        return text
    for _rule, pattern, repl in CATALOGUE:
        text = pattern.sub(repl, text)
    return text


def redact_env(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A container ``env`` list with values of secret-looking names masked."""
    out = []
    for item in env:
        if isinstance(item, dict) and "value" in item and is_secret_name(str(item.get("name"))):
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
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if k == "env" and isinstance(v, list):
                out[k] = redact_obj(redact_env(v))
            elif isinstance(v, str) and SECRET_KEY.search(str(k)) and is_secret_name(str(k)):
                out[k] = MASK
            else:
                out[k] = redact_obj(v)
        return out
    return obj
