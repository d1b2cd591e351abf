"""A dataset with one bad sample: its features make the model take the log of a negative number.

No compiler bug: eager makes the NaN too. Five batches of four samples, only sample 2 of batch 3
is bad. The tool scans the batches, names batch 3 and sample 2, and localises the NaN (the log,
with the statistics of what it was fed) on that sample alone.
"""
import torch
from torch import nn

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {}}
# BISECT_CORPUS=all (make test's time): test_budget_scans' bad-sample twin covers the batch and sample scan
SUITE = "full"
EXPECTED = {
    "verdict": "nan", "op": "aten.log.default", "graph": "forward_0",
    "nan_eager_op": "aten.log.default", "batch": {"index": 3, "samples": [2]},
}


def plant():
    pass


class LogFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(5, 3)

    def forward(self, counts):
        return self.head(torch.log(counts + 1.0))


def get_model():
    torch.manual_seed(0)
    return LogFeatures().eval()


def get_batches():
    torch.manual_seed(1)
    batches = [(torch.rand(4, 5) * 10,) for _ in range(5)]
    batches[3][0][2, 1] = -3.0  # a corrupt count
    return batches


def get_inputs():
    return get_batches()[0]
