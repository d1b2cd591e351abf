"""A program that compiles its model for inference with Inductor's freezing on (as serving code
does): ``torch._inductor.config.freezing = True`` set by the program, the model in eval mode under
``torch.no_grad()``, ``torch.compile`` with no options. Freezing folds the weights into constants of
the compiled graph, and what is computed from them alone (the gain ``sin(phase)``) is folded at
compile time, never lowered. Script mode must check the compiled calls as they ran: clean here; with
a planted wrong aten.sin lowering, the sin of the activations is named (the sin of the frozen phase is
folded in the program's compile, so our copies must fold it too, or they would blame it wrongly)."""
import torch
import torch._inductor.config
from torch import nn

torch._inductor.config.freezing = True


class MLP(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
        self.phase = nn.Parameter(torch.linspace(0.5, 1.5, 2 * width))

    def forward(self, x):
        gain = torch.sin(self.phase)  # from a parameter alone: a constant under freezing
        return self.down(torch.sin(self.up(x)) * gain)  # ACTIVATION


torch.manual_seed(0)
model = MLP().eval()
compiled = torch.compile(model)
with torch.no_grad():
    for step in range(2):
        x = torch.randn(8, 16)
        print(f"step {step}: max |compiled - eager| = {(compiled(x) - model(x)).abs().max().item():.3g}")
