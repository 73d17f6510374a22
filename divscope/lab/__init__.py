"""The miniature RLVR lab: a verifiable task and a tiny base / RL / SFT model family built on CPU.

`build(out_dir, seed)` trains the family from scratch (see `divscope.lab.family`); the task,
its generator and its verifier live in `divscope.lab.task` and need no torch.

>>> from divscope.lab import Problem, verify, solve
>>> verify(solve(Problem("start", 14, (3, -5, 4))), "12")
True
"""

from divscope._lazy import lazy_exports

# name -> module; loaded on first use so that grading with the lab verifier never imports torch.
_EXPORTS: dict[str, str] = {
    "BuildConfig": "divscope.lab.family",
    "GRPOConfig": "divscope.lab.grpo",
    "ModelConfig": "divscope.lab.model",
    "PretrainConfig": "divscope.lab.pretrain",
    "Problem": "divscope.lab.task",
    "SFTConfig": "divscope.lab.sft",
    "TaskConfig": "divscope.lab.task",
    "build": "divscope.lab.family",
    "build_tokenizer": "divscope.lab.tokenizer",
    "sample_problem": "divscope.lab.task",
    "solve": "divscope.lab.task",
    "teacher_solution": "divscope.lab.task",
    "verify": "divscope.lab.task",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
