"""An unmodified generation-style script with a planted dynamic-only bug: aten.tanh's lowering is
wrong only in symbolic kernels, at sequence lengths of 48 and more (GPT-2's gelu_new reaches
aten.tanh). The script calls the compiled model with lengths 37, 53, 71: Dynamo compiles length
37 statically, then recompiles with a symbolic length at 53 (automatic dynamic shapes); script
mode checks that new graph's first call, and localises in it symbolically.

    bisect-accuracy run repro_cases/script_dynamic_gpt2.py
"""
import importlib.util
from pathlib import Path

import torch

# The plant is the GPT-2 corpus case's (the same tanh lowering, wrong at symbolic lengths >= 48).
_spec = importlib.util.spec_from_file_location(
    "_gpt2_dynamic_tanh", Path(__file__).parent / "models" / "hf_gpt2_dynamic_tanh_lowering.py")
_planted = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_planted)  # plants the bug


def plant():
    _planted.plant()


PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
EXPECTED = {"verdict": "divergent", "op": "aten.tanh.default", "graph": "forward_0", "kind": "node",
            "shapes": "dynamic-only"}


def main() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=128, n_embd=32, n_layer=2, n_head=2, bos_token_id=99,
                        eos_token_id=99)
    model = GPT2LMHeadModel(config).eval()
    compiled = torch.compile(model)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for length in (37, 53, 71):
            ids = torch.randint(0, 100, (2, length), generator=generator)
            print(length, float(compiled(ids).logits.abs().mean()))


if __name__ == "__main__":
    main()
