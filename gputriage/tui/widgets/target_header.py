"""The one-line header: which pod and its state first (they must survive a narrow terminal),
then its node, its GPU request and where the evidence comes from."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from gputriage.textsafe import inert_line
from gputriage.tui.view import TriageView, gpu_request, pod_state_words


def header_content(view: TriageView) -> Content:
    target = view.facts.target if view.facts is not None else None
    pod = (
        f"{target.namespace}/{target.pod}"
        if target is not None and target.pod
        else view.target_hint or "…"
    )
    node = view.pod_value("node") or (target.node if target is not None else "") or "not scheduled"
    phase = str(view.pod_value("phase") or "")
    state = pod_state_words(
        phase,
        str(view.pod_value("reason") or ""),
        view.pod_value("containers"),
        bool(view.pod_value("deleting")),
        view.pod_value("conditions") or (),
    )
    healthy = phase in ("Running", "Succeeded") and state == phase
    return Content.assemble(
        (inert_line(pod), "bold"),
        "  │  ",
        (inert_line(state), "bold $success" if healthy else "bold $warning"),
        "  │  node ",
        (inert_line(str(node)), "bold"),
        "  │  ",
        (inert_line(gpu_request(view.pod_value("gpu_resources"))), "bold"),
        "  │  ",
        ("gputriage ", "bold $accent"),
        (inert_line(view.session), "$text-muted"),
    )


class TargetHeader(Static):
    """Namespace/pod, its state, node and GPU request, then the session, from the ``pod``
    fact group."""

    view: reactive[TriageView | None] = reactive(None, always_update=True)

    def watch_view(self, view: TriageView | None) -> None:
        if view is not None:
            self.update(header_content(view))
