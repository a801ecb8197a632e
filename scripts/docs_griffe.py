"""A Griffe extension for the API reference: the docstrings' reStructuredText habits as Markdown.

The docstrings are written for ``help()`` and doctest: Sphinx roles (``:class:`~a.B```) and
doctest examples (``>>>`` lines). Markdown has neither: a role shows as literal text, and ``>>>``
reads as three nested quotes. :func:`as_markdown` turns a role into inline code of its name and a
doctest example into a ``pycon`` code block; ``mkdocs.yml`` loads this file as an extension of
mkdocstrings' Python handler, so the sources keep their reST.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

#: A Sphinx role: ``:class:`~a.b.C``` (``~`` shows only the last name).
_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    target = match.group(2).strip()
    name = target.rsplit(".", 1)[-1] if match.group(1) else target
    return f"`{name}`"


def as_markdown(text: str) -> str:
    """A docstring's Sphinx roles as inline code, and its doctest examples as ``pycon`` blocks.

    An example runs from a ``>>>`` line to the next blank line (its output included).
    """
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        if not line.lstrip().startswith(">>>"):
            out.append(_ROLE.sub(_role, line))
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class ReSTAsMarkdown(Extension):
    """Rewrite every loaded object's docstring with :func:`as_markdown`."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        """Once the object tree is built: its docstring, rewritten."""
        if obj.docstring is not None:
            obj.docstring.value = as_markdown(obj.docstring.value)
