"""Clean: an LSTM text classifier (embedding, 2-layer batch-first nn.LSTM, last hidden state,
linear head), eval, with torch._dynamo.config.allow_rnn = True so that the LSTM is compiled (Dynamo's
default does not trace nn.LSTM; see lstm_eval.py).
"""
import torch
import torch._dynamo
from torch import nn

# What the user does after reading lstm_eval's message: Dynamo traces the LSTM, Inductor compiles it.
torch._dynamo.config.allow_rnn = True

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


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
