"""Policy specs and the run grid's strings, parsed into decoder settings: the one place.

`Policies("base,rl,forward:eps=0.05")` holds the specs of `--policy` and the default keys of
the specs that lack them (`--eps`, `--gate-tau`...); `Policies.build` turns them into
`[Base(), RL(), Forward(eps=0.05)]` (each policy built by `build_policy`) and adds the matched
controls. `--eps 0.01,0.05` is the default thresholds of a sweep and `--budgets 0,1,-1` the
budgets tuple.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from itertools import product
from typing import Annotated, Any

from divscope.decoding.gates import Calibration
from divscope.decoding.policies import POLICIES, STRATA, Policy, build_policy, flag
from divscope.defaults import MAP, MATCH_TOL, RAST_LAM, REPLACE_TEMPERATURE, REPLACE_TOP_P, STRATIFY
from divscope.errors import DivscopeError
from divscope.params import Flag
from divscope.progress import note
from divscope.scoring.metrics import StatsConfig

CONTROLS: tuple[str, ...] = ("base", "rl")
"""The single-model controls, run at every sampling of the run's policies."""
OWN_SAMPLING: tuple[str, ...] = ("rl-replace", "base-greedy")
"""Policies that sample at their own temperature and top-p (`--replace-*`), and bring both
controls at it."""
INTERVENTIONS: tuple[str, ...] = ("forward", "reverse")
"""The policies that `--eps`, `--stratify` and `--map` multiply into settings."""
MATCHED_TO_FORWARD: tuple[str, ...] = ("random-effective",)
"""Policies matched to a `forward` setting of the same run (its `eps`, online, every
divergent position): `--eps` multiplies them too, and `build` refuses them without it."""
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


def parse_floats(text: str, option: str, example: str) -> tuple[float, ...]:
    """Parse a comma-separated list of distinct numbers given to `option`.

    >>> parse_floats("0.01, 0.05", "--eps", "0.01,0.05")
    (0.01, 0.05)

    Raises:
        DivscopeError: a value that is not a number, or a value given twice (the message names
            the option and shows `example`).
    """
    try:
        values = tuple(float(part.strip()) for part in text.split(","))
    except ValueError as error:
        raise DivscopeError(
            f"{option} {text!r}: expected a number or comma-separated numbers such as {example}."
        ) from error
    if len(set(values)) != len(values):
        raise DivscopeError(f"{option} {text!r}: a value appears twice.")
    return values


def parse_eps(text: str) -> tuple[float, ...]:
    """Parse `--eps`: one JS threshold (nats) or several, comma-separated (the
    threshold-sensitivity sweep: `forward` and `reverse` run once per threshold).

    >>> parse_eps("0.05"), parse_eps("0.01, 0.05,-1")
    ((0.05,), (0.01, 0.05, -1.0))

    Raises:
        DivscopeError: an empty list, a value that is not a number, or a value given twice.
    """
    return parse_floats(text, "--eps", "0.01,0.05,0.1 (nats; negative: switch at every step)")


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


def parse_specs(text: str) -> tuple[str, ...]:
    """Split `--policy` into policy specs: at each comma, except before a `key=value` that
    continues the spec before it (`rl-replace:temperature=0.6,top_p=0.95`).

    >>> parse_specs("base, rl-replace:temperature=0.6,top_p=0.95,forward:eps=0.01/0.05")
    ('base', 'rl-replace:temperature=0.6,top_p=0.95', 'forward:eps=0.01/0.05')

    Raises:
        DivscopeError: a `key=value` with no policy before it.
    """
    specs: list[str] = []
    for piece in parse_names(text):
        if "=" in piece and ":" not in piece.split("=", 1)[0]:
            if not specs:
                raise DivscopeError(f"--policy {text!r}: {piece!r} follows no policy name.")
            specs[-1] += "," + piece
        else:
            specs.append(piece)
    return tuple(specs)


def parse_spec(spec: str) -> tuple[str, dict[str, tuple[str, ...]]]:
    """A policy spec's name and its keys, each with its values (a sweep: several).

    >>> parse_spec("forward:eps=0.01/0.05,stratum=tail")
    ('forward', {'eps': ('0.01', '0.05'), 'stratum': ('tail',)})

    Raises:
        DivscopeError: a key without `=value`, or a key given twice.
    """
    name, _, rest = spec.partition(":")
    keys: dict[str, tuple[str, ...]] = {}
    for item in parse_names(rest):
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or not key or not value:
            raise DivscopeError(f"policy spec {spec!r}: {item!r} is not key=value.")
        if key in keys:
            raise DivscopeError(f"policy spec {spec!r}: the key {key!r} appears twice.")
        values = (value,) if key in PATH_KEYS else tuple(v.strip() for v in value.split("/"))
        keys[key] = values
    return name.strip(), keys


