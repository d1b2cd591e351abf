"""Script mode for ``torch.export`` + AOTInductor: a package the script compiles in this process
(``torch._inductor.aoti_compile_and_package``) is checked at once, as a compiled call: the
package, loaded and run on the exported program's example inputs, against the exported graph run
eagerly and in fp64 (:func:`bisect_engine.script.call_check.judge_call`). A divergence is
localised like any compiled graph's: the exported graph (flat, :mod:`bisect_engine.load.exported`)
captured and searched per node under the user's ``inductor_configs``. When the export declared a
dynamic dim, the package also runs at a second size of it (``second_shape``): a package that
raises there specialised the dim; one that is wrong there diverged (localised at that size). Once
the program loads that package (``aoti_load_package``), its calls are checked as a compiled
graph's are (the first; every N-th on request), on the program's own inputs.

What is not checked says so by name: a package loaded from a file this process did not compile,
and a shared library from a direct ``torch._inductor.aot_compile``.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from ..load.exported import DynamicDim, dynamic_dims, flat_graph_module, flat_inputs, resized_inputs
from ..verdict.fx_eval import clone_value
from ..verdict.inductor_adapter import aoti_load_package
from .call_check import flat_values
from .levels import Level

log = logging.getLogger(__name__)

BACKEND = "aot_inductor"


@dataclass
class LoadedPackage:
    """A package this process compiled, loaded by the program: its calls are checked as the graph's."""

    model: Any
    record: Any  # the GraphRecord of the exported graph
    exported: Any
    calls: int = 0


def compile_options(configs: dict[str, Any]) -> dict[str, Any]:
    """The user's ``inductor_configs`` as a config patch for our own (JIT) compiles of the exported
    graph: the ``aot_inductor.*`` keys only say how the package is written, and are left out."""
    return {key: value for key, value in configs.items() if not key.startswith("aot_inductor.")}


def loaded_elsewhere(path: Any) -> str:
    return (f"not checked: an AOTInductor package loaded from {path} was compiled in another process "
            "(script mode checks the packages the script compiles with aoti_compile_and_package)")


def library_not_checked(result: Any) -> str:
    return (f"not checked: torch._inductor.aot_compile made {result} (a shared library, loaded outside "
            "script mode's sight); compile with torch._inductor.aoti_compile_and_package to have it checked")


def package_runner(path: Any, exported: Any) -> Callable[[list[Any]], Any]:
    """Run the package on flat inputs (unflattened into the exported program's args / kwargs)."""
    model = aoti_load_package(path)
    spec = exported.call_spec.in_spec

    def run(inputs: list[Any]) -> Any:
        args, kwargs = pytree.tree_unflatten(list(inputs), spec)
        return flat_values(model(*args, **kwargs))

    return run


def package_compiled(session: Any, exported: Any, path: Any, configs: dict[str, Any]) -> None:
    """``aoti_compile_and_package(exported, ...)`` made ``path``: check it (see the module doc)."""
    session.aoti_packages.append(path)
    if session.busy or session.settings.level is Level.OFF:
        return
    record = session.add_graph(flat_graph_module(exported), BACKEND, compile_options(configs))
    session.aoti_records.append((path, record, exported))
    record.notes.append(f"an AOTInductor package ({_where(path)}) checked on the exported program's example inputs")
    inputs = flat_inputs(exported)
    if not inputs and exported.example_inputs is None:
        record.outcome = "not_checked"
        record.notes.append("not checked: the exported program holds no example inputs")
        return
    run = session.guarded(record, lambda: package_runner(path, exported))
    if run is None:
        return
    session.check_external(record, run, inputs)
    dims = session.guarded(record, lambda: dynamic_dims(exported, inputs)) or []
    if dims and session.divergence is None:
        session.exported.append(second_shape(session, record, run, inputs, dims, path))


def second_shape(session: Any, record: Any, run: Callable[[list[Any]], Any], inputs: list[Any],
                 dims: list[DynamicDim], path: Any) -> dict[str, Any]:
    """The package at a second size of every dynamic dim: ``raised`` (it specialised), a divergence
    (checked as a call, so localised there), ``match``, or why it was not run."""
    sizes = {dim.name: size for dim in dims if (size := dim.other_size()) is not None}
    entry: dict[str, Any] = {"graph": record.name, "package": _where(path), "dynamic_dims": [d.to_json() for d in dims],
                             "second_shape": {"sizes": sizes, "outcome": "not_run", "detail": None}}
    if not sizes:
        entry["second_shape"]["detail"] = "every dynamic dim's range holds its example size only"
        return entry
    resized = resized_inputs(inputs, dims, sizes)
    shape = entry["second_shape"]
    shape["shapes"] = [list(v.shape) if isinstance(v, torch.Tensor) else None for v in resized]
    try:
        with session.tool_work():
            outputs = run(clone_value(resized))
    except Exception as error:  # noqa: BLE001 - the package refused a size its export declared valid
        shape["outcome"], shape["detail"] = "raised", f"{type(error).__name__}: {str(error)[:300]}"
        log.warning("the AOTInductor package %s raised at %s, a size its export declared dynamic: it specialised",
                    path, sizes)
        return entry
    if any(dim.specialised for dim in dims):  # the exported program holds the example size only: no reference
        shape["outcome"], shape["detail"] = "specialised", _ran_specialised(dims, outputs)
        return entry
    checks = record.checks
    session.check_external(record, run, resized)
    shape["outcome"] = "mismatch" if session.divergence is not None else "match" if record.checks > checks else "error"
    return entry


