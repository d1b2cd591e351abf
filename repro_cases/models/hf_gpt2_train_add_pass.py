"""Planted: a wrong post_grad_custom_post_pass that rewrites ``x + 1`` into ``x + 2`` (every
aten.add.Tensor whose second argument is the literal 1.0), in the tiny HF GPT2LMHeadModel of
hf_gpt2_train.py (train mode, dropout 0, LM loss). GPT-2's gelu_new computes
``0.5 * x * (1.0 + tanh(...))``: the first such add is in transformer.h.0.mlp.act.
"""
import torch
import torch._inductor.config as inductor_config
import torch.nn.functional as F
from torch._inductor.custom_graph_pass import CustomGraphPass
from transformers import GPT2Config, GPT2LMHeadModel

aten = torch.ops.aten


class PlusOneToPlusTwo(CustomGraphPass):
    def __call__(self, graph):
        for node in graph.find_nodes(op="call_function", target=aten.add.Tensor):
            if len(node.args) == 2 and node.args[1] == 1.0 and isinstance(node.args[0], torch.fx.Node):
                node.args = (node.args[0], 2.0)  # BUG
        graph.lint()

    def uuid(self):
        return "bisect-accuracy-corpus/gpt2_add_pass/plus-one-to-plus-two/v1"


def plant():
    inductor_config.post_grad_custom_post_pass = PlusOneToPlusTwo()


plant()

PLANTED = {"config": {}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.add.Tensor", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "pass", "name": "post_grad_custom_post_pass"}}

_IDS = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(1))


def get_model():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=99,
                        eos_token_id=99, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config).train()


def get_inputs():
    return (_IDS.clone(),)


def loss_fn(output):
    logits = output.logits[:, :-1].reshape(-1, output.logits.shape[-1])
    return F.cross_entropy(logits, _IDS[:, 1:].reshape(-1).to(logits.device))
