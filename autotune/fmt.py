"""Numbers for people, with their units: one set of formatters for the console, reports and the dashboard.

Every formatter takes any value and gives ``"n/a"`` for None or a non-number.
"""

from __future__ import annotations

import math

NA = "n/a"


def as_float(value: object) -> float | None:
    """``value`` as a float when it is a real number (bools are not), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def format_number(value: object, digits: int = 3) -> str:
    """A plain number for people, never in scientific notation, to ``digits`` significant digits.

    ``16640.2`` -> ``"16,640"`` (whole numbers keep every digit, with thousands separators),
    ``2.5`` -> ``"2.5"``, ``0.000123456`` -> ``"0.000123"``; trailing zeros are dropped. Where
    ``format(x, ".3g")`` would write ``1.664e+04`` or ``1.2e-05``, this writes the digits.
    """
    x = as_float(value)
    if x is None:
        return NA
    if not math.isfinite(x):
        return "inf" if x > 0 else "-inf" if x < 0 else "nan"
    if x == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    if decimals <= 0:
        return f"{x:,.0f}"
    text = f"{x:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def format_bytes(n: object) -> str:
    """Format bytes in binary units: ``1536`` -> ``"1.5 KiB"``; ``None`` -> ``"n/a"``."""
    x = as_float(n)
    if x is None:
        return NA
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{int(x)} B" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    raise AssertionError("unreachable")


def format_si(value: object, unit: str) -> str:
    """Format with SI prefixes: ``(2.5e9, "FLOP")`` -> ``"2.50 GFLOP"``; ``None`` -> ``"n/a"``."""
    x = as_float(value)
    if x is None:
        return NA
    for prefix in ("", "k", "M", "G", "T", "P"):
        if abs(x) < 1000 or prefix == "P":
            return f"{x:.0f} {prefix}{unit}" if prefix == "" else f"{x:.2f} {prefix}{unit}"
        x /= 1000
    raise AssertionError("unreachable")


def format_seconds(value: object) -> str:
    """Format a duration in seconds with a fitting unit: ``0.0324`` -> ``"32.4 ms"``."""
    s = as_float(value)
    if s is None:
        return NA
    if abs(s) >= 100:
        return f"{s:.0f} s"
    if abs(s) >= 1:
        return f"{s:.2f} s"
    if abs(s) >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def format_rate(value: object, unit: str) -> str:
    """Format a rate with thousands separators: ``(31700.4, "tokens/s")`` -> ``"31,700 tokens/s"``."""
    x = as_float(value)
    if x is None:
        return NA
    if abs(x) >= 100:
        return f"{x:,.0f} {unit}"
    if abs(x) >= 10:
        return f"{x:.1f} {unit}"
    return f"{x:.2f} {unit}"


def format_pct(fraction: object, digits: int = 1) -> str:
    """Format a 0..1 fraction as a percentage: ``0.4213`` -> ``"42.1%"``."""
    x = as_float(fraction)
    return NA if x is None else f"{x * 100:.{digits}f}%"


def format_usd(value: object) -> str:
    """Format dollars: ``1234.5`` -> ``"$1,235"``, ``3.456`` -> ``"$3.46"``, ``0.01234`` -> ``"$0.0123"``."""
    x = as_float(value)
    if x is None:
        return NA
    if abs(x) >= 100:
        return f"${x:,.0f}"
    if abs(x) >= 1:
        return f"${x:.2f}"
    return f"${format_number(x)}" if x else "$0"
