"""The model-file contract of ``bisect-accuracy run MODEL.py``.

Required: ``get_model()`` (an ``nn.Module`` or callable) and ``get_inputs()`` (a tuple of
positional arguments, a dict of keyword arguments, or an ``(args, kwargs)`` pair). Optional: ``loss_fn(output)`` returning a scalar (gradients are compared
too), ``get_batches()`` (an iterable of input tuples: the batches are scanned), and
``get_optimizer(parameters)`` (with ``get_batches`` and ``loss_fn``: training steps are scanned). Every failure is a :class:`UsageError`
naming the file and the function.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from ..errors import ModelError, UsageError
from .contract import defines_model_contract, split_inputs
from ..verdict.inductor_adapter import nondefault_inductor_config

REQUIRED = ("get_model", "get_inputs")


@dataclass
class ModelSpec:
    """What a model file provides, already called: the model and its inputs."""

    path: Path
    model: Callable[..., Any]
    inputs: tuple[Any, ...]
    loss_fn: Callable[[Any], Any] | None
    get_batches: Callable[[], Any] | None
    # The Inductor config the user's code set, read right after import, before we patch anything.
    inductor_config: dict[str, Any] = field(default_factory=dict)
    unrenderable_config: list[str] = field(default_factory=list)
    get_optimizer: Callable[..., Any] | None = None
    # get_model() returned an already torch.compile'd model: ``model`` is what it wraps (eager),
    # ``compiled`` the user's compiled object and ``backend`` its backend's name.
    compiled: Callable[..., Any] | None = None
    backend: str | None = None
    # the ``dynamic=`` that compiled object was given (None: Dynamo's default, automatic dynamic)
    dynamic: bool | None = None
    # the Inductor config its ``mode=`` / ``options=`` stand for (mode="max-autotune":
    # {"max_autotune": True, ...}); every compile of ours runs under it (see api.bisect_file)
    compile_options: dict[str, Any] = field(default_factory=dict)
    # the graph was compiled by the user as an AOTInductor package (torch.export +
    # aoti_compile_and_package, script mode): the repro compiles its cut the same way
    aot_inductor: bool = False
    # the ExportedProgram get_model() returned: the model-level check runs it as the package the
    # user ships (aoti_compile_and_package), not through torch.compile (None: not exported, or moved
    # with --device, where the program stays on its own device)
    exported_program: Any = None
    # what the model's own step adds at its peak (activations, gradients, temporaries), in bytes,
    # from a run of it on fake tensors at admission (``load/memory.eager_step_bytes``; None: not known)
    step_bytes: int | None = None

    @property
    def custom_backend(self) -> bool:
        """Compiled by the user with a backend other than Inductor's own entry point."""
        return self.compiled is not None and self.backend != "inductor"


