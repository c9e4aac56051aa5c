"""The one-line header: where the evidence comes from, which pod, its node, phase and GPUs."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from gputriage.textsafe import inert_line
from gputriage.tui.view import TriageView, gpu_request


def header_content(view: TriageView) -> Content:
    target = view.facts.target if view.facts is not None else None
    pod = (f"{target.namespace}/{target.pod}" if target is not None and target.pod
           else view.target_hint or "…")
    node = (view.pod_value("node") or (target.node if target is not None else "")
            or "not scheduled")
    phase = view.pod_value("phase") or "…"
    reason = view.pod_value("reason") or next(
        (c.get("waiting_reason") for c in view.pod_value("containers") or []
         if isinstance(c, dict) and c.get("waiting_reason")), "")
    parts: list[str | tuple[str, str]] = [
        ("gputriage ", "bold $accent"),
        (inert_line(view.session), "$text-muted"),
        "  │  ",
        (inert_line(pod), "bold"),
        "  │  node ",
        (inert_line(str(node)), "bold"),
        "  │  ",
        (inert_line(str(phase)), "bold $warning" if phase != "Running" else "bold $success"),
    ]
    if reason:
        parts += [" ", (f"({inert_line(str(reason))})", "$warning")]
    parts += ["  │  ", (inert_line(gpu_request(view.pod_value("gpu_resources"))), "bold")]
    return Content.assemble(*parts)


class TargetHeader(Static):
    """Context, namespace/pod, node, phase and GPU request, from the ``pod`` fact group."""

    view: reactive[TriageView | None] = reactive(None, always_update=True)

    def watch_view(self, view: TriageView | None) -> None:
        if view is not None:
            self.update(header_content(view))
