"""Memory: a run is refused only when its model cannot fit, and one that runs short of memory stops
as a budget cut (exit 4, a report saying so), before the OOM killer would."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from bisect_engine.cli import main
from bisect_engine.load.memory import MemoryGuard, UsageError, check_memory
from bisect_engine.search import Budget, BudgetExhausted

GIB = 2**30


def test_guard_says_nothing_while_there_is_room() -> None:
    guard = MemoryGuard(budget=4 * GIB, reserve=GIB, available=lambda: 8 * GIB, rss=lambda: GIB)
    assert guard() is None


def test_guard_stops_past_the_memory_budget() -> None:
    guard = MemoryGuard(budget=2 * GIB, reserve=GIB, available=lambda: 8 * GIB, rss=lambda: 3 * GIB)
    assert "past --memory-budget 2.00 GiB" in (guard() or "")


def test_guard_stops_when_the_machine_runs_short() -> None:
    guard = MemoryGuard(budget=None, reserve=GIB, available=lambda: GIB // 2, rss=lambda: 3 * GIB)
    assert "0.50 GiB left on the machine" in (guard() or "")


def test_guard_stops_when_a_device_the_run_holds_memory_on_runs_short() -> None:
    # the CUDA figures are injected: this machine has no device (``device_free_bytes`` reads them there)
    roomy = MemoryGuard(budget=None, reserve=GIB, available=lambda: 8 * GIB, rss=lambda: GIB,
                        devices=lambda: [("cuda:0", 20 * GIB, 80 * GIB), ("cuda:1", 3 * GIB, 80 * GIB)])
    assert roomy() is None  # 5 % of 80 GiB is past the 2 GiB cap: 2 GiB kept free on each
    short = MemoryGuard(budget=None, reserve=GIB, available=lambda: 8 * GIB, rss=lambda: GIB,
                        devices=lambda: [("cuda:0", 20 * GIB, 80 * GIB), ("cuda:1", GIB, 80 * GIB)])
    assert "1.00 GiB left on cuda:1, under the 2.00 GiB kept free" in (short() or "")
    small = MemoryGuard(budget=None, reserve=GIB, available=lambda: 8 * GIB, rss=lambda: GIB,
                        devices=lambda: [("cuda:0", 600 << 20, 8 * GIB)])
    assert small() is None  # 5 % of 8 GiB is under the 512 MiB floor: 512 MiB kept free
    budget = Budget(memory=MemoryGuard(budget=None, reserve=GIB, available=lambda: 8 * GIB, rss=lambda: GIB,
                                       devices=lambda: [("cuda:0", 100 << 20, 8 * GIB)]))
    with pytest.raises(BudgetExhausted) as cut:
        budget.check(0)
    assert cut.value.reason == "memory" and "left on cuda:0" in str(cut.value)


def test_a_device_room_is_its_free_memory_less_what_is_kept_free_and_unknown_where_the_run_holds_nothing() -> None:
    from bisect_engine.load.memory import device_room

    # injected figures, as above: 2 GiB kept free of an 80 GiB device, 512 MiB of an 8 GiB one
    devices = lambda: [("cuda:0", 20 * GIB, 80 * GIB), ("cuda:1", GIB, 8 * GIB)]  # noqa: E731
    assert device_room(torch.device("cuda:0"), devices) == 18 * GIB
    assert device_room(torch.device("cuda:1"), devices) == GIB // 2
    assert device_room(torch.device("cuda:2"), devices) is None  # nothing held there: not asked
    assert device_room(torch.device("cuda:0"), lambda: []) is None


def test_the_device_room_hook_says_every_devices_room_for_a_gpu_sessions_check(monkeypatch) -> None:
    from bisect_engine.load.memory import DEVICE_ROOM_FOR_TESTS, device_room

    monkeypatch.setenv(DEVICE_ROOM_FOR_TESTS, "0")
    assert device_room(torch.device("cuda:3"), lambda: []) == 0
    monkeypatch.setenv(DEVICE_ROOM_FOR_TESTS, "5")
    assert device_room(torch.device("cuda:0"), lambda: [("cuda:0", 20 * GIB, 80 * GIB)]) == 5 << 20


def _fake_device_graph(device: str = "cuda") -> Any:
    """A graph recorded on a CUDA device (fake tensors: no device is needed to record it), with a
    factory op told to make its value there: what an fp64 run moved to the host must make on the host;
    a sum that cancels its terms' rounding (a noise floor)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    def program(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ((torch.mm(torch.relu(x), w) * torch.arange(w.shape[1], device=x.device)).sum(0) + 1e7) - 1e7

    with FakeTensorMode():
        graph = make_fx(program)(torch.empty(64, 512, device=device), torch.empty(512, 1024, device=device))
    assert str(next(n for n in graph.graph.nodes if n.target == torch.ops.aten.arange.default).kwargs["device"]) \
        .startswith(device)
    return graph


def test_an_fp64_run_its_device_cannot_take_goes_on_on_the_host_and_stops_where_the_host_cannot_either() -> None:
    """Issue 34: "On CUDA, an fp64 reference that does not fit the device runs on the host." The
    run's watch weighs each op of an fp64 or noise run recorded on a device against that device's
    room (figures injected: this machine has no device): where the device cannot take it and the
    host can, the run moves to the host (its values, and a factory op's device) and its values are
    fp64's; where neither can, the run stops before the op (a memory cut, never an allocation failure)."""
    from bisect_engine.verdict import fx_eval, noise, offload

    graph = _fake_device_graph()
    # the graph's inputs as the run holds them (on this machine's host: they stand in for the device's)
    x, w = torch.randn(64, 512), torch.randn(512, 1024)
    expected = ((torch.mm(torch.relu(x.double()), w.double()) * torch.arange(1024, dtype=torch.float64)).sum(0)
                + 1e7) - 1e7
    dtypes = {n.name: torch.float32 for n in graph.graph.nodes}

    def policy(device_room: int, host_room: int | None = None) -> offload.Offload:
        budget = Budget(room_left=lambda: host_room)
        return offload.Offload(require=budget.require, device_room=lambda device: device_room,
                               memory_room=lambda: host_room)

    full = policy(device_room=0)
    with offload.using(full):
        (fp64,) = fx_eval.run_graph(graph, [x, w], upcast=True)
    assert fp64.dtype == torch.float64 and fp64.device.type == "cpu"
    torch.testing.assert_close(fp64, expected, rtol=1e-12, atol=1e-9)
    assert full.to_host == 1 and full.to_json()["fp64_on_host"] == 1
    full = policy(device_room=0)  # a fresh watch: its first op is asked whatever its size
    with offload.using(full):
        floors = noise.noise_floors(graph, [x, w], dtypes)
    assert full.to_host == 1
    # the noise model's floors on the host: those of the same graph recorded on the host
    assert floors.carried and floors == noise.noise_floors(_fake_device_graph("cpu"), [x, w], dtypes)
    # the device takes it: the run stays there (a CPU-only torch cannot make the graph's CUDA values;
    # a CUDA one refuses this host's inputs beside them): the host is what made it run above
    with offload.using(policy(device_room=1 << 40)), pytest.raises((RuntimeError, AssertionError)):
        fx_eval.run_graph(graph, [x, w], upcast=True)
    with offload.using(policy(device_room=0, host_room=1 << 10)), pytest.raises(BudgetExhausted) as cut:
        fx_eval.run_graph(graph, [x, w], upcast=True)
    assert cut.value.reason == "memory" and "evaluating node relu (aten.relu.default) on the host " \
        "(cuda:0 has 0 MiB left) needs about" in str(cut.value), str(cut.value)


# An op whose allocation fails once more on the device (armed by a test), then works: what a CUDA
# workspace or a fragmented cache does to an op the watch let through.
_ALLOCATIONS_FAILING = [0]


@torch.library.custom_op("bisect_memory_test::fails_to_allocate", mutates_args=())
def _fails_to_allocate(x: torch.Tensor) -> torch.Tensor:
    if _ALLOCATIONS_FAILING[0] > 0:
        _ALLOCATIONS_FAILING[0] -= 1
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.10 GiB total)")
    return x * 2


