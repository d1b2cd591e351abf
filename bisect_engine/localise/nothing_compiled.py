"""Nothing captured: why, and whether the user's own compile compiles anything after all.

Dynamo turns a backend's failure into a graph break (gb0219, "Backend compiler exception") and runs
the frame eagerly. When every graph our capture backend was handed failed that way, "torch.compile
compiled nothing" holds only if the user's own compile fails the same (2.13: ``while_loop`` under
autograd, for Inductor and for AOT alike): the user's compile is run once to tell. One that does
compile where our capture failed is our harness, never the user's problem (an internal error,
exit 3, naming it).
"""
from __future__ import annotations

from ..search import stop_if_out_of_memory
from ..load.capture import nothing_captured
from ..load.model_file import ModelSpec
from ..verdict.compiler import Compiler
from ..verdict.judgement import Oracle
from .model_check import check_model_level

BACKEND_FAILURE = "Backend compiler exception"


class CaptureFailed(RuntimeError):
    """Our capture backend failed on graphs the user's own torch.compile compiles (the harness)."""


def backend_failures() -> list[str]:
    """The explanations of the backend failures Dynamo turned into graph breaks in this process."""
    from torch._dynamo.utils import counters

    found = []
    for reason in counters.get("unimplemented", {}):
        if BACKEND_FAILURE in reason:
            lines = [line.strip() for line in reason.splitlines() if line.strip().startswith("Explanation:")]
            explanation = lines[0].removeprefix("Explanation:").strip() if lines else reason.splitlines()[0]
            cause = explanation.split(" failed with ", 1)[-1].split(". Adding a graph break", 1)[0]
            found.append(f"it failed with {cause}")
    return list(dict.fromkeys(found))


def why_nothing_compiled(spec: ModelSpec, seed: int) -> str:
    """:func:`nothing_captured`'s message; when backends failed, with what the user's compile does."""
    message = nothing_captured(spec.model)
    failures = backend_failures()
    if not failures:
        return message
    compiler = Compiler()
    try:
        check_model_level(spec, compiler, Oracle(), seed)
    except Exception as error:  # noqa: BLE001 - said, not raised: nothing was compiled by us either
        stop_if_out_of_memory(error, "in the model-level check")
        return f"{message}. Dynamo's graph break: {failures[0]}; the user's own torch.compile raised ({type(error).__name__}: {str(error)[:200]})"
    if compiler.compiles:
        raise CaptureFailed(f"harness: our capture backend failed on every graph ({failures[0]}) where the user's own "
                            f"torch.compile compiles ({compiler.compiles} Inductor compile(s)): nothing was judged")
    return (f"torch.compile compiled nothing: every graph Dynamo traced made the backend fail ({failures[0]}; a graph "
            "break, gb0219), and the user's own torch.compile does the same (checked: it compiled nothing), so the "
            "model runs eagerly: nothing to compare")
