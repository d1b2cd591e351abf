"""Restates upstream test/inductor/test_minifier.py::test_rmse_improves_over_atol (CPU twin), as an
nn.Module (the constant is still made inside forward).

See minifier_rmse_fp16_function.py: compiled (4) is more accurate than eager (0); fp64 says 4.
Expected: clean.
"""
import torch
import torch._inductor.config as inductor_config

DEVICES = ["cpu", "cuda"]
SUITE = "full"  # run with BISECT_CORPUS=all (make test runs a twin of it)
PLANTED = {"config": {"joint_graph_constant_folding": False}}
EXPECTED = {"verdict": "clean", "op": None}


def plant():
    inductor_config.joint_graph_constant_folding = False


plant()


class Inner(torch.nn.Module):
    def forward(self, x):
        return x - torch.tensor(655, dtype=torch.half, device=x.device) * 100


def get_model():
    return Inner()


def get_inputs():
    return (torch.tensor(655 * 100, dtype=torch.half),)
