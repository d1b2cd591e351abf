"""Cast elision (issue 37 item 4): a ``.to(bf16)``/``.to(fp16)`` round trip the program wrote and
compiled code skips, named by eager replays (no compile) on a real aten graph; the summary line;
script mode keeps ``clean`` with the listed difference only when the switch was checked."""
from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.output.amplified import differences_lines
from bisect_engine.script.session import cast_elided
from bisect_engine.strategies.departures import cast_round_trips, elided_cast
from bisect_engine.verdict.graphs import CapturedGraph
from bisect_engine.verdict.oracle import GraphContext


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
