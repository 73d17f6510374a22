"""`divscope generate`: sample trajectories from a model, streamed and resumable per prompt.

The entry point is `divscope.generate` (in `divscope.generation.generate`); this package holds
its configuration and the sampling engines.

>>> from divscope.generation import GenerateConfig, Sampling
>>> GenerateConfig(Sampling(n=4, max_new_tokens=64)).sampling.n
4
"""

from divscope.generation.engine import (
    ENGINES,
    Engine,
    HFEngine,
    Sampled,
    Sampling,
    VLLMEngine,
    VLLMOptions,
)
from divscope.generation.generate import GenerateConfig, GenerateReport

__all__ = [
    "ENGINES",
    "Engine",
    "GenerateConfig",
    "GenerateReport",
    "HFEngine",
    "Sampled",
    "Sampling",
    "VLLMEngine",
    "VLLMOptions",
]
