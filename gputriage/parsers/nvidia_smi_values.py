"""Value converters shared by the nvidia-smi parsers (XML, ``-q`` text, table, list, CSV).

nvidia-smi prints the same quantity in several spellings across formats and driver branches
(``23028 MiB``, ``23028MiB``, ``[N/A]``, ``Requested functionality has been deprecated``).
These helpers turn one spelling into one Python value and map everything that is not a value
to ``None``: "not reported" is never zero.
"""

from __future__ import annotations

import re

#: Field texts that mean "no value" rather than a value.
_NOT_A_VALUE = frozenset(
    {
        "",
        "n/a",
        "[n/a]",
        "na",
        "none reported",
        "not supported",
        "[not supported]",
        "requested functionality has been deprecated",
        "unknown error",
        "err!",
        "[unknown error]",
        "insufficient permissions",
        "[insufficient permissions]",
    }
)

#: Field texts that are errors worth showing to the SRE (a GPU that answers some queries
#: with "Unknown Error" is half-dead even when the rest of the dump looks normal).
_ERROR_TEXTS = ("unknown error", "err!", "gpu is lost")

_PCI = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
    r"(?:\.(?P<fn>[0-7]))?$"
)
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?")
_VERSION = re.compile(r"\d+(?:\.\d+)+")


def clean(text: str | None) -> str | None:
    """The stripped text, or None when it says "no value"."""
    if text is None:
        return None
    value = text.strip()
    return None if value.lower() in _NOT_A_VALUE else value


def is_error_text(text: str | None) -> bool:
    """True for field texts that report a failure (``Unknown Error``, ``ERR!``...)."""
    if not text:
        return False
    lowered = text.strip().lower()
    return any(e in lowered for e in _ERROR_TEXTS)


def to_version(*texts: str | None) -> str | None:
    """The first dotted version number among ``texts`` (``"610.57.04 [Deprecated...]"``)."""
    for text in texts:
        match = _VERSION.search(text or "")
        if match:
            return match.group()
    return None


def to_int(text: str | None) -> int | None:
    """The leading integer of ``text`` (``"4"``, ``"0 bank(s)"``, ``"0x0A"`` -> 10)."""
    value = clean(text)
    if value is None:
        return None
    if value.lower().startswith("0x"):
        try:
            return int(value, 16)
        except ValueError:
            return None
    match = _NUMBER.match(value)
    if not match:
        return None
    try:
        return int(float(match.group()))
    except ValueError:
        return None


def to_mib(text: str | None) -> int | None:
    """MiB from ``"23028 MiB"``, ``"2021MiB"``, ``"1.5 GiB"`` or a bare number (taken as MiB)."""
    value = clean(text)
    if value is None:
        return None
    match = re.match(r"^(-?\d+(?:\.\d+)?)\s*([KMGT]i?B|bytes)?", value, re.IGNORECASE)
    if not match:
        return None
    number = float(match.group(1))
    unit = (match.group(2) or "MiB").lower()
    scale = {
        "bytes": 1 / 2**20,
        "kib": 1 / 1024,
        "kb": 1 / 1024,
        "mib": 1,
        "mb": 1,
        "gib": 1024,
        "gb": 1024,
        "tib": 1024**2,
        "tb": 1024**2,
    }[unit]
    return round(number * scale)


def to_bool(text: str | None) -> bool | None:
    """``Yes``/``No`` (also ``Enabled``/``Disabled``, ``True``/``False``) as a bool."""
    value = clean(text)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("yes", "enabled", "true", "on", "active"):
        return True
    if lowered in ("no", "disabled", "false", "off", "not active"):
        return False
    return None


def to_mode(text: str | None) -> str | None:
    """``Enabled``/``Disabled`` as printed, normalised in case; None for N/A."""
    flag = to_bool(text)
    if flag is None:
        return None
    return "Enabled" if flag else "Disabled"


def normalize_pci(text: str | None) -> str:
    """``00000000:3b:00.0`` -> ``0000:3B:00.0`` (the form kernel logs and NVML agree on).

    A domain that does not fit 4 hex digits keeps 8. Text that is not a PCI address comes
    back stripped and upper-cased, never raising.
    """
    if not text:
        return ""
    value = text.strip()
    match = _PCI.match(value)
    if not match:
        return value.upper()
    domain = int(match.group("domain") or "0", 16)
    width = 4 if domain <= 0xFFFF else 8
    fn = match.group("fn") or "0"
    return (
        f"{domain:0{width}X}:{int(match.group('bus'), 16):02X}:"
        f"{int(match.group('dev'), 16):02X}.{fn}"
    )


def recovery_from_reset_status(
    reset_required: str | None, drain_recommended: str | None
) -> str | None:
    """The recovery action implied by the pre-R550 ``GPU Reset Status`` block.

    Drivers before ``GPU Recovery Action`` existed printed two flags instead; map them to the
    same vocabulary so a playbook reads one field.
    """
    reset = to_bool(reset_required)
    drain = to_bool(drain_recommended)
    if drain:
        return "Drain and Reset"
    if reset:
        return "Reset"
    if reset is False and drain in (False, None):
        return "None"
    return None


def sum_known(values: list[int | None]) -> int | None:
    """Sum of the values that were reported; None when none was."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def first_line(text: str, limit: int = 200) -> str:
    """The first non-blank line, at most ``limit`` characters (cheap on a 50 MB paste)."""
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos, pos + limit + 1)
        line = text[pos : end if end >= 0 else pos + limit]
        if line.strip():
            return line.strip()[:limit]
        if end < 0:
            break
        pos = end + 1
    return ""
