"""Greedy decoding with Hugging Face ``generate()`` and a static KV cache, the decode step compiled
as the transformers docs show: ``model.forward = torch.compile(model.forward, fullgraph=True)``,
``cache_implementation="static"``. A tiny Llama built from a config (random weights, no download),
its MLP activation ``relu``. ``--bug``: Inductor's C++ relu compiles as x + 1
(``cpp.inject_relu_bug_TESTING_ONLY``), which changes the generated tokens.

    bisect-accuracy run tests/scripts/hf_generate_static.py [--bug]
"""
import argparse

import torch
import torch._inductor.config as inductor_config
from transformers import LlamaConfig, LlamaForCausalLM

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default"}


def tiny_llama() -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         hidden_act="relu", pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", action="store_true")
    parser.add_argument("--new-tokens", type=int, default=4)
    args = parser.parse_args()
    if args.bug:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    model = tiny_llama()
    model.forward = torch.compile(model.forward, fullgraph=True)
    prompt = torch.tensor([[1, 5, 9, 13, 17, 21]])
    with torch.no_grad():
        tokens = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                max_new_tokens=args.new_tokens, cache_implementation="static",
                                eos_token_id=None)
    print("tokens", tokens[0, prompt.shape[1]:].tolist())


if __name__ == "__main__":
    main()