@_fails_to_allocate.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _fake_device_graph_failing(device: str = "cuda") -> Any:
    """:func:`_fake_device_graph` with an op before the rest whose allocation can be made to fail
    (:data:`_ALLOCATIONS_FAILING`), its value a second output."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    def program(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        doubled = torch.ops.bisect_memory_test.fails_to_allocate(x)  # an op the noise model draws nothing for
        return ((torch.mm(torch.relu(x), w) * torch.arange(w.shape[1], device=x.device)).sum(0) + 1e7) - 1e7, doubled

    with FakeTensorMode():
        return make_fx(program)(torch.empty(64, 512, device=device), torch.empty(512, 1024, device=device))


def test_an_fp64_op_whose_allocation_fails_on_its_device_runs_again_on_the_host() -> None:
    """The watch weighs an op by an estimate: an op it lets run on the device can still fail to
    allocate there (a workspace, a fragmented cache). Where the host takes it, the fp64 run (and the
    noise model's two runs) move to the host and run that op again there, as where the watch said
    so first; where the host cannot, the run stops there, the device's failure named. Here the
    device says it is roomy and the op raises CUDA's ``OutOfMemoryError`` once: only a run that
    moved to the host can make the graph's later ``arange(device=cuda)`` on this CPU-only machine."""
    from bisect_engine.verdict import fx_eval, noise, offload

    graph = _fake_device_graph_failing()
    x, w = torch.randn(64, 512), torch.randn(512, 1024)
    expected = ((torch.mm(torch.relu(x.double()), w.double()) * torch.arange(1024, dtype=torch.float64)).sum(0)
                + 1e7) - 1e7
    dtypes = {n.name: torch.float32 for n in graph.graph.nodes}

    def policy(host_room: int | None = None) -> offload.Offload:
        budget = Budget(room_left=lambda: host_room)
        return offload.Offload(require=budget.require, device_room=lambda device: 1 << 40,
                               memory_room=lambda: host_room)

    roomy = policy()
    _ALLOCATIONS_FAILING[0] = 1
    with offload.using(roomy):
        fp64, doubled = fx_eval.run_graph(graph, [x, w], upcast=True)
    assert _ALLOCATIONS_FAILING[0] == 0 and fp64.device.type == "cpu"
    torch.testing.assert_close(fp64, expected, rtol=1e-12, atol=1e-9)
    assert torch.equal(doubled, 2 * x.double())
    assert roomy.to_host == 1
    roomy = policy()
    _ALLOCATIONS_FAILING[0] = 1
    with offload.using(roomy):
        floors = noise.noise_floors(graph, [x, w], dtypes)
    assert _ALLOCATIONS_FAILING[0] == 0 and roomy.to_host == 1
    # the same draws as the graph recorded on the host: no draw was made for the op that failed
    assert floors.carried and floors == noise.noise_floors(_fake_device_graph_failing("cpu"), [x, w], dtypes)
    # the host cannot take it either: the run stops at that op, the device's failure said
    _ALLOCATIONS_FAILING[0] = 1
    with offload.using(policy(host_room=1 << 10)), pytest.raises(BudgetExhausted) as cut:
        fx_eval.run_graph(graph, [x, w], upcast=True)
    assert cut.value.reason == "memory" and "evaluating node fails_to_allocate (bisect_memory_test.fails_to_allocate" \
        ".default) on the host (its allocation on cuda:0 failed: OutOfMemoryError: CUDA out of memory." in str(cut.value)
    # outside a run's watch nothing is asked: the failure is the run's memory cut, as before
    _ALLOCATIONS_FAILING[0] = 1
    with pytest.raises(BudgetExhausted) as cut:
        fx_eval.run_graph(graph, [x, w], upcast=True)
    assert cut.value.reason == "memory" and "in an op of the fp64 reference run" in str(cut.value)
    _ALLOCATIONS_FAILING[0] = 0


def test_the_model_level_fp64_model_goes_to_the_host_where_its_device_cannot_take_it() -> None:
    """The model-level check's fp64 model and run (``model_check._results_wait``): weighed against the
    model's device first (``Offload.weigh_on``): there where it fits, else on the host (in memory or
    on disk, as on the host), else the run stops. The host's run is the device's, op for op (``OnHost``)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from bisect_engine.localise import model_check
    from bisect_engine.verdict import offload

    asked: list[tuple[int, str]] = []
    policy = offload.Offload(require=lambda need, what: asked.append((need, what)), device_room=lambda d: 100 << 20,
                             memory_room=lambda: GIB)
    device = torch.device("cuda:0")
    assert policy.weigh_on(device, 50 << 20, "the check") == (False, False)
    assert asked == [(0, "the check")]  # on the device: only the guard's stops asked of the host
    asked.clear()
    assert policy.weigh_on(device, 500 << 20, "the check", 200 << 20, "on disk") == (True, False)
    assert asked == [(500 << 20, "the check on the host (cuda:0 has 100 MiB left)")]
    asked.clear()
    assert policy.weigh_on(device, 2 * GIB, "the check", 200 << 20, "on disk")[0] is True
    assert asked == [(200 << 20, "on disk on the host (cuda:0 has 100 MiB left)")] or not policy.on_disk()
    assert policy.weigh_on(None, 500 << 20, "the check") == (False, False)
    on_device = torch.nn.Linear(4, 4)
    with FakeTensorMode():
        on_device.register_buffer("mask", torch.empty(4, device="cuda"))
    assert model_check.model_device(on_device) == torch.device("cuda:0")
    assert model_check.model_device(torch.nn.Linear(4, 4)) is None

    # the host's fp64 run: the same values and gradients as the fp64 run where the model is
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16, requires_grad=True)
    loss = lambda out: out.square().mean()  # noqa: E731
    runs = [model_check._forward_and_grads(model_check._fp64_copy(model, host=host),
                                           model_check._fp64_inputs((x,), host), loss, 0, host=host)
            for host in (False, True)]
    assert len(runs[0]) == len(runs[1]) == 1 + 1 + 4 + 1  # output, loss, 4 parameter gradients, x's gradient
    for there, here in zip(*runs):
        assert here.dtype == torch.float64 and torch.equal(there, here)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: run where one is lent "
                          "(BISECT_TEST_DEVICE=cuda pytest tests/test_memory.py -k cuda)")


@CUDA
def test_cuda_an_fp64_reference_its_device_cannot_take_is_computed_on_the_host_to_the_devices_values() -> None:
    """On a real device: the fp64 reference and noise model of a graph recorded on CUDA, with its
    device said to be full, run on the host (their values there, a factory op made there) and give
    the device's fp64 values (to fp64's rounding: the host's matmul sums in another order)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.verdict import fx_eval, noise, offload

    def program(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ((torch.mm(torch.relu(x), w) * torch.arange(w.shape[1], device=x.device)).sum(0) + 1e7) - 1e7

    x, w = torch.randn(64, 512, device="cuda"), torch.randn(512, 1024, device="cuda")
    graph = make_fx(program, tracing_mode="fake")(x, w)
    dtypes = {n.name: torch.float32 for n in graph.graph.nodes}

    def policy(room: int) -> offload.Offload:
        return offload.Offload(require=Budget().require, device_room=lambda device: room)

    with offload.using(policy(1 << 40)):
        (there,) = fx_eval.run_graph(graph, [x, w], upcast=True)
    full = policy(0)
    with offload.using(full):
        (here,) = fx_eval.run_graph(graph, [x, w], upcast=True)
    assert (there.device.type, here.device.type, here.dtype, full.to_host) == ("cuda", "cpu", torch.float64, 1)
    torch.testing.assert_close(here, there.cpu(), rtol=1e-12, atol=1e-6)
    full = policy(0)
    with offload.using(full):
        floors = noise.noise_floors(graph, [x, w], dtypes)
    assert full.to_host == 1 and set(floors.carried) == {"sub"}


@CUDA
def test_cuda_the_model_level_fp64_model_on_the_host_gives_the_devices_fp64_values() -> None:
    """On a real device: the model-level check's fp64 model copied to the host (``host``) and run
    there under ``OnHost`` (a tensor the forward makes on the device made on the host) gives the
    outputs, loss and gradients of the fp64 model on the device."""
    from bisect_engine.localise import model_check

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            shift = torch.ones(32, device="cuda")  # made on the device whatever the parameters' device
            return self.down(torch.nn.functional.gelu(self.up(x)) + shift)

    torch.manual_seed(0)
    model = Model().cuda()
    x = torch.randn(8, 16, device="cuda", requires_grad=True)
    assert model_check.model_device(model) == torch.device("cuda:0")
    loss = lambda out: out.square().mean()  # noqa: E731
    there, here = (model_check._forward_and_grads(model_check._fp64_copy(model, host=host),
                                                  model_check._fp64_inputs((x,), host), loss, 0, host=host)
                   for host in (False, True))
    assert len(there) == len(here) == 1 + 1 + 4 + 1
    for on_device, on_host in zip(there, here):
        assert (on_device.device.type, on_host.device.type, on_host.dtype) == ("cuda", "cpu", torch.float64)
        torch.testing.assert_close(on_host, on_device.cpu(), rtol=1e-10, atol=1e-12)


@CUDA
@pytest.mark.parametrize("planted", [False, True])
def test_cuda_a_run_whose_device_takes_no_fp64_run_judges_on_the_host_and_names_the_same_op(
        tmp_path: Path, planted: bool) -> None:
    """End to end on a real device, every fp64 run said not to fit it (``BISECT_TESTING_DEVICE_ROOM=0``):
    the references, noise runs and the model-level fp64 model go to the host (counted in
    ``stats.offload.fp64_on_host``), and the verdict is the device's own: a clean training step
    clean, a planted relu lowering (Triton's and C++'s) named."""
    import os
    import subprocess
    import sys

    model = tmp_path / "model.py"
    model.write_text("import torch\nimport torch._inductor.config as c\n"
                     + ("c.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'\n"
                        "c.triton.inject_relu_bug_TESTING_ONLY = 'accuracy'\n" if planted else "")
                     + "def get_model():\n    torch.manual_seed(0)\n"
                     "    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))\n"
                     "def get_inputs():\n    torch.manual_seed(1)\n    return (torch.randn(32, 64),)\n"
                     "def loss_fn(output):\n    return output.square().mean()\n")
    out = tmp_path / "out"
    env = {**os.environ, "BISECT_TESTING_DEVICE_ROOM": "0", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", str(model), "--device", "cuda",
                           "--out", str(out), "-q", "--verify-runs", "1"], env=env, capture_output=True, text=True)
    report = json.loads((out / "report.json").read_text())
    assert report["stats"]["offload"].get("fp64_on_host", 0) >= 1, report["stats"]
    if planted:
        assert (done.returncode, report["verdict"]) == (1, "divergent"), done.stderr[-3000:]
        assert "aten.relu" in json.dumps(report["culprit"]), report["culprit"]
    else:
        assert (done.returncode, report["verdict"]) == (0, "clean"), done.stderr[-3000:]


def test_budget_cut_for_memory_is_a_budget_exhausted() -> None:
    short = iter([None, "memory: short"])
    budget = Budget(max_compiles=10, memory=lambda: next(short))
    budget.check(0)  # room
    with pytest.raises(BudgetExhausted) as cut:
        budget.check(1)
    assert cut.value.reason == "memory" and budget.exhausted is cut.value


def test_admission_refuses_only_what_the_models_own_step_cannot_hold() -> None:
    """Refused (exit 2) only where the parameters, their gradients and the inputs exceed the memory
    available: a model eager can run starts, even where the check's later steps may not fit (those
    stop the run then, exit 4)."""
    model, inputs = torch.nn.Linear(256, 256), (torch.ones(1024, 256),)  # 1 MiB of input, 256 KiB of weights
    check_memory(model, inputs, available=lambda: 2 * 2**20)  # 2 x 0.25 + 1 = 1.5 MiB fit (8 copies would not)
    with pytest.raises(UsageError, match="refused before starting"):
        check_memory(model, inputs, available=lambda: 2**20)
    with pytest.raises(UsageError, match="under --memory-budget"):
        check_memory(model, inputs, available=lambda: GIB, budget=2**20)


class _Block(torch.nn.Module):
    """A pre-norm transformer block (self-attention, GELU MLP, dropout): what the step estimate is
    run on, beside a plain Linear stack."""

    def __init__(self, width: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.attention = torch.nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Dropout(0.1),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def test_the_steps_peak_on_fake_tensors_is_the_real_steps_and_leaves_the_model_as_it_was() -> None:
    """``eager_step_bytes``: the peak a training step (forward, loss, every gradient) and an inference
    step add beside the parameters and inputs, counted on fake tensors, is the same count on the
    real step, to the byte; the model's parameters, their gradients and torch's random state are
    as they were (the fake run swaps the parameters for the call only, and draws nothing)."""
    from bisect_engine.load.memory import eager_step_bytes, step_peak_bytes

    torch.manual_seed(0)
    model, inputs, target = _Block().train(), (torch.randn(4, 32, 64),), torch.randn(4, 32, 64)
    loss_fn = lambda output: (output - target).square().mean()  # noqa: E731 - reads a tensor from outside the step
    before = [p.detach().clone() for p in model.parameters()]
    state = torch.get_rng_state()
    fake = eager_step_bytes(model, inputs, loss_fn)
    assert torch.equal(state, torch.get_rng_state())
    assert all(p.grad is None and torch.equal(p, b) for p, b in zip(model.parameters(), before))
    real = step_peak_bytes(model, inputs, loss_fn)
    parameters = sum(p.numel() * 4 for p in model.parameters())
    assert fake == real and real > parameters, (fake, real, parameters)  # the gradients and the activations
    model.eval()
    assert eager_step_bytes(model, inputs, None) == step_peak_bytes(model, inputs, None) < real


def test_a_forward_that_keeps_values_on_itself_keeps_none_of_the_fake_run() -> None:
    """The fake run calls the user's forward once more: what it keeps on the module (a cache made at
    the first call, a counter, a list and a dict it fills) is put back, so the real runs after it see
    the module as the program left it, never a fake tensor."""
    from bisect_engine.load.memory import eager_step_bytes

    class Caching(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear, self.calls, self.seen, self.memo = torch.nn.Linear(8, 8), 0, [], {}

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            self.seen.append(x)
            self.memo["last"] = x
            if not hasattr(self, "table"):
                self.table = x.cos()
            return self.linear(x) + self.table

    model, inputs = Caching(), (torch.randn(4, 8),)
    seen, memo = model.seen, model.memo
    assert eager_step_bytes(model, inputs, lambda output: output.sum()) is not None
    assert (model.calls, model.seen, model.memo, hasattr(model, "table")) == (0, [], {}, False)
    assert model.seen is seen and model.memo is memo
    assert torch.equal(model(*inputs), model.linear(inputs[0]) + inputs[0].cos())


def test_admission_counts_the_steps_activations_where_it_can_run_it_on_fake_tensors() -> None:
    """A step whose activations dwarf its parameters (a 64 -> 4096 Linear on 4096 rows: 1 MiB of weights
    and input, 64 MiB of activation): refused where its peak cannot fit (16 MiB available), which
    the parameters' rule alone (2 x weights + inputs, about 3 MiB) admitted, its message naming the
    fake run; admitted where it fits. A step that reads a value (``.item()``) cannot run on fake
    tensors: not known, the parameters' rule applies."""
    from bisect_engine.load.memory import eager_step_bytes

    model = torch.nn.Sequential(torch.nn.Linear(64, 4096), torch.nn.ReLU())
    inputs, loss_fn = (torch.ones(4096, 64),), lambda output: output.mean()
    step = eager_step_bytes(model, inputs, loss_fn)
    assert step is not None and step >= 4096 * 4096 * 4, step
    check_memory(model, inputs, available=lambda: 16 * 2**20)  # the parameters' rule: admitted
    with pytest.raises(UsageError, match="from a run of it on fake tensors.*refused before starting"):
        check_memory(model, inputs, available=lambda: 16 * 2**20, step=step)
    check_memory(model, inputs, available=lambda: GIB, step=step)

    class ReadsAValue(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * float(x.sum().item())

    assert eager_step_bytes(ReadsAValue(), inputs, None) is None


def test_the_model_level_checks_needs_count_its_fp64_activations() -> None:
    """The model-level check's estimates, in memory and with its fp64 model on disk, count the fp64
    run's activations (twice what the step adds less its gradients) where admission measured the
    step, and one eager run at what its step adds: the activation-heavy step above needs more than
    its parameters' multiples alone said (before: 8 x 1 MiB in memory, 2 MiB + inputs on disk)."""
    import dataclasses

    from bisect_engine.load.memory import eager_step_bytes
    from bisect_engine.load.model_file import ModelSpec
    from bisect_engine.localise.model_check import fp64_activation_bytes
    from bisect_engine.localise.release import model_check_need, model_check_need_on_disk

    model = torch.nn.Sequential(torch.nn.Linear(64, 4096), torch.nn.ReLU())
    inputs, loss_fn = (torch.ones(4096, 64),), lambda output: output.mean()
    spec = ModelSpec(Path("m.py"), model, inputs, loss_fn, None)
    measured = dataclasses.replace(spec, step_bytes=eager_step_bytes(model, inputs, loss_fn))
    gradients = sum(p.numel() * 4 for p in model.parameters())
    assert fp64_activation_bytes(spec) == 0 and fp64_activation_bytes(measured) == 2 * (measured.step_bytes - gradients)
    assert model_check_need(measured) == model_check_need(spec) + fp64_activation_bytes(measured)
    assert model_check_need_on_disk(measured) >= measured.step_bytes + 4096 * 64 * 4 > model_check_need_on_disk(spec)


def test_a_step_that_cannot_fit_stops_the_run_before_it() -> None:
    """``Budget.require``: a step declaring more than the room left is a budget cut (reason memory)
    naming it; within the room, or with nothing known, it goes on."""
    budget = Budget(room_left=lambda: GIB)
    budget.require(GIB // 2, "a small step")
    Budget().require(100 * GIB, "a step with no room known")
    with pytest.raises(BudgetExhausted) as cut:
        budget.require(3 * GIB, "the model-level check's fp64 reference")
    assert cut.value.reason == "memory" and budget.exhausted is cut.value
    assert "the model-level check's fp64 reference needs about 3.00 GiB and 1.00 GiB is left" in str(cut.value)


def test_values_move_before_a_step_is_weighed_against_the_room(tmp_path: Path) -> None:
    """``Offload.spill`` with a step named: the values move first (where memory asks), then the
    step is weighed (``require``); an unnamed spill weighs nothing."""
    from bisect_engine.verdict import offload

    asked: list[tuple[int, str]] = []
    policy = offload.Offload(room=lambda: None, folder=str(tmp_path), require=lambda need, what: asked.append((need, what)))
    with offload.using(policy):
        offload.offload([], [], need=GIB)
        offload.offload([], [], need=2 * GIB, what="judging graph g")
    assert asked == [(2 * GIB, "judging graph g")]


def test_an_fp64_or_noise_run_stops_before_the_op_that_cannot_fit_and_not_outside_a_run() -> None:
    """The run's watch (``offload.using`` -> ``fx_eval.watch_op``) weighs each op of an fp64 or noise
    run before it runs: the op whose value (in fp64) and fp64 copies of what it reads pass the room
    is a budget cut naming it, before it allocates; the ops before it ran. Without a run's policy
    (a repro, a worker) nothing is asked."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.verdict import fx_eval, noise, offload

    def program(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.mm(torch.relu(x), w).sum()

    x, w = torch.randn(64, 512), torch.randn(512, 4096)  # the mm: a 2 MiB fp64 value, its weight 16 MiB in fp64
    graph = make_fx(program, tracing_mode="fake")(x, w)
    seen: list[tuple[str, int]] = []

    def room(limit: int) -> offload.Offload:
        budget = Budget(room_left=lambda: limit)
        return offload.Offload(require=lambda need, what: (seen.append((what, need)), budget.require(need, what))[1])

    assert fx_eval.run_graph(graph, [x, w], upcast=True)[0] is not None  # no run: nothing asked
    assert seen == []
    with offload.using(room(64 << 20)):
        fx_eval.run_graph(graph, [x, w], upcast=True)
    assert [what.split()[2] for what, _ in seen][:1] == ["relu"] and seen  # asked before the first op
    for run in (lambda: fx_eval.run_graph(graph, [x, w], upcast=True),
                lambda: noise.noise_floors(graph, [x, w], {n.name: torch.float32 for n in graph.graph.nodes})):
        seen.clear()
        with offload.using(room(8 << 20)), pytest.raises(BudgetExhausted) as cut:
            run()
        assert cut.value.reason == "memory", cut.value
        assert "evaluating node mm (aten.mm.default) needs about" in str(cut.value), str(cut.value)
        assert [what.split()[2] for what, _ in seen] == ["relu", "mm"]  # relu fitted and ran; mm did not


def _run_in_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: int, width: int, model: str) -> tuple[Any, dict]:
    """The CLI's run of ``model`` (an expression) on 8 x ``width`` inputs with a squared-mean loss, with
    the memory left said to be ``room`` bytes throughout: its result and its report."""
    from bisect_engine.load import memory

    monkeypatch.setattr(memory.MemoryGuard, "room", lambda self: room)
    path = tmp_path / "model.py"
    path.write_text("import torch\n"
                    f"def get_model():\n    torch.manual_seed(0)\n    return {model}\n"
                    f"def get_inputs():\n    return (torch.randn(8, {width}, generator=torch.Generator().manual_seed(1)),)\n"
                    "def loss_fn(output):\n    return output.square().mean()\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(path), "--out", str(out), "-q", "--verify-runs", "0"])
    return result, json.loads((out / "report.json").read_text())


def test_a_run_whose_model_level_check_cannot_fit_stops_before_it_with_its_graphs_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond what the check's fp64 model can have even on disk (here: a room said to be 24 MiB, where
    judging a graph needs 4 x its ~4 MiB of inputs and the model-level check 8 x its 4 MiB of
    parameters in memory, and on disk 8 x its largest, the same one Linear), the run is not refused:
    its graphs are judged, and it ends before the model-level check with exit 4, ``incomplete``, the
    step named."""
    result, report = _run_in_room(tmp_path, monkeypatch, 24 << 20, 1024,
                                  "torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Tanh())")
    assert result.exit_code == 4, result.output
    assert report["verdict"] == "incomplete", report
    assert "the model-level check, its fp64 model on disk needs about 32 MiB" in report["budget"], report["budget"]
    assert [(g["kind"], g["whole"]) for g in report["graphs"]] == [("forward", "match"), ("backward", "match")]
    assert report["not_checked"] == []  # every captured graph was judged; only the model-level check was not


def test_an_fp64_model_on_disk_gives_the_same_bits_and_holds_its_parameters_and_gradients_in_files(
        tmp_path: Path) -> None:
    """The model-level check's fp64 reference where it does not fit in memory (``_fp64_copy`` and
    ``_forward_and_grads`` with ``on_disk``): the same outputs, loss and gradients bit for bit as in
    memory; its large parameters and their gradients lie in the mapped files (a small one stays)."""
    from bisect_engine.localise.model_check import _forward_and_grads, _fp64_copy, _fp64_inputs
    from bisect_engine.verdict import offload

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Tanh(), torch.nn.LayerNorm(512),
                                torch.nn.Linear(512, 512))
    inputs = (torch.randn(8, 512),)
    loss_fn = lambda output: output.square().mean()  # noqa: E731
    in_memory = _forward_and_grads(_fp64_copy(model), _fp64_inputs(inputs), loss_fn, 0)
    policy = offload.Offload(folder=str(tmp_path))
    with offload.using(policy):
        model64 = _fp64_copy(model, on_disk=True)
        on_disk = _forward_and_grads(model64, _fp64_inputs(inputs), loss_fn, 0, on_disk=True)
    assert len(on_disk) == len(in_memory) and all(torch.equal(a, b) for a, b in zip(in_memory, on_disk))
    assert all(v.dtype == torch.float64 for v in on_disk)
    files = offload._spilled_ranges()
    in_files = lambda t: any(start <= t.untyped_storage().data_ptr() < end for start, end in files)  # noqa: E731
    large = [p for p in model64.parameters() if p.numel() * 8 >= offload.MIN_BYTES]
    assert len(large) == 2 and all(in_files(p) and in_files(p.grad) for p in large)
    assert not in_files(model64[2].weight)  # the LayerNorm's 4 KiB stays in memory
    assert policy.disk_copies == 2 and list(model.parameters())[0].dtype == torch.float32


def test_the_model_level_noise_floors_are_the_same_with_the_fp64_model_on_disk(tmp_path: Path) -> None:
    """The noise model's second fp64 run (``model_check._noise_floors``) takes the same way to disk
    where its copy does not fit (memory said to have 1 MiB of room): the same floors as in memory."""
    from bisect_engine.load.model_file import ModelSpec
    from bisect_engine.localise.model_check import _forward_and_grads, _fp64_copy, _fp64_inputs, _noise_floors
    from bisect_engine.verdict import offload
    from bisect_engine.verdict.model_state import ModelRuns

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.LayerNorm(512))
    spec = ModelSpec(Path("m.py"), model, (torch.randn(8, 512),), lambda output: output.square().mean(), None)
    floors = []
    for room in (None, 1 << 20):
        policy = offload.Offload(folder=str(tmp_path), memory_room=lambda room=room: room, require=lambda need, what: None)
        with offload.using(policy), ModelRuns(model) as runs:
            eager = runs.run(lambda: _forward_and_grads(model, spec.inputs, spec.loss_fn, 0))
            fp64 = _forward_and_grads(_fp64_copy(model), _fp64_inputs(spec.inputs), spec.loss_fn, 0)
            floors.append(_noise_floors(spec, 0, fp64, eager, runs))
        assert policy.disk_copies == (0 if room is None else 1)  # the 2 MiB fp64 weight; the rest is small
    assert floors[0] == floors[1] and any(f > 0 for f in floors[0]), floors


def test_a_model_level_check_that_does_not_fit_in_memory_runs_with_its_fp64_model_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the check's fp64 model and run (8 x its ~4 MiB of parameters) would not fit the room (said
    to be 20 MiB) but its run with the fp64 model on disk does (the larger of 2 x the parameters and
    8 x the largest, 1 MiB), the run is not stopped there: the model-level check runs, its fp64 model
    in files, and the run ends clean (before: exit 4, the check named)."""
    result, report = _run_in_room(
        tmp_path, monkeypatch, 20 << 20, 512,
        "torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(512, 512), torch.nn.Tanh())])")
    assert result.exit_code == 0 and report["verdict"] == "clean", (result.output, report.get("budget"))
    assert report["stats"]["offload"]["disk_copies"] == 4, report["stats"]["offload"]  # the four 1 MiB weights
    # the step's peak, measured on fake tensors at admission: the four weights' and biases' gradients,
    # the activations and temporaries (the same count on the real step, to the byte)
    from bisect_engine.load.memory import step_peak_bytes

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(512, 512), torch.nn.Tanh())])
    step = step_peak_bytes(model, (torch.randn(8, 512),), lambda output: output.square().mean())
    assert report["stats"]["eager_step_mb"] == round(step / 2**20, 3), (report["stats"], step)
    assert report["not_checked"] == [] and report["budget"] is None


def test_a_graph_memory_stops_inside_its_judgement_is_judged_again_in_segments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph whose estimate (4 x what it reads) fits the room but one of whose ops, weighed inside
    its fp64 or noise run (``Offload.watch``), does not (here: the watch made to stop every op of a
    graph holding three tanhs or more, i.e. the whole forward, never a half of it; the eager run that
    gives the segments their inputs is let through): before, exit 4,
    ``incomplete``; now its partial judgement is let go and it is judged again in segments at module
    boundaries, and the run ends clean, the forward listed as judged in segments, not at once."""
    from bisect_engine.verdict import offload
    from bisect_engine.verdict.fx_eval import value_bytes

    def watch(self: Any, node: Any, need: int, device: Any = None, failed: Any = None) -> bool:  # an fp64 or noise run's op (eager's weighs its value)
        if need > value_bytes(node, False) and sum(n.target is torch.ops.aten.tanh.default for n in node.graph.nodes) >= 3:
            self.require(1 << 50, f"evaluating node {node.name} ({node.target})")
        return False

    monkeypatch.setattr(offload.Offload, "watch", watch)
    # the stopped judgement's values are let go before the segments are planned (its context is
    # held by nothing: not the run's records, nor the stop's traceback)
    import weakref

    from bisect_engine.localise import run_steps
    from bisect_engine.verdict.oracle import GraphContext

    contexts: dict[str, Any] = {}
    made = GraphContext.from_captured.__func__  # type: ignore[attr-defined]

    def from_captured(cls: Any, captured: Any, *args: Any, **kwargs: Any) -> Any:
        context = made(cls, captured, *args, **kwargs)
        contexts.setdefault(captured.name, weakref.ref(context))
        return context

    let_go: list[bool] = []
    planned = run_steps.segments_after_memory_stop

    def segments_after_memory_stop(graph: Any, driver: Any, cut: Any) -> Any:
        segments = planned(graph, driver, cut)
        let_go.append(contexts[graph.name]() is None)
        return segments

    monkeypatch.setattr(GraphContext, "from_captured", classmethod(from_captured))
    monkeypatch.setattr(run_steps, "segments_after_memory_stop", segments_after_memory_stop)
    result, report = _run_in_room(
        tmp_path, monkeypatch, 1 << 30, 64,
        "torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(64, 64), torch.nn.Tanh())])")
    assert result.exit_code == 0 and report["verdict"] == "clean", (result.output, report.get("budget"))
    names = [g["name"] for g in report["graphs"]]
    assert "forward_0" not in names and "backward_0" in names, names
    segments = [name for name in names if name.startswith("forward_0_segment")]
    assert len(segments) >= 2 and all(g["whole"] == "match" for g in report["graphs"]), report["graphs"]
    assert [(s["graph"], s["check"], s["segments"]) for s in report["not_checked"]] == \
        [("forward_0", "graph_at_once", len(segments))], report["not_checked"]
    assert report["budget"] is None and let_go == [True], let_go


def test_a_run_past_its_memory_budget_ends_incomplete_with_a_report(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("import torch\ndef get_model():\n    return torch.nn.Tanh()\n"
                     "def get_inputs():\n    return (torch.ones(4, 4),)\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(model), "--out", str(out), "-q", "--verify-runs", "0",
                                       "--memory-budget", "0.001"])  # 1 MiB: this process holds more
    assert result.exit_code == 4, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "incomplete" and "past --memory-budget" in report["budget"], report["budget"]


class _Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.weight).sum()


def test_capture_holds_parameters_by_reference_and_refuses_them_once_written() -> None:
    """No copy of the parameters at capture; an in-place write after it (an optimizer step) makes
    judging the graph our harness's error, never a verdict on other values than its call had."""
    from bisect_engine.load.capture import capture
    from bisect_engine.verdict.graphs import CapturedInputChanged
    from bisect_engine.verdict.oracle import GraphContext

    model = _Scaled()
    graphs = capture(model, (torch.randn(4),), lambda out: out, False)[0]
    forward = next(g for g in graphs if g.kind == "forward")
    assert any(v.data_ptr() == model.weight.data_ptr() for v in forward.inputs if isinstance(v, torch.Tensor))
    GraphContext.from_captured(forward)  # intact: judged
    with torch.no_grad():
        model.weight.mul_(2)
    with pytest.raises(CapturedInputChanged):
        GraphContext.from_captured(forward)


def test_a_backward_holds_its_saved_transposed_weights_by_reference() -> None:
    """A Linear's backward saves its weight transposed: a view of the parameter, as large as it.
    Held by reference (no second copy of the parameters), its version recorded as the parameter's:
    a write to the parameter after capture is refused for the backward too."""
    from bisect_engine.load.capture import capture
    from bisect_engine.verdict.graphs import CapturedInputChanged
    from bisect_engine.verdict.oracle import GraphContext

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))
    graphs = capture(model, (torch.randn(4, 16),), lambda out: out.square().mean(), False)[0]
    backward = next(g for g in graphs if g.kind == "backward")
    weights = {p.untyped_storage().data_ptr() for p in (model[0].weight, model[2].weight)}
    on_weights = {v.untyped_storage().data_ptr() for v in backward.inputs
                  if isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr() in weights}
    assert on_weights == {model[2].weight.untyped_storage().data_ptr()}  # the first weight's grad needs no weight
    assert any(v.untyped_storage().data_ptr() in weights for v, _version in backward.shared)
    GraphContext.from_captured(backward)  # intact: judged
    with torch.no_grad():
        model[2].weight.mul_(2)
    with pytest.raises(CapturedInputChanged):
        GraphContext.from_captured(backward)


