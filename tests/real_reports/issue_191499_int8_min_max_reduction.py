"""https://github.com/pytorch/pytorch/issues/191499 — [Inductor][CPU] torch.compile returns 0 for
short positive uint8/int8 amin reductions on Apple Silicon (filed 2026-07-29, reported on 2.13.0;
open).

Thread: cuiliaomei-beep (2026-09-22): "This is not specific to Apple Silicon. On x86-64 ... the
same defect appears once the reduction has 16 or more elements, and it affects more than amin",
with this script (min, max, argmin, argmax of 18 int8/uint8 values): the vectorised int8 reduction
starts from a wrong identity / lane index. The script here is that comment's, as written.

Check on torch 2.13.0+cpu (x86-64, AVX2 here): uint8 argmin eager 1 compiled 0; int8 argmin eager
1 compiled 0; int8 (negated) max eager -1 compiled 1; argmax eager 1 compiled 0. Exact integers:
eager is the reference (numpy agrees). Class: a real compiler bug; the first call that diverges
is the uint8 ``argmin`` (``min`` itself agrees on this machine). No edits.
"""
REAL_REPORT = {
    "issue": 191499, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.argmin.default",
    "cli_args": [],
    "known_miss": None,
}
import torch

pos = torch.tensor([5, 1, 100, 3, 7, 8, 9, 13, 100, 120, 127, 2, 6, 4, 11, 12, 90, 80])
for dtype, x in ((torch.uint8, pos), (torch.int8, pos), (torch.int8, -pos)):
    x = x.to(dtype)
    for name, fn in (("min", torch.min), ("max", torch.max), ("argmin", torch.argmin), ("argmax", torch.argmax)):
        torch._dynamo.reset()
        e, c = fn(x).item(), torch.compile(fn)(x.clone()).item()
        if e != c:
            print(f"{str(dtype):12s} first={x[0].item():3d}  {name:6s} eager={e:4d}  inductor={c:4d}")
