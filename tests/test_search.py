"""Tests for bisect_engine.search: the Search object and the search algorithms."""

from __future__ import annotations

import contextlib
import math
from typing import Any
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bisect_engine.search import (
    Budget,
    BudgetExhausted,
    Search,
    ddmin,
    default_key,
    find_integer,
    first_failing_prefix,
    remove_one_by_one,
    split_failing,
)

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


def log2_bound(n: int) -> int:
    return math.ceil(math.log2(n)) + 1 if n > 1 else 1


class RecordingPredicate:
    """Wraps a predicate, recording every argument it is called with."""

    def __init__(self, predicate: Callable[..., bool]) -> None:
        self.predicate = predicate
        self.calls: list[object] = []

    def __call__(self, candidate: object) -> bool:
        self.calls.append(candidate)
        return self.predicate(candidate)


def assert_one_minimal(result: tuple[object, ...], fails: Callable[[tuple], bool]) -> None:
    assert fails(result), f"result {result!r} does not fail"
    for index in range(len(result)):
        smaller = result[:index] + result[index + 1 :]
        assert not fails(smaller), f"removing index {index} of {result!r} still fails"


def is_subsequence(small: Sequence[object], big: Sequence[object]) -> bool:
    remaining = iter(big)
    return all(any(item == other for other in remaining) for item in small)


# --- Search -----------------------------------------------------------------


def test_default_key_normalises_containers() -> None:
    assert default_key({1, 2}) == frozenset({1, 2})
    assert default_key([1, 2]) == (1, 2)
    assert default_key((1, 2)) == (1, 2)
    assert default_key(7) == 7


def test_search_caches_repeated_candidates() -> None:
    oracle = RecordingPredicate(lambda candidate: 3 in candidate)
    search: Search[list[int]] = Search(oracle)
    assert search.is_interesting([1, 3]) is True
    assert search.is_interesting([1, 3]) is True
    assert oracle.calls == [[1, 3]]
    assert (search.calls, search.cache_hits) == (1, 1)


def test_search_set_keys_ignore_order() -> None:
    oracle = RecordingPredicate(lambda candidate: False)
    search: Search[set[int]] = Search(oracle)
    search.is_interesting({1, 2, 3})
    search.is_interesting({3, 2, 1})
    assert len(oracle.calls) == 1


def test_search_history_and_on_call_in_call_order() -> None:
    seen: list[tuple[object, bool]] = []
    search: Search[int] = Search(lambda n: n > 5, on_call=lambda c, r: seen.append((c, r)))
    for n in (9, 2, 9, 6):
        search.is_interesting(n)
    assert search.history == [(9, True), (2, False), (6, True)]
    assert seen == [(9, True), (2, False), (6, True)]


def test_search_custom_key() -> None:
    search: Search[str] = Search(lambda s: True, key=str.lower)
    search.is_interesting("ABC")
    search.is_interesting("abc")
    assert (search.calls, search.cache_hits) == (1, 1)


def test_search_max_calls_raises_before_calling_oracle() -> None:
    oracle = RecordingPredicate(lambda n: True)
    search: Search[int] = Search(oracle, max_calls=2)
    search.is_interesting(1)
    search.is_interesting(2)
    with pytest.raises(BudgetExhausted) as info:
        search.is_interesting(3)
    assert info.value.reason == "max_compiles"
    assert str(info.value) == "compile budget of 2 exhausted"
    assert oracle.calls == [1, 2]
    assert search.calls == 2
    assert search.is_interesting(1) is True  # cache hits stay free after exhaustion


def test_search_timeout_with_fake_clock() -> None:
    now = [100.0]
    oracle = RecordingPredicate(lambda n: False)
    search: Search[int] = Search(oracle, timeout_s=300, clock=lambda: now[0])
    now[0] = 400.0  # elapsed == timeout is still allowed
    search.is_interesting(1)
    now[0] = 400.5
    with pytest.raises(BudgetExhausted) as info:
        search.is_interesting(2)
    assert info.value.reason == "timeout"
    assert str(info.value) == "timeout of 300 s exceeded"
    assert oracle.calls == [1]
    assert search.is_interesting(1) is False


