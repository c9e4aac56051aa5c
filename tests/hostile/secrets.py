"""Planted secrets: one per redaction rule and per form the attack report named.

Each entry is ``(text as it appears in the evidence, the secret fragment that must never be
exported)``. The texts are what real tools print (AWS CLI config, curl headers, libpq URLs,
docker config.json, Azure connection strings, PGP/PEM blocks); the secrets are made up.
"""

from __future__ import annotations

#: A PEM body long enough that a 1,000-character cut lands before its END line.
PEM_BODY = [
    ("MIIEpAIBAAKCAQEA7" + "Q" * 40 + f"SECRETPEM{i:02d}").ljust(64, "k") for i in range(30)
]
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"
PGP_BODY = [
    "lQOYBGXsecretPGPbody" + "A" * 30 + f"SECRETPGP{i:02d}".ljust(20, "z") for i in range(3)
]
PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
    + "\n".join(PGP_BODY)
    + "\n=ab12\n-----END PGP PRIVATE KEY BLOCK-----"
)

#: (evidence text, secret fragment)
PLANTED: tuple[tuple[str, str], ...] = (
    ("AKIA\x1b[1mIOSFODNN7SECRT01\x1b[0m used", "IOSFODNN7SECRT01"),
    ("login password=\x1b[31mHunter2SECRET02\x1b[0m ok", "Hunter2SECRET02"),
    (
        "aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYSECRET03",
        "wJalrXUtnFEMIK7MDENGbPxRfiCYSECRET03",
    ),
    ("AWS_SECRET_ACCESS_KEY: je7MtGbClwBF2Zp9Utk5SECRET04", "je7MtGbClwBF2Zp9Utk5SECRET04"),
    ("curl -H 'Authorization: token tokSECRET05abcdef' https://api", "tokSECRET05abcdef"),
    ("x-api-key: xakSECRET06abcdef", "xakSECRET06abcdef"),
    ("dial postgres://admin:PgSECRET07pw@db.internal:5432/app failed", "PgSECRET07pw"),
    ("exec: mysql --password PwSECRET08 -h db", "PwSECRET08"),
    ("args: serve --api-key=ApiSECRET09 --port 80", "ApiSECRET09"),
    ("sshpass -p SshSECRET10 ssh root@node", "SshSECRET10"),
    ("key sk-proj-SECRET11abcdefghijklmnopqrstuvwxyz0123", "SECRET11abcdefghijklmnop"),
    ("google AIzaSyASECRET12defghijklmnopqrstuvwxyz01 in url", "SyASECRET12defghijklmnop"),
    (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=AzSECRET13+abc/def==;"
        "EndpointSuffix=core.windows.net",
        "AzSECRET13",
    ),
    ('{"auths":{"registry.example.com":{"auth":"ZG9ja2VyU0VDUkVUMTQ="}}}', "ZG9ja2VyU0VDUkVUMTQ="),
    (
        "Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJTRUNSRVQxNSJ9.c2lnU0VDUkVUMTU",
        "eyJzdWIiOiJTRUNSRVQxNSJ9",
    ),
    ("token: ghp_SECRET16abcdefghijklmnopqrstuvwxyz", "ghp_SECRET16"),
    ("HF_TOKEN=hf_SECRET17abcdefghijklmnopqrstu", "SECRET17abcdefghijk"),
    ("slack xoxb-SECRET18-abcdefghijkl posted", "SECRET18-abcdefghijkl"),
    ("client-secret: cliSECRET19value", "cliSECRET19value"),
    ("redis://:RedisSECRET20@cache:6379/0", "RedisSECRET20"),
)
#: Blocks whose every body line is secret.
BLOCKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (PEM, tuple(f"SECRETPEM{i:02d}" for i in range(30))),
    (PGP, tuple(f"SECRETPGP{i:02d}" for i in range(3))),
)
#: Env entries of secret-looking names: (name, value).
ENV = (
    ("DB_PASSWORD", "EnvSECRET21"),
    ("OPENAI_API_KEY", "EnvSECRET22key"),
    ("WANDB_TOKEN", "EnvSECRET23tok"),
    ("AWS_SECRET_ACCESS_KEY", "EnvSECRET24aws"),
    ("STORAGE_ACCOUNT_KEY", "EnvSECRET25"),
)


def all_secrets() -> tuple[str, ...]:
    return (
        tuple(s for _, s in PLANTED)
        + tuple(s for _, ss in BLOCKS for s in ss)
        + tuple(v for _, v in ENV)
    )
