"""YAML with positions: plain data plus a side table of where every key and value was written.

``yaml.compose`` gives nodes with marks; we walk them once to build the plain data (dicts,
lists, scalars) and ``{path: Span}`` for keys and values, where a path is the tuple of keys and
indexes from the root (``("steps", "phase", "branches", 0, "when")``). Line numbers never go
into the data itself. Duplicate keys are reported here, because PyYAML otherwise keeps the
last one silently.

:meth:`SourceMap.offset_position` maps a character offset inside a scalar's *value* back to the
file, across quoting and block scalars (``|``, ``>``), so a CEL error at ``<input>:2:7``
lands on the right line and column of the YAML file.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gputriage.playbook.problems import Problem

if TYPE_CHECKING:
    from yaml.nodes import Node

YamlPath = tuple[str | int, ...]

#: Deeper nesting than this is not a playbook.
MAX_DEPTH = 64


@dataclass(frozen=True)
class Span:
    """Where a node was written: 1-based line and column, and character indexes into the text."""

    line: int
    col: int
    end_line: int
    end_col: int
    start: int
    end: int


class SourceMap:
    """Positions of the keys and values of one YAML file."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.values: dict[YamlPath, Span] = {}
        self.keys: dict[YamlPath, Span] = {}
        self.styles: dict[YamlPath, str] = {}
        #: The string value of every scalar (after unquoting and folding).
        self.scalars: dict[YamlPath, str] = {}
        self._line_starts = [0]
        self._line_starts += [i + 1 for i, ch in enumerate(text) if ch == "\n"]

    # -- lookups ----------------------------------------------------------------------------

    def line_text(self, line: int) -> str:
        if not 0 < line <= len(self._line_starts):
            return ""
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    def position(self, index: int) -> tuple[int, int]:
        """1-based (line, col) of character ``index`` of the text."""
        line = bisect.bisect_right(self._line_starts, index)
        return line, index - self._line_starts[line - 1] + 1

    def value_span(self, path: YamlPath) -> Span | None:
        """The span of the value at ``path``, or of its nearest ancestor that has one."""
        for n in range(len(path), -1, -1):
            span = self.values.get(path[:n])
            if span is not None:
                return span
        return None

    def key_span(self, path: YamlPath) -> Span | None:
        """The span of the key that introduced ``path`` (falls back to the value's)."""
        return self.keys.get(path) or self.value_span(path)

    def offset_position(self, path: YamlPath, offset: int) -> tuple[int, int]:
        """(line, col) in the file of character ``offset`` of the scalar value at ``path``."""
        span = self.values.get(path)
        if span is None:
            fallback = self.value_span(path)
            return (fallback.line, fallback.col) if fallback else (0, 0)
        index = _align(
            self.text, span, self.styles.get(path, ""), self.scalars.get(path, ""), offset
        )
        return self.position(index)

    # -- problems ---------------------------------------------------------------------------

    def problem(
        self,
        path: YamlPath,
        message: str,
        hint: str = "",
        *,
        at_key: bool = False,
        offset: int | None = None,
        length: int | None = None,
    ) -> Problem:
        """A :class:`Problem` placed at the value (or key) at ``path``."""
        if offset is not None:
            line, col = self.offset_position(path, offset)
            return self.problem_at(line, col, message, hint, length or 1)
        span = self.key_span(path) if at_key else self.value_span(path)
        if span is None:
            return Problem(self.file, 0, 0, message, hint)
        if length is None:
            length = span.end_col - span.col if span.end_line == span.line else 0
            length = length or len(self.line_text(span.line)) - span.col + 1
        return self.problem_at(span.line, span.col, message, hint, length)

    def problem_at(
        self, line: int, col: int, message: str, hint: str = "", length: int = 1
    ) -> Problem:
        return Problem(self.file, line, col, message, hint, self.line_text(line), max(length, 1))


def parse_yaml(text: str, file: str) -> tuple[Any, SourceMap, list[Problem]]:
    """Compose ``text`` into (data, positions, problems). Never raises for bad YAML."""
    import yaml

    smap = SourceMap(file, text)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    refused = _refuse_bombs(text, smap, loader)
    if refused is not None:
        return None, smap, [refused]
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if isinstance(exc, yaml.composer.ComposerError) and "single document" in str(exc):
            message = "a playbook file holds one YAML document; this is a second one"
        else:
            message = f"YAML syntax error: {exc.problem or exc.context or 'cannot parse'}"
            if exc.problem and exc.context:
                message += f" ({exc.context})"
        if mark is None:
            return None, smap, [Problem(file, 0, 0, message)]
        hint = ""
        start = exc.context_mark
        context = exc.context or ""
        if context.startswith("while parsing ") and start and start.line != mark.line:
            hint = (
                f"{context.removeprefix('while parsing ')} started at line {start.line + 1}, "
                f"column {start.column + 1}"
            )
        return None, smap, [smap.problem_at(mark.line + 1, mark.column + 1, message, hint)]
    except yaml.YAMLError as exc:
        return None, smap, [Problem(file, 0, 0, f"YAML error: {exc}")]
    if root is None:
        return None, smap, [Problem(file, 0, 0, "the file is empty: a playbook is a YAML mapping")]
    problems: list[Problem] = []
    data = _build(root, (), smap, problems, 0)
    return data, smap, problems


