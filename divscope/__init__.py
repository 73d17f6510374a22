"""divscope: where, token by token, an RL-fine-tuned LLM differs from its base model.

>>> import divscope
>>> summary = divscope.score(  # doctest: +SKIP
...     "fixtures/lab/trajectories.jsonl", base="fixtures/lab/base", rl="fixtures/lab/rl",
...     out="runs/lab-tokens.parquet")
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("divscope")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"

from divscope._lazy import lazy_exports
from divscope.errors import DivscopeError

# The scoring API imports torch; load it on first use so `divscope --help` stays instant.
_EXPORTS: dict[str, str] = {
    "ScoreConfig": "divscope.scoring.engine",
    "score": "divscope.scoring.pipeline",
}

__all__ = ["DivscopeError", "__version__", *sorted(_EXPORTS)]

__getattr__ = lazy_exports(__name__, _EXPORTS)[0]  # dir() keeps the module's own names
