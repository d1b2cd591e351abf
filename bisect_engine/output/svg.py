"""A very small SVG writer: elements as strings, escaped text, compact numbers, a log axis.

Pure and torch-free. The report's plots need circles, lines, rectangles, paths and hover titles;
a plotting library would add tens of megabytes and seconds of import for that, and its SVG output
(ids, metadata, dates) is neither small nor byte-for-byte deterministic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape


def text(value: object) -> str:
    """Any value as escaped SVG/HTML text (quotes too: safe inside an attribute)."""
    return escape(str(value), quote=True)


def number(value: float) -> str:
    """Coordinates with one decimal and no trailing zeros: ``12``, ``12.5``, ``-3.2``."""
    rounded = f"{value:.1f}"
    return rounded[:-2] if rounded.endswith(".0") else rounded


def element(tag: str, attributes: dict[str, object] | None = None, content: str = "") -> str:
    """``<tag a="1">content</tag>``; floats in attributes are written with :func:`number`;
    attributes whose value is None are left out. ``content`` is markup (escape text first)."""
    parts = [tag]
    for name, value in (attributes or {}).items():
        if value is None:
            continue
        shown = number(value) if isinstance(value, float) else text(value)
        parts.append(f'{name}="{shown}"')
    opening = " ".join(parts)
    return f"<{opening}>{content}</{tag}>" if content else f"<{opening}/>"


def title(words: str) -> str:
    """A hover tooltip (the first child of the element it describes)."""
    return f"<title>{text(words)}</title>"


@dataclass(frozen=True)
class LogAxis:
    """A base-10 axis from ``10**low`` (at pixel ``bottom``) to ``10**high`` (at ``top``)."""

    low: int
    high: int
    top: float
    bottom: float

    @classmethod
    def spanning(cls, values: list[float], top: float, bottom: float, least_high: int = 2) -> "LogAxis":
        """Whole decades around the positive finite ``values``: at least 0.1 to ``10**least_high``,
        never below 0.01 (smaller errors are drawn at the bottom)."""
        positive = [v for v in values if v > 0 and math.isfinite(v)]
        low = min([-1] + [math.floor(math.log10(v)) for v in positive])
        high = max([least_high] + [math.ceil(math.log10(v)) for v in positive])
        return cls(max(low, -2), max(high, max(low, -2) + 1), top, bottom)

    def y(self, value: float) -> float:
        exponent = min(max(math.log10(value), self.low), self.high) if value > 0 else self.low
        return self.bottom - (exponent - self.low) / (self.high - self.low) * (self.bottom - self.top)

    def decades(self) -> list[int]:
        return list(range(self.low, self.high + 1))


def decade_label(exponent: int) -> str:
    """``0.01``, ``0.1``, ``1``, ``10``, ``100``, then ``1e3``, ``1e4``, ..."""
    if -2 <= exponent <= 2:
        return f"{10.0 ** exponent:g}"
    return f"1e{exponent}"


def nice_step(count: int, most_ticks: int = 10) -> int:
    """A step of 1, 2 or 5 times a power of ten giving at most ``most_ticks`` ticks over ``count``."""
    step = 1
    while count / step > most_ticks:
        for factor in (2, 5, 10):
            if count / (step * factor) <= most_ticks or factor == 10:
                step *= factor
                break
    return step
