"""What every key of a summary.json means, kept on the record's field that writes and reads it.

A field of :class:`~profilers.contract.profile_summary.ProfileSummary` or
:class:`~profilers.contract.study.summary.TuningSummary` says its meaning in its metadata
(:func:`means`), beside how it is read and written (:mod:`profilers.contract.json_checks`). The
documentation's reference pages (``docs/reference/``, filled in by ``scripts/docs_hooks.py``) are
made from those fields (:func:`markdown_table`), so they cannot drift from what the code writes: a
test profiles a real loop and runs a real study and checks that every key written is documented,
and every key documented is written.

>>> from dataclasses import dataclass, field
>>> @dataclass
... class Loss:
...     first: float | None = field(default=None, metadata=means("the first step's loss"))
...     last: float | None = field(default=None, metadata=WITH_ABOVE)
...     steps: int = field(default=0, metadata=means("steps with a loss", always=False))
>>> print(markdown_table(Loss))
| key | meaning |
|---|---|
| `first`, `last` | the first step's loss |
| `steps` | steps with a loss |
>>> sorted(documented_keys(Loss, always_only=True))
['first', 'last']
"""

from __future__ import annotations

import dataclasses

from profilers.contract.lenient import FieldMeta

#: A field's metadata: it shares the row of the documented field before it (``objective``, ``metric``).
WITH_ABOVE: FieldMeta = {"with_above": True}


def means(meaning: str, always: bool = True) -> FieldMeta:
    """A field's metadata: what its key means (Markdown, `code` spans for other keys and values).

    ``always``: every run writes it; False when only some do (the meaning says when).
    """
    return {"meaning": meaning, "always": always}


def reference_rows(record: type) -> list[tuple[list[str], str, bool]]:
    """The reference rows of the dataclass ``record``: (keys, meaning, always), in the order written."""
    rows: list[tuple[list[str], str, bool]] = []
    for f in dataclasses.fields(record):
        if not f.metadata.get("written", True):
            continue
        key = f.metadata.get("key") or f.name
        if f.metadata.get("with_above"):
            if not rows:
                raise ValueError(f"{record.__name__}.{f.name}: no documented field above it")
            rows[-1][0].append(key)
        elif "meaning" in f.metadata:
            rows.append(([key], f.metadata["meaning"], f.metadata["always"]))
        else:
            raise ValueError(f"{record.__name__}.{f.name} is written but says no meaning (means())")
    return rows


def meaning_of(record: type, key: str) -> str:
    """What ``key`` of ``record`` means (the row it is documented in); KeyError when it is not."""
    found = [meaning for keys, meaning, _ in reference_rows(record) if key in keys]
    if not found:
        raise KeyError(f"{record.__name__} documents no key {key!r}")
    return found[0]


def documented_keys(record: type, always_only: bool = False) -> set[str]:
    """Every top-level key ``record`` documents (``always_only``: those every run writes)."""
    return {key for keys, _, always in reference_rows(record) if always or not always_only for key in keys}


def markdown_table(record: type) -> str:
    """The reference table of ``record`` as Markdown, one row per documented field (and those with it)."""
    lines = ["| key | meaning |", "|---|---|"]
    for keys, meaning, _ in reference_rows(record):
        lines.append("| " + ", ".join(f"`{k}`" for k in keys) + f" | {meaning} |")
    return "\n".join(lines)