def load_module(path: Path) -> ModuleType:
    """Import a file as a module, its folder first on ``sys.path`` only while importing."""
    if not path.is_file():
        raise UsageError(f"no such model file: {path}")
    spec = importlib.util.spec_from_file_location(f"_bisect_model_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    # Registered as an imported module is: Dynamo (torch.cond and flex attention compile their
    # branches when run eagerly) and dataclasses look the file's functions up by module name.
    sys.modules[spec.name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except SystemExit as exit:
        raise ModelError(f"importing {path.name} called sys.exit({exit.code!r}): a model file must not end the "
                         "process (put script code under `if __name__ == \"__main__\":`)") from None
    except Exception as error:
        raise ModelError(f"importing {path.name} raised {type(error).__name__}: {error}") from error
    finally:
        with contextlib.suppress(ValueError):  # the file may have edited sys.path itself
            sys.path.remove(str(path.parent))
    return module


def is_model_file(module: ModuleType) -> bool:
    return any(hasattr(module, name) for name in REQUIRED)


def load_model_spec(path: str | os.PathLike[str], device: str | None = None) -> ModelSpec:
    """Import a model file and call its functions; ``device``: move the model, its inputs and
    its batches there (``--device cuda`` on a file written for the CPU)."""
    path = Path(path).resolve()
    target = _device(device) if device else None
    if path.is_file() and not defines_model_contract(path):
        raise UsageError(
            f"{path.name} defines neither get_model() nor get_inputs(): it is a plain script. "
            f"Run it in script mode: `bisect-accuracy run {path.name} [ARGS...]` "
            "(or bisect_engine.script.runner.run_script; see README)."
        )
    module = load_module(path)
    config, unrenderable = nondefault_inductor_config()
    if not is_model_file(module):
        raise UsageError(f"{path.name} defines neither get_model() nor get_inputs() (see README)")
    for name in REQUIRED:
        if not callable(getattr(module, name, None)):
            raise UsageError(f"{path.name} must define {name}() (see README: model file contract)")
    returned = _call(path, module.get_model, "get_model")
    model = exported_module(returned)
    exported = model is not returned  # an ExportedProgram: the finding's repro compiles through AOTInductor
    if not callable(model):
        raise UsageError(f"{path.name}: get_model() returned {type(model).__name__}, not a module or callable")
    args, kwargs = split_inputs(_call(path, module.get_inputs, "get_inputs"), f"{path.name}: get_inputs()")
    inputs = (*args, *kwargs.values())  # keyword arguments travel positionally (see KeywordInputs)
    loss_fn = getattr(module, "loss_fn", None)
    get_batches = getattr(module, "get_batches", None)
    get_optimizer = getattr(module, "get_optimizer", None)
    if target is not None:
        model, inputs = _moved(path, model, target), to_device(inputs, target)
        if callable(get_batches):
            get_batches = _batches_on(get_batches, target)
    get_batches = get_batches if callable(get_batches) else None
    if kwargs and get_batches is not None:
        get_batches = _keyword_batches(path, get_batches, tuple(kwargs))
    return _spec(path, model, inputs, (config, unrenderable), loss_fn if callable(loss_fn) else None, get_batches,
                 get_optimizer if callable(get_optimizer) else None, keywords=(len(args), kwargs),
                 exported_program=returned if exported and target is None else None, aot_inductor=exported)


def _spec(path: Path, model: Any, inputs: tuple[Any, ...], user_config: tuple[dict[str, Any], list[str]],
          loss_fn: Callable[[Any], Any] | None, get_batches: Callable[[], Any] | None,
          get_optimizer: Callable[..., Any] | None, *, keywords: tuple[int, dict[str, Any]] = (0, {}),
          exported_program: Any = None, aot_inductor: bool = False) -> ModelSpec:
    """The spec of a model and its flat inputs, read the one way both entries share: a compiled
    model unwrapped with its backend, mode and ``dynamic=``; keyword inputs (``keywords``: how many
    positional ones, then the keyword ones) taken positionally; the compile's literal options added
    to the user's Inductor config (the repro's too), the others named as unrenderable."""
    original, compiled, backend = unwrap_compiled(model)
    options = compiled_options(compiled)
    positional, kwargs = keywords
    if kwargs:
        original, compiled = keyword_inputs(original, positional, kwargs), keyword_inputs(compiled, positional, kwargs)
    config, unrenderable = user_config
    config = {**config, **{k: v for k, v in options.items() if _literal(v)}}
    unrenderable = [*unrenderable, *(k for k, v in options.items() if not _literal(v) and k not in unrenderable)]
    return ModelSpec(path, original, inputs, loss_fn, get_batches, config, unrenderable, get_optimizer, compiled,
                     backend, compiled_dynamic(compiled), options, aot_inductor=aot_inductor,
                     exported_program=exported_program)


def exported_module(model: Any) -> Any:
    """A ``torch.export.ExportedProgram`` (what AOTInductor packages) is checked as its graph module
    (``ExportedProgram.module()``): eager, fp64 and Inductor per node on the exported graph; the
    finding's repro compiles through AOTInductor (``ModelSpec.aot_inductor``)."""
    import torch.export

    return model.module() if isinstance(model, torch.export.ExportedProgram) else model


def compiled_dynamic(compiled: Any) -> bool | None:
    """The ``dynamic=`` argument of the user's ``torch.compile`` (True: every size symbolic from
    the first compile), so our capture and model check compile with the same dynamism."""
    dynamic = getattr(_compile_context(compiled), "_dynamic", None) if compiled is not None else None
    return dynamic if isinstance(dynamic, bool) else None


def _literal(value: Any) -> bool:
    """Renderable as Python source (the repro writes the config as a literal)."""
    import ast

    try:
        return bool(ast.literal_eval(repr(value)) == value)
    except (ValueError, SyntaxError):
        return False


def compiled_options(compiled: Any) -> dict[str, Any]:
    """The Inductor config the user's ``torch.compile(mode=..., options=...)`` stands for, as
    Inductor's wrapper holds it (``mode="max-autotune"``: ``max_autotune``,
    ``coordinate_descent_tuning``, ``triton.cudagraphs``; ``options=``: as given); {} for the
    default mode, another backend or no compile. ``fullgraph=`` is not among them: it only turns
    graph breaks into errors, so a compile that ran gives the same graphs without it."""
    import torch

    seen = getattr(_compile_context(compiled), "callback", None) if compiled is not None else None
    for _ in range(8):
        if isinstance(seen, torch._TorchCompileInductorWrapper):
            config = getattr(seen, "config", None)
            return {str(k): v for k, v in config.items()} if isinstance(config, dict) else {}
        inner = getattr(seen, "_torchdynamo_orig_backend", None)
        if inner is None or inner is seen:
            break
        seen = inner
    return {}


def user_backend(compiled: Any) -> Callable[..., Any] | None:
    """The backend object the user gave ``torch.compile`` (their own class or function), or None
    for a registered backend ("inductor", "eager", ...) or when it cannot be found."""
    seen = getattr(_compile_context(compiled), "callback", None)
    for _ in range(8):
        inner = getattr(seen, "_torchdynamo_orig_backend", None)
        if inner is None or inner is seen:
            break
        seen = inner
    name = getattr(seen, "compiler_name", None)
    if seen is None or not callable(seen) or (isinstance(name, str) and not name.startswith("<")):
        return None  # a registered backend ("inductor", "eager", ...), not the user's own
    return seen  # torch.compile's wrapper of the user's backend: it passes the user's options too


def unwrap_compiled(model: Any) -> tuple[Any, Any, str | None]:
    """``(eager model, the user's compiled object or None, its backend's name)`` for what
    ``get_model()`` returned. Dynamo unwraps nested compiles, so our capture sees the same graphs
    either way; but calling the compiled object is *not* eager, and its backend may be the user's."""
    from torch._dynamo.eval_frame import OptimizedModule, innermost_fn

    original: Any
    if isinstance(model, OptimizedModule):
        original = model._orig_mod
    elif getattr(model, "_torchdynamo_orig_callable", None) is not None:
        original = innermost_fn(model)
    else:
        return model, None, None
    return original, model, _backend_name(getattr(_compile_context(model), "callback", None))


def _compile_context(compiled: Any) -> Any:
    """The Dynamo context of a ``torch.compile``d module or function (its backend callback, its
    ``dynamic=``), or None."""
    from torch._dynamo.eval_frame import OptimizedModule

    if isinstance(compiled, OptimizedModule):
        return getattr(compiled, "dynamo_ctx", None)
    cells = [c.cell_contents for c in (getattr(compiled, "__closure__", None) or ()) if _filled(c)]
    return next((c for c in cells if hasattr(c, "callback")), None)


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _backend_name(callback: Any) -> str | None:
    """The name torch.compile was given as ``backend=`` ("inductor", "eager", a class name)."""
    seen = callback
    for _ in range(8):
        inner = getattr(seen, "_torchdynamo_orig_backend", None)
        if inner is None or inner is seen:
            break
        seen = inner
    name = getattr(seen, "compiler_name", None)
    if isinstance(name, str) and not name.startswith("<"):  # "inductor", "eager", a registered name
        return name
    name = getattr(seen, "compiler_fn", None) or seen
    if name is None:
        return None
    if isinstance(name, type) or not hasattr(name, "__name__"):  # a backend object: its class
        name = name if isinstance(name, type) else type(name)
    return str(name.__name__)


def keyword_inputs(model: Any, positional: int, kwargs: dict[str, Any]) -> Any:
    """``model`` taking ``get_inputs()``'s keyword arguments positionally, after its positional
    ones, so every candidate, capture and repro calls it with one flat tuple (None stays None)."""
    import torch

    if model is None:
        return None

    class KeywordInputs(torch.nn.Module):
        """Calls the model with its last inputs as the keyword arguments named ``names``."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model  # an nn.Module is registered (its parameters and buffers stay the model's)
            self.positional, self.names = positional, tuple(kwargs)

        def forward(self, *inputs: Any) -> Any:
            keywords = dict(zip(self.names, inputs[self.positional:]))
            return self.model(*inputs[:self.positional], **keywords)

    return KeywordInputs()


def _keyword_batches(path: Path, get_batches: Callable[[], Any], names: tuple[str, ...]) -> Callable[[], Any]:
    """Each batch in ``get_inputs()``'s form, flattened as its inputs are (the same keyword names)."""
    def flat() -> list[Any]:
        batches = []
        for batch in get_batches():
            args, kwargs = split_inputs(batch, f"{path.name}: get_batches()")
            if tuple(kwargs) != names:
                raise UsageError(f"{path.name}: get_batches() gave keyword arguments {sorted(kwargs)}; "
                                 f"get_inputs() gave {list(names)}")
            batches.append((*args, *kwargs.values()))
        return batches
    return flat


def _call(path: Path, function: Callable[[], Any], name: str) -> Any:
    try:
        return function()
    except SystemExit as exit:
        raise ModelError(f"{path.name}: {name}() called sys.exit({exit.code!r})") from None
    except Exception as error:
        raise ModelError(f"{path.name}: {name}() raised {type(error).__name__}: {error}") from error


def _device(name: str) -> Any:
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as error:
        raise UsageError(f"--device {name}: not a torch device ({error})") from error
    backend = getattr(torch, device.type, None)
    if device.type != "cpu" and not (backend is not None and hasattr(backend, "is_available") and backend.is_available()):
        raise UsageError(f"--device {name}: no {device.type} device is available here "
                         f"(torch.{device.type}.is_available() is False)")
    return device


def to_device(value: Any, device: Any) -> Any:
    """Every tensor in a (nested) container moved to ``device``; anything else as it is."""
    import torch
    import torch.utils._pytree as pytree

    return pytree.tree_map_only(torch.Tensor, lambda tensor: tensor.to(device), value)


def _moved(path: Path, model: Any, device: Any) -> Any:
    import torch

    if not isinstance(model, torch.nn.Module):
        return model  # a plain function: its inputs move, whatever it closes over does not
    try:
        return model.to(device)
    except Exception as error:
        raise ModelError(f"{path.name}: moving the model to {device} raised {type(error).__name__}: {error}") from error


def _batches_on(get_batches: Callable[[], Any], device: Any) -> Callable[[], Any]:
    return lambda: to_device(list(get_batches()), device)


def spec_of_objects(path: Path, returned: Any, inputs: tuple[Any, ...],
                    loss_fn: Callable[[Any], Any] | None) -> ModelSpec:
    """The spec of live objects (``bisect_engine.check``): what :func:`load_model_spec` gives for a
    file whose ``get_model()`` returns ``returned`` and ``get_inputs()`` ``inputs``, read the same
    way (the Inductor config set now, a compiled model unwrapped with its backend, mode and
    ``dynamic=``, an ``ExportedProgram`` as its module). ``path``: where the model's code lives."""
    config, unrenderable = nondefault_inductor_config()
    model = exported_module(returned)
    exported = model is not returned
    if not callable(model):
        raise UsageError(f"the model is a {type(model).__name__}, not a module or callable")
    return _spec(path, model, inputs, (config, unrenderable), loss_fn, None, None,
                 exported_program=returned if exported else None, aot_inductor=exported)
