"""https://github.com/pytorch/pytorch/issues/198183 — [inductor][cpu] Vectorized float32
``torch.erf`` loses all relative accuracy near 0 under ``torch.compile`` (returns 0 for
|x| <= 1e-7, 1.7e-2 relative error at 1e-5) (filed 2026-09-22, torch 2.14.0 and nightly; open).

Thread: the reporter's diagnosis: the vector backend emits ``Vectorized<float>::erf()``, the
Abramowitz-Stegun 7.1.26 approximation ``1 - p(t) * exp(-x*x)`` whose 1.5e-7 error bound is
absolute, not relative, instead of the ``std::erf`` of the eager kernel.

Check on torch 2.13.0+cpu: erf(1e-8): eager 1.1284e-08, compiled 0.0; erf(1e-7): eager
1.1284e-07, compiled 0.0; erf(2e-7): eager 2.2568e-07, compiled 4.1723e-07 (fp64 reference
1.1283792e-08, 1.1283792e-07, 2.2567583e-07: eager exact to fp32 rounding), for n = 3, 8 and 64
alike on this machine. Class: a real compiler bug.

What the tool says: ``divergent``, ``aten.erf.default`` (node, forward_0), the repro
REPRODUCED. Evidence (torch 2.13.0 CPU, the first call, n = 3, against fp64): compiled 8.95e6 ulps
RMS at the tensor's scale, eager 0.11; every element 100% off at worst. This is no rounding noise
(erf does not cancel: the noise model gives it no floor; the kernel's error is an absolute ~2e-7,
its approximation's bound, everywhere in [1e-8, 3]). Its absolute errors (at most 2.0e-7) pass
``torch._dynamo.utils.same(eager, compiled, fp64_ref, tol=1e-3)`` as upstream calls it, whose
absolute term is sized for values of order one; the upstream gate reads an output whose values
all sit below one at its own scale (``judgement.at_own_scale``), where they fail. (Until
2026-11-29 the tool said ``clean`` with the op listed under ``within_upstream``.) The same kernel
in a program where erf is interior at O(0.1) values (``repro_cases/script_graph_breaks_erf.py``) is
12.7 ulps RMS there, within the end-to-end tolerance: clean, nothing listed.
Edit: the thread's excerpt ends inside the ``print`` f-string; its end (``e[i].item():.4e} compiled
{c[i].item():.4e}`` over the first three values) is completed here.
"""
REAL_REPORT = {
    "issue": 198183, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.erf.default",
    "cli_args": [],
    "known_miss": None,
}
import torch

vals = [1e-8, 1e-7, 2e-7, 5e-7, 1e-6, 1e-5, 1e-4, 1e-3]
for n in (3, 8, 64):
    x = torch.tensor((vals * 8)[:n], dtype=torch.float32)
    torch._dynamo.reset()
    e, c = torch.erf(x), torch.compile(torch.erf)(x)
    print(f"n={n:2d}  " + "  ".join(f"erf({vals[i]:.0e}): eager {e[i].item():.4e} compiled {c[i].item():.4e}" for i in range(min(n, 3))))
