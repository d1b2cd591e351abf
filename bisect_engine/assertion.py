"""``assert_compiled_matches(fn, *args)``: the assertion for test suites that test under ``torch.compile``.

It passes when compiled agrees with eager, and is never stricter than upstream's own accuracy
criterion: first, one eager run, one fp64 run and one compiled run compared by
``torch._dynamo.utils.same(eager, compiled, fp64_ref, tol=torch._dynamo.config.repro_tolerance,
equal_nan=True)``, the check ``torch._dynamo.debug_utils.same_two_models`` makes for the minifier
(except that a compiled run that raises fails here, where the minifier skips it). Where that holds,
the assertion passes after one compile. Where it does not, the whole pipeline
(:func:`bisect_engine.check`) judges by the tool's fp64-aware rule and names the op: a clean verdict
passes (upstream's tolerance was the stricter one); any other verdict raises ``AssertionError``
naming the op, its source line, its error in ulps and the repro; a run that could not decide
(``incomplete``, an error) raises too, saying so: never a silent pass.

Torch-free at import (the pytest plugin imports it in every test session); the runs import torch.
Inside the plugin, each call's result is recorded for the running test (:data:`RESULTS`) and its
reports go under the test's own folder (:data:`OUT_DIR`).
"""
from __future__ import annotations

import contextvars
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .live import CheckResult

# Set by the pytest plugin around each test: where its reports go, and the results it made.
OUT_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("bisect_accuracy_out", default=None)
RESULTS: contextvars.ContextVar[list[CheckResult] | None] = contextvars.ContextVar("bisect_accuracy_results",
                                                                                   default=None)


def assert_compiled_matches(fn: Callable[..., Any], *args: Any, loss_fn: Callable[[Any], Any] | None = None,
                            out: str | Path | None = None, verify_runs: int = 1, **kwargs: Any) -> None:
    """Assert that ``torch.compile(fn)(*args, **kwargs)`` agrees with ``fn(*args, **kwargs)``.

    ``fn``: a module or function (compiled with ``torch.compile``'s defaults), or one the caller
    compiled (that compile, as written, is checked against the function it wraps). ``loss_fn``:
    gradients are compared too. ``out``: where a failure's report and repro go (default: the pytest
    plugin's folder for this test, else a fresh folder under ``./bisect-accuracy-out/``).
    The caller's model, inputs, random states and torch's flags are left as they were.
    """
    from .caller_state import caller_state_kept

    with caller_state_kept(fn, args, kwargs, loss_fn):
        if upstream_same(fn, args, kwargs, loss_fn):
            return
    from .live import check

    result = check(fn, *args, loss_fn=loss_fn, out=out if out is not None else _test_folder(),
                   verify_runs=verify_runs, **kwargs)
    results = RESULTS.get()
    if results is not None:
        results.append(result)
    if result.verdict != "clean":
        raise AssertionError(failure_message(result))


def _test_folder() -> Path | None:
    root = OUT_DIR.get()
    if root is None:
        return None
    from .live import fresh_folder

    return fresh_folder(root.parent, root.name)


def failure_message(result: CheckResult) -> str:
    """One paragraph: what disagrees, where, by how much, and the files to read and run."""
    if result.verdict in ("incomplete", "interrupted", "error", "unchecked"):
        head = (f"torch.compile and eager could not be told apart or not (bisect-accuracy: {result.verdict}); "
                "upstream's check found them different")
    elif result.op:
        where = f" at {result.source}" if result.source else ""
        error = (f": {result.error_ulps:.3g} ulps RMS against fp64 (eager: {result.eager_error_ulps:.3g})"
                 if result.error_ulps is not None and result.eager_error_ulps is not None else "")
        head = (f"torch.compile disagrees with eager (bisect-accuracy: {result.verdict}): "
                f"{result.op}{where} (node {result.node}, graph {result.graph}){error}")
    else:
        head = f"torch.compile disagrees with eager (bisect-accuracy: {result.verdict}); no single op was named"
    files = [f"repro: {result.repro_path}" if result.repro_path else None,
             f"report: {result.report_path}" if result.report_path else None]
    return "\n".join([head, *(line for line in files if line), "", result.summary])


def upstream_same(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  loss_fn: Callable[[Any], Any] | None) -> bool:
    """``torch._dynamo.utils.same`` on eager, compiled and fp64 results, as the minifier's
    ``same_two_models`` calls it; a compiled run that raises is no match (the pipeline then names
    the crash). Each run starts from the caller's state (the caller restores it after)."""
    import torch

    from .caller_state import caller_state_kept
    from .load.model_file import unwrap_compiled
    from .verdict.judgement import upstream_same as same

    eager, compiled, _backend = unwrap_compiled(fn)
    compiled = compiled if compiled is not None else torch.compile(fn)
    with caller_state_kept(fn, args, kwargs):
        reference = _results(eager, args, kwargs, loss_fn)
    with caller_state_kept(fn, args, kwargs):
        fp64_reference = _fp64_results(eager, args, kwargs, loss_fn)
    with caller_state_kept(fn, args, kwargs):
        try:
            result = _results(compiled, args, kwargs, loss_fn)
        except Exception:  # noqa: BLE001 - a compiled run that raises disagrees; check() says how
            return False
    return same(reference, result, fp64_reference)


def _results(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             loss_fn: Callable[[Any], Any] | None) -> list[Any]:
    """The outputs (and with ``loss_fn``: the loss and the parameters' gradients), detached."""
    import torch
    import torch.utils._pytree as pytree

    parameters = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    for parameter in parameters:
        parameter.grad = None
    torch.manual_seed(0)
    with torch.set_grad_enabled(loss_fn is not None and torch.is_grad_enabled()):
        output = fn(*args, **kwargs)
    values = [v for v in pytree.tree_leaves(output) if isinstance(v, torch.Tensor)]
    if loss_fn is not None:
        loss = loss_fn(output)
        loss.backward()
        values += [loss] + [p.grad for p in parameters if p.grad is not None]
    return [v.detach().clone() for v in values]


def _fp64_results(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  loss_fn: Callable[[Any], Any] | None) -> list[Any] | None:
    """The fp64 reference: a copy of the model and the inputs cast to float64 (upstream's
    ``cast_to_fp64``); None where the model cannot run in fp64 (upstream then judges without one)."""
    import copy

    import torch
    import torch.utils._pytree as pytree

    def cast(value: Any) -> Any:
        return value.to(torch.float64) if isinstance(value, torch.Tensor) and value.is_floating_point() else value

    try:
        model = copy.deepcopy(fn).to(torch.float64) if isinstance(fn, torch.nn.Module) else fn
        return _results(model, pytree.tree_map(cast, args), pytree.tree_map(cast, kwargs), loss_fn)
    except Exception:  # noqa: BLE001 - as upstream: no fp64 reference, judged without it
        return None
