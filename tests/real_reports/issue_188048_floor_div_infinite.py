"""https://github.com/pytorch/pytorch/issues/188048 — [Inductor][CUDA] torch.div(rounding_mode="floor")
mismatches eager for infinite inputs (filed 2026-06-24; closed).

Thread: eager floor division follows Python (``inf // 1.0`` is NaN, ``1.0 // -inf`` is -1); Inductor
lowered it as ``floor(div_rn(a, b))``, which keeps ±inf and returns -0.0. Fixed by
pytorch/pytorch#188049 ("Fix Inductor div floor nonfinite CUDA results": the floating floor-div
*lowering*, shared by every device, corrects the non-finite cases to match eager).

Check on torch 2.13.0+cpu: the CPU backend shares the lowering and still reproduces:
``fn(a, b)`` eager [nan, nan, nan], compiled [nan, inf, -inf]; ``fn(b, a)`` eager [nan, 0., -1.],
compiled [nan, 0., -0.]. The inputs are float64, so eager is the fp64 reference (Python's
``float('inf') // 1.0`` is nan too). Class: a real compiler bug in ``div.Tensor_mode``.
Edits: ``device = "cuda"`` -> ``"cpu"`` and ``torch.cuda.synchronize()`` dropped (the bug is in the
shared lowering); the thread's excerpt ends at ``compiled_out_``: the second compiled call, the
prints of the four results and the ``main()`` call are completed as the first half of the script
has them.
"""
REAL_REPORT = {
    "issue": 188048, "class": "real_bug",
    "verdict": "nan",                          # compiled's ±inf where eager's NaN: a non-finite finding
    "op": "aten.div.Tensor_mode",
    "cli_args": [],
    "known_miss": None,
}
import torch
import torch._dynamo
import torch._inductor.config

torch._inductor.config.fallback_random = True


def fn(a, b):
    return torch.div(a, b, rounding_mode="floor")


def main():
    print("torch:", torch.__version__)
    print("cuda:", torch.version.cuda)

    device = "cpu"
    dtype = torch.float64

    a = torch.tensor(
        [float("nan"), float("inf"), -float("inf")],
        device=device,
        dtype=dtype,
    )
    b = torch.tensor(
        [1.0, 1.0, 1.0],
        device=device,
        dtype=dtype,
    )

    eager_out_1 = fn(a,b)
    eager_out_2 = fn(b,a)

    torch._dynamo.reset()
    compiled_fn = torch.compile(fn, backend="inductor", fullgraph=True)
    compiled_out_1 = compiled_fn(a, b)
    compiled_out_2 = compiled_fn(b, a)

    print("eager_out_1:", eager_out_1)
    print("compiled_out_1:", compiled_out_1)
    print("eager_out_2:", eager_out_2)
    print("compiled_out_2:", compiled_out_2)


if __name__ == "__main__":
    main()
