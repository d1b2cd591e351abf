"""Issue 37: exact rules where the program is exact. The sign of a zero: -0.0 and +0.0 are 0 ulps
apart, so the ulp rule matches them; under ``--oracle bitwise`` they differ (the judgement's exact
rules run after the ulp rule, at their own call site)."""
from __future__ import annotations

import torch

from bisect_engine.verdict.compare import Outcome, zero_sign_flips
from bisect_engine.verdict.judgement import GRAPH, Oracle, judge_outputs
from fakes import dynamo_graphs

EAGER = torch.tensor([-0.0, 0.0, -1.0, 2.0])
FLIPPED = torch.tensor([0.0, 0.0, -1.0, 2.0])  # compiled clamp(x, max=0.0) on torch 2.13


def test_zeros_of_the_other_sign_are_counted() -> None:
    assert zero_sign_flips(EAGER, FLIPPED) == 1
    assert zero_sign_flips(EAGER, EAGER.clone()) == 0
    assert zero_sign_flips(EAGER.to(torch.int64), FLIPPED.to(torch.int64)) == 0  # integers have one zero


def test_bitwise_names_a_flipped_zero_sign_and_the_ulp_oracles_do_not() -> None:
    bitwise = judge_outputs(Oracle(kind="bitwise"), GRAPH, [EAGER], None, [FLIPPED])[0]
    assert bitwise.outcome is Outcome.MISMATCH and "sign of zero: 1 element" in bitwise.reason
    assert judge_outputs(Oracle(kind="bitwise"), GRAPH, [EAGER], None, [EAGER.clone()])[0].outcome is Outcome.MATCH
    for kind in ("outputs", "eager"):
        assert judge_outputs(Oracle(kind=kind), GRAPH, [EAGER], [EAGER.double()], [FLIPPED])[0].outcome is Outcome.MATCH


# ---- under every oracle: the sign of a zero a later op observes; integer arithmetic; a dtype ------
from bisect_engine.verdict.compare import exact_integer, TensorVerdict  # noqa: E402
from bisect_engine.verdict.judgement import MODEL, OutputFacts, integer_arithmetic, output_facts, sign_observed  # noqa: E402


def _nodes(function, *inputs):
    graph_module = torch.fx.symbolic_trace(function)
    nodes = {node.name: node for node in graph_module.graph.nodes}
    values = {}
    placeholders = iter(inputs)
    for node in graph_module.graph.nodes:  # eager values by name, as GraphContext keeps them
        if node.op == "placeholder":
            values[node.name] = next(placeholders)
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, lambda n: values[n.name])
            values[node.name] = node.target(*args, **node.kwargs)
    return nodes, values


def _observed(x, y):
    low = torch.minimum(x, y)
    return torch.signbit(low), torch.minimum(x, y) + 1.0, torch.atan2(torch.ones_like(x), torch.maximum(x, y))


def test_a_zero_whose_sign_a_later_op_reads_is_observed_and_one_nobody_reads_is_not() -> None:
    nodes, values = _nodes(_observed, EAGER, FLIPPED)
    assert sign_observed(nodes, "minimum")  # read by signbit
    assert not sign_observed(nodes, "minimum_1")  # only added to: -0.0 + 1.0 == +0.0 + 1.0
    assert sign_observed(nodes, "maximum")  # atan2's second argument picks the quadrant
    assert not sign_observed(nodes, "signbit")


def test_an_observed_zero_sign_is_a_mismatch_under_every_oracle_and_an_unobserved_one_stays_clean() -> None:
    for kind in ("outputs", "strict", "eager"):
        oracle = Oracle(kind=kind)
        observed = judge_outputs(oracle, GRAPH, [EAGER], [EAGER.double()], [FLIPPED], [OutputFacts(sign_observed=True)])[0]
        assert observed.outcome is Outcome.MISMATCH and "sign of zero" in observed.reason, kind
        plain = judge_outputs(oracle, GRAPH, [EAGER], [EAGER.double()], [FLIPPED], [OutputFacts()])[0]
        assert plain.outcome is Outcome.MATCH, kind


def _nearest_index(positions, x):
    index = torch.floor(torch.mul(positions, 0.7692307692307692))
    return torch.ops.aten._to_copy.default(index, dtype=torch.int64), torch.ge(x, 0)