PATH_KEYS: tuple[str, ...] = ("map_table", "calibration")
"""Spec keys whose value is a path: one value (a `/` is the path's own)."""
_KINDS: dict[str, type] = {
    "window": int, "stratum": str, "map_table": str, "calibration": str, "budget_sweep": bool,
}  # fmt: skip
"""The type of a spec key's value where it is not a float."""


@dataclass(frozen=True)
class Policies:
    """The policies of a cross-sample run: specs, and the keys of the specs that lack them.

    A spec is a policy's name, optionally followed by `:` and comma-separated `key=value`s;
    `--policy` is a comma-separated list of them::

        SPECS  := SPEC ("," SPEC)*
        SPEC   := NAME [":" KEY "=" VALUES ("," KEY "=" VALUES)*]
        VALUES := VALUE ("/" VALUE)*      a sweep: one policy per value (not for paths)

    e.g. `base,rl,forward:eps=0.01/0.05/0.1`, `random:rate=0.02`,
    `gated:calibration=gates.json`, `rl-replace:temperature=0.6,top_p=0.95`. The keys are the
    policy's parameters (`build_policy`): `eps`, `stratum` (`none`, `rerank`, `tail`,
    `entropy-matched`), `match_tol`, `map_table` (a token table: the retrospective map),
    `rate`, `alpha`, `share`, `tau`, `lam`, `window`, `temperature`, `top_p`, and
    `calibration` (`gated`, `entropy`: the JSON of `divscope calibrate`; they then run once
    per calibrated rate, or at the one `rate` the spec picks) and `budget_sweep` (`gated`,
    `entropy`: `true` runs them once per `--budgets` budget; by default they run unbudgeted,
    a one-token takeover at every gate firing). Several swept keys
    multiply. A key a spec lacks comes from the options below (`--eps`, `--gate-tau`...):
    they are the default keys of every spec, and the only other place a policy's parameter
    is read. The run's own sampling is not here: it is `DecodeConfig.sampling` (`--top-p`,
    `--temperature`); a policy samples elsewhere only by its spec's keys.

    Controls are added by `build`, so the Python API and the command line run the same
    policies: a listed `base` or `rl` without keys runs at the run's sampling and again at
    every other sampling of the run's policies; `rl-replace` and `base-greedy` bring both
    controls at their own sampling, listed or not. `mixture` beside `rl-replace` samples at
    rl-replace's sampling (`SAMPLED_LIKE_REPLACE`), unless its spec sets its own.

    >>> Policies("base,forward:eps=0.01/0.05").build(StatsConfig())
    [Base(), Forward(eps=0.01), Forward(eps=0.05)]
    >>> Policies(("base", "rl-replace")).build(StatsConfig())
    [Base(), Base(temperature=0.6, top_p=0.95), RLReplace(temperature=0.6, top_p=0.95),
     RL(temperature=0.6, top_p=0.95)]
    """

    policy: Annotated[
        tuple[str | Policy, ...], Flag("--policy", parse=parse_specs, metavar="SPEC[,SPEC...]")
    ]
    """Comma-separated policy specs: `NAME[:KEY=VALUE[/VALUE...][,KEY=VALUE...]]`, names of
    base, rl, forward, reverse, random, random-effective, early, rl-replace, base-greedy,
    gated, entropy, mixture, rast (e.g. base,rl,forward:eps=0.05 for recovery;
    forward:eps=0.01/0.05 sweeps eps; docs/contracts.md, "Policies of the lockstep decoder").
    rl-replace and base-greedy add base and rl controls at their own sampling (and mixture
    beside them samples at it); a listed base or rl runs at every sampling of the run;
    random-effective needs forward at its eps."""
    eps: Annotated[tuple[float, ...] | None, Flag(parse=parse_eps, metavar="EPS[,EPS...]")] = None
    """forward/reverse: switch where JS > eps (nats); a comma-separated list runs them once
    per eps (e.g. 0.01,0.05,0.1); random-effective: the forward it matches."""
    stratify: Annotated[str, Flag(metavar="STRATUM[,STRATUM...]")] = STRATIFY
    """forward/reverse: switch only at one class of divergent positions, once per stratum, at
    the same budgets: none (every one), rerank (the intervener's top-1 is within the
    primary's top-3, `RERANK_TOP_K`), tail (the intervener's sampled token has probability
    < 0.01 under the primary, `TAIL_P`), entropy-matched (low-divergence positions whose base
    entropy is within --match-tol of an earlier divergent one's; a divergent position is
    matched once). Full distributions, T=1."""
    match_tol: float = MATCH_TOL
    """entropy-matched: the largest base-entropy difference (nats) to the divergent position
    matched."""
    map_kind: Annotated[str, Flag("--map", metavar="online|retrospective")] = MAP
    """forward/reverse: where divergence is found. online: JS > eps on the mixed prefix;
    retrospective: at the positions with js > eps of the response's reference trajectory in
    --map-table (same prompt_id and sample_id, else sample_id mod the prompt's trajectories).
    online,retrospective runs both."""
    map_table: Annotated[str | None, Flag(metavar="TOKENS[,TOKENS...]")] = None
    """--map retrospective: token tables (divscope score) of reference trajectories, e.g. the
    RL model's responses scored against base, or against a checkpoint (--rl rl-step-30); one
    setting per table."""
    rate: float | None = None
    """random: per-step switch probability."""
    alpha: float | None = None
    """mixture: probability that the RL model writes a response."""
    early_share: float | None = None
    """early: the RL model writes the first ceil(share x n) tokens, n the length of the same
    prompt and sample's base response (instead of --budgets)."""
    calibration: str | os.PathLike | None = None
    """gated/entropy: tau, lambda and W from `divscope calibrate`, one setting per calibrated
    rate r (the results' `rate`); unbudgeted (budget −1) unless the spec says
    budget_sweep=true."""
    gate_tau: float | None = None
    """gated: absolute threshold tau."""
    gate_lam: float | None = None
    """gated: relative threshold lambda."""
    gate_window: int | None = None
    """gated: W, previous steps of the recent mean (default 16)."""
    entropy_tau: float | None = None
    """entropy: absolute threshold tau."""
    entropy_lam: float | None = None
    """entropy: relative threshold lambda."""
    entropy_window: int | None = None
    """entropy: W, previous steps of the recent mean (default 16)."""
    override_calibration: bool = False
    """Apply a tau, lambda or W (--gate-*, --entropy-* or a spec key) that differs from the
    calibration's (refused otherwise)."""
    rast_lam: float = RAST_LAM
    """rast: the weight of the small pair's logit difference."""
    replace_temperature: float = REPLACE_TEMPERATURE
    """rl-replace/base-greedy (and their controls): base sampling temperature."""
    replace_top_p: float = REPLACE_TOP_P
    """rl-replace/base-greedy (and their controls): base sampling top-p."""

    def __post_init__(self) -> None:
        if isinstance(self.policy, str | Policy):
            object.__setattr__(self, "policy", (self.policy,))
        specs = [s for p in self.policy for s in (parse_specs(p) if isinstance(p, str) else (p,))]
        object.__setattr__(self, "policy", tuple(specs))
        if isinstance(self.eps, int | float):
            object.__setattr__(self, "eps", (float(self.eps),))

    @classmethod
    def of(cls, policies: Policies | str | Policy | Sequence[str | Policy]) -> Policies:
        """`policies` as this class: a group as it is; specs (or policies) with the defaults."""
        if isinstance(policies, cls):
            return policies
        return cls(policies if isinstance(policies, str | Policy) else tuple(policies))

    def build(self, run: StatsConfig) -> list[Policy]:
        """The policies, in the order of the specs, each control at every sampling of the run.

        Args:
            run: the run's sampling (`DecodeConfig.sampling`): where a control without its
                own sampling runs.

        Raises:
            DivscopeError: an unknown policy or key, a policy given twice, a parameter that
                a policy needs missing or out of range (see `build_policy`), a value that
                would replace a calibrated one without `override_calibration` (naming both
                values), a bad `--stratify` or `--map`, or either of them without `forward`
                or `reverse`.
        """
        text = ",".join(p if isinstance(p, str) else repr(p) for p in self.policy)
        if len(set(self.policy)) != len(self.policy):
            raise DivscopeError(f"--policy {text!r}: a policy appears twice.")
        specs = [parse_spec(p) if isinstance(p, str) else p for p in self.policy]
        names = [s[0] if isinstance(s, tuple) else s.name for s in specs]
        strata, maps = parse_strata(self.stratify), parse_maps(self.map_kind, self.map_table)
        if (strata, maps) != ((None,), (None,)) and not set(INTERVENTIONS) & set(names):
            raise DivscopeError(
                "--stratify and --map apply to forward and reverse; add one of them to --policy."
            )
        sampling = (run.temperature, run.top_p)
        built: list[tuple[Policy, bool]] = []  # (policy, a control at every sampling)
        for spec in specs:
            if not isinstance(spec, tuple):
                every = spec.name in CONTROLS and not spec.params()
                built.append((spec, every))
                continue
            name, keys = spec
            if name in CONTROLS and not keys:
                built.append((build_policy(name), True))
                continue
            built += [(p, False) for p in self._build(name, keys, strata, maps, sampling)]
        built = _beside_replace(built)
        samplings = [sampling] + [_sampling(p, sampling) for p, every in built if not every]
        policies: list[Policy] = []
        for policy, every in built:
            if every:
                policies += [_control(policy.name, s, sampling) for s in dict.fromkeys(samplings)]
            else:
                policies.append(policy)
        own = [_sampling(p, sampling) for p, _ in built if p.name in OWN_SAMPLING]
        for at in dict.fromkeys(own):
            controls = [_control(c, at, sampling) for c in CONTROLS]
            policies += [p for p in controls if p not in policies]
        repeated = [p for i, p in enumerate(policies) if p in policies[:i]]
        if repeated:
            raise DivscopeError(f"--policy {text!r}: {repeated[0]!r} appears twice.")
        _check_matched(policies, text)
        return policies

    def _build(
        self,
        name: str,
        keys: dict[str, tuple[str, ...]],
        strata: tuple[str | None, ...],
        maps: tuple[str | None, ...],
        sampling: tuple[float, float],
    ) -> list[Policy]:
        """The policies of one spec: its keys over the defaults, one per swept value."""
        if name not in POLICIES:
            raise DivscopeError(f"unknown policy {name!r}; known policies: {', '.join(POLICIES)}.")
        known = {f.name for f in fields(POLICIES[name])} | (
            {"calibration"} if name in GATES else set()
        )
        unknown = [key for key in keys if key not in known]
        if unknown:
            raise DivscopeError(
                f"policy {name!r}: unknown key {unknown[0]!r}; its keys: "
                f"{', '.join(sorted(known)) or 'none'}."
            )
        values = {key: tuple(_value(name, key, v) for v in vs) for key, vs in keys.items()}
        if name in CONTROLS:
            return [
                _control(
                    name,
                    (given.get("temperature", sampling[0]), given.get("top_p", sampling[1])),
                    sampling,
                )  # fmt: skip
                for given in _product(values)
            ]
        if name in INTERVENTIONS:
            defaults = {
                "eps": self.eps or (None,),
                "stratum": strata,
                "map_table": maps,
            }
            swept = defaults | values
            found = []
            for given in _product(swept):
                if given["stratum"] == "entropy-matched":
                    given.setdefault("match_tol", self.match_tol)
                found.append(build_policy(name, **given))
            return found
        if name in MATCHED_TO_FORWARD:
            return [
                build_policy(name, **given)
                for given in _product({"eps": self.eps or (None,)} | values)
            ]
        found = []
        for given in _product(values):
            params: dict[str, Any] = {"alpha": self.alpha, "share": self.early_share}
            if name in GATES:
                found += self._gated(name, given)
                continue
            params["rate"] = self.rate
            if name in OWN_SAMPLING:
                params |= {"temperature": self.replace_temperature, "top_p": self.replace_top_p}
            if name == "rast":
                params["lam"] = self.rast_lam
            found.append(build_policy(name, **(params | given)))
        return found

    def _gated(self, name: str, given: dict[str, Any]) -> list[Policy]:
        """The policies of one `gated` or `entropy` spec value: one per calibrated rate (the
        spec's `rate` keeps only that calibrated rate), or one with the thresholds given."""
        source = given.pop("calibration", self.calibration)
        option = GATES[name]
        flags = {key: getattr(self, f"{option}_{key}") for key in ("tau", "lam", "window")}
        gate = flags | {k: given.pop(k) for k in list(given) if k in flags}
        if source is None:
            if "rate" in given:
                raise DivscopeError(
                    f"policy {name!r}: rate= picks a calibrated rate; give --calibration (the "
                    "JSON of `divscope calibrate`), or leave rate out with --"
                    f"{option}-tau and --{option}-lam."
                )
            return [build_policy(name, **(gate | given))]
        calibrated = Calibration.from_json(source)
        rate = given.pop("rate", None)
        thresholds = _gate(name, gate, calibrated, source, self.override_calibration)
        if rate is not None:
            thresholds = [t for t in thresholds if t["rate"] == rate]
            if not thresholds:
                raise DivscopeError(
                    f"policy {name!r}: rate={rate!r} is not a rate of --calibration {source} "
                    f"(its rates: {', '.join(f'{r:g}' for r in calibrated.rates)})."
                )
        return [build_policy(name, **(t | given)) for t in thresholds]


