"""The model-level check: the user's model through a real ``torch.compile`` against eager and fp64.

Run only when every captured graph matched, to tell ``clean`` from ``not_reproducible`` (the model
diverges, but not in any graph we captured). The compile goes through Inductor's own entry point,
counted by the shared :class:`~bisect_engine.runner.Compiler`.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from .compare import Outcome, Tolerance, compare_values
from .model_file import ModelSpec
from .runner import Compiler, to_fp64


def _forward_and_grads(model: Callable[..., Any], inputs: tuple[Any, ...], loss_fn: Any, seed: int) -> list[Any]:
    torch.manual_seed(seed)
    parameters = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    for parameter in parameters:
        parameter.grad = None
    output = model(*inputs)
    values = [v for v in pytree.tree_leaves(output) if isinstance(v, torch.Tensor)]
    if loss_fn is not None:
        loss = loss_fn(output)
        loss.backward()
        values += [loss] + [p.grad for p in parameters if p.grad is not None]
    return [v.detach().clone() for v in values]


def check_model_level(spec: ModelSpec, compiler: Compiler, tolerance: Tolerance, seed: int,
                      config_patches: dict[str, Any] | None = None) -> str:
    """"match" or "mismatch" for the whole model, outputs and (with loss_fn) gradients."""
    eager = _forward_and_grads(spec.model, spec.inputs, spec.loss_fn, seed)
    fp64 = eager
    if isinstance(spec.model, torch.nn.Module):
        model64 = copy.deepcopy(spec.model).to(torch.float64)
        fp64 = _forward_and_grads(model64, to_fp64(spec.inputs), spec.loss_fn, seed)
    torch._dynamo.reset()
    try:
        compiled_model = torch.compile(
            spec.model, backend=lambda gm, example: compiler.compile(gm, example, label="model", aten_graph=False, config_patches=config_patches)
        )
        compiled = _forward_and_grads(compiled_model, spec.inputs, spec.loss_fn, seed)
    finally:
        torch._dynamo.reset()
    verdicts = compare_values(eager, fp64, compiled, tolerance)
    return "match" if all(v.outcome is Outcome.MATCH for v in verdicts) else "mismatch"
