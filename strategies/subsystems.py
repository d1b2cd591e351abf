"""Which part of Inductor makes a culprit diverge: passes, decompositions, config, lowerings.

Only the culprit's subgraph is recompiled, once per candidate, judged by the same oracle as
everything else: a candidate *fixes* the culprit when the subgraph compiled with that subsystem
disabled matches eager. The subsystems are data: :data:`PASSES` and :data:`CONFIG_FLIPS` are
tables (adding one is a line), decompositions and lowerings are enumerated from the subgraph.
Order: user passes and pattern passes, decompositions, config flips, then lowerings (the broadest
hammer: falling back to the aten kernel).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ..compare import Outcome
from ..graphs import Subgraph, reference_inputs
from ..inductor_adapter import default_decompositions, is_lowered
from ..oracle import GraphContext
from ..runner import Compiler
from ..search import ddmin

Kind = Literal["decomposition", "lowering", "pass", "config"]


@dataclass(frozen=True)
class Switch:
    """One way to disable a subsystem: a config patch, and the workaround to show the user."""

    kind: Kind
    name: str
    patch: dict[str, Any]


# Graph passes Inductor runs on aten graphs; user-registered ones are tried only when set.
PASSES = (
    Switch("pass", "post_grad_custom_post_pass", {"post_grad_custom_post_pass": None}),
    Switch("pass", "post_grad_custom_pre_pass", {"post_grad_custom_pre_pass": None}),
    Switch("pass", "joint_custom_post_pass", {"joint_custom_post_pass": None}),
    Switch("pass", "joint_custom_pre_pass", {"joint_custom_pre_pass": None}),
    Switch("pass", "pattern_matcher", {"pattern_matcher": False}),
)
# Passes that only run on the torch-level (Dynamo) graph: tried on the whole model.
MODEL_PASSES = (
    Switch("pass", "pre_grad_custom_pass", {"pre_grad_custom_pass": None}),
    Switch("pass", "pre_grad_passes", {"use_pre_grad_passes": False}),
)
# Known suspects, each flipped to its safe value.
CONFIG_FLIPS = (
    Switch("config", "fallback_random", {"fallback_random": True}),
    Switch("config", "emulate_precision_casts", {"emulate_precision_casts": True}),
    Switch("config", "cpp.simdlen", {"cpp.simdlen": 1}),  # no vectorisation
    Switch("config", "split_reductions", {"split_reductions": False}),
    Switch("config", "max_fusion_size", {"max_fusion_size": 1}),  # no fusion
)

# A build setting, not codegen: scalar kernels (cpp.simdlen=1) include the C++ prefix header
# without vector ISA macros, so Inductor would first build a precompiled header just for them
# (about 5 s on a 2-core machine) to compile the one small kernel of a culprit subgraph (about
# 2 s without one). The same source and flags make the same kernel either way.
SCALAR_BUILD = {"cpp_cache_precompile_headers": False}


@dataclass(frozen=True)
class Attribution:
    kind: Kind
    name: str
    workaround: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "workaround": self.workaround}


def _is_set(switch: Switch) -> bool:
    import torch._inductor.config as inductor_config

    if switch.name.startswith(("post_grad_custom", "joint_custom", "pre_grad_custom")):
        return getattr(inductor_config, switch.name) is not None
    return True


def config_workaround(patch: dict[str, Any]) -> str:
    lines = [f"torch._inductor.config.{key} = {value!r}" for key, value in patch.items()]
    return "import torch._inductor.config\n" + "\n".join(lines)


def applied_decompositions(subgraph: Subgraph, inputs: list[Any]) -> list[Any]:
    """The entries of Inductor's decomposition table that fire while tracing the subgraph."""
    table = default_decompositions()
    fired: list[Any] = []

    def recording(op: Any, decomposition: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            if op not in fired:
                fired.append(op)
            return decomposition(*args, **kwargs)
        return run

    wrapped = {op: recording(op, fn) for op, fn in table.items()}
    make_fx(subgraph.graph_module, decomposition_table=wrapped, tracing_mode="fake")(*inputs)
    return fired


class SubsystemSearch:
    """Tries subsystem switches on one culprit subgraph; counts on the shared compiler."""

    def __init__(self, context: GraphContext, subgraph: Subgraph, compiler: Compiler):
        self.context = context
        self.subgraph = subgraph
        self.compiler = compiler
        self.inputs = reference_inputs(subgraph, context.eager_values)

    def fixed(self, *, patch: dict[str, Any] | None = None, without: Iterable[Any] = (),
              fallbacks: tuple[Any, ...] = ()) -> bool:
        return self.outcome(patch=patch, without=without, fallbacks=fallbacks) is Outcome.MATCH

    def outcome(self, *, patch: dict[str, Any] | None = None, without: Iterable[Any] = (),
                fallbacks: tuple[Any, ...] = ()) -> Outcome:
        decompositions = None
        removed = set(without) | set(fallbacks)
        if removed:
            decompositions = {op: fn for op, fn in default_decompositions().items() if op not in removed}
        # An op left with neither a decomposition nor a lowering falls back to aten; say so
        # explicitly, as Inductor's implicit fallback refuses ops with a decomposition when CI is set.
        unlowered = tuple(op for op in without if not is_lowered(op))
        if patch and "cpp.simdlen" in patch:
            patch = {**patch, **SCALAR_BUILD}
        verdict = self.context.judge(self.subgraph, self.compiler, label=f"{self.context.name}:subsystem",
                                     config_patches=patch, decompositions=decompositions,
                                     fallbacks=tuple(dict.fromkeys((*fallbacks, *unlowered))))
        return verdict.outcome

    def first_fixing_switch(self, switches: Iterable[Switch]) -> Switch | None:
        candidates = [s for s in switches if _is_set(s)]
        return next((s for s in candidates if self.fixed(patch=s.patch)), None)

    def decomposition(self) -> Attribution | None:
        """Remove every entry that fires at once (one compile when none is to blame), then
        narrow with ddmin; if removing them all cannot compile, try them one at a time."""
        entries = applied_decompositions(self.subgraph, self.inputs)
        if not entries:
            return None
        together = self.outcome(without=entries)
        if together is Outcome.MATCH:
            culprits = entries if len(entries) == 1 else ddmin(entries, lambda subset: self.fixed(without=subset))
        elif together is Outcome.CRASH:
            culprits = next(([entry] for entry in entries if self.fixed(without=[entry])), [])
        else:
            return None
        if not culprits:
            return None
        names = ", ".join(str(op) for op in culprits)
        drop = "\n".join(f"    table.pop(torch.ops.{op}, None)" for op in culprits)
        return Attribution("decomposition", names, _decomposition_workaround(drop))

    def lowering(self) -> Attribution | None:
        ops = [node.target for node in self.subgraph.graph_module.graph.nodes
               if node.op == "call_function" and is_lowered(node.target)]
        ops = list(dict.fromkeys(ops))
        if not ops or not self.fixed(fallbacks=tuple(ops)):
            return None
        culprits = ops if len(ops) == 1 else ddmin(ops, lambda subset: self.fixed(fallbacks=tuple(subset)))
        lines = "\n".join(f"make_fallback(torch.ops.{op}, warn=False, override_decomp=True)" for op in culprits)
        return Attribution("lowering", ", ".join(str(op) for op in culprits),
                           "from torch._inductor.lowering import make_fallback\n" + lines)

    def config(self) -> Attribution | None:
        """All flips at once first (one compile when none helps), then one at a time."""
        combined: dict[str, Any] = {k: v for s in CONFIG_FLIPS for k, v in s.patch.items()}
        if self.outcome(patch=combined) is Outcome.MISMATCH:
            return None
        switch = self.first_fixing_switch(CONFIG_FLIPS)
        return Attribution("config", switch.name, config_workaround(switch.patch)) if switch else None


def _decomposition_workaround(drop: str) -> str:
    return (
        "# Compile without the faulty decomposition(s): a custom backend passing a trimmed table.\n"
        "import torch\nfrom torch._inductor.compile_fx import compile_fx\n"
        "from torch._inductor.decomposition import select_decomp_table\n\n"
        "def inductor_without_bad_decomps(gm, example_inputs):\n"
        "    table = dict(select_decomp_table())\n"
        f"{drop}\n"
        "    return compile_fx(gm, example_inputs, decompositions=table)\n\n"
        "model = torch.compile(model, backend=inductor_without_bad_decomps)"
    )


def attribute(context: GraphContext, subgraph: Subgraph, compiler: Compiler,
              verified: bool = True) -> Attribution | None:
    """The first subsystem whose switch makes the culprit subgraph match eager, in table order.

    ``verified=False``: first check that the subgraph diverges with nothing switched off.
    """
    search = SubsystemSearch(context, subgraph, compiler)
    if not verified and search.outcome() is Outcome.MATCH:
        return None
    switch = search.first_fixing_switch(PASSES)
    if switch is not None:
        return Attribution(switch.kind, switch.name, config_workaround(switch.patch))
    return search.decomposition() or search.config() or search.lowering()


def attribute_model(spec: Any, compiler: Compiler, tolerance: Any, seed: int) -> Attribution | None:
    """For a divergence no captured graph shows (e.g. a pre-grad pass on the torch-level graph):
    recompile the whole model with each switch until it matches. Costs a full compile per try,
    as ``CompilerBisector`` does, but only for what the per-graph search cannot reach."""
    from ..model_check import check_model_level

    for switch in (*MODEL_PASSES, *PASSES, *CONFIG_FLIPS):
        if _is_set(switch) and check_model_level(spec, compiler, tolerance, seed, switch.patch) == "match":
            return Attribution(switch.kind, switch.name, config_workaround(switch.patch))
    return None