GATES: dict[str, str] = {"gated": "gate", "entropy": "entropy"}
"""The policies whose thresholds `divscope calibrate` calibrates (`calibration`), and the
prefix of their options (`--gate-tau`)."""


def _value(name: str, key: str, text: str) -> Any:
    """A spec value as its key's type (`none` as the stratum None, `true`/`false` as bools)."""
    kind = _KINDS.get(key, float)
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise DivscopeError(f"policy {name!r}: {key}={text!r} is not true or false.")
        return text.lower() == "true"
    if key == "stratum":
        if text not in STRATA:
            raise DivscopeError(
                f"policy {name!r}: stratum {text!r} is unknown; known: {', '.join(STRATA)}."
            )
        return None if text == "none" else text
    try:
        return kind(text)
    except ValueError as error:
        raise DivscopeError(
            f"policy {name!r}: {key}={text!r} is not {'an integer' if kind is int else 'a number'}."
        ) from error


def _product(values: dict[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Every combination of the swept values, the first key varying slowest."""
    combinations = product(*values.values())
    return [dict(zip(values, combination, strict=True)) for combination in combinations]


def _gate(
    name: str,
    given: dict[str, Any],
    calibrated: Calibration,
    source: str | os.PathLike,
    override: bool,
) -> list[dict[str, Any]]:
    """`tau`, `lam`, `window` and `rate` of the gated policy `name`, one per calibrated rate:
    each given value, else the calibrated one; a given value that differs from a calibrated
    one needs `override`."""
    found = []
    for gate in calibrated.gates_of(name):
        values = {"tau": gate.tau, "lam": gate.lam, "window": calibrated.window}
        for key, value in given.items():
            if value is None or value == values[key]:
                continue
            option = flag(name, key)
            replaced = (
                f"{option} {value!r} replaces the value {values[key]!r} that --calibration "
                f"{source} calibrated for {name!r} at rate {gate.rate:g}"
            )
            if not override:
                raise DivscopeError(
                    f"{replaced}: leave {option} out to use the calibrated value, or pass "
                    "--override-calibration to apply it."
                )
            note(f"{replaced} (--override-calibration).")
            values[key] = value
        found.append(values | {"rate": gate.rate})
    return found


SAMPLED_LIKE_REPLACE: tuple[str, ...] = ("mixture",)
"""Policies that, run beside `rl-replace` without a sampling of their own, sample at
rl-replace's (once per sampling of it), so that they compare with it."""


def _beside_replace(built: list[tuple[Policy, bool]]) -> list[tuple[Policy, bool]]:
    """`built` with each policy of `SAMPLED_LIKE_REPLACE` that has no sampling of its own run
    at every sampling of the `rl-replace` policies of `built` (as it is without them)."""
    replaces = [p for p, _ in built if p.name == "rl-replace"]
    if not replaces:
        return built
    at = dict.fromkeys((p.temperature, p.top_p) for p in replaces)  # type: ignore[attr-defined]
    out: list[tuple[Policy, bool]] = []
    for policy, every in built:
        own = {"temperature", "top_p"} & set(policy.params())
        if policy.name not in SAMPLED_LIKE_REPLACE or own:
            out.append((policy, every))
            continue
        out += [(replace(policy, temperature=t, top_p=p), every) for t, p in at]
    return out


def _check_matched(policies: Sequence[Policy], text: str) -> None:
    """Refuse a policy of `MATCHED_TO_FORWARD` whose `forward` setting (its eps, online, every
    divergent position) is not among `policies`."""
    for policy in policies:
        if policy.name not in MATCHED_TO_FORWARD:
            continue
        eps = policy.params()["eps"]
        if build_policy("forward", eps=eps) not in policies:
            raise DivscopeError(
                f"--policy {text!r}: {policy.name} matches the effective switches of forward at "
                f"eps {eps:g} (online, every divergent position), which this run lacks; add "
                f"forward:eps={eps:g} to --policy (with --stratify none and --map online)."
            )


def _sampling(policy: Policy, run: tuple[float, float]) -> tuple[float, float]:
    """(temperature, top-p) that `policy` samples at; `run` where it has none of its own."""
    params = policy.params()
    return params.get("temperature", run[0]), params.get("top_p", run[1])


def _control(name: str, sampling: tuple[float, float], run: tuple[float, float]) -> Policy:
    """The control `name` at `sampling`: no parameters when it is the run's own."""
    if sampling == run:
        return build_policy(name)
    return build_policy(name, temperature=sampling[0], top_p=sampling[1])
