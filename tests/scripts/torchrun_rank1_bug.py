"""A two-rank data-parallel training script (gloo, CPU) whose rank 1 alone has a planted Inductor
bug (relu compiled as x + 1): under ``torchrun --nproc_per_node 2`` with the hook, rank 1 must
report the divergence, rank 0 must be clean, and the summary must name rank 1 first."""
import torch
import torch._inductor.config as inductor_config
import torch.distributed as dist
from torch import nn


def main() -> None:
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if rank == 1:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        loss = compiled(torch.randn(4, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        for parameter in model.parameters():  # data parallel by hand: no DDP graph splitting
            dist.all_reduce(parameter.grad)
            parameter.grad /= world_size
        optimizer.step()
        print(f"rank {rank} step {step} loss {loss.item():.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