def test_search_oracle_result_is_coerced_to_bool() -> None:
    search: Search[int] = Search(lambda n: n)  # type: ignore[arg-type, return-value]
    assert search.is_interesting(5) is True
    assert search.history == [(5, 5)]


# --- find_integer -----------------------------------------------------------


@pytest.mark.parametrize("limit", [0, 1, 3, 4, 5, 7, 8, 9, 100, 1023, 1024, 10**6])
def test_find_integer_exact_threshold(limit: int) -> None:
    f = RecordingPredicate(lambda n: n <= limit)
    assert find_integer(f) == limit
    assert 0 not in f.calls
    assert len(f.calls) <= 2 * log2_bound(limit + 2) + 4


@PROPERTY_SETTINGS
@given(st.integers(min_value=0, max_value=10**9))
def test_find_integer_property(limit: int) -> None:
    f = RecordingPredicate(lambda n: n <= limit)
    assert find_integer(f) == limit
    assert len(f.calls) <= 2 * log2_bound(limit + 2) + 4


def test_find_integer_non_monotone_returns_a_boundary() -> None:
    truth = {0, 1, 2, 4, 5, 6, 7, 8, 9, 10}
    n = find_integer(lambda k: k in truth)
    assert n in truth and n + 1 not in truth


# --- first_failing_prefix -----------------------------------------------------


def test_first_failing_prefix_empty_is_none() -> None:
    assert first_failing_prefix(0, lambda k: pytest.fail("must not be called")) is None


def test_first_failing_prefix_never_calls_length_and_defaults_to_it() -> None:
    fails = RecordingPredicate(lambda k: False)
    assert first_failing_prefix(10, fails) == 10
    assert 10 not in fails.calls and 0 not in fails.calls


def test_first_failing_prefix_threshold() -> None:
    assert first_failing_prefix(100, lambda k: k >= 37) == 37
    assert first_failing_prefix(1, lambda k: pytest.fail("must not be called")) == 1


@pytest.mark.parametrize("length", range(1, 70))
def test_first_failing_prefix_call_bound_all_thresholds(length: int) -> None:
    for threshold in range(1, length + 1):
        fails = RecordingPredicate(lambda k: k >= threshold)
        assert first_failing_prefix(length, fails) == threshold
        assert len(fails.calls) <= log2_bound(length)
        assert all(1 <= k < length for k in fails.calls)


@PROPERTY_SETTINGS
@given(st.integers(min_value=1, max_value=10**6).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(min_value=1, max_value=n))))
def test_first_failing_prefix_property(length_and_threshold: tuple[int, int]) -> None:
    length, threshold = length_and_threshold
    fails = RecordingPredicate(lambda k: k >= threshold)
    assert first_failing_prefix(length, fails) == threshold
    assert len(fails.calls) <= log2_bound(length)
    assert length not in fails.calls


# --- ddmin --------------------------------------------------------------------


def test_ddmin_finds_pair() -> None:
    fails = RecordingPredicate(lambda c: 3 in c and 7 in c)
    result = ddmin(range(10), fails)
    assert result == (3, 7)
    assert tuple(range(10)) not in fails.calls
    assert_one_minimal(result, fails)


def test_ddmin_single_item_input_makes_no_calls() -> None:
    assert ddmin(["x"], lambda c: pytest.fail("must not be called")) == ("x",)
    assert ddmin([], lambda c: pytest.fail("must not be called")) == ()


def test_ddmin_small_input_tries_single_items_first() -> None:
    fails = RecordingPredicate(lambda c: "c" in c)
    assert ddmin("abcd", fails) == ("c",)
    assert fails.calls == [("a",), ("b",), ("c",)]


def test_ddmin_small_input_falls_back_to_ddmin() -> None:
    fails = RecordingPredicate(lambda c: "a" in c and "d" in c)
    result = ddmin("abcd", fails)
    assert result == ("a", "d")
    assert fails.calls[:4] == [("a",), ("b",), ("c",), ("d",)]
    assert_one_minimal(result, fails)


