"""Tests for bisect_engine.verdict.nonfinite: where NaN/Inf first appear, and what counts as a NaN problem."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.verdict.fx_eval import interpret, run_graph
from bisect_engine.verdict.graphs import GraphView
from bisect_engine.verdict.compare import Outcome, TensorVerdict
from bisect_engine.verdict.nonfinite import compiled_origin, first_origin, outputs_problem, turned_nonfinite


def log_chain(x):
    return (torch.log(x) * 2 + 1).sum()


def masked_softmax(x, mask):
    return torch.softmax(x.masked_fill(mask, float("-inf")), -1)


def masked_fill_only(x, mask):
    return x.masked_fill(mask, float("-inf")) * 2


def overflow_chain(x):
    e = torch.exp(x)
    return e - e  # inf - inf = NaN downstream of the Inf origin


def norm_then_scale(x):
    return F.layer_norm(x, (4,)) * 3


def evaluated(fn, *inputs):
    # A 1-tuple so the graph returns a tuple, as captured and built graphs do.
    graph_module = make_fx(lambda *args: (fn(*args),))(*inputs)
    view = GraphView(graph_module)
    return view, interpret(graph_module, inputs), run_graph(graph_module, inputs)


def problem(view, values):
    return outputs_problem(view, values, view.output_names())


def masked_log(x):
    y = torch.log(x)
    return torch.where(torch.isnan(y), torch.zeros_like(y), y) * 2  # the model masks its own NaN away


def origin_name(*args) -> str | None:
    node = first_origin(*args)
    return None if node is None else node.name


# --- first_origin (eager side: one run's values) ---------------------------------------------------


def test_finite_run_has_no_origin() -> None:
    view, values, outputs = evaluated(log_chain, torch.tensor([1.0, 2.0, 3.0]))
    assert origin_name(view, values) is None
    assert problem(view, values) is None


def test_nan_origin_is_the_op_that_makes_it_not_its_consumers() -> None:
    view, values, outputs = evaluated(log_chain, torch.tensor([1.0, -2.0, 3.0]))
    assert [n.name for n in view.compute_nodes] == ["log", "mul", "add", "sum_1"]
    assert all(torch.isnan(values[name]).any() for name in ("log", "mul", "add", "sum_1"))
    assert origin_name(view, values) == "log"
    assert problem(view, values).made_by == "model" and problem(view, values).origin == "log"


def test_inf_origin_precedes_the_nan_it_causes() -> None:
    view, values, _ = evaluated(overflow_chain, torch.tensor([1.0, 100.0]))
    assert torch.isinf(values["exp"]).any() and torch.isnan(values["sub"]).any()
    assert origin_name(view, values) == "exp"


def test_nan_from_inf_inputs_is_an_origin() -> None:
    # sub reads an Inf but no NaN, and makes a NaN: that is its own doing.
    view, values, _ = evaluated(overflow_chain, torch.tensor([1.0, 100.0]))
    assert origin_name(view, {"sub": values["sub"]}, values) == "sub"


def test_masked_fill_with_minus_inf_is_not_an_origin() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[False, True, False], [True, False, False]])
    view, values, outputs = evaluated(masked_softmax, x, mask)
    assert torch.isinf(values["masked_fill"]).any()
    assert origin_name(view, values) is None
    assert problem(view, values) is None  # the Inf is masked away by softmax


def test_fully_masked_row_makes_softmax_the_nan_origin() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[False, True, False], [True, True, True]])
    view, values, outputs = evaluated(masked_softmax, x, mask)
    assert origin_name(view, values) == "_softmax"
    assert problem(view, values).origin == "_softmax"


def test_an_infinity_the_model_asked_for_is_not_a_problem_even_at_the_output() -> None:
    mask = torch.tensor([False, True, False])
    view, values, outputs = evaluated(masked_fill_only, torch.tensor([1.0, 2.0, 3.0]), mask)
    assert torch.isinf(outputs[0]).any()
    assert origin_name(view, values) is None  # the Inf was asked for (masked_fill with -inf)
    assert problem(view, values) is None


def test_an_intermediate_nan_the_model_masks_away_is_not_a_problem() -> None:
    view, values, outputs = evaluated(masked_log, torch.tensor([1.0, -2.0, 3.0]))
    assert torch.isnan(values["log"]).any() and bool(torch.isfinite(outputs[0]).all())
    assert problem(view, values) is None


def test_nan_fed_in_is_the_inputs_doing() -> None:
    view, values, _ = evaluated(log_chain, torch.tensor([1.0, math.nan, 3.0]))
    found = problem(view, values)
    assert (found.made_by, found.origin, found.inputs) == ("input", None, (("arg0_1", 1, 0),))


def test_multi_output_op_is_found_through_its_getitems() -> None:
    view, values, _ = evaluated(norm_then_scale, torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, math.inf, 0.0, 0.0]]))
    assert torch.isnan(values["getitem"]).any()
    assert origin_name(view, values) == "native_layer_norm"


# --- compiled side: compiled outputs judged against eager's inputs --------------------------------


def test_compiled_nan_with_finite_eager_inputs_is_an_origin() -> None:
    view, eager, _ = evaluated(log_chain, torch.tensor([1.0, 2.0, 3.0]))
    compiled = {name: eager[name].clone() for name in ("log", "mul", "add", "sum_1")}
    compiled["add"][1] = math.nan
    compiled["sum_1"] = torch.tensor(math.nan)
    assert origin_name(view, compiled, eager) == "add"
    del compiled["add"]  # sum_1 alone is NaN while its (eager) input is finite
    assert origin_name(view, compiled, eager) == "sum_1"


def test_compiled_nan_where_eager_inputs_are_already_nan_is_not_an_origin() -> None:
    view, eager, _ = evaluated(log_chain, torch.tensor([1.0, -2.0, 3.0]))
    assert torch.isnan(eager["log"]).any()
    # The stitched check ran each compiled node on eager's values: mul read eager's NaN log.
    # Compiled log happens to be finite, so judged against the compiled values mul would look
    # like an origin; judged against the inputs it really read, it is not.
    compiled = {"log": torch.zeros(3), "mul": eager["mul"].clone()}
    assert origin_name(view, compiled, eager) is None
    assert origin_name(view, compiled) == "mul"


def test_compiled_inf_from_finite_eager_inputs_is_an_origin() -> None:
    view, eager, _ = evaluated(log_chain, torch.tensor([1.0, 2.0, 3.0]))
    compiled = {"mul": torch.tensor([0.0, math.inf, 1.0])}
    assert origin_name(view, compiled, eager) == "mul"


def test_compiled_origin_is_the_first_node_compiled_turns_non_finite() -> None:
    view, _, _ = evaluated(log_chain, torch.tensor([1.0, 2.0, 3.0]))
    clean, bad = TensorVerdict(Outcome.MATCH), TensorVerdict(Outcome.MISMATCH, new_nonfinite=1, reason="nonfinite")
    assert compiled_origin(view, {"log": clean, "mul": clean, "add": clean}) is None
    assert compiled_origin(view, {"log": clean, "mul": bad, "add": bad}) == "mul"


def test_turned_nonfinite_compares_with_eager_position_by_position() -> None:
    eager = {"out": torch.tensor([1.0, math.inf])}
    assert not turned_nonfinite(eager, {"out": torch.tensor([2.0, math.inf])}, ["out"])
    assert turned_nonfinite(eager, {"out": torch.tensor([math.nan, 1.0])}, ["out"])
    assert not turned_nonfinite(eager, {"out": torch.tensor([1, 2])}, ["out"])


def test_compiled_nan_in_a_multi_output_value_blames_its_op() -> None:
    # Compiled values are keyed by value (getitem) names, never by the multi-output node's name.
    view, eager, _ = evaluated(norm_then_scale, torch.randn(2, 4, generator=torch.Generator().manual_seed(0)))
    compiled = {"getitem": torch.full((2, 4), math.nan), "mul": eager["mul"].clone()}
    assert origin_name(view, compiled, eager) == "native_layer_norm"
