"""Clean: an LSTM text classifier (embedding, 2-layer batch-first nn.LSTM, last hidden state,
linear head), eval: the tool must say why nothing is compiled. Dynamo's default (torch._dynamo.config.allow_rnn = False) does not trace
nn.LSTM: it runs eagerly between graphs.
"""
import torch
from torch import nn

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "ci"  # "ci": run by make test; "full": BISECT_CORPUS=all
# torch.compile compiles nothing here, so there is nothing to compare: a usage error (exit 2)
# that names the reason and the switch, never a verdict.
EXPECTED = {"exit": 2, "message": "torch._dynamo.config.allow_rnn = True"}


class LSTMClassifier(nn.Module):
    def __init__(self, vocab=100, dim=32, hidden=32, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, batch_first=True)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, tokens):
        output, (h, c) = self.lstm(self.embed(tokens))
        return self.head(torch.tanh(self.norm(output[:, -1])))


def get_model():
    torch.manual_seed(0)
    return LSTMClassifier().eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randint(0, 100, (2, 12), generator=generator),)
