"""The command line's policy and budget strings, parsed into decoder settings.

`--policy base,rl,forward` becomes `[Base(), RL(), Forward(eps=...)]` (each policy built by
`build_policy` with the parameters it takes) and `--budgets 0,1,-1` the budgets tuple.
"""

from __future__ import annotations

import os

from divscope.decoding.calibration import Calibration
from divscope.decoding.policies import Policy, build_policy
from divscope.defaults import REPLACE_TEMPERATURE, REPLACE_TOP_P
from divscope.errors import DivscopeError


def parse_budgets(text: str) -> tuple[int, ...]:
    """Parse `--budgets`: comma-separated integers >= 0, or −1 for unlimited.

    >>> parse_budgets("0,1,2,-1")
    (0, 1, 2, -1)

    Raises:
        DivscopeError: an empty list, a non-integer or a value below −1.
    """
    parts = [part.strip() for part in text.split(",")]
    try:
        budgets = tuple(int(part) for part in parts)
    except ValueError as error:
        raise DivscopeError(
            f"--budgets {text!r}: expected comma-separated integers such as 0,1,2,4,-1 "
            "(−1 = unlimited)."
        ) from error
    bad = [b for b in budgets if b < -1]
    if bad:
        raise DivscopeError(f"--budgets {text!r}: {bad[0]} is not a budget (>= 0, or −1).")
    return budgets


def parse_policies(
    text: str,
    *,
    eps: float | None = None,
    rate: float | None = None,
    alpha: float | None = None,
    tau: float | None = None,
    lam: float | None = None,
    window: int | None = None,
    calibration: str | os.PathLike | None = None,
    replace_temperature: float = REPLACE_TEMPERATURE,
    replace_top_p: float = REPLACE_TOP_P,
) -> list[Policy]:
    """Parse `--policy`: comma-separated policy names, each built with the parameters it takes.

    `gated` and `entropy` take `tau`, `lam` and `window` from the `calibration` JSON (of
    `divscope calibrate`) where not given; `rl-replace` samples the base model at
    `replace_temperature` and `replace_top_p`.

    >>> parse_policies("base, forward", eps=0.05)
    [Base(), Forward(eps=0.05)]

    Raises:
        DivscopeError: a policy named twice, an unknown policy, or a parameter that a policy
            needs missing or out of range (see `build_policy`).
    """
    names = [name.strip() for name in text.split(",") if name.strip()]
    if len(set(names)) != len(names):
        raise DivscopeError(f"--policy {text!r}: a policy appears twice.")
    calibrated: Calibration | None = None
    policies = []
    for name in names:
        params = {"eps": eps, "rate": rate, "alpha": alpha, "lam": lam}
        if name in ("gated", "entropy"):
            params |= {"tau": tau, "lam": lam, "window": window}
            if calibration is not None:
                calibrated = calibrated or Calibration.from_json(calibration)
                gate = calibrated.gate(name)
                params |= {
                    "tau": tau if tau is not None else gate.tau,
                    "lam": lam if lam is not None else gate.lam,
                    "window": window if window is not None else calibrated.window,
                }
        if name == "rl-replace":
            params |= {"temperature": replace_temperature, "top_p": replace_top_p}
        policies.append(build_policy(name, **params))
    return policies