def _ran_specialised(dims: list[DynamicDim], outputs: Any) -> str:
    """What a package did at a size of a dim the export specialised: it ran, unrefused."""
    shapes = [list(v.shape) for v in pytree.tree_leaves(outputs) if isinstance(v, torch.Tensor)]
    return (f"the package ran there without an error (outputs {shapes}): it does not refuse a size its export "
            "specialised away; its values there are not checked (no reference holds that size)")


def package_loaded(session: Any, path: Any, model: Any) -> Any:
    """``aoti_load_package(path)``: a package this process compiled was checked when it was
    compiled, and its calls are checked from here on (:func:`package_called`); any other is named
    as not checked."""
    if session.busy or session.settings.level is Level.OFF:
        return model
    made = next(((record, exported) for made, record, exported in session.aoti_records if _same(made, path)), None)
    if made is not None:
        session.aoti_loaded.append(LoadedPackage(model, *made))
    if _compiled_here(session, path):
        return model
    record = session.add_graph(fx.GraphModule(torch.nn.Module(), fx.Graph()), f"{BACKEND} (loaded)", None)
    record.outcome = "not_checked"
    record.notes.append(loaded_elsewhere(_where(path)))
    return model


def library_made(session: Any, graph_module: Any, result: Any) -> None:
    """A direct ``torch._inductor.aot_compile``: named as not checked."""
    if session.busy or session.settings.level is Level.OFF:
        return
    record = session.add_graph(fx.GraphModule(torch.nn.Module(), fx.Graph()), f"{BACKEND} (aot_compile)", None)
    record.outcome = "not_checked"
    record.notes.append(library_not_checked(result))


def _where(path: Any) -> str:
    """A package's path, or what it was written to (a buffer)."""
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else f"a {type(path).__name__} buffer"


def package_called(session: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                   call: Callable[..., Any]) -> Any:
    """A call of a loaded package: for one this process compiled, the checked calls (the first, every
    N-th on request) are checked on the program's own inputs, on copies, before the real call.
    The program's own call runs outside the tool's guard: its errors are its own."""
    loaded = next((p for p in session.aoti_loaded if p.model is model), None)
    if loaded is not None and not session.busy and session.divergence is None:
        loaded.calls += 1
        if session.settings.checks_call(loaded.calls):
            _check_call(session, loaded, args, kwargs, call)
    return call(model, *args, **kwargs)


def _check_call(session: Any, loaded: LoadedPackage, args: tuple[Any, ...], kwargs: dict[str, Any],
                call: Callable[..., Any]) -> None:
    try:
        inputs = flat_inputs(loaded.exported, args, kwargs)
    except Exception as error:  # noqa: BLE001 - inputs the export's spec does not take: the package will say so
        log.debug("a call of the AOTInductor package not checked: %s", error)
        return
    spec = loaded.exported.call_spec.in_spec

    def run(values: list[Any]) -> Any:
        call_args, call_kwargs = pytree.tree_unflatten(list(values), spec)
        return flat_values(call(loaded.model, *call_args, **call_kwargs))

    session.check_external(loaded.record, run, inputs)


def _same(made: Any, path: Any) -> bool:
    def key(value: Any) -> Any:
        return os.path.realpath(os.fspath(value)) if isinstance(value, (str, os.PathLike)) else id(value)

    return bool(key(made) == key(path))


def _compiled_here(session: Any, path: Any) -> bool:
    return any(_same(made, path) for made in session.aoti_packages)


def _said(dim: dict[str, Any]) -> str:
    """A dim as the user named it (``batch (s77)``), else its symbol; one the export specialised, so."""
    if dim.get("specialised"):
        return f"input {dim['input']} dim {dim['dim']} (marked dynamic; the export specialised it to {dim['size']})"
    return f"{dim['name']} ({dim['symbol']})" if dim.get("name") else str(dim["symbol"])


def _sizes(entry: dict[str, Any]) -> str:
    """The second sizes by the names the user knows them by (``batch=6``)."""
    names = {d["symbol"]: d.get("name") or (f"input {d['input']} dim {d['dim']}" if d.get("specialised") else d["symbol"])
             for d in entry["dynamic_dims"]}
    return ", ".join(f"{names.get(symbol, symbol)}={size}" for symbol, size in entry["second_shape"]["sizes"].items())


def summary_lines(report: dict[str, Any]) -> list[str]:
    """Summary lines: the second-size check of each package whose export declared a dynamic dim."""
    lines = []
    for entry in report.get("exported") or []:
        shape = entry["second_shape"]
        lines.append(f"  exported: {entry['graph']} dynamic dim(s) {', '.join(_said(d) for d in entry['dynamic_dims'])}"
                     f" at {_sizes(entry) or 'no second size'}: {shape['outcome']}" + (f" ({shape['detail']})" if shape["detail"] else ""))
    return lines
