"""Which part of Inductor makes a culprit diverge: passes, decompositions, config, lowerings.

Only proposes: each try is a :class:`~bisect_engine.verdict.candidate.GraphCandidate` of the
culprit's nodes under a :class:`~bisect_engine.verdict.candidate.Switch` (or, for divergences no
captured graph shows, a :class:`~bisect_engine.verdict.candidate.ModelCandidate`), judged by the
one search object: a switch *fixes* the culprit when the candidate then matches eager. The
subsystems are data: :data:`PASSES`, :data:`MODEL_PASSES` and :data:`CONFIG_FLIPS` are tables
(adding one is a line); decompositions and lowerings are enumerated from the subgraph. Order: user
passes and pattern passes, decompositions, config flips, then lowerings (the broadest hammer:
falling back to the aten kernel).
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ..search import ddmin, stop_if_out_of_memory
from ..verdict.candidate import GraphCandidate, ModelCandidate, Switch
from ..verdict.compare import Outcome
from ..verdict.compiler import split_patches
from ..verdict.judgement import GRAPH, judge_outputs
from ..verdict.fx_eval import run_graph
from ..verdict.graphs import Subgraph, reference_inputs
from ..verdict.inductor_adapter import default_decompositions, is_lowered
from ..verdict.oracle import GraphContext
from .nodes import crash_key
from .protocol import GraphSearch

log = logging.getLogger(__name__)

Kind = Literal["decomposition", "lowering", "pass", "config"]

# Graph passes Inductor runs on aten graphs; user-registered ones are tried only when set.
PASSES = (
    Switch.config("pass", "post_grad_custom_post_pass", {"post_grad_custom_post_pass": None}),
    Switch.config("pass", "post_grad_custom_pre_pass", {"post_grad_custom_pre_pass": None}),
    Switch.config("pass", "joint_custom_post_pass", {"joint_custom_post_pass": None}),
    Switch.config("pass", "joint_custom_pre_pass", {"joint_custom_pre_pass": None}),
    Switch.config("pass", "pattern_matcher", {"pattern_matcher": False}),
)
# Passes that only run on the torch-level (Dynamo) graph: tried on the whole model.
MODEL_PASSES = (
    Switch.config("pass", "pre_grad_custom_pass", {"pre_grad_custom_pass": None}),
    Switch.config("pass", "pre_grad_passes", {"use_pre_grad_passes": False}),
)
# Known suspects, each flipped to its safe value.
CONFIG_FLIPS = (
    Switch.config("config", "fallback_random", {"fallback_random": True}),
    Switch.config("config", "emulate_precision_casts", {"emulate_precision_casts": True}),
    Switch.config("config", "cpp.simdlen", {"cpp.simdlen": 1}),  # no vectorisation
    Switch.config("config", "split_reductions", {"split_reductions": False}),
    Switch.config("config", "max_fusion_size", {"max_fusion_size": 1}),  # no fusion
    # max-autotune's GEMM templates (C++ on CPU, Triton on GPU) off: ATen's GEMM only
    Switch.config("config", "max_autotune_gemm_backends", {"max_autotune_gemm_backends": "ATEN"}),
)
# Flips of AOT Autograd's config: they matter only where AOT Autograd partitions a joint graph, so
# only in the model-level check (a captured graph is compiled as the forward or backward alone).
MODEL_FLIPS = (
    Switch.config("config", "functorch.donated_buffer", {"functorch.donated_buffer": False}),
)
# What a flip that fixes it says about the compiler, beyond "flipping it matches eager".
CONFIG_NOTES = {
    "functorch.donated_buffer": "the compiled backward overwrites a value it still reads: AOT Autograd's donated "
                                "buffers (saved tensors whose memory the backward reuses) are wrong here; without "
                                "them the model matches (a known case: a control-flow HOP's subgraph inheriting "
                                "the outer graph's donated-buffer indices, pytorch#153679)",
    "max_autotune_gemm_backends": "the C++/Triton GEMM template max-autotune chose is wrong; the ATen GEMM "
                                  "fallback is right (workaround: max_autotune_gemm_backends='ATEN')",
}


@dataclass(frozen=True)
class Attribution:
    kind: Kind
    name: str
    workaround: str
    note: str = ""  # what the switch shows and does not show (e.g. a decomposition that only avoids the bug)

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "workaround": self.workaround,
                **({"note": self.note} if self.note else {})}


def _is_set(switch: Switch) -> bool:
    import torch._inductor.config as inductor_config

    if switch.name.startswith(("post_grad_custom", "joint_custom", "pre_grad_custom")):
        return getattr(inductor_config, switch.name) is not None
    if switch.name == "max_autotune_gemm_backends":  # only templates max-autotune tunes can be wrong there
        return bool(inductor_config.max_autotune or inductor_config.max_autotune_gemm)
    return True


def config_workaround(patch: dict[str, Any]) -> str:
    inductor, functorch = split_patches(patch)
    imports = [f"import torch.{module}.config" for module, keys in (("_inductor", inductor), ("_functorch", functorch)) if keys]
    lines = [f"torch._inductor.config.{key} = {value!r}" for key, value in inductor.items()]
    lines += [f"torch._functorch.config.{key} = {value!r}" for key, value in functorch.items()]
    return "\n".join(imports + lines)


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
    """Proposes subsystem switches on one culprit's nodes to the run's search object."""

    def __init__(self, context: GraphContext, nodes: Iterable[str], search: GraphSearch):
        self.context = context
        self.nodes = frozenset(nodes)
        self.search = search
        self.subgraph = context.subgraph(sorted(self.nodes, key=context.view.position.__getitem__))

    def candidate(self, switch: Switch = Switch()) -> GraphCandidate:
        return GraphCandidate(self.context.name, self.nodes, switch=switch, purpose=f"subsystem {switch.name}")

    def outcome(self, switch: Switch = Switch()) -> Outcome:
        return self.search.judge(self.candidate(switch)).outcome

    def fixed(self, switch: Switch) -> bool:
        return self.outcome(switch) is Outcome.MATCH

    def first_fixing_switch(self, switches: Iterable[Switch]) -> Switch | None:
        """The first switch in table order that fixes it (the set ones judged ahead together)."""
        return self.first_fixing([s for s in switches if _is_set(s)])

    def first_fixing(self, switches: Sequence[Switch]) -> Switch | None:
        """The first of ``switches``, in order, that fixes it (judged ahead together with workers)."""
        candidates = [self.candidate(s) for s in switches]
        found = self.search.first(candidates, lambda verdict: verdict.outcome is Outcome.MATCH)
        return next(s for s, c in zip(switches, candidates) if c is found[0]) if found is not None else None

    def heads(self, verified: bool) -> list[Switch]:
        """The first switch each stage tries, in the order the stages run: independent of each
        other, so they can be judged ahead together (later ones are wasted when an earlier fixes it)."""
        entries = self.decomposition_entries
        ops = self.lowered_ops
        return [*(() if verified else (Switch(),)), *(s for s in PASSES if _is_set(s)),
                *((_without(entries),) if entries else ()), ALL_FLIPS, *((_fallback(ops),) if ops else ())]

    @functools.cached_property
    def decomposition_entries(self) -> tuple[Any, ...] | None:
        """The decomposition entries that fire while tracing the culprit (None: tracing failed)."""
        try:
            return tuple(applied_decompositions(self.subgraph, reference_inputs(self.subgraph, self.context.eager_values)))
        except Exception as error:  # our tracing failed: no decomposition can be named, say why
            stop_if_out_of_memory(error, "tracing the culprit's decompositions")
            log.warning("could not enumerate the decompositions of %s: %s: %s",
                        ", ".join(sorted(self.nodes)), type(error).__name__, error)
            return None

    @functools.cached_property
    def lowered_ops(self) -> tuple[Any, ...]:
        graph = self.subgraph.graph_module.graph
        ops = [node.target for node in graph.nodes if node.op == "call_function" and is_lowered(node.target)]
        return tuple(dict.fromkeys(ops))

    def decomposition(self) -> Attribution | None:
        """Remove every entry that fires at once (one compile when none is to blame), then
        narrow with ddmin; if removing them all cannot compile, try them one at a time."""
        entries = self.decomposition_entries
        if not entries:
            return None
        without = _without
        together = self.outcome(without(entries))
        if together is Outcome.MATCH:
            culprits = entries if len(entries) == 1 else ddmin(entries, lambda subset: self.fixed(without(subset)))
        elif together is Outcome.CRASH:
            alone = self.first_fixing([without([entry]) for entry in entries])
            culprits = tuple(alone.without) if alone is not None else ()
        else:
            return None
        if not culprits:
            return None
        names = ", ".join(str(op) for op in culprits)
        drop = "\n".join(f"    table.pop(torch.ops.{op}, None)" for op in culprits)
        found = Attribution("decomposition", names, _decomposition_workaround(drop))
        if not self.decomposition_is_right(culprits):
            return found
        # Removing the decomposition avoids the bug, but the decomposition itself computes right:
        # the fault is in how Inductor compiles an op it decomposes into (mish -> softplus -> log1p).
        beneath = self.lowering(decomposed=True)
        note = (f"the decomposition of {names} computes right when run eagerly; removing it only avoids "
                "a bug in the code Inductor generates for the ops it decomposes into")
        if beneath is not None:
            return Attribution("lowering", beneath.name, beneath.workaround,
                               note=f"reached through the decomposition of {names}, which is right; removing "
                                    "that decomposition also avoids it")
        return Attribution("decomposition", names, found.workaround, note=note)

    def decomposition_is_right(self, ops: Iterable[Any]) -> bool:
        """The culprit subgraph with ``ops`` decomposed, run eagerly, matches eager against fp64.
        Not for random ops: a fresh eager run draws other numbers, so values cannot tell."""
        if any(torch.Tag.nondeterministic_seeded in getattr(op, "tags", ()) for op in ops) or \
                set(self.context.view.random_names()) & self.nodes:
            return False
        table = default_decompositions()
        inputs = reference_inputs(self.subgraph, self.context.eager_values)
        try:
            decomposed = make_fx(self.subgraph.graph_module, decomposition_table={op: table[op] for op in ops if op in table},
                                 tracing_mode="real")(*inputs)
            values = run_graph(decomposed, inputs)
        except Exception as error:  # noqa: BLE001 - cannot tell: keep the decomposition as named
            stop_if_out_of_memory(error, "running a decomposition eagerly")
            log.warning("could not run the decomposition of %s eagerly: %s: %s", list(ops), type(error).__name__, error)
            return False
        eager = [self.context.eager_values[name] for name in self.subgraph.output_names]  # already computed
        # Judged as the compiled subgraph is: the run's reference, units and scale floors.
        oracle, names = self.context.oracle, self.subgraph.output_names
        fp64 = run_graph(self.subgraph.graph_module, inputs, upcast=True) if oracle.needs_fp64(GRAPH) else None
        verdicts = judge_outputs(oracle, GRAPH, eager, fp64, list(values), self.context.output_facts(names, eager, self.subgraph.graph_module))
        return len(verdicts) == len(eager) and all(v.outcome is Outcome.MATCH for v in verdicts)

    def lowering(self, decomposed: bool = False) -> Attribution | None:
        """Force aten fallbacks on the subgraph's lowered ops (``decomposed``: on those of its
        decomposed form, the ops Inductor lowers after its decompositions)."""
        ops = list(self.lowered_ops)
        if decomposed:
            try:
                graph = make_fx(self.subgraph.graph_module, decomposition_table=default_decompositions(),
                                tracing_mode="fake")(*reference_inputs(self.subgraph, self.context.eager_values)).graph
            except Exception as error:  # noqa: BLE001 - our tracing failed: nothing to name
                stop_if_out_of_memory(error, "decomposing the culprit")
                log.warning("could not decompose %s: %s: %s", sorted(self.nodes), type(error).__name__, error)
                return None
            ops = [node.target for node in graph.nodes if node.op == "call_function" and is_lowered(node.target)]
            ops = list(dict.fromkeys(ops))
        fallback = _fallback
        if not ops or not self.fixed(fallback(ops)):
            return None
        culprits = ops if len(ops) == 1 else ddmin(ops, lambda subset: self.fixed(fallback(subset)))
        lines = "\n".join(f"make_fallback(torch.ops.{op}, warn=False, override_decomp=True)" for op in culprits)
        return Attribution("lowering", ", ".join(str(op) for op in culprits),
                           "from torch._inductor.lowering import make_fallback\n" + lines)

    def config(self) -> Attribution | None:
        """All flips at once first (one compile when none helps: still wrong, or still raising the
        culprit's own error), then one at a time."""
        flipped = self.search.judge(self.candidate(ALL_FLIPS))
        if flipped.outcome is Outcome.MISMATCH:
            return None
        if flipped.outcome is Outcome.CRASH:
            # the verdict the culprit was confirmed with (cached: the confirm compile kept its code)
            own = self.search.judge(GraphCandidate(self.context.name, self.nodes, purpose="confirm", keep_code=True))
            if own.outcome is Outcome.CRASH and crash_key(own.error) == crash_key(flipped.error):
                return None
        switch = self.first_fixing_switch(CONFIG_FLIPS)
        return Attribution("config", switch.name, config_workaround(switch.patch_dict),
                           CONFIG_NOTES.get(switch.name, "")) if switch else None


ALL_FLIPS = Switch.config("config", "all flips", {k: v for s in CONFIG_FLIPS for k, v in s.patch})


def _without(ops: Iterable[Any]) -> Switch:
    ops = tuple(ops)
    return Switch("decomposition", ", ".join(map(str, ops)), without=frozenset(ops))


def _fallback(ops: Iterable[Any]) -> Switch:
    ops = tuple(ops)
    return Switch("lowering", ", ".join(map(str, ops)), fallbacks=frozenset(ops))


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


def attribute(context: GraphContext, nodes: Iterable[str], search: GraphSearch, verified: bool = True) -> Attribution | None:
    """The first subsystem whose switch makes the culprit's nodes match eager, in table order.

    ``verified=False``: first check that they diverge with nothing switched off.
    """
    subsystems = SubsystemSearch(context, nodes, search)
    if search.ahead is not None:  # workers: every stage's first try at once, adopted in stage order
        search.prefetch([subsystems.candidate(switch) for switch in subsystems.heads(verified)])
    try:
        if not verified and subsystems.outcome() is Outcome.MATCH:
            return None
        switch = subsystems.first_fixing_switch(PASSES)
        if switch is not None:
            return Attribution(switch.kind, switch.name, config_workaround(switch.patch_dict))  # type: ignore[arg-type]
        return subsystems.decomposition() or subsystems.config() or subsystems.lowering()
    finally:
        search.discard_ahead()


def attribute_model(search: GraphSearch) -> Attribution | None:
    """For a divergence no captured graph shows (e.g. a pre-grad pass on the torch-level graph):
    recompile the whole model with each switch until it matches. Costs a full compile per try,
    as ``CompilerBisector`` does, but only for what the per-graph search cannot reach."""
    for switch in (*MODEL_PASSES, *PASSES, *CONFIG_FLIPS, *MODEL_FLIPS):
        if _is_set(switch) and search.judge(ModelCandidate(switch)).outcome is Outcome.MATCH:
            return Attribution(switch.kind, switch.name, config_workaround(switch.patch_dict),  # type: ignore[arg-type]
                               CONFIG_NOTES.get(switch.name, ""))
    return None
