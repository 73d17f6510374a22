"""How mkdocs reads the docstrings for docs/api.md: an mkdocs hook and a griffe extension.

The hook lets docs/api.md name the package's lazy exports by their public path: `divscope`
loads its commands and configuration classes on first use (`divscope._EXPORTS`), so the static
reader behind mkdocstrings cannot find `divscope.score`; the hook rewrites each
`::: divscope.NAME` line of a page to the module that defines NAME before mkdocstrings reads it.
"""

from __future__ import annotations

import re
import textwrap

from griffe import Extension, Object

from divscope import _EXPORTS

ENTRY = re.compile(r"^::: divscope\.(\w+)$", re.M)


def on_page_markdown(markdown: str, **kwargs) -> str:
    """`markdown` with `::: divscope.NAME` read as `::: <module of NAME>.NAME`."""

    def defined(entry: re.Match) -> str:
        name = entry[1]
        return f"::: {_EXPORTS[name]}.{name}" if name in _EXPORTS else entry[0]

    return ENTRY.sub(defined, markdown)


class ExampleBlocks(Extension):
    """A griffe extension (mkdocstrings' reader): shows each docstring's `>>>` example as code.

    The docstrings title their examples in prose (`Example (the lab, from the repository root):`)
    or not at all, which the Google style does not read as an examples section: their `>>>` lines
    would render as prose (`x[0][1]` as a link). Each run of them becomes a fenced `pycon` block.
    """

    def on_object(self, *, obj: Object, **kwargs) -> None:
        """Fence the doctest blocks of `obj`'s docstring."""
        if obj.docstring is not None:
            obj.docstring.value = fenced_examples(obj.docstring.value)


def fenced_examples(docstring: str) -> str:
    """`docstring` with each run of lines that starts at a `>>>` line, up to the next blank line,
    dedented and fenced as `pycon`; runs under an `Examples:` section (griffe reads those) stay."""
    lines, out, i = docstring.splitlines(), [], 0
    while i < len(lines):
        title = out[-1].strip() if out else ""
        if lines[i].lstrip().startswith(">>>") and title not in ("Example:", "Examples:"):
            j = i
            while j < len(lines) and lines[j].strip():
                j += 1
            out += ["", "```pycon", *textwrap.dedent("\n".join(lines[i:j])).splitlines(), "```"]
            i = j
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)
