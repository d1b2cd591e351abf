"""torch.export + AOTInductor (aoti_compile_and_package, aoti_load_package): Inductor compiles,
no torch.compile runs. Script mode names it as not checked (exit 4), never "compiled nothing"."""
import os, tempfile
import torch
from torch import nn
class M(nn.Module):
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(8, 4)
    def forward(self, x):
        return torch.relu(self.fc(x))
torch.manual_seed(0)
model = M().eval(); x = torch.randn(2, 8)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(tempfile.mkdtemp(), "m.pt2"))
loaded = torch._inductor.aoti_load_package(path)
print((loaded(x) - model(x)).abs().max().item())