def test_ddmin_large_input_does_not_start_with_singles() -> None:
    fails = RecordingPredicate(lambda c: 0 in c)
    assert ddmin(range(5), fails) == (0,)
    assert len(fails.calls[0]) > 1


def test_ddmin_preserves_order_and_duplicates() -> None:
    fails = RecordingPredicate(lambda c: c.count("b") >= 2 and "z" in c)
    result = ddmin("abzxbyb", fails)
    assert result in {("b", "z", "b"), ("z", "b", "b")}
    assert is_subsequence(result, "abzxbyb")
    assert_one_minimal(result, fails)


def test_ddmin_is_deterministic() -> None:
    first = Search(lambda c: sum(c) % 7 == 3 and len(c) > 0)
    second = Search(lambda c: sum(c) % 7 == 3 and len(c) > 0)
    items = list(range(1, 40))
    assert ddmin(items, first.is_interesting) == ddmin(items, second.is_interesting)
    assert first.history == second.history


def test_ddmin_through_search_reuses_cache() -> None:
    oracle = RecordingPredicate(lambda c: 1 in c and 2 in c)
    search: Search[tuple[int, ...]] = Search(oracle)
    assert ddmin((0, 1, 2, 3), search.is_interesting) == (1, 2)
    assert search.cache_hits > 0
    assert len(oracle.calls) == len(set(oracle.calls))


def test_ddmin_stops_on_budget() -> None:
    search: Search[tuple[int, ...]] = Search(lambda c: 5 in c and 50 in c, max_calls=3)
    with pytest.raises(BudgetExhausted):
        ddmin(range(100), search.is_interesting)
    assert search.calls == 3


@PROPERTY_SETTINGS
@given(st.integers(min_value=1, max_value=40).flatmap(
    lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), min_size=1, max_size=n))))
def test_ddmin_superset_property(size_and_required: tuple[int, set[int]]) -> None:
    size, required = size_and_required
    fails = RecordingPredicate(lambda c: required.issubset(c))
    result = ddmin(range(size), fails)
    assert result == tuple(sorted(required))
    assert_one_minimal(result, fails)


@PROPERTY_SETTINGS
@given(
    st.lists(st.integers(-20, 20), min_size=1, max_size=30),
    st.integers(min_value=2, max_value=6),
)
def test_ddmin_non_monotone_result_is_one_minimal(items: list[int], modulus: int) -> None:
    target = sum(items) % modulus
    fails = RecordingPredicate(lambda c: len(c) > 0 and sum(c) % modulus == target)
    result = ddmin(items, fails)
    assert is_subsequence(result, items)
    assert_one_minimal(result, fails)


@PROPERTY_SETTINGS
@given(
    st.lists(st.sets(st.integers(0, 29), min_size=1, max_size=4), min_size=1, max_size=4),
)
def test_ddmin_any_of_several_causes(causes: list[set[int]]) -> None:
    items = range(30)
    fails = RecordingPredicate(lambda c: any(cause.issubset(c) for cause in causes))
    result = ddmin(items, fails)
    assert tuple(sorted(result)) == result
    assert_one_minimal(result, fails)


def test_record_seeds_the_cache_without_calling_the_oracle() -> None:
    calls: list[object] = []
    search = Search(lambda c: calls.append(c) or True)
    search.record(frozenset({1, 2}), False)
    assert search.is_interesting({2, 1}) is False
    assert calls == [] and search.calls == 0 and search.cache_hits == 1
    assert search.is_interesting({3}) is True and search.calls == 1


@given(st.integers(min_value=1, max_value=12).flatmap(
    lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), min_size=1))))
@PROPERTY_SETTINGS
def test_remove_one_by_one_is_exact_and_linear_for_monotone_predicates(case: tuple[int, set[int]]) -> None:
    n, required = case
    calls: list[tuple[int, ...]] = []

    def fails(candidate: tuple[int, ...]) -> bool:
        calls.append(candidate)
        return required <= set(candidate)

    assert remove_one_by_one(tuple(range(n)), fails) == tuple(sorted(required))
    assert len(calls) <= n and tuple(range(n)) not in calls


