"""Data-parallel training with ``DistributedDataParallel`` on the ``gloo`` backend (CPU), two ranks
under ``torchrun``, the compiled model wrapped by DDP (``DistributedDataParallel(torch.compile(model))``;
``torch.compile(DistributedDataParallel(model))`` compiles no graph at all on torch 2.13: Dynamo breaks
on DDP's logger and runs the model eagerly). Dynamo's DDPOptimizer splits the model's graph at the
gradient buckets' boundaries (a 512 x 512 layer fills a 1 MiB bucket): each piece is its own compiled graph. ``--bug``: Inductor's C++ relu compiles as x + 1
(``cpp.inject_relu_bug_TESTING_ONLY``) on every rank.

    BISECT_ACCURACY_LEVEL=4 BISECT_ACCURACY_OUT=out torchrun --nproc_per_node 2 tests/scripts/ddp_gloo.py [--bug]
"""
import argparse

import torch
import torch._inductor.config as inductor_config
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default"}


def train(steps: int) -> None:
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 8))
    compiled = DistributedDataParallel(torch.compile(model), bucket_cap_mb=1)  # DDP's smallest: 1 MiB
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)  # each rank its own shard of the data
    for step in range(steps):
        loss = compiled(torch.randn(4, 512, generator=generator)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"rank {rank} step {step} loss {loss.item():.6f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", action="store_true")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    if args.bug:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    dist.init_process_group("gloo")
    train(args.steps)  # DDP's reducer freed before the group: gloo's teardown can hang the other way round
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