# ---- the backward replay of a departure's consequence, streamed (issue 34) ---------------------------
def _flipping_backward(saved: torch.Tensor, tangent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.ge(saved, 0)  # a float saved by the forward, compared: one sign flips the gradient
    grad = torch.where(mask, tangent / 2, torch.zeros_like(saved)) * torch.exp(saved)
    return torch.neg(grad) + 1.0, saved * tangent  # the second reads the value, never compares it


def test_a_streamed_backward_replay_finds_what_the_held_replay_finds_and_holds_no_replay(monkeypatch) -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.strategies import departures
    from bisect_engine.verdict.graphs import CapturedGraph
    from bisect_engine.verdict.oracle import GraphContext

    saved, tangent = torch.tensor([0.25, -0.5, 1.5, 0.0]), torch.tensor(1.0)
    module = make_fx(_flipping_backward)(saved, tangent)
    next(n for n in module.graph.nodes if n.op == "placeholder")._rename("hinge")  # the forward's saved name
    module.recompile()

    def consequence(overrides: dict[str, torch.Tensor], held: bool) -> tuple[object, list[object]]:
        backward = GraphContext.from_captured(CapturedGraph("backward_0", "backward", 0, module,
                                                            [saved, tangent], True))
        if held:  # the replay that holds every value: what a backward that writes in place still takes
            monkeypatch.setattr(departures, "mutates", lambda graph_module: True)
        try:
            return departures._flipped(backward, overrides), backward._replays
        finally:
            monkeypatch.undo()

    flipped = {"hinge": torch.tensor([0.25, -0.5, -1.5, 0.0])}  # one sign flipped: the first gradient flips
    streamed, kept = consequence(flipped, held=False)
    assert streamed is not None and streamed.output == module.graph.find_nodes(op="output")[0].args[0][0].name
    assert streamed == consequence(flipped, held=True)[0]  # output, difference and amplifiers alike
    assert any(a.why == "quantises" for a in streamed.amplifiers)  # the mask on its path
    assert kept == []  # no replay of every backward value is kept after it
    rounded = {"hinge": saved * (1 + 2**-20)}  # a rounding-sized change that flips no mask
    assert consequence(rounded, held=False)[0] is None and consequence(rounded, held=True)[0] is None


# ---- the run's values on disk while the upstream gate's model-level check runs (issue 34) -----------
def _mapped_spills() -> int:
    with open("/proc/self/maps") as maps:
        return sum("bisect-spill-" in line for line in maps)


def test_spilled_values_keep_their_objects_bits_and_sharing_and_leave_protected_ones(tmp_path: Path) -> None:
    from bisect_engine.verdict.offload import scratch_on_disk, spill, tensors_in

    if not scratch_on_disk(str(tmp_path)):
        pytest.skip("the temporary folder is in memory: nothing is moved there")
    base = torch.randn(512, 1024)  # 2 MB
    view = base[3:, 5:]  # shares base's storage
    small = torch.randn(8)  # under MIN_BYTES: stays
    parameter = torch.randn(1024, 1024)
    alias = parameter.view(-1)  # shares a protected storage: stays
    record = {"values": [base, view, (small, alias)], "again": view}
    expected = [t.clone() for t in (base, view, small, alias)]
    held = tensors_in([record])
    assert {id(t) for t in held} == {id(base), id(view), id(small), id(alias)}
    before, parameter_version = _mapped_spills(), parameter._version
    moved = spill(held, [parameter], str(tmp_path))
    assert moved == base.untyped_storage().nbytes() == 512 * 1024 * 4
    assert _mapped_spills() == before + 1 and list(tmp_path.iterdir()) == []  # mapped, its file already unlinked
    assert record["values"][0] is base and record["again"] is view  # the same objects everywhere
    assert all(torch.equal(a, b) for a, b in zip((base, view, small, alias), expected))
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()  # still one storage
    assert view.storage_offset() == 3 * 1024 + 5 and view.stride() == base.stride()
    assert parameter._version == parameter_version and alias.data_ptr() == parameter.data_ptr()
    assert spill(held, [parameter], str(tmp_path)) == 0 and _mapped_spills() == before + 1  # moved once
    view.add_(1.0)  # a write after the move reaches every tensor on the storage, as before it
    assert torch.equal(base[3:, 5:], expected[1] + 1.0)
    del base, view, record, held
    assert _mapped_spills() == before  # the mapping goes with the last tensor on it


def _resident_kb(tensor: torch.Tensor) -> int:
    """The resident kB of the mapping that holds ``tensor``'s storage (``/proc/self/smaps``)."""
    pointer, inside = tensor.untyped_storage().data_ptr(), False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and all(c in "0123456789abcdef-" for c in head):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= pointer < end
            elif inside and line.startswith("Rss:"):
                return int(line.split()[1])
    raise AssertionError("no mapping holds the tensor")


def test_a_moved_value_read_back_leaves_memory_again_at_the_next_move_and_keeps_its_writes(tmp_path: Path) -> None:
    """A value moved to disk and read since (judged) is in memory again; the next move of it (the
    next step that needs room) drops those pages again (``MADV_PAGEOUT``): read again from the file,
    the same bits. A page written since the move is the process's own: it stays, with the write."""
    from bisect_engine.verdict.offload import scratch_on_disk, spill

    if not scratch_on_disk(str(tmp_path)):
        pytest.skip("the temporary folder is in memory: nothing is moved there")
    value = torch.randn(1024, 1024)  # 4 MB
    expected = value.clone()
    assert spill([value], [], str(tmp_path)) == 4 << 20
    assert torch.equal(value, expected) and _resident_kb(value) >= 4000  # read back: resident
    assert spill([value], [], str(tmp_path)) == 0  # moved once; its pages leave memory again
    assert _resident_kb(value) < 400
    assert torch.equal(value, expected)  # read again from the file
    value[:512].add_(1.0)  # half of it written: those pages are the process's own now
    assert spill([value], [], str(tmp_path)) == 0
    assert 1900 <= _resident_kb(value) < 2500
    assert torch.equal(value[:512], expected[:512] + 1.0) and torch.equal(value[512:], expected[512:])



def test_a_graph_digested_gives_back_the_pages_its_moved_values_were_read_into(tmp_path: Path) -> None:
    """A report's digests read every value of a graph once, values that waited on disk included:
    each leaves memory again once digested (``offload.PagedOut``), the digests those of its bits."""
    from bisect_engine.localise.release import graph_digests
    from bisect_engine.verdict.digest import digest
    from bisect_engine.verdict.offload import scratch_on_disk, spill

    if not scratch_on_disk(str(tmp_path)):
        pytest.skip("the temporary folder is in memory: nothing is moved there")
    from types import SimpleNamespace

    from torch.fx.experimental.proxy_tensor import make_fx

    module = make_fx(lambda x: torch.tanh(x) * 2)(torch.randn(4))
    names = [n.name for n in module.graph.nodes if n.op == "call_function"]
    values = {name: torch.randn(1024, 1024) for name in names}  # 4 MB each
    expected = {name: digest(v).to_json() for name, v in values.items()}
    assert spill(list(values.values()), [], str(tmp_path)) == len(names) * (4 << 20)
    view = SimpleNamespace(compute_nodes=[n for n in module.graph.nodes if n.op == "call_function"])
    graph = SimpleNamespace(digests=None, nodes=None, whole=SimpleNamespace(compiled_values={}, outputs={}),
                            context=SimpleNamespace(eager_values=values, view=view))
    entries = graph_digests(graph)  # type: ignore[arg-type]
    assert [e["eager"] for e in entries] == [expected[name] for name in names]
    assert all(_resident_kb(v) < 400 for v in values.values())

def test_a_spill_folder_that_cannot_take_the_values_leaves_them_in_memory(tmp_path: Path, monkeypatch) -> None:
    """A full or unwritable folder (ENOSPC, EACCES) stops the moves: the values stay where they were,
    the run goes on (our scratch failing is never the run's end)."""
    from bisect_engine.verdict import offload

    if not offload.scratch_on_disk(str(tmp_path)):
        pytest.skip("the temporary folder is in memory: nothing is moved there")

    def full(*_: Any) -> torch.UntypedStorage:  # _to_file's chunks, size and folder
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(offload, "_to_file", full)
    values = [torch.randn(512, 1024), torch.randn(512, 1024)]
    expected = [(v.data_ptr(), v.clone()) for v in values]
    assert offload.spill(values, [], str(tmp_path)) == 0
    assert all(v.data_ptr() == ptr and torch.equal(v, copy) for v, (ptr, copy) in zip(values, expected))


def test_values_move_only_when_memory_asks_and_into_the_folder_given(tmp_path: Path) -> None:
    """The run's offload policy (``verdict/offload.Offload``): with room to spare nothing is written;
    a tight --memory-budget (``load/memory.run_offload``: the room MemoryGuard leaves) moves the
    values, into the folder given; the counts say so (the report's ``stats.offload``)."""
    from bisect_engine.load.memory import run_offload, rss_bytes
    from bisect_engine.verdict import offload

    if not offload.scratch_on_disk(str(tmp_path)):
        pytest.skip("the temporary folder is in memory: nothing is moved there")
    values = [torch.randn(512, 1024)]
    kept, before = values[0].clone(), _mapped_spills()
    roomy = offload.Offload(room=MemoryGuard(budget=None, reserve=GIB, available=lambda: 8 * GIB).room,
                            folder=str(tmp_path))
    with offload.using(roomy):
        assert offload.offload(values, [], need=GIB) == 0  # 7 GiB left: nothing written
    assert (roomy.asked, roomy.moves, roomy.moved) == (1, 0, 0) and _mapped_spills() == before
    assert offload.offload(values, [], need=GIB) == 0  # outside a run's policy: nothing moves
    held = rss_bytes()
    assert held is not None
    assert run_offload(budget=None, folder=str(tmp_path)).wanted(1)  # no budget given: values always wait on disk
    tight = run_offload(budget=held + (64 << 20), folder=str(tmp_path))  # 64 MiB left under the budget
    with offload.using(tight):
        moved = offload.offload(values, [], need=128 << 20)
    assert moved == values[0].untyped_storage().nbytes() and _mapped_spills() == before + 1
    assert torch.equal(values[0], kept)
    assert tight.to_json() == {"moved_mb": 2, "moves": 1, "asked": 1, "folder": "output_scratch"}
    assert list(tmp_path.iterdir()) == []  # the file unlinked once mapped
    del values
    assert _mapped_spills() == before


def test_the_model_level_noise_run_moves_eagers_gradients_too_and_the_model_gets_them_back(tmp_path: Path) -> None:
    """The model-level check's noise run (``model_check._noise_floors``) reads none of the three runs'
    results: eager's gradients wait on disk beside the fp64 and compiled ones, with the gradient
    objects ``ModelRuns`` holds to leave in the model (the same storages: the memory goes). The
    parameters stay (the fp64 copy reads them); the model ends with eager's gradients, bit for bit."""
    from bisect_engine.load.model_file import ModelSpec
    from bisect_engine.localise import model_check
    from bisect_engine.verdict import offload
    from bisect_engine.verdict.model_state import ModelRuns

    if not offload.scratch_on_disk(str(tmp_path)):
        pytest.skip("the temporary folder is in memory: nothing is moved there")

    def on_disk(tensor: torch.Tensor) -> bool:
        pointer = tensor.untyped_storage().data_ptr()
        return any(start <= pointer < end for start, end in offload._spilled_ranges())

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Tanh(), torch.nn.Linear(512, 4))  # 1 MB weights
    spec = ModelSpec(path=tmp_path / "m.py", model=model, inputs=(torch.randn(8, 512),),
                     loss_fn=lambda out: out.square().mean(), get_batches=None)
    always = offload.Offload(room=lambda: 0, folder=str(tmp_path))  # every step is past the room left
    with ModelRuns(model) as runs, offload.using(always):
        eager = runs.run(lambda: model_check._forward_and_grads(model, spec.inputs, spec.loss_fn, 0))
        grads = runs.results_held()
        assert len(grads) == 4 and all(g is p.grad for g, p in zip(grads, model.parameters()))
        expected = [g.clone() for g in grads]
        fp64 = runs.run(lambda: model_check._forward_and_grads(model_check._fp64_copy(model),
                                                              model_check._fp64_inputs(spec.inputs), spec.loss_fn, 0))
        compiled = runs.run(lambda: model_check._forward_and_grads(model, spec.inputs, spec.loss_fn, 0))
        floors = model_check._noise_floors(spec, 0, fp64, eager, runs, compiled)
        assert len(floors) == len(eager)
        assert on_disk(grads[0]) and on_disk(eager[2])  # the first weight's gradient: both holders moved
        assert not any(on_disk(p) for p in model.parameters())
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))  # the model gets eager's back
    assert all(torch.equal(p.grad, e) for p, e in zip(model.parameters(), expected))


