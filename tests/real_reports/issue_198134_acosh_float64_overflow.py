"""https://github.com/pytorch/pytorch/issues/198134 — [inductor][cpu] Vectorized float64
``torch.acosh`` returns ``inf`` for inputs above 1.34e154 under ``torch.compile`` (eager and the
scalar tail are finite): ``Vectorized<double>::acosh`` squares its argument (filed 2026-09-22,
torch 2.14.0 and nightly; open, labels module: correctness (silent), module: sleef).

Thread: the reporter's diagnosis: the vectorised C++ backend lowers ``acosh`` to SLEEF's
``log(x + sqrt(x*x - 1))``, which overflows in ``x*x`` above sqrt(DBL_MAX) ~ 1.34e154, where
``std::acosh`` (the eager kernel) is stable.

Check on torch 2.13.0+cpu: eager 461.21 for every n; compiled ``inf`` for n = 3, 8 and 64 (on
2.13 the 3-element scalar tail is wrong too). The input is float64, so eager is the fp64
reference: acosh(1e200) = ln(2e200) = 461.2101. Class: a real compiler bug.
Edit: only the script's first loop is kept (the excerpt of the thread ends inside the second).
"""
REAL_REPORT = {
    "issue": 198134, "class": "real_bug",
    "verdict": "nan",                          # compiled makes Inf where eager is finite
    "op": "aten.acosh.default",
    "cli_args": [],
    "known_miss": None,
}
import torch

compiled = torch.compile(torch.acosh)
for n in (3, 8, 64):
    x = torch.full((n,), 1e200, dtype=torch.float64)
    print(f"n={n:2d}  eager {torch.acosh(x)[0].item():.6g}   compiled {compiled(x)[0].item():.6g}")
