"""A transformer FFN block served for inference as a user who tunes their GEMMs on CPU writes it:
``torch._inductor.config.freezing = True`` (weights folded into constants) and
``torch.compile(model, options={"max_autotune": True, "max_autotune_gemm_backends": "CPP"})``, so
every GEMM is Inductor's C++ GEMM template (``use_cpp_gemm_template`` needs the weight to be a
frozen constant). No bug: the twin of ``max_autotune_cpp_gemm_template.py``. Every copy the tool
compiles holds the weights as frozen constants, as the user's compile does (else the template
has no choice to make and the compile raises NoValidChoicesError).
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn

inductor_config.freezing = True  # the user's own setting: the weights become constants

SUITE = "full"  # max-autotune compiles (C++ template code for every GEMM): too slow for make test
EXPECTED = {"verdict": "clean"}


class FFNBlock(nn.Module):
    def __init__(self, width: int = 32, hidden: int = 64):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def get_model():
    torch.manual_seed(0)
    return torch.compile(FFNBlock().eval(), options={"max_autotune": True, "max_autotune_gemm_backends": "CPP"})


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(16, 32),)