def test_integer_arithmetic_is_told_from_a_mask_of_floats() -> None:
    x = torch.tensor([-1.0, 0.5, 2.0])
    nodes, values = _nodes(_nearest_index, torch.arange(3), x)  # an integer input: integers alone
    names = [name for name, node in nodes.items() if node.op == "call_function"]
    exact = integer_arithmetic(nodes, values, names, [values[name] for name in names])
    index = next(name for name in names if name.startswith("_to_copy"))
    mask = next(name for name in names if name.startswith("ge"))
    assert index in exact and mask not in exact
    facts = output_facts(Oracle(), nodes, values, [index, mask])
    assert (facts[0].exact, facts[1].exact) == (True, False)


def test_an_integer_index_compiled_computes_otherwise_is_a_mismatch_though_fp64_agrees_with_compiled() -> None:
    eager, compiled = torch.tensor([0, 1, 2]), torch.tensor([0, 0, 2])  # floor(i / 1.3): 1 eager, 0 compiled
    fp64 = compiled.clone()  # the fp64 run's floats land on compiled's index
    for kind in ("outputs", "strict"):
        oracle = Oracle(kind=kind)
        judged = judge_outputs(oracle, GRAPH, [eager], [fp64], [compiled], [OutputFacts(exact=True)])[0]
        assert judged.outcome is Outcome.MISMATCH and judged.reason.startswith("exact: 1 of 3"), kind
        # a mask of floats compiled sets closer to fp64 stays a departure (listed), not a mismatch
        assert judge_outputs(oracle, GRAPH, [eager], [fp64], [compiled], [OutputFacts()])[0].outcome is Outcome.MATCH
    assert exact_integer(TensorVerdict(Outcome.MATCH), eager, eager.clone()).outcome is Outcome.MATCH


def test_a_dtype_that_differs_is_a_mismatch_at_every_scope_and_upstream_never_excuses_it() -> None:
    eager = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)  # an int8 bmm's value, as eager types it
    compiled = eager.to(torch.int64)  # compiled returns int64: same numbers, another dtype
    for scope in (GRAPH, MODEL):
        judged = judge_outputs(Oracle(), scope, [eager], [eager.double()], [compiled])[0]
        assert judged.outcome is Outcome.MISMATCH and judged.reason.startswith("dtype"), scope


# ---- an op whose result jumps with a scalar eager rounds (pytorch#183083) --------------------------
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from bisect_engine.script.call_check import judge_call, reference_outputs  # noqa: E402
from bisect_engine.verdict.judgement import scalar_exact  # noqa: E402

X16 = torch.tensor([-4.0, -1.5, -0.0, 0.0, 0.1, 1.0, 3.140625, 8.0], dtype=torch.float16)
KEPT_WIDE = torch.remainder(X16.float(), 3.14).to(torch.float16)  # Inductor 2.13's kernel: 3.14 as written


def _call(node_filter, function, *inputs):
    graph_module = make_fx(function)(*inputs)
    return [node for node in graph_module.graph.nodes if node.op == "call_function" and node_filter(node)]


def test_a_remainder_by_a_scalar_its_dtype_rounds_has_one_right_answer() -> None:
    (remainder,) = _call(lambda n: True, lambda x: torch.remainder(x, 3.14), X16)
    assert scalar_exact(remainder)
    (fp32,) = _call(lambda n: True, lambda x: torch.remainder(x, 3.14), X16.float())
    assert not scalar_exact(fp32)  # an fp32 op's scalar is rounded at 2**-24: no jump to speak of
    exact_divisor, product = _call(lambda n: True, lambda x: torch.remainder(x, 3.140625) * 1.7, X16)
    assert not scalar_exact(exact_divisor) and not scalar_exact(product)  # representable; continuous


def test_a_script_call_keeping_the_scalar_wide_diverges_and_eagers_rounding_matches() -> None:
    (graph_module,) = dynamo_graphs((lambda x: torch.remainder(x, 3.14), (X16,)))
    references = reference_outputs(graph_module, [X16])
    eager = torch.remainder(X16, 3.14)
    assert torch.equal(references.eager[0], eager)
    wide = judge_call(graph_module, references, (KEPT_WIDE,), [X16])
    assert wide.outcome is Outcome.MISMATCH and wide.outputs["output 0"].reason.startswith("exact: ")
    assert judge_call(graph_module, references, (eager.clone(),), [X16]).outcome is Outcome.MATCH
    plain = judge_outputs(Oracle(), MODEL, [eager], references.fp64, [KEPT_WIDE])[0]
    assert plain.outcome is Outcome.MATCH  # the end-to-end ulp rule alone lets it pass (the known miss it was)
