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

from divscope.errors import DivscopeError

__all__ = ["DivscopeError", "ScoreConfig", "__version__", "score"]


def __getattr__(name: str):
    # The scoring API imports torch; load it on first use so `divscope --help` stays instant.
    if name in ("score", "ScoreConfig"):
        from divscope.scoring.engine import ScoreConfig
        from divscope.scoring.pipeline import score

        return {"score": score, "ScoreConfig": ScoreConfig}[name]
    raise AttributeError(f"module 'divscope' has no attribute {name!r}")
