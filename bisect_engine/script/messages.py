"""How the tool speaks to a running program: its log lines on stderr, and the stop at a
divergence. Standard library only (the CLI uses it before the script imports torch).
"""
from __future__ import annotations

import logging
import sys


class DivergenceStop(SystemExit):
    """Ends the program at its first divergence (stop on divergence): exit status 1."""

    def __init__(self) -> None:
        super().__init__(1)


def log_to_stderr(level: int = logging.WARNING) -> None:
    """Our messages reach stderr, marked as ours, without touching the program's own logging
    (the root logger stays the program's: its ``basicConfig`` must work as without us)."""
    package_logger = logging.getLogger("bisect_engine")
    if package_logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("bisect-accuracy: %(message)s"))
    package_logger.addHandler(handler)
    package_logger.setLevel(level)
    package_logger.propagate = False


# Modules that only an AOTInductor package brings in (torch._inductor.aoti_compile_and_package and
# aoti_load_package import them; a torch.compile run does not): the script compiled through
# torch.export + AOTInductor, which no torch.compile backend of ours sees.
AOTI_MODULES = ("torch._inductor.package",)
AOTI_NOT_CHECKED = ("an AOTInductor package was compiled (torch.export + aoti_compile_and_package / aoti_load_package): "
                    "not checked by script mode (it hooks torch.compile only); run the exported model as a model file "
                    "(get_model() returning the nn.Module you exported, get_inputs() its example inputs) to localise "
                    "the op Inductor gets wrong")


def aoti_compiled() -> bool:
    """Did this process compile or load an AOTInductor package?"""
    return any(name in sys.modules for name in AOTI_MODULES)
