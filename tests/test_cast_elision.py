"""Cast elision (issue 37 item 4): a ``.to(bf16)``/``.to(fp16)`` round trip the program wrote and
compiled code skips, named by eager replays (no compile) on a real aten graph; the summary line;
script mode keeps ``clean`` with the listed difference only when the switch was checked."""
from __future__ import annotations

from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.output.amplified import differences_lines
from bisect_engine.script.session import cast_elided
from bisect_engine.strategies.departures import cast_round_trips, elided_cast
from bisect_engine.verdict.graphs import CapturedGraph
from bisect_engine.verdict.oracle import GraphContext
from fakes import dynamo_graphs


def _context(fn, *inputs: torch.Tensor) -> GraphContext:
    graph_module = make_fx(fn)(*inputs)
    return GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, list(inputs), True))


def _round_trip_then(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return ((x * 3.0).to(torch.bfloat16).to(torch.float32) > t).float()


X = torch.randn(512, generator=torch.Generator().manual_seed(0))
T = X * 3.0 + 1e-4


def test_the_skipped_round_trip_is_named_by_its_narrowing_cast() -> None:
    context = _context(_round_trip_then, X, T)
    trips = cast_round_trips(context)
    assert len(trips) == 1
    narrow, back = trips[0]
    assert context.eager_values[narrow].dtype == torch.bfloat16 and context.eager_values[back].dtype == torch.float32
    output = context.view.output_names()[0]
    skipped = ((X * 3.0) > T).float()  # what a fused kernel that keeps fp32 computes
    assert not torch.equal(skipped, context.eager_values[output])  # the rounding matters here
    found = elided_cast(context, {output: skipped})
    assert found is not None and (found.node, found.back, found.dtype) == (narrow, back, "torch.bfloat16")
    assert found.outputs == (output,)


def test_no_elision_when_compiled_agrees_or_differs_otherwise() -> None:
    context = _context(_round_trip_then, X, T)
    output = context.view.output_names()[0]
    assert elided_cast(context, {output: context.eager_values[output]}) is None  # nothing differs
    other = 1.0 - context.eager_values[output]  # a difference the round trip does not explain
    assert elided_cast(context, {output: other}) is None


def test_a_widening_cast_alone_is_no_round_trip() -> None:
    context = _context(lambda x: x.to(torch.float64).to(torch.float32) + 1.0, X)
    assert cast_round_trips(context) == []


ENTRY = {"op": "aten._to_copy.default", "node": "_to_copy", "source": "f.py:3",
         "cast_elided": {"dtype": "torch.bfloat16", "cast_back": "_to_copy_1", "outputs": ["sum_1"]},
         "setting": {"name": "emulate_precision_casts", "value": True, "follows_eager": True}}


def test_the_line_names_the_cast_and_the_checked_switch() -> None:
    (line,) = differences_lines([ENTRY])
    assert "cast elided" in line and "node _to_copy" in line and "torch.bfloat16" in line
    assert "emulate_precision_casts=True makes compiled follow eager (checked)" in line


def test_script_stays_clean_only_when_the_switch_was_checked() -> None:
    assert cast_elided({"differences": [ENTRY]})
    unchecked = {**ENTRY, "setting": {**ENTRY["setting"], "follows_eager": False}}
    assert not cast_elided({"differences": [unchecked]})
    assert not cast_elided({"differences": [{k: v for k, v in ENTRY.items() if k != "cast_elided"}]})


# ---- departures by mechanism (issue 37 item 5): a saved value the backward reads as a mask ----------
from bisect_engine.strategies.departures import saved_value_consequence  # noqa: E402

HINGE_X1 = torch.tensor([1.703125, 1.703125], dtype=torch.bfloat16)  # pytorch#185517's values
HINGE_X2 = torch.zeros(2, dtype=torch.bfloat16)


def _hinge_forward(x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    value = torch.ops.aten.add.Scalar(torch.neg(torch.sub(x1, x2)), 1.703125)  # eager's margin, cast to bf16
    return torch.clamp_min(value, 0.0).mean(), value  # the loss, and the value saved for the backward


def _contexts(backward_fn, saved_name: str) -> tuple[GraphContext, GraphContext]:
    forward_module = make_fx(_hinge_forward)(HINGE_X1, HINGE_X2)
    forward = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, forward_module,
                                                       [HINGE_X1, HINGE_X2], True, model_outputs=1))
    eager_saved = forward.eager_values[saved_name]
    backward_module = make_fx(backward_fn)(eager_saved, torch.tensor(1.0, dtype=torch.bfloat16))
    first = next(n for n in backward_module.graph.nodes if n.op == "placeholder")
    first._rename(saved_name)  # AOT Autograd's backward reads the forward's saved value by its name
    backward_module.recompile()
    backward = GraphContext.from_captured(CapturedGraph("backward_0", "backward", 0, backward_module,
                                                        [eager_saved, torch.tensor(1.0, dtype=torch.bfloat16)], True))
    return forward, backward


