"""The command line's policy, eps and budget strings, parsed into decoder settings.

`--policy base,rl,forward` becomes `[Base(), RL(), Forward(eps=...)]` (each policy built by
`build_policy` with its own parameters), `--eps 0.01,0.05` the thresholds of the sweep and
`--budgets 0,1,-1` the budgets tuple.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from divscope.decoding.gates import Calibration
from divscope.decoding.policies import STRATA, Policy, build_policy, flag
from divscope.defaults import (
    MAP,
    MATCH_TOL,
    RAST_LAM,
    REPLACE_TEMPERATURE,
    REPLACE_TOP_P,
    STRATIFY,
    TEMPERATURE,
    TOP_P,
)
from divscope.errors import DivscopeError
from divscope.progress import note

CONTROLS: tuple[str, ...] = ("base", "rl")
"""The single-model controls, run at every sampling of the run's policies."""
OWN_SAMPLING: tuple[str, ...] = ("rl-replace", "base-greedy")
"""Policies that sample at their own temperature and top-p (`--replace-*`), and bring both
controls at it."""
INTERVENTIONS: tuple[str, ...] = ("forward", "reverse")
"""The policies that `--eps`, `--stratify` and `--map` multiply into settings."""
MAPS: tuple[str, ...] = ("online", "retrospective")
"""Where `forward` and `reverse` find divergence (`--map`)."""


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


def parse_eps(text: str) -> tuple[float, ...]:
    """Parse `--eps`: one JS threshold (nats) or several, comma-separated (the
    threshold-sensitivity sweep: `forward` and `reverse` run once per threshold).

    >>> parse_eps("0.05"), parse_eps("0.01, 0.05,-1")
    ((0.05,), (0.01, 0.05, -1.0))

    Raises:
        DivscopeError: an empty list, a value that is not a number, or a value given twice.
    """
    try:
        values = tuple(float(part.strip()) for part in text.split(","))
    except ValueError as error:
        raise DivscopeError(
            f"--eps {text!r}: expected a number or comma-separated numbers such as "
            "0.01,0.05,0.1 (nats; negative: switch at every step)."
        ) from error
    if len(set(values)) != len(values):
        raise DivscopeError(f"--eps {text!r}: a threshold appears twice.")
    return values


def parse_strata(text: str) -> tuple[str | None, ...]:
    """Parse `--stratify`: comma-separated strata of `STRATA`, `none` read as None (every
    divergent position).

    >>> parse_strata("none, rerank,tail")
    (None, 'rerank', 'tail')

    Raises:
        DivscopeError: an empty list, an unknown stratum, or one given twice.
    """
    names = parse_names(text)
    unknown = [name for name in names if name not in STRATA]
    if not names or unknown:
        raise DivscopeError(
            f"--stratify {text!r}: expected comma-separated strata of {', '.join(STRATA)}."
        )
    if len(set(names)) != len(names):
        raise DivscopeError(f"--stratify {text!r}: a stratum appears twice.")
    return tuple(None if name == "none" else name for name in names)


def parse_maps(text: str, tables: str | None) -> tuple[str | None, ...]:
    """Parse `--map` and `--map-table`: the maps of `forward` and `reverse`, None for the
    online one and each table's path for a retrospective one.

    >>> parse_maps("online", None), parse_maps("online,retrospective", "a.parquet,b")
    ((None,), (None, 'a.parquet', 'b'))

    Raises:
        DivscopeError: an unknown or repeated map, `retrospective` without `--map-table`, or
            `--map-table` without `retrospective`.
    """
    names = parse_names(text)
    if not names or any(name not in MAPS for name in names) or len(set(names)) != len(names):
        raise DivscopeError(
            f"--map {text!r}: expected online, retrospective or online,retrospective."
        )
    paths = parse_names(tables or "")
    if ("retrospective" in names) != bool(paths):
        raise DivscopeError(
            "--map retrospective needs --map-table (token tables of reference trajectories, "
            "from divscope score), and --map-table needs --map retrospective."
        )
    if len(set(paths)) != len(paths):
        raise DivscopeError(f"--map-table {tables!r}: a table appears twice.")
    return (*((None,) if "online" in names else ()), *paths)


def parse_names(text: str) -> list[str]:
    """Policy names of a comma-separated list (`--policy`, `--forced-policies`).

    >>> parse_names(" base, rl-replace,")
    ['base', 'rl-replace']
    """
    return [name.strip() for name in text.split(",") if name.strip()]


