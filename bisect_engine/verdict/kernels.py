"""Inductor's generated code, and which of its kernels compute which of our aten nodes.

A compile asked to keep its code gives an :class:`OutputCode`: the wrapper module's source (every
kernel's source is a string inside it) and, where the torch version has it, Inductor's provenance
mapping (``trace.provenance_tracking_level``). Read here, torch-free: :func:`parse_output_code`
finds each kernel defined in the source (C++ on CPU, Triton on CUDA, ...) and each extern call
(an aten/library kernel the wrapper calls); :func:`culprit_kernels` keeps those computing the
culprit's nodes, which it learns, per kernel, from

1. ``provenance``: kernel -> post-grad nodes -> the nodes of *our* graph they came from (the
   post-grad names are Inductor's own: our ``add`` may be its ``add_2``);
2. else ``comment``: the ``# Topologically Sorted Source Nodes: [...]`` comment Inductor writes
   before a Triton kernel's definition and before Triton and extern calls (C++ kernels get none);
3. else ``compile``: the compile held the culprit's nodes alone (the confirm or window compile),
   so each of its kernels computes some of them.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

SOURCE_LIMIT = 64_000  # characters of one kernel's source kept in the report
MAX_KERNELS = 8

_DEFINITION = re.compile(r"^(?P<name>[A-Za-z_]\w*) = async_compile\.(?P<method>\w+)\(.*'''\s*$")
_SOURCE_NODES = re.compile(r"#\s*(?:Topologically Sorted|Unsorted) Source Nodes: \[(?P<nodes>[^\]]*)\]")
_CALL = re.compile(r"^\s+(?:[\w, ]+ = )?(?P<callee>[A-Za-z_][\w.]*)\(")
_KINDS = {"cpp_pybinding": "cpp", "cpp": "cpp", "triton": "triton"}
# Lines the wrapper writes between a call's comment and the call (Triton: the stream to launch on).
_BETWEEN = re.compile(r"^\s*stream\w* = get_raw_stream\(")


@dataclass(frozen=True)
class OutputCode:
    """What one Inductor compile generated: the wrapper module's source and, when it was tracked,
    Inductor's provenance mapping (its JSON text)."""

    source: str
    provenance: str | None = None


@dataclass(frozen=True)
class Kernel:
    """One kernel of a compile: its source, and the nodes of our graph it computes."""

    name: str
    kind: str  # cpp | triton | extern | wrapper | the async_compile method of another backend
    source: str
    nodes: tuple[str, ...] = ()
    mapped_by: str = ""  # provenance | comment | compile

    def to_json(self) -> dict[str, Any]:
        source = self.source
        clipped = len(source) > SOURCE_LIMIT
        if clipped:
            source = source[:SOURCE_LIMIT] + f"\n... ({len(self.source) - SOURCE_LIMIT:,} more characters)"
        return {"name": self.name, "kind": self.kind, "nodes": list(self.nodes), "mapped_by": self.mapped_by,
                "source": source, "lines": self.source.count("\n") + 1, "truncated": clipped}


@dataclass
class ParsedCode:
    """The kernels a wrapper defines (name -> kind, source), the extern calls it makes (callee ->
    the call with its comments), the source nodes its comments name, and its ``call`` function."""

    defined: dict[str, tuple[str, str]] = field(default_factory=dict)
    externs: dict[str, str] = field(default_factory=dict)
    commented: dict[str, list[str]] = field(default_factory=dict)
    call: str = ""


def parse_output_code(source: str) -> ParsedCode:
    """Kernel definitions, commented calls and the ``call`` function of a wrapper module."""
    parsed, lines, index = ParsedCode(), source.splitlines(), 0
    comments: list[str] = []
    while index < len(lines):
        line = lines[index]
        definition = _DEFINITION.match(line)
        if definition:
            end = next((j for j in range(index + 1, len(lines)) if lines[j].startswith("'''")), len(lines))
            name = definition["name"]
            method = definition["method"]
            parsed.defined[name] = (_KINDS.get(method, method), "\n".join(lines[index + 1:end]))
            _add_nodes(parsed.commented, name, _comment_nodes(comments))
            comments, index = [], end + 1
            continue
        if line.strip().startswith("#"):
            comments.append(line.strip())
        elif line.strip() and not _BETWEEN.match(line):
            _note_call(parsed, line, comments)
            comments = []
        index += 1
    parsed.call = _call_function(lines)
    return parsed


