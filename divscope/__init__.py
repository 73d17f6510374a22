"""divscope: where, token by token, an RL-fine-tuned LLM differs from its base model."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("divscope")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"

from divscope.errors import DivscopeError

__all__ = ["DivscopeError", "__version__"]
