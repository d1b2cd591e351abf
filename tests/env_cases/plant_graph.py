"""Environment B, another graph: F.silu written out as x * sigmoid(x) (a torch-level change that
makes Dynamo and AOT Autograd produce other ops)."""
import torch
import torch.nn.functional as F


def _silu(x, inplace=False):
    return x * torch.sigmoid(x)


F.silu = _silu
