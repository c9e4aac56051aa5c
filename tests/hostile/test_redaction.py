"""The redaction catalogue, rule by rule, and the funnel's order (strip, redact, then cut)."""

from __future__ import annotations

import time

import pytest

from gputriage.evidence.model import MAX_CITE_CHARS, LineRef
from gputriage.report.redact import CATALOGUE, MASK, redact_obj, redact_text
from gputriage.textsafe import clean, clean_obj
from tests.hostile.secrets import BLOCKS, ENV, PEM, PLANTED


@pytest.mark.parametrize(("text", "secret"), PLANTED, ids=[s for _, s in PLANTED])
def test_each_planted_form_is_redacted(text: str, secret: str) -> None:
    out = clean(text)
    assert secret not in out
    assert MASK in out
    assert "\x1b" not in out


@pytest.mark.parametrize(("block", "secrets"), BLOCKS, ids=["pem", "pgp"])
def test_private_key_blocks_whole_cut_and_line_by_line(
    block: str, secrets: tuple[str, ...]
) -> None:
    whole = clean(block)
    assert whole == MASK
    cut = block.rsplit("\n", 2)[0]  # the END line lost
    assert not any(s in clean(cut) for s in secrets)
    for line in block.splitlines():  # a log cites each line on its own
        assert not any(s in clean(line) for s in secrets), line


def test_a_cut_never_exposes_a_fragment_of_a_long_secret() -> None:
    line = "x" * 900 + " " + PEM.replace("\n", "\\n")  # a compact JSON line holding a PEM
    ref = LineRef("pod", "pod.json", 1, line)
    assert len(line) > MAX_CITE_CHARS and MASK in ref.text
    assert "SECRETPEM" not in ref.text and "MIIEpA" not in ref.text
    assert "SECRETPEM" not in clean(line, MAX_CITE_CHARS)


def test_escapes_are_stripped_before_redaction() -> None:
    assert clean("AKIA\x1b[1mIOSFODNN7EXAMPLE") == MASK
    assert clean("pass\x1b[0mword=\x1b[31mhunter22") == f"password={MASK}"


def test_env_entries_compact_and_structured() -> None:
    compact = (
        '{"spec":{"containers":[{"env":['
        + ",".join(f'{{"name":"{n}","value":"{v}"}}' for n, v in ENV)
        + ',{"name":"MODEL","value":"llama-3-8b"}]}]}}'
    )
    out = clean(compact)
    assert not any(v in out for _, v in ENV)
    assert '"value":"llama-3-8b"' in out
    obj = {"env": [{"name": n, "value": v} for n, v in ENV] + [{"name": "MODEL", "value": "x"}]}
    masked = redact_obj(obj)
    assert [e["value"] for e in masked["env"]] == [MASK] * len(ENV) + ["x"]
    assert clean_obj(obj) == masked


def test_references_to_secrets_are_kept() -> None:
    """Names of secrets and their keys are diagnosis, not secrets."""
    for text in (
        'secret "registry-creds" not found',
        "secretName: hf-token",
        '"secretKeyRef": {"name": "db", "key": "password"}',
        "automountServiceAccountToken: true",
        "--token-file /var/run/token",
        "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
    ):
        assert redact_text(text) == text, text


#: One sample per catalogue rule, with the secret it must remove.
RULE_SAMPLES = {
    "private-key-block": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----",
        "b3Blbn",
    ),
    "private-key-body": ("    " + "Qk" * 32, "Qk" * 32),
    "authorization-header": ("Proxy-Authorization: Digest dgSECRET", "dgSECRET"),
    "api-key-header": ("X-Vault-Token: hvs.SECRETvault", "hvs.SECRETvault"),
    "bearer-token": ("sent bearer abcdefSECRET123 to", "abcdefSECRET123"),
    "url-credentials": ("amqp://guest:gSECRET@mq:5672/", "gSECRET"),
    "azure-account-key": ("SharedAccessKey=sakSECRET;Entity=x", "sakSECRET"),
    "docker-auth": ('{"identitytoken": "idtSECRET"}', "idtSECRET"),
    "env-json": ('{"name": "API_TOKEN", "value": "envjSECRET"}', "envjSECRET"),
    "cli-flag": ("run --db-passwd 'pwSECRET x'", "pwSECRET"),
    "sshpass": ("sshpass -e -p spSECRET ssh", "spSECRET"),
    "named-value": ("client_secret=csSECRET1", "csSECRET1"),
    "jwt": ("eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2Q", "eyJzdWIiOiIx"),
    "aws-access-key-id": ("ASIAY34FZKBOKMUTVV7A", "Y34FZKBOKMUTVV7A"),
    "github-token": ("github_pat_11ABCDEFG0abcdefghijkl_SECRET", "abcdefghijkl_SECRET"),
    "gitlab-token": ("glpat-abcdefghijklmnopqrstuv", "abcdefghijklmnopqrstuv"),
    "huggingface-token": ("hf_abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
    "slack-token": ("xoxp-1234567890-abc", "1234567890-abc"),
    "slack-webhook": ("https://hooks.slack.com/services/T000/B000/XXXX", "T000/B000/XXXX"),
    "openai-key": ("sk-ant-abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
    "stripe-key": ("rk_live_abcdefghijklmnopqr", "abcdefghijklmnopqr"),
    "google-api-key": ("AIza" + "B" * 35, "B" * 35),
    "npm-token": ("npm_" + "c" * 36, "c" * 36),
}


@pytest.mark.parametrize("rule", [name for name, _, _ in CATALOGUE])
def test_every_rule_has_a_sample_it_redacts(rule: str) -> None:
    text, secret = RULE_SAMPLES[rule]
    pattern = next(p for name, p, _ in CATALOGUE if name == rule)
    assert pattern.search(text), f"{rule} does not match its sample"
    assert secret not in clean(text) and MASK in clean(text)


def test_rule_names_are_unique() -> None:
    names = [name for name, _, _ in CATALOGUE]
    assert len(names) == len(set(names)) == len(RULE_SAMPLES)


#: Shapes that made an unbounded name pattern backtrack quadratically ("a.a.a..." of 40 KB
#: took 90 s): each rule must stay linear. 200 KB each; the bound only proves "no stall".
PATHOLOGICAL = {
    "dots": "a." * 100_000,
    "dashes": "-a" * 100_000,
    "schemes": "ab://" * 40_000,
    "colons": "a:" * 100_000,
    "flags": "--password-" * 20_000,
    "names": "password." * 20_000,
    "json-names": '"name":"' * 25_000,
    "escaped-quotes": '\\"' * 100_000,
    "begin-blocks": "-----BEGIN RSA PRIVATE KEY-----" * 6_000,
    "bearers": "bearer " * 30_000,
}


@pytest.mark.parametrize("shape", list(PATHOLOGICAL))
def test_redaction_stays_linear_on_pathological_text(shape: str) -> None:
    started = time.monotonic()
    clean(PATHOLOGICAL[shape])
    assert time.monotonic() - started < 5.0
