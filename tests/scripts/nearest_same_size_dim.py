"""Issue 37 miss (a), as pytorch#198201's reporter wrote it: ``interpolate(mode='nearest')`` with a
non-integer scale that leaves a dimension's size unchanged (3 x 1.3 -> 3). Eager copies that
dimension's rows; the aten graph AOT Autograd traces reads ``floor(i / 1.3)``, so the captured
graph is wrong before Inductor and each of its nodes matches its compile. Named by running the
Dynamo graph against the captured one, then the call and the op eager runs
(``aten.upsample_nearest2d.vec``) against its decomposition (``pregrad.localise_capture_decomposition``).

    bisect-accuracy run tests/scripts/nearest_same_size_dim.py
"""
import torch
import torch.nn.functional as F

# H: 3 -> floor(3*1.3)=3 (unchanged) with a non-unit scale;  W: 4 -> floor(4*1.5)=6 (changed)
x = torch.arange(12, dtype=torch.float32).reshape(1, 1, 3, 4)


def fn(z):
    return F.interpolate(z, scale_factor=(1.3, 1.5), mode='nearest')


e = fn(x)
c = torch.compile(fn, backend="inductor")(x)
print([int(e[0, 0, i, 0]) // 4 for i in range(3)])  # eager:    [0, 1, 2]
print([int(c[0, 0, i, 0]) // 4 for i in range(3)])  # compiled: [0, 0, 1]
