"""A program that exports a small scorer with its batch dim marked ``Dim.AUTO`` and ships it as an
AOTInductor package. The scorer adds a per-row offset buffer made for the example batch of 4, so
``torch.export`` silently specialises the batch to 4 (``Dim.AUTO`` lets it; pytorch#150364's kind of
surprise): the package then refuses any other batch. Script mode runs the package at a second batch
size and must say it raised there (``exported[].second_shape.outcome == "raised"``, the dim named as
specialised by the export), while the package is right at the size it holds (clean, exit 0):

    bisect-accuracy run repro_cases/script_aoti_auto_batch.py
"""
import os
import tempfile

import torch
from torch import nn

SUITE = "full"  # an AOTInductor package compile (~20-40 s here): BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "backend": "aot_inductor", "second_shape": "specialised"}


class Scorer(nn.Module):
    def __init__(self, width: int = 8, batch: int = 4):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.register_buffer("offset", torch.linspace(-1.0, 1.0, batch * width).view(batch, width))

    def forward(self, x):
        return torch.relu(self.fc(x) + self.offset)  # broadcasting against the buffer pins the batch to 4


def main() -> None:
    torch.manual_seed(0)
    model = Scorer().eval()
    x = torch.randn(4, 8)
    exported = torch.export.export(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    path = torch._inductor.aoti_compile_and_package(exported, package_path=os.path.join(tempfile.mkdtemp(), "scorer.pt2"))
    package = torch._inductor.aoti_load_package(path)
    with torch.no_grad():
        print(f"max |package - eager| = {(package(x) - model(x)).abs().max().item():.3g}")


if __name__ == "__main__":
    main()
