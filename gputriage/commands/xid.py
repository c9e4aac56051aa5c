"""``gputriage xid``: explain an Xid/SXid code, or decode pasted kernel log lines."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gputriage.errors import GputriageError

HELP = "explain an Xid or SXid code, or decode a pasted kernel log line"

EPILOG = """\
examples:
  gputriage xid 79                     what NVIDIA says about Xid 79, and what to do
  gputriage xid 20034                  an NVSwitch SXid
  gputriage xid "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has \
fallen off the bus."
  dmesg -T | gputriage xid -           decode every NVIDIA line of a kernel log
  gputriage xid --list                 the whole catalog, one Xid per line
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.add_argument(
        "query",
        nargs="*",
        metavar="CODE|LINE",
        help="an Xid code (79), an SXid code (20034), a kernel log line in quotes, "
        "or - to read a whole log from stdin",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--list", action="store_true", help="list every catalogued Xid")


def run(args: argparse.Namespace) -> int:
    from gputriage.xid import catalog

    if args.list:
        xids = catalog.all()
        if args.json:
            _print_json({"xids": [x.to_dict() for x in xids]})
        else:
            for x in xids:
                print(f"{x.code:>4}  {x.klass:<13} {x.immediate or '-':<20} {x.description}")
        return 0
    query = " ".join(args.query).strip()
    if not query:
        raise GputriageError(
            "give an Xid code (gputriage xid 79), a kernel log line in quotes, "
            "or - to read a log from stdin",
            title="xid",
        )
    if query == "-":
        return _decode_text(sys.stdin.read(), args.json, whole_log=True)
    if query.isdigit():
        return _explain_code(int(query), args.json)
    return _decode_text(query, args.json, whole_log=False)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _explain_code(code: int, as_json: bool) -> int:
    from gputriage.xid.decode import explain_sxid, explain_xid

    xid = explain_xid(code)
    sxid = None if xid else explain_sxid(code)
    if xid is None and sxid is None:
        raise GputriageError(
            f"{code} is neither an Xid in NVIDIA's catalog (codes 1-172) nor an SXid listed in "
            "the Fabric Manager guide. Newer drivers may add codes: see "
            "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html",
            title=f"unknown code {code}",
        )
    if as_json:
        _print_json({"query": str(code), "xid": xid} if xid else {"query": str(code), "sxid": sxid})
    elif xid:
        print("\n".join(_xid_lines(xid)))
    elif sxid:
        print("\n".join(_sxid_lines(sxid)))
    return 0


def _decode_text(text: str, as_json: bool, *, whole_log: bool) -> int:
    from gputriage.parsers.kernel import Kind, parse_text
    from gputriage.xid.decode import decode_record

    log = parse_text(text)
    wanted = [
        r
        for r in log.records
        if whole_log is False or r.kind not in (Kind.OTHER_NVRM, Kind.PEERMEM)
    ]
    if not wanted:
        where = f"{log.lines_scanned} lines read" if whole_log else repr(text[:200])
        raise GputriageError(
            f"no Xid, SXid or other NVIDIA GPU kernel message found ({where})",
            title="nothing to decode",
        )
    decoded = [decode_record(r) for r in wanted]
    if as_json:
        _print_json(
            {"lines_scanned": log.lines_scanned, "records": decoded}
            if whole_log
            else {"query": text, "records": decoded}
        )
        return 0
    if whole_log:
        print("\n".join(_log_lines(decoded, log.lines_scanned)))
    else:
        print("\n\n".join("\n".join(_record_lines(d)) for d in decoded))
    return 0


def _field(label: str, value: object) -> str:
    return f"  {label + ':':<18} {value}"


def _bucket(name: str, meaning: str) -> str:
    if not name:
        return "-"
    return f"{name} ({meaning})" if meaning else name


def _xid_lines(x: dict[str, Any]) -> list[str]:
    lines = [
        f"Xid {x['code']}: {x['description']}",
        _field("NVIDIA mnemonic", x["mnemonic"]),
        _field("class", f"{x['klass']}: {x['class_meaning']} ({x['reading']})"),
        _field("what to do", x["action"]),
        _field("immediate action", _bucket(x["immediate"], x["immediate_meaning"])),
        _field("if it recurs", _bucket(x["investigatory"], x["investigatory_meaning"])),
        _field("device plugin", x["device_plugin"]),
    ]
    if x["xid154_since"]:
        lines.append(_field("feeds Xid 154", f"since driver {x['xid154_since']}"))
    lines.append(_field("applies to", ", ".join(x["applies_to"]) or "none of A100/H100/B100/GB200"))
    if x["legacy_name"] and x["legacy_name"] != x["description"]:
        lines.append(_field("legacy name", x["legacy_name"]))
    if x["legacy_causes"]:
        lines.append(_field("legacy causes", ", ".join(x["legacy_causes"])))
    if x["other_tools"]:
        lines.append(_field("other tools", x["other_tools"]))
    if x["notes"]:
        lines.append(_field("notes", x["notes"]))
    lines.append(_field("source", _sources(x["source"])))
    return lines


def _sources(tags: str) -> str:
    from gputriage.xid import catalog

    known = catalog.sources()
    return "; ".join(known.get(t.strip(), t.strip()) for t in tags.split(","))


def _sxid_lines(s: dict[str, Any]) -> list[str]:
    name = f": {s['name']}" if s["name"] else ""
    return [
        f"SXid {s['code']} (NVSwitch){name}",
        _field("class", s["klass"]),
        _field("what to do", s["action"]),
        _field("source", _sources("FM-guide")),
    ]


def _where(d: dict[str, Any]) -> str:
    gpu = f"PCI {d['pci']}" if d["pci"] else (d["device"] or "not printed")
    if d["pci"] and d["device"] and d["kind"].startswith("sxid"):
        gpu = f"{d['device']} at {gpu}"
    if d["gpu_instance"] >= 0:
        gpu += f", MIG GPU instance {d['gpu_instance']}"
    if d["compute_instance"] >= 0:
        gpu += f", compute instance {d['compute_instance']}"
    return gpu


def _record_lines(d: dict[str, Any]) -> list[str]:
    """One decoded record: what the line said, then what it means."""
    kind = d["kind"]
    head = {"xid": f"Xid {d['code']}", "sxid": f"SXid {d['code']}"}.get(kind, kind)
    lines = [f"{head} at line {d['line']}: {d['text'].strip()}"]
    if d["timestamp"]:
        lines.append(_field("logged at", d["time"] or d["timestamp"]))
    lines.append(_field("NVSwitch" if kind.startswith("sxid") else "GPU", _where(d)))
    if d["pid"]:
        lines.append(_field("pid", d["pid"]))
    if d["process"]:
        lines.append(_field("process", d["process"]))
    if d["message"]:
        lines.append(_field("message", d["message"]))
    if d["severity"]:
        lines.append(_field("severity", d["severity"]))
    if d["unit"]:
        lines.append(_field("unit", d["unit"]))
    if d["link"] >= 0:
        lines.append(_field("link", d["link"]))
    if d["caused_by"]:
        lines.append(_field("caused by", f"Xid {d['caused_by']} (look for it first)"))
    if d["recovery_to"] >= 0:
        lines.append(
            _field("recovery action", f"{d['recovery_from_name']} -> {d['recovery_to_name']}")
        )
    if d["detail"] and kind != "xid" and d["detail"] != d["message"]:
        lines.append(_field("detail", d["detail"]))
    meaning = d["meaning"]
    if kind == "xid" and meaning:
        lines += _xid_lines(meaning)[1:]
        lines.insert(1, f"  meaning:           {meaning['description']}")
    elif kind == "xid":
        lines.append(_field("meaning", "not in NVIDIA's Xid catalog (codes 1-172)"))
    elif kind == "sxid":
        lines.append(_field("fatal", "yes" if d["fatal"] else "no"))
        lines += (
            _sxid_lines(meaning)[1:]
            if meaning
            else [_field("class", "not listed in the Fabric Manager guide")]
        )
    elif meaning:
        lines.append(_field("meaning", meaning))
    return lines


def _log_lines(decoded: list[dict[str, Any]], scanned: int) -> list[str]:
    """A whole log: one line per record, then each distinct Xid/SXid code explained once."""
    lines = [f"{len(decoded)} NVIDIA GPU messages in {scanned} lines"]
    codes: dict[tuple[str, int], dict[str, Any]] = {}
    for d in decoded:
        kind = d["kind"]
        label = {"xid": f"Xid {d['code']}", "sxid": f"SXid {d['code']}"}.get(kind, kind)
        where = f" on {d['pci'] or d['device']}" if d["pci"] or d["device"] else ""
        who = f" pid={d['pid']}" if d["pid"] else ""
        who += f" ({d['process']})" if d["process"] else ""
        text = d["message"] or d["detail"]
        lines.append(f"line {d['line']}: {label}{where}{who}: {text}")
        if kind in ("xid", "sxid") and d["meaning"]:
            codes.setdefault((kind, d["code"]), d["meaning"])
    for (kind, _code), meaning in sorted(codes.items()):
        lines.append("")
        lines += _xid_lines(meaning) if kind == "xid" else _sxid_lines(meaning)
    return lines