def test_the_output_folders_scratch_is_private_and_removed_at_the_end(tmp_path: Path) -> None:
    """``OutputFolder.scratch``: one hidden folder inside the output folder, emptied of a killed run's
    leftovers when made, removed when the folder closes; never through a link."""
    from bisect_engine.output.folder import SCRATCH_DIR, OutputFolder

    (tmp_path / SCRATCH_DIR).mkdir()
    (tmp_path / SCRATCH_DIR / "bisect-spill-left").write_bytes(b"x")  # a killed run's
    with OutputFolder(tmp_path) as folder:
        scratch = folder.scratch()
        assert scratch == tmp_path / SCRATCH_DIR and list(scratch.iterdir()) == []
        assert folder.scratch() == scratch
    assert not (tmp_path / SCRATCH_DIR).exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / SCRATCH_DIR).symlink_to(elsewhere)
    with OutputFolder(out) as folder:
        assert folder.scratch() is None  # a link in its place: not followed, the system's temporary folder instead
    assert elsewhere.is_dir() and (out / SCRATCH_DIR).is_symlink()


_FREED = """
import sys, torch
from bisect_engine.load.memory import return_freed_memory
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20
if sys.argv[1] == "set" and not return_freed_memory():
    print("unset"); sys.exit()
a = torch.ones(20 << 18); del a  # a 20 MB block freed: glibc raises its threshold to 20 MB
keep, drop = [], []
for i in range(40):
    (keep if i % 2 else drop).append(torch.ones(1 << 20))  # 4 MB blocks, interleaved
before = rss(); drop.clear(); print(before - rss())
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads /proc")
def test_the_cli_run_hands_freed_values_back_to_the_system() -> None:
    """glibc keeps freed blocks below its raised threshold in its heaps (resident); the CLI's run
    sets the threshold so that 80 MB of values let go leave the process."""
    import subprocess
    import sys

    fell = {how: subprocess.run([sys.executable, "-c", _FREED, how], capture_output=True, text=True, check=True).stdout.strip()
            for how in ("set", "plain")}
    if fell["set"] == "unset":
        pytest.skip("not glibc: no mallopt")
    assert int(fell["set"]) >= 70, fell
    assert int(fell["plain"]) < 40, fell  # what the setting changes: without it the memory stays


def test_a_backward_reads_the_forwards_eager_values_in_place_of_its_copies_of_them() -> None:
    """The activations a forward saves are captured twice: the backward's copies at capture, and
    the forward's eager re-run. Where bit for bit the same, the backward holds the forward's tensors
    (one copy goes); its own judgement reads the same values."""
    from bisect_engine.load.capture import capture
    from bisect_engine.localise.release import share_saved_values
    from bisect_engine.verdict.oracle import GraphContext

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.LayerNorm(64), torch.nn.Linear(64, 8))
    graphs = capture(model, (torch.randn(32, 16),), lambda out: out.square().mean(), False)[0]
    forward = next(g for g in graphs if g.kind == "forward")
    backward = next(g for g in graphs if g.kind == "backward")
    before = GraphContext.from_captured(backward).eager_values
    copies = [v.clone() if isinstance(v, torch.Tensor) else v for v in backward.inputs]
    context = GraphContext.from_captured(forward)
    freed = share_saved_values(context, graphs)
    held = {id(v) for v in context.eager_values.values()}
    assert freed > 0 and any(id(v) in held for v in backward.inputs)
    assert all(torch.equal(a, b) for a, b in zip(backward.inputs, copies) if isinstance(a, torch.Tensor))
    after = GraphContext.from_captured(backward).eager_values
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before
                                                 if isinstance(before[k], torch.Tensor))


def test_a_run_stopped_before_a_graph_names_the_graphs_it_never_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A room too small for judging even the first graph: exit 4, and each captured graph is in
    ``not_checked`` (check ``graph``), said in the summary: nothing of it was compared."""
    from bisect_engine.load import memory

    monkeypatch.setattr(memory.MemoryGuard, "room", lambda self: 1 << 20)
    model = tmp_path / "model.py"
    model.write_text("import torch\n"
                     "def get_model():\n    return torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Tanh())\n"
                     "def get_inputs():\n    return (torch.randn(8, 1024),)\n"
                     "def loss_fn(output):\n    return output.square().mean()\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(model), "--out", str(out), "--verify-runs", "0"])
    assert result.exit_code == 4, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["graphs"] == [] and "judging graph forward_0 needs about" in report["budget"], report["budget"]
    assert [(s["graph"], s["check"], s["instead"]) for s in report["not_checked"]] == [
        ("forward_0", "graph", None), ("backward_0", "graph", None)]
    assert "not checked: backward_0 (the run stopped before judging it)" in result.output


def test_a_compiled_runs_outputs_are_copied_only_where_they_are_not_values_of_their_own() -> None:
    """``compiler.run_compiled``: an output that owns its whole storage is held as it is (no second
    copy of a graph's every value); a view, an output on an input's storage, or one of two outputs
    on one storage is copied. Inputs are copied only for a graph that may write them."""
    from bisect_engine.verdict.compiler import run_compiled

    x = torch.randn(4, 8)
    returned: list[torch.Tensor] = []

    def compiled(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        doubled = a * 2
        returned[:] = [doubled, a[0], a, doubled.view(8, 4)]
        return tuple(returned)

    outputs = run_compiled(compiled, [x], writes=False)
    assert [torch.equal(o, r) for o, r in zip(outputs, returned)] == [True] * 4
    assert outputs[1].data_ptr() != returned[1].data_ptr() and outputs[2].data_ptr() != x.data_ptr()
    assert all(o.data_ptr() != r.data_ptr() for o, r in zip(outputs, returned))  # two views of one storage: copied
    outputs = run_compiled(lambda a: (a + 1,), [x], writes=False)
    kept = outputs[0]
    assert torch.equal(kept, x + 1) and not kept._is_view()
    seen: list[torch.Tensor] = []
    run_compiled(lambda a: seen.append(a) or (a + 1,), [x], writes=False)
    assert seen[0] is x  # read-only: the input itself
    run_compiled(lambda a: seen.append(a) or (a + 1,), [x], writes=True)
    assert seen[1] is not x and torch.equal(seen[1], x)  # may write: a copy
    single: list[torch.Tensor] = []

    def own(a: torch.Tensor) -> torch.Tensor:
        single.append(a * 3)
        return single[0]

    assert run_compiled(own, [x], writes=False)[0] is single[0]  # a value of its own: not copied


def test_a_read_only_input_is_copied_only_where_its_copy_is_laid_out_otherwise() -> None:
    """``run_compiled`` hands a graph that writes nothing its inputs as they are where a copy
    (``clone_value``, what the per-node check compiles on) keeps their sizes and strides: a
    transposed 1 GB weight is not copied twice more. A view the copy lays out densely (a slice with
    gaps: BERT's pooler) is copied, so the compiled node meets the layout it was compiled for."""
    from bisect_engine.verdict.compiler import run_compiled
    from bisect_engine.verdict.fx_eval import clone_value, copy_keeps_layout

    views = {"transposed": torch.randn(64, 32).t(), "permuted": torch.randn(2, 3, 4).permute(2, 0, 1),
             "expanded": torch.randn(4, 1).expand(4, 8), "every other": torch.randn(40)[::2],
             "a chunk": torch.randn(8, 6).chunk(2, dim=1)[1], "offset": torch.randn(10)[3:],
             "pooler slice": torch.randn(2, 128, 32)[:, 0], "a column": torch.randn(100, 100)[:, 3]}
    for name, view in views.items():
        laid_out_alike = clone_value(view).stride() == view.stride()
        assert copy_keeps_layout(view) == laid_out_alike, name
        seen: list[torch.Tensor] = []
        run_compiled(lambda a: seen.append(a) or (a + 1,), [view], writes=False)
        assert (seen[0] is view) == laid_out_alike, name
        assert seen[0].stride() == clone_value(view).stride() and torch.equal(seen[0], view), name
    assert not copy_keeps_layout(views["pooler slice"]) and copy_keeps_layout(views["transposed"])


def test_a_compiled_run_that_writes_an_input_it_was_handed_uncopied_stops_the_judgement() -> None:
    """Inputs handed to a compiled run uncopied (its graph writes nothing) are checked unchanged
    after it: a write (a compiler's, or an aliasing we did not foresee) is ``ReadOnlyInputWritten``,
    never a verdict on values that are no longer the recorded ones, in a per-node check too."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.verdict.compiler import run_compiled
    from bisect_engine.verdict.graphs import CapturedGraph, ReadOnlyInputWritten
    from bisect_engine.verdict.oracle import GraphContext
    from fakes import FakeCompiler

    x = torch.randn(4, 8)
    with pytest.raises(ReadOnlyInputWritten, match=r"input\(s\) \[1\]"):
        run_compiled(lambda a, b: (a + b.add_(1),), [x.clone(), x], writes=False)
    assert run_compiled(lambda a, b: (a + b.add_(1),), [x.clone(), x.clone()], writes=True)  # copies: may write

    class Writing(FakeCompiler):
        def compile(self, graph_module, example_inputs, **kwargs):  # type: ignore[no-untyped-def]
            compiled = super().compile(graph_module, example_inputs, **kwargs)

            def run(*args):  # type: ignore[no-untyped-def]
                outputs = compiled(*args)
                args[0].mul_(2)  # writes what it only reads
                return outputs
            return run

    graph_module = make_fx(lambda v: torch.tanh(v) * 3.0)(x)
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, [x], True))
    with pytest.raises(ReadOnlyInputWritten):
        context.judge_nodes(context.view.compilable_names(), Writing(("no_such_node",)), label="nodes")


def test_a_per_node_checks_compiled_values_equal_to_eagers_are_held_as_eagers() -> None:
    """``GraphContext.judge_nodes``: a node whose compiled value is eager's bit for bit, with its
    strides, is held as eager's tensor (one copy, not two); a node the compiler gets wrong keeps
    its own value, and the verdict names it as before."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.verdict.graphs import CapturedGraph
    from bisect_engine.verdict.oracle import GraphContext
    from fakes import FakeCompiler

    def program(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.tanh(x) * 3.0).sum(0)

    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    graph_module = make_fx(program)(x)
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, [x], True))
    context.eager_values  # noqa: B018 - the eager run
    names = context.view.compilable_names()
    verdict = context.judge_nodes(names, FakeCompiler(("relu",)), label="nodes")
    relu = next(n for n in names if n.startswith("relu"))
    tanh = next(n for n in names if n.startswith("tanh"))
    assert verdict.outcome.value == "mismatch" and verdict.failing_outputs == [relu]
    assert verdict.compiled_values[tanh] is context.eager_values[tanh]
    assert verdict.compiled_values[relu] is not context.eager_values[relu]


