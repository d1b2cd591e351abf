"""Clean: HF GPTNeoXForCausalLM (tiny), eval, one decode step with past_key_values from a prefill
(the prefill runs eagerly in get_inputs; the model compiles the decode step)."""
import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}

_model = None


def _base():
    global _model
    if _model is None:
        torch.manual_seed(0)
        config = GPTNeoXConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, max_position_embeddings=64, rotary_pct=0.5)
        _model = GPTNeoXForCausalLM(config).eval()
    return _model


class Step(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, next_ids, past_k0, past_v0, past_k1, past_v1):
        from transformers import DynamicCache
        cache = DynamicCache()
        cache.update(past_k0, past_v0, 0)
        cache.update(past_k1, past_v1, 1)
        out = self.m(input_ids=next_ids, past_key_values=cache, use_cache=True)
        return out.logits


def get_model():
    return Step(_base())


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (2, 9), generator=g)
    with torch.no_grad():
        out = _base()(input_ids=ids, use_cache=True)
    cache = out.past_key_values
    layers = []
    for i in range(2):
        layer = cache.layers[i]
        layers += [layer.keys.clone(), layer.values.clone()]
    nxt = out.logits[:, -1:].argmax(-1)
    return (nxt, *layers)