def parse_policies(
    text: str,
    *,
    eps: float | Sequence[float] | None = None,
    rate: float | None = None,
    alpha: float | None = None,
    early_share: float | None = None,
    gate_tau: float | None = None,
    gate_lam: float | None = None,
    gate_window: int | None = None,
    entropy_tau: float | None = None,
    entropy_lam: float | None = None,
    entropy_window: int | None = None,
    rast_lam: float = RAST_LAM,
    calibration: str | os.PathLike | None = None,
    override_calibration: bool = False,
    replace_temperature: float = REPLACE_TEMPERATURE,
    replace_top_p: float = REPLACE_TOP_P,
    temperature: float = TEMPERATURE,
    top_p: float = TOP_P,
    stratify: str = STRATIFY,
    match_tol: float = MATCH_TOL,
    map_kind: str = MAP,
    map_table: str | None = None,
) -> list[Policy]:
    """Parse `--policy`: comma-separated policy names, each built with its own parameters.

    - `forward` and `reverse` are built once per `eps` (a list: the threshold sweep), per
      stratum of `stratify` (`parse_strata`; `entropy-matched` with `match_tol`) and per map
      of `map_kind` and `map_table` (`parse_maps`), in that order.
    - `gated` takes `gate_*`, `entropy` takes `entropy_*`: each from the `calibration` JSON (of
      `divscope calibrate`) where not given. A given value that differs from the calibrated
      one is refused unless `override_calibration`; then it is applied and a note says so.
    - `rl-replace` and `base-greedy` sample the base model at `replace_temperature` and
      `replace_top_p`; `rast` steers with `rast_lam`; `early` takes `early_share`.
    - Controls: a listed `base` / `rl` runs at the run's sampling (`temperature`, `top_p`) and
      again at every other sampling of the run's policies; `rl-replace` or `base-greedy`
      brings both controls at its sampling, listed or not. A control at the run's sampling
      is `Base()` / `RL()`, at another one it carries its temperature and top-p.

    Args:
        text: the policy names, comma-separated (`--policy`).
        eps: `forward`/`reverse`: switch where JS > eps (nats); a sequence sweeps it.
        rate: `random`: per-step switch probability.
        alpha: `mixture`: probability that the RL model writes a response.
        early_share: `early`: the share of the base response's length the RL model writes.
        gate_tau: `gated`: absolute threshold tau.
        gate_lam: `gated`: relative threshold lambda.
        gate_window: `gated`: W, previous steps of the recent mean.
        entropy_tau: `entropy`: absolute threshold tau.
        entropy_lam: `entropy`: relative threshold lambda.
        entropy_window: `entropy`: W, previous steps of the recent mean.
        rast_lam: `rast`: the weight of the small pair's logit difference.
        calibration: `gated`/`entropy`: the JSON of `divscope calibrate` (tau, lambda, W).
        override_calibration: apply a gate value that differs from `calibration`'s.
        replace_temperature: `rl-replace`/`base-greedy` (and their controls): base sampling
            temperature.
        replace_top_p: `rl-replace`/`base-greedy` (and their controls): base sampling top-p.
        temperature: the run's sampling temperature (of the controls at it).
        top_p: the run's sampling top-p (of the controls at it).
        stratify: `forward`/`reverse`: strata of divergent positions, comma-separated
            (`parse_strata`).
        match_tol: `entropy-matched`: the largest base-entropy difference (nats) to the
            divergent position matched.
        map_kind: `forward`/`reverse`: `online`, `retrospective` or both (`parse_maps`).
        map_table: `retrospective`: token tables of reference trajectories, comma-separated.

    Returns:
        The policies, in the order of `text`, each control at every sampling of the run.

    Raises:
        DivscopeError: a policy named twice, an unknown policy, a parameter that a policy
            needs missing or out of range (see `build_policy`), a flag that would replace a
            calibrated value without `override_calibration` (naming both values), a bad
            `--stratify` or `--map`, or either of them without `forward` or `reverse`.

    >>> parse_policies("base, forward", eps=(0.05, 0.1))
    [Base(), Forward(eps=0.05), Forward(eps=0.1)]
    >>> parse_policies("base,rl-replace")
    [Base(), Base(temperature=0.6, top_p=0.95), RLReplace(temperature=0.6, top_p=0.95),
     RL(temperature=0.6, top_p=0.95)]
    >>> parse_policies("forward", eps=0.05, stratify="none,entropy-matched")
    [Forward(eps=0.05), Forward(eps=0.05, stratum='entropy-matched', match_tol=0.1)]
    """
    names = parse_names(text)
    if len(set(names)) != len(names):
        raise DivscopeError(f"--policy {text!r}: a policy appears twice.")
    strata, maps = parse_strata(stratify), parse_maps(map_kind, map_table)
    if (strata, maps) != ((None,), (None,)) and not set(INTERVENTIONS) & set(names):
        raise DivscopeError(
            "--stratify and --map apply to forward and reverse; add one of them to --policy."
        )
    thresholds = (eps,) if eps is None or isinstance(eps, int | float) else tuple(eps)
    given = {
        "gated": {"tau": gate_tau, "lam": gate_lam, "window": gate_window},
        "entropy": {"tau": entropy_tau, "lam": entropy_lam, "window": entropy_window},
    }
    calibrated = Calibration.from_json(calibration) if calibration is not None else None
    shared: dict[str, Any] = {"rate": rate, "alpha": alpha, "share": early_share}
    own = {"temperature": replace_temperature, "top_p": replace_top_p}
    built: dict[str, list[Policy]] = {}
    for name in names:
        if name in CONTROLS:
            continue  # built below, once the samplings of the run are known
        if name in INTERVENTIONS:
            built[name] = [
                build_policy(
                    name,
                    eps=e,
                    stratum=stratum,
                    map_table=table,
                    match_tol=match_tol if stratum == "entropy-matched" else None,
                )  # fmt: skip
                for e in thresholds
                for stratum in strata
                for table in maps
            ]
            continue
        params = dict(shared)
        if name in given:
            params |= _gate(name, given[name], calibrated, calibration, override_calibration)
        if name in OWN_SAMPLING:
            params |= own
        if name == "rast":
            params["lam"] = rast_lam
        built[name] = [build_policy(name, **params)]
    run = (temperature, top_p)
    samplings = [run] + [_sampling(p, run) for ps in built.values() for p in ps]
    for name in names:
        if name in CONTROLS:
            built[name] = [_control(name, sampling, run) for sampling in dict.fromkeys(samplings)]
    policies = [p for name in names for p in built[name]]
    if any(name in built for name in OWN_SAMPLING):
        own_controls = [_control(c, (replace_temperature, replace_top_p), run) for c in CONTROLS]
        policies += [p for p in own_controls if p not in policies]
    repeated = [p for i, p in enumerate(policies) if p in policies[:i]]
    if repeated:
        raise DivscopeError(f"--policy {text!r}: {repeated[0]!r} appears twice.")
    return policies


