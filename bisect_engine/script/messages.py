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
# aoti_load_package import them; a torch.compile run does not). Script mode checks the packages it
# sees compiled (script/aoti_check.py); this names the rest: AOTInductor ran by a way it did not see.
AOTI_MODULES = ("torch._inductor.package",)
AOTI_NOT_CHECKED = ("AOTInductor ran (torch._inductor.package was imported) but no package compile or load went through "
                    "torch._inductor.aoti_compile_and_package / aoti_load_package while script mode watched: not "
                    "checked; compile the package with aoti_compile_and_package in the script, or run the exported "
                    "model as a model file (get_model() returning the ExportedProgram, get_inputs() its example inputs)")


def aoti_compiled() -> bool:
    """Did this process compile or load an AOTInductor package?"""
    return any(name in sys.modules for name in AOTI_MODULES)