@pytest.mark.parametrize("n", [2, 3, 7, 16, 41])
def test_split_failing_infers_the_second_half_when_the_first_passes(n: int) -> None:
    """One failing item among n: with ``infer``, about log2(n) calls and the same answer; a group
    that fails only together is reported by no item (the caller confirms each item alone)."""
    for bad in range(n):
        calls: list[tuple[int, ...]] = []

        def fails(group: tuple[int, ...]) -> bool:
            calls.append(group)
            return bad in group

        split = split_failing(tuple(range(n)), fails, infer=True)
        assert split.failing == (bad,) and sorted(i for g in split.passing for i in g) == [i for i in range(n) if i != bad]
        assert len(calls) <= 2 * math.ceil(math.log2(n)), (bad, calls)
    together = split_failing((0, 1), lambda group: False, infer=True)  # fails only as a pair
    assert together.failing == (1,) and together.passing == ((0,),)  # inferred, never called: unconfirmed


class FakeAhead:
    """An Ahead evaluator that computes every submitted verdict at once, in reverse order (as
    workers finishing out of order would), and records what it was given."""

    def __init__(self, evaluate: Callable[[int], bool]) -> None:
        self.evaluate = evaluate
        self.ready: dict[int, bool] = {}
        self.submitted: list[int] = []
        self.discarded: list[int] = []

    def submit(self, candidates: Sequence[int]) -> None:
        self.submitted += list(candidates)
        for candidate in reversed(candidates):
            self.ready[candidate] = self.evaluate(candidate)

    def take(self, candidate: int) -> bool | None:
        return self.ready.pop(candidate, None)

    def discard(self) -> None:
        self.discarded += list(self.ready)
        self.ready.clear()


@PROPERTY_SETTINGS
@given(st.lists(st.booleans(), min_size=1, max_size=12), st.integers(min_value=1, max_value=15))
def test_first_success_in_submission_order_is_the_serial_answer_with_or_without_workers(
        outcomes: list[bool], max_compiles: int) -> None:
    """The answer, the history and where the budget stops never depend on evaluating ahead."""
    candidates = list(range(len(outcomes)))

    def run(ahead: FakeAhead | None) -> tuple[object, list[object], str | None]:
        search: Search[int, bool] = Search(lambda c: outcomes[c], max_calls=max_compiles, ahead=ahead)
        try:
            found = search.first(candidates, bool)
            stopped = None
        except BudgetExhausted as exhausted:
            found, stopped = None, exhausted.reason
        return found, search.history, stopped

    ahead = FakeAhead(lambda c: outcomes[c])
    assert run(ahead) == run(None)
    assert len(ahead.submitted) <= max_compiles  # the batch is cut where the budget would stop


def test_prefetch_skips_cached_candidates_and_verdicts_judged_ahead_are_adopted_in_order() -> None:
    calls: list[int] = []
    ahead = FakeAhead(lambda c: c == 3)
    search: Search[int, bool] = Search(lambda c: calls.append(c) or c == 3, ahead=ahead)
    search.judge(0)  # cached: never submitted
    assert search.first([0, 1, 2, 3, 4], bool) == (3, True)
    assert ahead.submitted == [1, 2, 3, 4] and calls == [0]  # 1..3 came from the workers
    assert [key for key, _ in search.history] == [0, 1, 2, 3]  # 4 was computed ahead, never judged
    search.discard_ahead()
    assert ahead.discarded == [4] and search.known(4) is None


def test_the_search_sets_the_stage_on_the_budget_it_holds() -> None:
    budget = Budget()
    search = Search(lambda candidate: candidate, budget=budget)
    assert search.stage == budget.stage == "localise"
    search.stage = "subsystem"
    assert budget.stage == "subsystem"  # what the compiler counts under and a budget cut names
    with pytest.raises(BudgetExhausted, match="compile budget of 0"):
        Search(lambda candidate: candidate, budget=Budget(max_compiles=0)).judge(1)


