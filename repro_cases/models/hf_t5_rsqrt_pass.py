"""Planted: a wrong post_grad_custom_pre_pass that rewrites aten.rsqrt into aten.sqrt, in the
tiny HF T5ForConditionalGeneration of hf_t5_eval.py (eval, default cache, decoder_input_ids).
T5LayerNorm computes ``x * rsqrt(mean(x^2) + eps)``: the first rsqrt is
encoder.block.0.layer.0.layer_norm.
"""
import torch
import torch._inductor.config as inductor_config
from torch._inductor.custom_graph_pass import CustomGraphPass
from transformers import T5Config, T5ForConditionalGeneration

aten = torch.ops.aten


class RsqrtToSqrt(CustomGraphPass):
    def __call__(self, graph):
        for node in graph.find_nodes(op="call_function", target=aten.rsqrt.default):
            node.target = aten.sqrt.default  # BUG
        graph.lint()

    def uuid(self):
        return "bisect-accuracy-corpus/t5_rsqrt_pass/rsqrt-to-sqrt/v1"


def plant():
    inductor_config.post_grad_custom_pre_pass = RsqrtToSqrt()


plant()

PLANTED = {"config": {}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.rsqrt.default", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "pass", "name": "post_grad_custom_pre_pass"}}


def get_model():
    torch.manual_seed(0)
    config = T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                      decoder_start_token_id=0, pad_token_id=0)
    return T5ForConditionalGeneration(config).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 100, (2, 10), generator=generator)
    attention_mask = torch.ones(2, 10, dtype=torch.long)
    attention_mask[1, 7:] = 0
    decoder_input_ids = torch.randint(1, 100, (2, 6), generator=generator)
    decoder_input_ids[:, 0] = 0
    return (input_ids, attention_mask, decoder_input_ids)
