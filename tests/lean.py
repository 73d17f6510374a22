"""Run divscope as on a lean GPU image: `python -m tests.lean ARGS...` is `divscope ARGS...`
with the analysis and grading stack (`HIDDEN`) not installed, as far as imports can tell (no
finder finds them, so `import polars` fails and `importlib.util.find_spec` says None).

>>> "polars" in HIDDEN
True
"""

from __future__ import annotations

import runpy
import sys

HIDDEN = ("polars", "math_verify", "scipy", "matplotlib")
"""The packages that `score`, `generate` and `cross-sample` without a grader never import."""


class _Hiding:
    """A meta-path finder that finds nothing of `HIDDEN` and defers everything else."""

    def __init__(self, finder) -> None:
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        find = getattr(self.finder, "find_spec", None)
        return None if find is None else find(name, path, target)

    def __getattr__(self, name):
        return getattr(self.finder, name)


def hide() -> None:
    """Make `HIDDEN` unimportable in this process (those already imported stay)."""
    sys.meta_path[:] = [_Hiding(finder) for finder in sys.meta_path]


if __name__ == "__main__":
    hide()
    sys.argv[0] = "divscope"
    runpy.run_module("divscope", run_name="__main__")