def _gate(
    name: str,
    given: dict[str, Any],
    calibrated: Calibration | None,
    source: str | os.PathLike | None,
    override: bool,
) -> dict[str, Any]:
    """`tau`, `lam` and `window` of the gated policy `name`: each given value, else the
    calibrated one; a given value that differs from a calibrated one needs `override`."""
    if calibrated is None:
        return dict(given)
    gate = calibrated.gate(name)
    values = {"tau": gate.tau, "lam": gate.lam, "window": calibrated.window}
    for key, value in given.items():
        if value is None or value == values[key]:
            continue
        option = flag(name, key)
        replaced = (
            f"{option} {value!r} replaces the value {values[key]!r} that --calibration "
            f"{source} calibrated for {name!r}"
        )
        if not override:
            raise DivscopeError(
                f"{replaced}: leave {option} out to use the calibrated value, or pass "
                "--override-calibration to apply it."
            )
        note(f"{replaced} (--override-calibration).")
        values[key] = value
    return values


def _sampling(policy: Policy, run: tuple[float, float]) -> tuple[float, float]:
    """(temperature, top-p) that `policy` samples at; `run` where it has none of its own."""
    params = policy.params()
    return params.get("temperature", run[0]), params.get("top_p", run[1])


def _control(name: str, sampling: tuple[float, float], run: tuple[float, float]) -> Policy:
    """The control `name` at `sampling`: no parameters when it is the run's own."""
    if sampling == run:
        return build_policy(name)
    return build_policy(name, temperature=sampling[0], top_p=sampling[1])
