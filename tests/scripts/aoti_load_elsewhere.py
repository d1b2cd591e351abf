"""Loads an AOTInductor package made by another process (its path: argv[1]) and runs it: script
mode never saw it compiled, so it is named as not checked (exit 4), never "compiled nothing"."""
import sys

import torch

loaded = torch._inductor.aoti_load_package(sys.argv[1])
print(loaded(torch.randn(2, 8)).shape)