def test_an_allocation_that_fails_while_capturing_is_a_memory_stop_with_a_report_never_the_models_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our capture runs the step under torch.compile with copies of its inputs; an allocation that
    fails there (here: copying the inputs, as torch's CPU allocator fails) is the run's memory, not
    the model's: exit 4, ``incomplete``, a report whose ``budget`` says what failed where, the step
    never run eagerly again to compare (it was exit 2, "the model raised while being captured")."""
    from bisect_engine.load import capture

    def copies_fail(inputs: Any) -> Any:
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                           "memory: you tried to allocate 4503599627370496 bytes. Error code 12 (Cannot allocate memory)")

    monkeypatch.setattr(capture, "fresh_inputs", copies_fail)
    monkeypatch.setattr(capture, "_in_eager_too", lambda *a: pytest.fail("run eagerly again after an allocation failed"))
    path = tmp_path / "model.py"
    path.write_text("import torch\n"
                    "def get_model():\n    torch.manual_seed(0)\n    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())\n"
                    "def get_inputs():\n    return (torch.randn(4, 8),)\n"
                    "def loss_fn(output):\n    return output.square().mean()\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(path), "--out", str(out), "-q", "--verify-runs", "0"])
    assert result.exit_code == 4, result.output
    report = json.loads((out / "report.json").read_text())
    assert (report["verdict"], report["culprit"], report["graphs"]) == ("incomplete", None, []), report
    assert report["budget"].startswith("memory: an allocation failed while capturing the model"), report["budget"]
    assert "can't allocate memory" in report["budget"] and report["budget"].endswith(
        "during the capture stage; more free memory (or smaller inputs) for a complete answer"), report["budget"]


def _on_disk(tensor: torch.Tensor) -> bool:
    from bisect_engine.verdict.offload import _spilled_ranges

    pointer = tensor.untyped_storage().data_ptr()
    return any(start <= pointer < end for start, end in _spilled_ranges())


def test_a_whole_graph_judged_holds_its_outputs_and_inputs_and_its_other_values_wait_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the whole graph's fp64 run streams (issue 34: a backward's activation gradients are as
    large as its weight gradients), the eager values between its inputs and its outputs wait on
    disk; its outputs and inputs stay in memory. The verdict is the one judged with everything in
    memory, and the values moved keep their bits (a per-node check reads them after)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.verdict import offload, oracle
    from bisect_engine.verdict.graphs import CapturedGraph
    from bisect_engine.verdict.oracle import GraphContext
    from fakes import FakeCompiler

    if not offload.scratch_on_disk(str(tmp_path)):
        pytest.skip("the temporary folder is in memory: nothing is moved there")
    monkeypatch.setattr(offload, "MIN_BYTES", 0)

    def program(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.tanh(x @ w)
        return (hidden * 2.0).sum(0), torch.relu(hidden).sum()

    x = torch.randn(256, 128, generator=torch.Generator().manual_seed(0))
    w = torch.randn(128, 128, generator=torch.Generator().manual_seed(1))

    def judged(moved: bool, compiler: FakeCompiler) -> tuple[Any, dict[str, bool], list[str]]:
        context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(program)(x, w),
                                                           [x, w], True))
        tensors = lambda: {n: v for n, v in context.eager_values.items() if isinstance(v, torch.Tensor)}  # noqa: E731
        expected = {name: value.clone() for name, value in tensors().items()}
        seen: dict[str, bool] = {}
        stream = oracle.stream_graph

        def watched(*args: Any, **kwargs: Any) -> None:
            seen.update({name: _on_disk(value) for name, value in tensors().items()})
            stream(*args, **kwargs)

        monkeypatch.setattr(oracle, "stream_graph", watched)
        policy = offload.Offload(room=lambda: 0 if moved else None, folder=str(tmp_path))
        with offload.using(policy):
            verdict = context.judge(context.whole(), compiler, label="whole")
        assert all(torch.equal(context.eager_values[name], value) for name, value in expected.items())
        return verdict, seen, context.view.output_names()

    for compiler in (FakeCompiler(("no_such_node",)), FakeCompiler(("tanh",))):
        in_memory, kept, _ = judged(False, compiler)
        on_disk, seen, output_names = judged(True, type(compiler)(compiler.chain))
        assert not any(kept.values())
        assert on_disk.outcome == in_memory.outcome and on_disk.failing_outputs == in_memory.failing_outputs
        assert {name: v.to_json() for name, v in on_disk.outputs.items()} == \
            {name: v.to_json() for name, v in in_memory.outputs.items()}
        names = list(seen)
        outputs = set(output_names)
        inputs = names[:2]
        between = [n for n in names if n not in outputs and n not in inputs]
        assert between and all(seen[n] for n in between), seen  # moved before the fp64 run
        assert not any(seen[n] for n in [*outputs, *inputs]), seen
    assert in_memory.outcome.value == "mismatch"


def test_a_whole_graph_that_writes_nothing_holds_the_views_it_returns_of_its_inputs_as_eager_does() -> None:
    """A forward returns views of its parameters for its backward (a Linear's transposed weight):
    the whole graph's compiled run holds each as it is, on the parameter's storage (issue 34: a
    copy of every weight), as eager's value of it is; an output on a copy made for a run that may
    write its inputs, and any output of a run outside a whole graph's judgement, is copied."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.verdict.compiler import run_compiled
    from bisect_engine.verdict.graphs import CapturedGraph
    from bisect_engine.verdict.oracle import GraphContext
    from fakes import FakeCompiler

    def forward(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = w.t()
        return torch.tanh(x @ t), t

    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    w = torch.randn(48, 32, generator=torch.Generator().manual_seed(1))
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(forward)(x, w), [x, w], True))
    verdict = context.judge(context.whole(), FakeCompiler(("no_such_node",)), label="whole")
    tanh, t = context.view.output_names()
    assert verdict.outcome.value == "match"
    held = verdict.compiled_values[t]
    assert held.untyped_storage().data_ptr() == w.untyped_storage().data_ptr() and held.stride() == w.t().stride()
    assert context.eager_values[t].untyped_storage().data_ptr() == w.untyped_storage().data_ptr()
    assert verdict.compiled_values[tanh].untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    for writes, views_held in ((False, False), (True, True)):
        copied = run_compiled(lambda a, b: (torch.tanh(a @ b.t()), b.t()), [x, w], writes, views_held)[1]
        assert copied.untyped_storage().data_ptr() != w.untyped_storage().data_ptr() and torch.equal(copied, w.t())
