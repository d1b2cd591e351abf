"""Random stand-ins for real inputs: how to draw them (a recipe) and the drawing itself.

Depends on torch and the standard library only: the repro renderer embeds this file verbatim, so a
repro made with ``--random-inputs`` draws exactly what the tool checked.
"""
from __future__ import annotations

from typing import Any

import torch


def input_recipes(values: list[Any]) -> list[dict[str, Any]]:
    """How to draw stand-ins for real inputs: shape, dtype and the real values' statistics."""
    recipes: list[dict[str, Any]] = []
    for value in values:
        if not isinstance(value, torch.Tensor):
            recipes.append({"kind": "value", "value": value})
            continue
        base = {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
        as64 = value.detach().to(torch.float64)
        if value.dtype == torch.bool:
            recipes.append({**base, "kind": "bool", "p": round(float(as64.mean()), 6) if value.numel() else 0.5})
        elif value.is_floating_point():
            finite = as64[torch.isfinite(as64)]
            mean = float(finite.mean()) if finite.numel() else 0.0
            std = float(finite.std()) if finite.numel() > 1 else 1.0
            recipes.append({**base, "kind": "float", "mean": round(mean, 6), "std": round(std, 6)})
        else:
            low, high = (int(as64.min()), int(as64.max())) if value.numel() else (0, 1)
            recipes.append({**base, "kind": "int", "low": low, "high": high})
    return recipes


def random_inputs(recipes, seed):
    """Inputs drawn from recipes (shape, dtype, and the real values' statistics), seeded."""
    generator = torch.Generator().manual_seed(seed)
    values = []
    for recipe in recipes:
        dtype, shape = getattr(torch, recipe["dtype"]), recipe["shape"]
        if recipe["kind"] == "float":
            noise = torch.randn(shape, generator=generator, dtype=torch.float64)
            values.append((noise * recipe["std"] + recipe["mean"]).to(dtype))
        elif recipe["kind"] == "int":
            values.append(torch.randint(recipe["low"], recipe["high"] + 1, shape, generator=generator, dtype=dtype))
        elif recipe["kind"] == "bool":
            values.append(torch.rand(shape, generator=generator) < recipe["p"])
        else:
            values.append(recipe["value"])
    return values