def _masked_backward(saved: torch.Tensor, tangent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    grad = torch.where(torch.ge(saved, 0), tangent / 2, torch.zeros_like(saved))  # clamp_min's, then mean's
    return torch.neg(grad), grad


def _scaled_backward(saved: torch.Tensor, tangent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return saved * tangent, -saved * tangent  # reads the value, never compares it


def test_a_saved_value_the_backward_compares_is_listed_with_the_gradient_it_flips() -> None:
    forward, backward = _contexts(_masked_backward, "add")
    saved = forward.view.output_names()[1]
    compiled = torch.full((2,), -0.0031, dtype=torch.bfloat16)  # the margin kept as 1.7 in fp32: -0.0031
    found = saved_value_consequence(forward, {saved: compiled}, backward)
    assert found is not None
    departed, consequence = found
    assert departed.value == saved and departed.elements == 2
    assert consequence.saved == (saved,) and consequence.difference.material
    assert consequence.output == backward.view.output_names()[0]  # the gradient of x1: -0.5 eager, 0 compiled


def test_a_saved_value_nobody_compares_or_one_that_flips_nothing_is_not_listed() -> None:
    forward, backward = _contexts(_scaled_backward, "add")
    saved = forward.view.output_names()[1]
    compiled = torch.full((2,), -0.0031, dtype=torch.bfloat16)
    assert saved_value_consequence(forward, {saved: compiled}, backward) is None  # not read as a mask
    forward, backward = _contexts(_masked_backward, "add")
    same = forward.eager_values[saved].clone()
    assert saved_value_consequence(forward, {saved: same}, backward) is None  # computed as eager does


def test_a_clean_forward_keeps_its_values_only_where_a_saved_value_crosses_zero() -> None:
    from bisect_engine.strategies.departures import saved_masks_differ

    forward, _ = _contexts(_masked_backward, "add")
    saved = forward.view.output_names()[1]
    eager = forward.eager_values[saved]
    assert saved_masks_differ(forward, {saved: torch.full((2,), -0.0031, dtype=torch.bfloat16)})  # 0 -> below 0
    assert not saved_masks_differ(forward, {saved: eager.clone()})


def test_the_eager_rounding_switch_compiles_only_where_it_can_change_the_code() -> None:
    """``emulate_precision_casts`` on a CPU graph with no fp16/bf16 value: the whole graph's own
    compile answers (a cached verdict, no compile); with a bf16 value the switch is compiled."""
    from bisect_engine.strategies.departures import EAGER_ROUNDING, follows_eager_with, rounding_switch_inert
    from bisect_engine.verdict.candidate import NO_SWITCH
    from bisect_engine.verdict.compare import Outcome
    from bisect_engine.verdict.oracle import SubgraphVerdict

    class Recording:
        def __init__(self, context: GraphContext) -> None:
            self.context, self.asked = context, []

        def judge(self, candidate):
            self.asked.append(candidate.switch)
            output = self.context.view.output_names()[0]
            return SubgraphVerdict(Outcome.MATCH, compiled_values={output: self.context.eager_values[output]})

    plain = _context(lambda x, t: ((x * 3.0) > t).float(), X, T)
    narrow = _context(_round_trip_then, X, T)
    assert rounding_switch_inert(plain) and not rounding_switch_inert(narrow)
    for context, switch in ((plain, NO_SWITCH), (narrow, EAGER_ROUNDING)):
        search = Recording(context)
        assert follows_eager_with(context, search)  # type: ignore[arg-type]
        assert search.asked == [switch]


# ---- script mode: a skipped fp16 rounding within the end-to-end tolerance (pytorch#182131) ---------
from types import SimpleNamespace  # noqa: E402

from bisect_engine.script.call_check import may_elide_cast, reference_outputs  # noqa: E402
from bisect_engine.strategies.departures import clearly_closer, follows_eager_with  # noqa: E402
from bisect_engine.verdict.compare import Outcome  # noqa: E402

X182131 = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) / 10
C182131 = (torch.arange(24) % 5 == 0).reshape(2, 3, 4)


def _fp16_add(x: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.where(c, torch.full_like(x, 0.5), torch.full_like(x, -0.5))
    y = z.to(torch.float16) + x.to(torch.float16)  # pytorch#182131, as its reporter wrote it
    return y, y.float().sum()


def _skipped(x: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What Inductor's fused kernel computes: the add in fp32, rounded once to fp16."""
    y = (torch.where(c, 0.5, -0.5) + x).to(torch.float16)
    return y, y.float().sum()


def test_a_skipped_rounding_of_one_ulp_is_named_only_when_asked_exactly() -> None:
    context = _context(_fp16_add, X182131, C182131)
    names = context.view.output_names()
    compiled = dict(zip(names, _skipped(X182131, C182131)))
    assert not torch.equal(compiled[names[0]], context.eager_values[names[0]])  # one fp16 ulp in 8 of 24
    assert elided_cast(context, compiled) is None  # within the floors: the model-file rule sees nothing
    found = elided_cast(context, compiled, exact=True)
    x_cast = next(node.name for node in context.view.compute_nodes
                  if node.args and getattr(node.args[0], "op", "") == "placeholder" and node.name.startswith("_to_copy"))
    assert found is not None and found.node == x_cast and found.dtype == "torch.float16"  # z's cast is exact
    other = {names[0]: compiled[names[0]].clone(), names[1]: compiled[names[1]]}
    other[names[0]][0, 0, 1] += 0.0009765625  # one more ulp the skipped rounding does not explain
    assert elided_cast(context, other, exact=True) is None


def test_clearly_closer_needs_equality_or_a_clear_margin() -> None:
    eager = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
    wide = torch.tensor([1.0, 2.001953125, 3.0], dtype=torch.float16)  # one ulp on one element
    assert clearly_closer(eager, wide, wide.clone(), 2.0)
    assert not clearly_closer(eager, wide, eager.clone(), 2.0)
    halfway = torch.tensor([1.0, 2.0, 3.001953125], dtype=torch.float16)  # as far from each
    assert not clearly_closer(eager, wide, halfway, 2.0)


def test_the_switch_is_checked_by_closeness_where_a_match_says_nothing() -> None:
    """Within the floors, compiled matches eager with or without ``emulate_precision_casts``: the
    switch follows eager only where it brings compiled clearly closer to eager's values."""
    context = _context(_fp16_add, X182131, C182131)
    names = context.view.output_names()
    skipped = dict(zip(names, _skipped(X182131, C182131)))

    def search(values: dict[str, torch.Tensor]) -> SimpleNamespace:
        return SimpleNamespace(judge=lambda candidate: SimpleNamespace(outcome=Outcome.MATCH, compiled_values=values))

    eager = {name: context.eager_values[name] for name in names}
    assert follows_eager_with(context, search(skipped))  # a match alone: what the floors allow
    assert not follows_eager_with(context, search(skipped), away_from=skipped)
    assert follows_eager_with(context, search(eager), away_from=skipped)


def test_a_matching_call_goes_to_the_cast_look_only_with_a_written_cast_and_a_difference() -> None:
    with_cast, widening = dynamo_graphs((_fp16_add, (X182131, C182131)),
                                        (lambda x: (x.double() * 3).sum(), (X182131,)))
    references = reference_outputs(with_cast, [X182131, C182131])
    assert may_elide_cast(with_cast, references, _skipped(X182131, C182131))
    assert not may_elide_cast(with_cast, references, references.eager)  # compiled equals eager: nothing to explain
    other = reference_outputs(widening, [X182131])
    assert not may_elide_cast(widening, other, [other.eager[0] + 1])  # a widening cast is no narrowing one


def _equal_backward(saved: torch.Tensor, tangent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hit = torch.eq(saved, saved.amax())  # amax's backward compares its saved input with its result
    return torch.where(hit, tangent, 0.0), -torch.where(hit, tangent, 0.0)


def _scaled_forward(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    value = torch.mul(x, 3.0)
    return value.amax(), value  # the result, and the value saved for the backward


def _forward_and(backward_fn) -> tuple[GraphContext, torch.fx.GraphModule]:
    x = torch.tensor([0.5, 1.5, -2.0])
    forward = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(_scaled_forward)(x), [x],
                                                       True, model_outputs=1))
    backward_module = make_fx(backward_fn)(forward.eager_values["mul"], torch.tensor(1.0))
    first = next(n for n in backward_module.graph.nodes if n.op == "placeholder")
    first._rename("mul")  # AOT Autograd's backward reads the forward's saved value by its name
    backward_module.recompile()
    return forward, backward_module


def test_a_saved_float_the_backward_compares_keeps_the_forward_for_any_element_of_difference() -> None:
    """pytorch#186799: a saved float one ulp off, on the same side of zero, that the backward reads
    with ``eq``: the forward's values are kept for the saved-value replay only when the backward
    compares it (its graph given); a saved value it only multiplies lets them go."""
    from bisect_engine.strategies.departures import saved_masks_differ

    forward, compared = _forward_and(_equal_backward)
    eager = forward.eager_values["mul"]
    one_ulp = torch.nextafter(eager, torch.full_like(eager, 10.0))
    assert torch.equal(one_ulp > 0, eager > 0) and not torch.equal(one_ulp, eager)
    assert not saved_masks_differ(forward, {"mul": one_ulp})  # no backward given: only sign flips count
    assert saved_masks_differ(forward, {"mul": one_ulp}, compared)
    assert not saved_masks_differ(forward, {"mul": eager.clone()}, compared)
    _, scaled = _forward_and(lambda saved, tangent: (saved * tangent, -saved * tangent))
    assert not saved_masks_differ(forward, {"mul": one_ulp}, scaled)
