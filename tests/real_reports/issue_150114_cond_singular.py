"""https://github.com/pytorch/pytorch/issues/150114 — [Miscompilation] inductor produce
inconsistent inference results with the eager mode (filed 2025-03-27).

Thread: ``linalg.cond(arctan(ones(2, 2)))``: eager 37269600, compiled inf; no maintainer
diagnosis in the thread. The matrix is exactly singular (every entry pi/4), so its true condition
number is infinite: eager's finite value is rounding noise in the SVD's smallest singular value.

Check on torch 2.13.0+cpu: eager 37269600., compiled inf, fp64 reference inf (eager in fp64 also
inf). Compiled is closer to the reference: class more_accurate, the right verdict is ``clean``.
The script's own ``assert_close`` fails (AssertionError). No edits.
"""
REAL_REPORT = {
    "issue": 150114, "class": "more_accurate",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch

class SimpleModel(torch.nn.Module):
    def forward(self, x):
        x = torch.arctan(x)
        x = torch.linalg.cond(x)
        return x

model = SimpleModel()
inputs = torch.ones(2, 2, dtype=torch.float32)
res = model(inputs)

compiled_model = torch.compile(model, backend='inductor')
with torch.no_grad():
    compiled_out = compiled_model(inputs)
print(res)
print(compiled_out)
non_nan_mask = ~torch.isnan(res)
torch.testing.assert_close(res[non_nan_mask], compiled_out[non_nan_mask])
