"""``compare --setting KEY=VALUE``: one environment, a setting flipped (an Inductor config key such
as ``max_autotune=True`` or ``emulate_precision_casts=True``; ``tf32=on|off``)."""
from __future__ import annotations

import ast
import contextlib
from typing import Any, Iterator

import torch
import torch._inductor.config as inductor_config

from ..errors import UsageError

TF32 = "tf32"


def parse_settings(items: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as a dict; the value read as a Python literal where it is one."""
    settings: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--setting {item!r}: expected KEY=VALUE")
        value: Any = {"on": True, "off": False}.get(text.lower(), text)
        if isinstance(value, str):
            with contextlib.suppress(ValueError, SyntaxError):
                value = ast.literal_eval(text)
        if key != TF32 and key not in inductor_config.get_config_copy():
            raise UsageError(f"--setting {key}: not an Inductor config key (nor {TF32})")
        settings[key] = value
    return settings


@contextlib.contextmanager
def applied(settings: dict[str, Any]) -> Iterator[None]:
    """The settings in force inside the block; every one restored after it."""
    tf32 = settings.get(TF32)
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    patches = {k: v for k, v in settings.items() if k != TF32}
    try:
        if tf32 is not None:
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = bool(tf32)
            torch.set_float32_matmul_precision("high" if tf32 else "highest")
        with inductor_config.patch(patches) if patches else contextlib.nullcontext():
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before[0], before[1]
        torch.set_float32_matmul_precision(before[2])