def _note_call(parsed: ParsedCode, line: str, comments: list[str]) -> None:
    """A call preceded by comments: the nodes they name, and the call itself when it may be an
    extern kernel's (not one the module defines)."""
    call = _CALL.match(line)
    if call is None or not comments:
        return
    callee = call["callee"].removesuffix(".run")
    _add_nodes(parsed.commented, callee, _comment_nodes(comments))
    if callee not in parsed.defined and callee not in parsed.externs:
        parsed.externs[callee] = "\n".join([*comments, line.strip()])


def _comment_nodes(comments: Iterable[str]) -> list[str]:
    found = []
    for comment in comments:
        match = _SOURCE_NODES.search(comment)
        if match:
            found += [name.strip() for name in match["nodes"].split(",") if name.strip()]
    return found


def _add_nodes(table: dict[str, list[str]], name: str, nodes: Iterable[str]) -> None:
    nodes = list(nodes)
    if nodes:
        entry = table.setdefault(name, [])
        entry += [n for n in nodes if n not in entry]


def _call_function(lines: list[str]) -> str:
    """The wrapper's ``def call(...)`` (a method of ``Runner`` in newer releases), as it is written."""
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def call(")), None)
    if start is None:
        return ""
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next((j for j in range(start + 1, len(lines))
                if lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) <= indent), len(lines))
    return "\n".join(line[indent:] for line in lines[start:end]).rstrip()


def provenance_nodes(provenance: str | None) -> dict[str, list[str]]:
    """Kernel name -> the nodes of the compiled (our) graph it computes, from Inductor's provenance
    mapping; empty when there is none or it cannot be read. Debug handles (``name:3``: one per call
    of a kernel) are merged into the kernel's name."""
    try:
        mapping = json.loads(provenance) if provenance else {}
    except ValueError:
        return {}
    post_to_pre = mapping.get("postToPre") if isinstance(mapping, dict) else None
    kernels = mapping.get("cppCodeToPost") if isinstance(mapping, dict) else None
    if not isinstance(post_to_pre, dict) or not isinstance(kernels, dict) or not post_to_pre:
        return {}
    found: dict[str, list[str]] = {}
    for handle, post_nodes in kernels.items():
        name = handle.rsplit(":", 1)[0] if handle.rpartition(":")[2].isdigit() else handle
        ours = [pre for post in post_nodes or [] for pre in post_to_pre.get(post) or []]
        _add_nodes(found, name, ours)
    return found


def culprit_kernels(code: Sequence[OutputCode], culprit: Sequence[str]) -> tuple[Kernel, ...]:
    """The kernels of a compile of the culprit's nodes (``code``: one per inner compile) that
    compute them, generated kernels first; the wrapper's ``call`` when none does (a view, say,
    is only a ``reinterpret_tensor`` there)."""
    wanted = set(culprit)
    found: list[Kernel] = []
    for output in code:
        parsed = parse_output_code(output.source)
        mapped = provenance_nodes(output.provenance)
        kernels = [_kernel(name, kind, text, parsed, mapped, culprit) for name, (kind, text) in parsed.defined.items()]
        kernels += [_kernel(name, "extern", text, parsed, mapped, culprit) for name, text in parsed.externs.items()
                    if name in mapped or name in parsed.commented]
        kept = [k for k in kernels if wanted & set(k.nodes)]
        if not kept and parsed.call:
            kept = [Kernel("call", "wrapper", parsed.call, tuple(culprit), "compile")]
        found += kept
    return tuple(found[:MAX_KERNELS])


def _kernel(name: str, kind: str, text: str, parsed: ParsedCode, mapped: dict[str, list[str]],
            culprit: Sequence[str]) -> Kernel:
    if mapped.get(name):
        return Kernel(name, kind, text, tuple(mapped[name]), "provenance")
    if parsed.commented.get(name):
        return Kernel(name, kind, text, tuple(parsed.commented[name]), "comment")
    if kind == "extern":
        return Kernel(name, kind, text)  # an unnamed extern call: kept only when mapped
    return Kernel(name, kind, text, tuple(culprit), "compile")
