"""Variable-length batches padded to each batch's longest sequence, with a padding mask, compiled
with ``dynamic=True`` (one graph for every length). ``--bug``: Inductor's C++ relu compiles as
x + 1 (``cpp.inject_relu_bug_TESTING_ONLY``).

    bisect-accuracy run tests/scripts/padded_dynamic.py [--bug]
"""
import argparse

import torch
import torch._inductor.config as inductor_config
from torch import nn

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default"}


class Encoder(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width, padding_idx=0)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, 3)

    def forward(self, tokens, mask):
        hidden = self.up(self.embed(tokens))
        pooled = (torch.relu(hidden) * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)
        return self.down(pooled)


def padded(lengths: list, generator: torch.Generator) -> tuple:
    longest = max(lengths)
    tokens = torch.zeros(len(lengths), longest, dtype=torch.long)
    mask = torch.zeros(len(lengths), longest)
    for row, length in enumerate(lengths):
        tokens[row, :length] = torch.randint(1, 50, (length,), generator=generator)
        mask[row, :length] = 1
    return tokens, mask


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", action="store_true")
    args = parser.parse_args()
    if args.bug:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    model = Encoder().eval()
    compiled = torch.compile(model, dynamic=True)
    with torch.no_grad():
        for lengths in ([5, 3, 7], [9, 2, 4], [6, 6, 1]):
            print(lengths, compiled(*padded(lengths, generator)).argmax(dim=1).tolist())


if __name__ == "__main__":
    main()
