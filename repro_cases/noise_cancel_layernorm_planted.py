"""Planted twin of noise_cancel_layernorm.py: the same pre-norm MLP and ``output.pow(2).mean()`` loss,
with a wrong decomposition of ``aten.native_layer_norm_backward.default`` that drops the
``xhat * mean(g * xhat)`` term of the input gradient. The gradient into the final LayerNorm, ~0 and
pure rounding noise when right, is then O(rstd * grad): the op the noise model floors must still be
named when it is wrong (issue 36).
"""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from torch import nn

aten = torch.ops.aten


def _wrong_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    axis = input.dim() - len(normalized_shape)
    dims = list(range(axis, input.dim()))
    xhat = (input - mean) * rstd
    scaled = grad_out * weight if weight is not None else grad_out
    # BUG: the - xhat * mean(scaled * xhat) term is dropped
    grad_input = rstd * (scaled - scaled.mean(dims, keepdim=True))
    outer = list(range(axis))
    grad_weight = (grad_out * xhat).sum(outer) if weight is not None and output_mask[1] else None
    grad_bias = grad_out.sum(outer) if bias is not None and output_mask[2] else None
    return grad_input if output_mask[0] else None, grad_weight, grad_bias


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.native_layer_norm_backward.default] = _wrong_layer_norm_backward
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

SUITE = "full"  # BISECT_CORPUS=all (about 20 min of e2e wall on 2 loaded cores); tests/test_noise.py covers a dropped term at the floor
DEVICES = ["cpu"]
PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
EXPECTED = {"verdict": "divergent", "op": "aten.native_layer_norm_backward.default", "graph": "backward_0",
            "kind": "node"}
WIDTH = 256


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class PreNormMLP(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.blocks = nn.Sequential(Block(width), Block(width))
        self.final = nn.LayerNorm(width)

    def forward(self, x):
        return self.final(self.blocks(x))


def get_model():
    torch.manual_seed(0)
    return PreNormMLP().train()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(16, WIDTH),)


def loss_fn(output):
    return output.pow(2).mean()