def test_judge_if_room_is_none_when_the_budget_cuts_before_or_during_the_evaluation() -> None:
    search = Search(lambda candidate: candidate * 2, max_calls=1)
    assert search.judge_if_room(1) == 2
    assert search.judge_if_room(2) is None and search.budget.exhausted is not None  # cut before
    assert search.judge_if_room(1) == 2  # a cached verdict needs no room

    def spends(candidate: int) -> int:
        raise BudgetExhausted("compile budget of 0 exhausted", "max_compiles")

    assert Search(spends).judge_if_room(1) is None  # cut inside the evaluation (the compiler's check)
    with pytest.raises(BudgetExhausted):
        Search(spends).judge(1)


def test_compile_metered_candidates_are_checked_against_the_clock_only() -> None:
    # A scan's batch compiles only when Dynamo holds no compile for it, each compile checked where
    # it happens: the search must not refuse it because the compile budget is spent.
    now = [0.0]
    budget = Budget(max_compiles=1, timeout_s=10.0, clock=lambda: now[0])
    search: Search[int, int] = Search(lambda c: c, budget=budget, cost=lambda: 5, compile_metered=lambda c: c < 0)
    assert search.judge(-1) == -1  # 5 compiles spent of 1, but metered where it compiles
    with pytest.raises(BudgetExhausted) as info:
        search.judge(1)  # an ordinary candidate is refused
    assert info.value.reason == "max_compiles"
    now[0] = 11.0
    with pytest.raises(BudgetExhausted) as info:
        search.judge(-2)
    assert info.value.reason == "timeout"
    assert [key for key, _ in search.history] == [-1]


def test_a_budget_cut_passes_every_except_exception_on_its_way() -> None:
    # A compile refused inside a candidate's evaluation must reach the run, never become a crash verdict.
    def judged(candidate: int) -> str:
        try:
            raise BudgetExhausted("compile budget of 0 exhausted", "max_compiles")
        except Exception:  # noqa: BLE001 - what an evaluator does with a compile that raises
            return "crash"

    with pytest.raises(BudgetExhausted):
        Search(judged).judge(1)


def test_the_search_holds_the_run_s_progress_reporter() -> None:
    steps: list[str] = []

    class Recording:
        def step(self, description: str) -> Any:
            steps.append(description)
            return contextlib.nullcontext()

        def items(self, items: Any, description: str, unit: str) -> Any:
            steps.append(description)
            return items

    search: Search[int, int] = Search(lambda c: c, progress=Recording())
    with search.progress.step("judging"):
        assert list(search.progress.items([1, 2], "scanning", "batch")) == [1, 2]
    assert steps == ["judging", "scanning"]
    assert list(Search(lambda c: c).progress.items([3], "quiet", "batch")) == [3]  # the default says nothing


def test_a_workers_cache_is_seeded_with_the_capability_probes_and_no_kernel(tmp_path, monkeypatch) -> None:
    from bisect_engine.localise.workers import capability_probes, seed_cache

    tool_cache = tmp_path / "tool"
    (tool_cache / "ab").mkdir(parents=True)
    (tool_cache / "ab" / "cabprobe.cpp").write_text("#include <ATen/cpu/vec/vec.h>\nint main() {}\n")
    (tool_cache / "ab" / "cabprobe.so").write_bytes(b"probe")
    (tool_cache / "cd").mkdir()
    (tool_cache / "cd" / "ckernel.main.cpp").write_text('#include "/tmp/x/cpp_prefix.h"\nvoid kernel() {}\n')
    (tool_cache / "cd" / "ckernel.main.so").write_bytes(b"kernel")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tool_cache))
    probes = capability_probes()
    assert sorted(map(lambda p: p.rsplit("/", 1)[-1], probes)) == ["cabprobe.cpp", "cabprobe.so"]
    worker_cache = tmp_path / "worker"
    seed_cache(worker_cache, probes)
    assert sorted(str(p.relative_to(worker_cache)) for p in worker_cache.rglob("*") if p.is_file()) == \
        ["ab/cabprobe.cpp", "ab/cabprobe.so"]
