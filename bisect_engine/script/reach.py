"""Graph breaks (issue 36, item 3): whether an interior error reaches what the program's compiled calls return.

A compiled call's output that fails the end-to-end rule by rounding-sized amounts (the ulp rule
fails it, no material difference: :func:`deferrable`) is a *suspect*, not yet a divergence: the
program may only feed it to later compiled calls (the next graph after a graph break), where a
comparison or a rounding absorbs it. Each failing output is *shadowed*: its compiled tensor (by
identity, held weakly) is paired with eager's and fp64's values for it. A later checked call that
reads a shadowed tensor is judged twice: on its own (the references run on the values it was
given) and traced (the references run on the shadows' eager and fp64 values, so the suspect's
error is measured where it lands). When the call alone matches and the traced call does not, the
suspect's error reached that call's outputs: the suspect's graph diverges. Otherwise its outputs
carry the shadows on (their traced references), so a chain of graphs is followed to its end.

At the end of the program a suspect is *absorbed* only when every failing output was read by a
later checked call and no traced call showed its error: listed, never a headline. One a checked
call never read (the program's result, a value read only by Python: ``.item()``, ``print``) is a
divergence, as before: what Python reads between graphs is not traced (an absorbed suspect's
output also printed by the program is listed, not a verdict: see the README's Limits).
Nothing here runs a graph or writes a file; ``session.py`` acts on what this says.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..verdict.compare import material_difference
from .call_check import CallVerdict, References

_FLOAT_RULES = ("rms", "max")
CAPACITY = 16  # suspects followed at once (a program failing every call by a little: memory stays bounded)


@dataclass
class Suspect:
    """A checked call whose outputs failed the end-to-end rule by rounding-sized amounts."""

    record: Any  # the session's GraphRecord
    verdict: CallVerdict
    pristine: list[Any]
    graph_call: int
    call: int
    unread: set[str]  # failing outputs no later checked call has read yet
    read_by: list[str] = field(default_factory=list)  # the graphs whose checked calls read them

    def to_json(self) -> dict[str, Any]:
        failing = {name: v for name, v in self.verdict.outputs.items() if v.reason in _FLOAT_RULES}
        return {"call": self.graph_call, "outputs": {name: v.to_json() for name, v in failing.items()},
                "read_by": sorted(set(self.read_by))}


@dataclass
class Shadow:
    tensor: "weakref.ref[torch.Tensor]"
    eager: Any
    fp64: Any
    suspects: tuple[Suspect, ...]
    output: str | None = None  # the suspect's own failing output this shadows (None: carried further)


def deferrable(verdict: CallVerdict, references: References, outputs: Sequence[Any]) -> list[int]:
    """The positions of the failing outputs when every failure is the ulp rule's on a returned
    tensor (not an input written in place, no exact rule, no material difference); else []."""
    positions = []
    for name, verdict_of in verdict.outputs.items():
        if verdict_of.outcome.value == "match":
            continue
        index = int(name.split()[1]) if name.startswith("output ") and name.split()[1].isdigit() else -1
        if verdict_of.reason not in _FLOAT_RULES or not 0 <= index < len(outputs) \
                or not isinstance(outputs[index], torch.Tensor):
            return []
        if material_difference(references.eager[index], outputs[index]).material:
            return []
        positions.append(index)
    return positions


class Tracer:
    """The suspects of a program run and the compiled tensors that carry their errors. At most
    :data:`CAPACITY` suspects are followed (each holds its call's inputs): past that, a failing
    call is a divergence at once, as without tracing (:attr:`full`)."""

    def __init__(self) -> None:
        self.suspects: list[Suspect] = []
        self._shadows: dict[int, Shadow] = {}

    @property
    def full(self) -> bool:
        return len(self.suspects) >= CAPACITY

    def suspect(self, suspect: Suspect, positions: list[int], references: References, outputs: Sequence[Any]) -> None:
        self.suspects.append(suspect)
        fp64 = references.fp64 if references.fp64 is not None else references.eager
        for i in positions:
            self._shadow(outputs[i], references.eager[i], fp64[i], (suspect,), f"output {i}")

    def _shadow(self, tensor: torch.Tensor, eager: Any, fp64: Any, suspects: tuple[Suspect, ...],
                output: str | None = None) -> None:
        key = id(tensor)
        shadows = self._shadows

        def forget(dead: "weakref.ref[torch.Tensor]") -> None:  # the tensor is gone: so are its copies
            if key in shadows and shadows[key].tensor is dead:
                del shadows[key]
        shadows[key] = Shadow(weakref.ref(tensor, forget), eager, fp64, suspects, output)

    def shadows(self, args: Sequence[Any]) -> dict[int, Shadow]:
        """The positions of ``args`` that are shadowed tensors (the very objects, still alive)."""
        found = {}
        for i, arg in enumerate(args):
            shadow = self._shadows.get(id(arg)) if isinstance(arg, torch.Tensor) else None
            if shadow is not None and shadow.tensor() is arg:
                found[i] = shadow
        return found

    @staticmethod
    def traced_inputs(pristine: Sequence[Any], shadows: dict[int, Shadow]) -> tuple[list[Any], list[Any]]:
        """The call's inputs with each shadowed one replaced by its eager and its fp64 value."""
        eager = [shadows[i].eager if i in shadows else v for i, v in enumerate(pristine)]
        fp64 = [shadows[i].fp64 if i in shadows else v for i, v in enumerate(pristine)]
        return eager, fp64

    def read(self, graph: str, shadows: dict[int, Shadow]) -> tuple[Suspect, ...]:
        """A checked call of ``graph`` read these shadows: their suspects, each once."""
        suspects: list[Suspect] = []
        for shadow in shadows.values():
            for suspect in shadow.suspects:
                if shadow.output is not None:
                    suspect.unread.discard(shadow.output)
                suspect.read_by.append(graph)
                if suspect not in suspects:
                    suspects.append(suspect)
        return tuple(suspects)

    def carry(self, suspects: tuple[Suspect, ...], traced: References, outputs: Sequence[Any]) -> None:
        """The call's outputs carry its inputs' suspects on, with their traced references."""
        fp64 = traced.fp64 if traced.fp64 is not None else traced.eager
        for i, output in enumerate(outputs[:len(traced.eager)]):
            if isinstance(output, torch.Tensor) and output.is_floating_point():
                self._shadow(output, traced.eager[i], fp64[i], suspects)

    def resolve(self, suspect: Suspect) -> None:
        """The suspect is decided (it diverged): no tensor carries it on."""
        if suspect in self.suspects:
            self.suspects.remove(suspect)
        for key in [k for k, s in self._shadows.items() if suspect in s.suspects]:
            del self._shadows[key]

    def unresolved(self) -> list[Suspect]:
        """Suspects with a failing output no later checked call read: what the program kept."""
        return [s for s in self.suspects if s.unread]

    def absorbed(self) -> list[Suspect]:
        return [s for s in self.suspects if not s.unread]