def _refuse_bombs(text: str, smap: SourceMap, loader: Any) -> Problem | None:
    """A problem at the first alias, or at the first collection nested past :data:`MAX_DEPTH`.

    Scans the event stream before composing: an alias bomb ("billion laughs") is small as
    nodes but explodes when walked, and very deep nesting is slow or crashes the composer.
    Syntax errors are left to the composer, which reports them better.
    """
    import yaml

    depth = 0
    anchors: set[str] = set()
    try:
        for event in yaml.parse(text, Loader=loader):
            mark = event.start_mark
            if (
                isinstance(event, yaml.NodeEvent)
                and not isinstance(event, yaml.AliasEvent)
                and event.anchor
            ):
                anchors.add(event.anchor)
            if mark is None:
                continue
            if isinstance(event, yaml.AliasEvent):
                if event.anchor not in anchors:
                    return None  # the composer reports an undefined alias
                return smap.problem_at(
                    mark.line + 1,
                    mark.column + 1,
                    "YAML aliases are not allowed in playbooks",
                    f"'*{event.anchor}' repeats the node anchored as '&{event.anchor}'; "
                    "write the value out instead",
                    len(event.anchor or "") + 1,
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    return smap.problem_at(
                        mark.line + 1,
                        mark.column + 1,
                        f"nesting deeper than {MAX_DEPTH} levels",
                        "a playbook is never nested this deeply",
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return None
    return None


def _span(node: Node, smap: SourceMap) -> Span:
    start, end = node.start_mark, node.end_mark
    return Span(
        start.line + 1, start.column + 1, end.line + 1, end.column + 1, start.index, end.index
    )


def _build(node: Node, path: YamlPath, smap: SourceMap, problems: list[Problem], depth: int) -> Any:
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    smap.values[path] = _span(node, smap)
    if depth > MAX_DEPTH:
        problems.append(smap.problem(path, f"nesting deeper than {MAX_DEPTH} levels"))
        return None
    if isinstance(node, ScalarNode):
        smap.styles[path] = node.style or ""
        smap.scalars[path] = str(node.value)
        return _scalar(node)
    if isinstance(node, SequenceNode):
        return [
            _build(item, (*path, i), smap, problems, depth + 1) for i, item in enumerate(node.value)
        ]
    if isinstance(node, MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                smap.values[(*path, "<key>")] = _span(key_node, smap)
                problems.append(
                    smap.problem((*path, "<key>"), "mapping keys must be plain strings")
                )
                continue
            key = str(key_node.value)
            if key in out:
                first = smap.keys[(*path, key)]
                smap_key = (*path, f"<duplicate {key}>")
                smap.keys[smap_key] = _span(key_node, smap)
                problems.append(
                    smap.problem(
                        smap_key,
                        f"duplicate key '{key}'",
                        f"first defined at line {first.line}; "
                        "YAML would silently keep the last one",
                        at_key=True,
                    )
                )
                continue
            smap.keys[(*path, key)] = _span(key_node, smap)
            out[key] = _build(value_node, (*path, key), smap, problems, depth + 1)
        return out
    return None


def _scalar(node: Any) -> Any:
    """The Python value of a scalar, with YAML 1.1 resolution (``yes`` is a bool)."""
    from yaml.constructor import ConstructorError, SafeConstructor

    if node.tag == "tag:yaml.org,2002:str":
        return node.value
    try:
        return SafeConstructor().construct_object(node)
    except (ConstructorError, ValueError):
        return node.value


def _align(text: str, span: Span, style: str, value: str, offset: int) -> int:
    """Index in ``text`` of character ``offset`` of the scalar ``value`` written at ``span``.

    The value's characters appear in the raw text in order; quoting, escapes, indentation and
    folding only add or change whitespace and quote characters around them. So we walk the
    value and find each character in the raw text, letting value whitespace match raw
    whitespace. Exact for plain, single-quoted, literal and folded scalars; close enough for
    double-quoted ones with escapes.
    """
    raw_start, raw_end = span.start, span.end
    if style in ("|", ">"):
        newline = text.find("\n", raw_start, raw_end)
        raw_start = raw_end if newline < 0 else newline + 1
    elif style in ("'", '"'):
        raw_start += 1
    p = raw_start
    for i, ch in enumerate(value):
        if ch.isspace():
            at = p if p < raw_end and text[p].isspace() else -1
            if i == offset:
                return at if at >= 0 else p
            if at >= 0:
                p += 1
            continue
        found = text.find(ch, p, raw_end)
        if i == offset:
            return found if found >= 0 else p
        if found >= 0:
            p = found + 1
    # Past the end (CEL reports "unexpected end of input" there): just after the last char.
    return min(p, len(text))
