"""What a run of the user's model changes that the model owns, kept to one run's worth.

One check runs the user's model many times: the model-level check runs it eagerly, compiled (a
``torch.compile`` of the same module: one set of parameters and buffers) and, where it fails, again
on both sides (``oracle.over_runs``); a batch scan runs eager, the compiled copy and their reruns on
one module per batch, and a failing batch's rows alone. Each run moves what a forward writes: a
BatchNorm's running statistics in training mode, a step counter buffer, a parameter written in
place, the parameters' gradients (the last run's: compiled's), and the random state.
:class:`ModelRuns` makes every run of one check start from the state the first started from
(compiled and each rerun see what eager saw), and leaves the model, and torch's random state, as
that first run left them: as one run of the user's program would (``leave="first"``), or as found
(``leave="as_found"``: a look the program never makes).

Buffers are copied (usually small); parameters are not (a model's weights held twice): one written
by the first run (its version counter moved) is kept as that run left it, and the later runs start
from there (logged): only a forward that writes a parameter in place under ``no_grad`` does so.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Literal, TypeVar

import torch

log = logging.getLogger(__name__)
Result = TypeVar("Result")


class _State:
    """Module buffers (each slot's tensor object and a copy of its bits), named parameters (their
    copies only where given; their gradient objects), and torch's random states (CPU; CUDA where
    initialised)."""

    def __init__(self, model: Any, parameters: frozenset[int] = frozenset(), grads: bool = True) -> None:
        modules = list(model.modules()) if isinstance(model, torch.nn.Module) else []
        self.slots: list[tuple[torch.nn.Module, str, torch.Tensor, torch.Tensor]] = [
            (module, name, tensor, tensor.detach().clone())
            for module in modules for name, tensor in module._buffers.items() if _materialised(tensor)]
        self.parameters = [(p, p.detach().clone()) for p in _parameters(model) if id(p) in parameters]
        # each parameter's gradient object (a run sets new ones, never writes the old: no copy); else
        # none: a later run starts without gradients (one that accumulates would write the first
        # run's, its judged values), and the old ones are not held past the run that drops them
        self.grads = [(p, p.grad if grads else None) for p in _parameters(model)]
        self.rng = torch.get_rng_state()
        self.cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

    def restore(self) -> None:
        with torch.no_grad():
            for module, name, tensor, value in self.slots:
                if module._buffers.get(name) is not tensor:  # reassigned by a forward: the slot's own object back
                    module._buffers[name] = tensor
                if not torch.equal(tensor, value):  # unchanged bits keep their version counter
                    tensor.copy_(value)
            for parameter, value in self.parameters:
                if not torch.equal(parameter, value):
                    parameter.copy_(value)
            for parameter, grad in self.grads:
                if parameter.grad is not grad:
                    parameter.grad = grad
        torch.set_rng_state(self.rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)


def _parameters(model: Any) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if _materialised(p)] if isinstance(model, torch.nn.Module) else []


def _materialised(tensor: Any) -> bool:
    """A tensor with values (a lazy module's are made by its first run: that run's, never put back)."""
    return isinstance(tensor, torch.Tensor) and not isinstance(tensor, torch.nn.parameter.UninitializedTensorMixin)


class ModelRuns:
    """The runs of one check on ``model``'s state (a module; anything else: the random state
    alone). Use as a context manager: every run through :meth:`run`; on exit the model is left as
    ``leave`` says, whatever was raised."""

    def __init__(self, model: Any, leave: Literal["first", "as_found"] = "first") -> None:
        self.model, self.leave = model, leave
        self.before = _State(model, grads=leave == "as_found")
        self.versions = {id(p): p._version for p in _parameters(model)}
        self.after: _State | None = None

    def run(self, function: Callable[[], Result]) -> Result:
        """``function`` (a run of the model, or anything that reads its state: an fp64 copy made
        from it) from the state the first run started from; the first run's end state kept."""
        if self.after is not None:
            self.before.restore()
        result = function()
        if self.after is None:
            written = frozenset(id(p) for p in _parameters(self.model) if p._version != self.versions.get(id(p)))
            if written:
                log.info("a run of the model wrote %d parameter(s) in place: later runs start from what it left",
                         len(written))
            self.after = _State(self.model, written)
        return result

    def results_held(self) -> list[torch.Tensor]:
        """The tensors a run made that this object holds to leave in the model: the first run's
        gradient objects (kept to be put back on exit). A caller moving that run's results out of
        memory (``verdict/offload``) moves these with them: the same storages, so the memory goes."""
        return [grad for _, grad in (self.after.grads if self.after is not None else []) if grad is not None]

    def __enter__(self) -> "ModelRuns":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        state = self.after if self.leave == "first" and self.after is not None else self.before
        state.restore()
        self.after = None
