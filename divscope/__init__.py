"""divscope: where, token by token, an RL-fine-tuned LLM differs from its base model.

One function per command, each importable from here and living in
`divscope/<package>/<command>.py`: `score`, `analyze`, `plot`, `report`, `generate`, `grade`,
`cross_sample`, `calibrate`, `weights` and `watch`; `quickstart` (all of them in turn, on
the lab) in `divscope/lab_study.py`; `config` (the study file that replays an output's run) in
`divscope/study_file.py`; `view`, the report's token viewer in a notebook, in
`divscope/reporting/notebook.py`; with the configuration classes they take.

Each command's docstring has an example that runs on the lab in `fixtures/lab`.

>>> import divscope
>>> divscope.score.__module__, divscope.ScoreConfig().stats.top_p
('divscope.scoring.score', 0.7)
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("divscope")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"

from divscope._lazy import lazy_exports
from divscope.errors import DivscopeError

# Most of the API imports torch; load it on first use so `divscope --help` stays instant.
_EXPORTS: dict[str, str] = {
    "analyze": "divscope.analyses.analyze",
    "calibrate": "divscope.decoding.calibrate",
    "config": "divscope.study_file",
    "cross_sample": "divscope.decoding.cross_sample",
    "generate": "divscope.generation.generate",
    "grade": "divscope.grading.grade",
    "plot": "divscope.figures.plot",
    "quickstart": "divscope.lab_study",
    "report": "divscope.reporting.report",
    "score": "divscope.scoring.score",
    "view": "divscope.reporting.notebook",
    "watch": "divscope.monitor.watch",
    "weights": "divscope.scoring.weights",
    "Chat": "divscope.params",
    "DecodeConfig": "divscope.decoding.lockstep",
    "GenerateConfig": "divscope.generation.generate",
    "GradeConfig": "divscope.grading.table",
    "Metrics": "divscope.analyses.summary",
    "Recovery": "divscope.params",
    "Sampling": "divscope.generation.engine",
    "ScoreConfig": "divscope.scoring.engine",
    "StatsConfig": "divscope.scoring.metrics",
    "Study": "divscope.analyses.study",
    "VLLMOptions": "divscope.generation.engine",
}

__all__ = ["DivscopeError", "__version__", *sorted(_EXPORTS)]

__getattr__ = lazy_exports(__name__, _EXPORTS)[0]  # dir() keeps the module's own names
