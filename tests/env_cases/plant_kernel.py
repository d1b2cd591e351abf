"""Environment B, eager side: the ATen CPU kernel of exp is overridden (torch.library) by one 2**-10
too large; Inductor's own exp is untouched."""
import math

import torch

_LIBRARY = torch.library.Library("aten", "IMPL")


def _changed_exp(x):
    return torch.exp2(x * (1 / math.log(2))) * (1 + 2.0 ** -10)


_LIBRARY.impl("exp", _changed_exp, "CPU")
