"""Watch the divergence of a training policy from its frozen base while it trains.

`ProbeScorer` scores the current policy on a fixed probe set (prompts sampled with a fixed
seed, or teacher-forced trajectories) against the frozen base; `step_statistics` names what is
logged (`STATISTICS`); `EvolutionDir` keeps one token table per step for
`divscope plot --evolution`; `DivergenceCallback` (and `attach`) runs it all inside a
`transformers` Trainer, TRL's `GRPOTrainer` included. docs/monitor.md tells the whole story.

>>> import divscope.monitor
>>> divscope.monitor.ProbeConfig().every
10
"""

from divscope._lazy import lazy_exports

# name -> module; loaded on first use, so that importing the package loads no torch.
_EXPORTS: dict[str, str] = {
    "STATISTICS": "divscope.monitor.statistics",
    "DivergenceCallback": "divscope.monitor.callback",
    "EvolutionDir": "divscope.monitor.evolution",
    "Probe": "divscope.monitor.probe",
    "ProbeConfig": "divscope.monitor.probe",
    "ProbeScorer": "divscope.monitor.probe",
    "attach": "divscope.monitor.callback",
    "step_statistics": "divscope.monitor.statistics",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
