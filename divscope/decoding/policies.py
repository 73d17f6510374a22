"""Intervention policies of the lockstep decoder (docs/contracts.md, "Policies of the lockstep
decoder").

At every step a policy proposes the token its primary model draws, and optionally the token an
intervening model would emit and whether it wants to switch to it. The decoder applies the
budget and the bookkeeping (`n_switches`, `n_effective`, `switch_positions`), so every policy
is only its gate. All draws use the step's coupled uniform (`randomness`); a switch is
*effective* when the emitted token differs from an independent draw of the primary
(`StepView.independent`: `n_effective`, the papers' count), *coupled-effective* when it
differs from the primary's coupled draw (`n_effective_coupled`).

>>> build_policy("forward", eps=0.05)
Forward(eps=0.05)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from divscope.decoding.randomness import inverse_cdf
from divscope.defaults import (
    GATE_WINDOW,
    RAST_LAM,
    REPLACE_TEMPERATURE,
    REPLACE_TOP_P,
    RERANK_TOP_K,
    TAIL_P,
)
from divscope.errors import DivscopeError
from divscope.scoring.metrics import (
    StatsConfig,
    Truncated,
    entropy_and_cross_entropy,
    top1,
    truncate,
    truncated_js,
)

if TYPE_CHECKING:
    from divscope.decoding.request import Request


class StepView:
    """The next-token logits of one decoding step and the statistics policies read from them,
    each computed at most once (with the scoring engine's functions)."""

    def __init__(
        self,
        logits: Mapping[str, Tensor],
        u: Tensor,
        u_switch: Tensor,
        sampling: StatsConfig,
        step: int | Tensor = 0,
        u_primary: Tensor | None = None,
    ) -> None:
        """
        Args:
            logits: `[B, V]` next-token logits per model name.
            u: `[B]` float64 sampling uniforms of this step.
            u_switch: `[B]` float64 uniforms of the `random` policy's coin.
            sampling: temperature, top-p and window of the sampled distributions and of `js`.
            step: the decoding step t (the response position of the token drawn): one for
                every row, or per row a `[B]` int64 tensor on the host (the speculative
                decoder's rows stand at different steps).
            u_primary: `[B]` float64 uniforms of the primary's independent draw
                (`Stream.PRIMARY`; `independent`); None: `u` (no independent draw).
        """
        self.logits = logits
        self.u = u
        self.u_switch = u_switch
        self.u_primary = u if u_primary is None else u_primary
        self.sampling = sampling
        self.step = step
        self._truncated: dict[tuple[str, StatsConfig], Truncated] = {}
        self._probs: dict[str, Tensor] = {}

    def steps(self, rows: int) -> Tensor:
        """`[rows]` int64 on the host: each row's step."""
        if isinstance(self.step, Tensor):
            return self.step
        return torch.full((rows,), self.step, dtype=torch.int64)

    def column(self, table: Tensor) -> Tensor:
        """`[B]` each row's entry of `table` (`[B, T]`) at its step."""
        if isinstance(self.step, Tensor):
            return table.gather(1, self.step.to(table.device)[:, None])[:, 0]
        return table[:, self.step]

    def truncate_together(self, models: Sequence[str]) -> None:
        """Truncate the sampled distributions of `models` in one call (one host sync for the
        window check instead of one per model); the rows are the same as one by one."""
        if len(models) < 2:
            return
        together = truncate(torch.cat([self.logits[m] for m in models]), self.sampling)
        n = self.u.shape[0]
        for i, model in enumerate(models):
            self._truncated[(model, self.sampling)] = _rows(together, slice(i * n, (i + 1) * n))

    def truncated(self, model: str, config: StatsConfig | None = None) -> Truncated:
        """The truncated distribution of `model` at `config` (default: the sampling one)."""
        key = (model, config or self.sampling)
        if key not in self._truncated:
            self._truncated[key] = truncate(self.logits[model], key[1])
        return self._truncated[key]

    def draw(self, model: str, config: StatsConfig | None = None) -> Tensor:
        """`[B]` the token `model` samples with this step's uniform."""
        return inverse_cdf(self.truncated(model, config), self.u)

    def independent(self, model: str, config: StatsConfig | None = None) -> Tensor:
        """`[B]` the token `model` samples with this step's independent uniform (`u_primary`):
        the draw that effective switches are counted against (`n_effective`)."""
        return inverse_cdf(self.truncated(model, config), self.u_primary)

    @cached_property
    def js(self) -> Tensor:
        """`[B]` JS of the base and RL truncated distributions (the token table's `js`)."""
        return truncated_js(self.truncated("base"), self.truncated("rl"))

    @cached_property
    def entropy_and_ce(self) -> tuple[Tensor, Tensor]:
        """`[B]` base entropy and CE(p_b, p_r), full distributions at T=1."""
        return entropy_and_cross_entropy(self.logits["base"], self.logits["rl"])

    def top1(self, model: str) -> Tensor:
        """`[B]` the most probable token of `model` (T=1, ties to the lowest id)."""
        return top1(self.logits[model])

    def probs(self, model: str) -> Tensor:
        """`[B, V]` float32 probabilities of `model`'s full distribution at T=1."""
        if model not in self._probs:
            self._probs[model] = torch.softmax(self.logits[model].float(), dim=-1)
        return self._probs[model]

    def rank(self, model: str, tokens: Tensor) -> Tensor:
        """`[B]` the 1-based rank of `tokens` (`[B]`) under `model`'s full T=1 distribution:
        1 + the number of tokens more probable (the token table's `rl_top1_rank_in_base`)."""
        probs = self.probs(model)
        return 1 + (probs > probs.gather(-1, tokens[:, None])).sum(-1)


def _rows(value: Any, rows: slice) -> Any:
    """`rows` of every tensor of a (nested) dataclass of `[n, ...]` tensors."""
    if is_dataclass(value):
        return type(value)(**{f.name: _rows(getattr(value, f.name), rows) for f in fields(value)})
    return value[rows]


@dataclass(frozen=True)
class Proposal:
    """What a policy proposes at one step (`[B]` tensors)."""

    primary: Tensor
    """The token the primary model (`Policy.primary`) draws with the step's uniform from its
    distribution (`Policy.primary_config`)."""
    intervener: Tensor | None = None
    """The token the intervening model would emit; None for single-model policies."""
    want: Tensor | None = None
    """Whether the policy switches to the intervener (before the budget applies)."""


@dataclass(frozen=True)
class Policy:
    """A decoding policy: a name, the models it reads and a per-step proposal."""

    name: ClassVar[str]
    models: ClassVar[tuple[str, ...]] = ("base", "rl")
    budgeted: ClassVar[bool] = False
    """Whether a switch budget applies (otherwise the policy runs with budget −1 only)."""
    drawn: ClassVar[tuple[str, ...]] = ("base", "rl")
    """The models drawn from at the sampling settings every step (truncated together)."""
    primary: ClassVar[str] = "base"
    """The primary model: the one whose draw (`Proposal.primary`) is emitted where the policy
    does not switch."""

    def primary_config(self, view: StepView) -> StatsConfig:
        """The distribution the primary model samples from (its `Proposal.primary` is the
        inverse-CDF draw of the step's uniform from it): by default the run's (`view.sampling`).
        The decoder draws the primary independently from the same distribution to count
        `n_effective` (`StepView.independent`)."""
        return view.sampling

    def params(self) -> dict[str, Any]:
        """The policy's parameters, as results columns."""
        return asdict(self)

    def positionwise(self) -> bool:
        """Whether `propose` only reads `state`, so that its proposal at a position depends on
        that position's view alone: the speculative decoder then proposes at all of a round's
        drafted positions in one call. Policies that carry state from step to step (a count, a
        history, a pending entropy) return False and are asked position by position."""
        return True

    records_js: ClassVar[bool] = False
    """Whether the decoder records the step's `js` at each switch (`Decoded.switch_js`)."""

    def init_state(
        self, u_response: Tensor, requests: Sequence[Request], steps: int
    ) -> dict[str, Tensor]:
        """Per-batch state.

        Args:
            u_response: `[B]` float64 once-per-response uniforms.
            requests: the batch's requests, in its row order.
            steps: the most steps the batch decodes.
        """
        return {}

    def select_state(self, state: dict[str, Tensor], rows: Tensor) -> dict[str, Tensor]:
        """The state of the batch's `rows` (`[b]` indices) only: per-row tensors (first axis
        the batch) are indexed, scalars kept."""
        return {k: v[rows.to(v.device)] if v.dim() else v for k, v in state.items()}

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        """The step's proposal; may update `state`."""
        raise NotImplementedError


@dataclass(frozen=True, repr=False)
class _Control(Policy):
    """A single-model control: sample the `primary` model alone, at its own temperature and
    top-p where given, else at the run's."""

    drawn: ClassVar[tuple[str, ...]] = ()
    temperature: float | None = None
    """Sampling temperature; None: the run's (--temperature)."""
    top_p: float | None = None
    """Sampling top-p; None: the run's (--top-p)."""

    def params(self) -> dict[str, Any]:
        """The sampling this control sets (none: the run's, which the results then hold)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def primary_config(self, view: StepView) -> StatsConfig:
        """The sampled distribution: the run's (`view.sampling`) with this control's own
        temperature and top-p where given."""
        run = view.sampling
        return StatsConfig(
            top_p=run.top_p if self.top_p is None else self.top_p,
            temperature=run.temperature if self.temperature is None else self.temperature,
            window=run.window,
        )

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        return Proposal(view.draw(self.primary, self.primary_config(view)))

    def __repr__(self) -> str:
        """`Base()` at the run's sampling, `Base(temperature=0.6, top_p=0.95)` at its own."""
        given = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({given})"


@dataclass(frozen=True, repr=False)
class Base(_Control):
    """Sample the base model alone (control)."""

    name: ClassVar[str] = "base"
    models: ClassVar[tuple[str, ...]] = ("base",)


@dataclass(frozen=True, repr=False)
class RL(_Control):
    """Sample the RL model alone (control)."""

    name: ClassVar[str] = "rl"
    models: ClassVar[tuple[str, ...]] = ("rl",)
    primary: ClassVar[str] = "rl"


STRATA: tuple[str, ...] = ("none", "rerank", "tail", "entropy-matched")
"""The classes of positions `forward` and `reverse` may be restricted to (`--stratify`)."""


@dataclass(frozen=True, repr=False)
class _Intervention(Policy):
    """Switch from the primary model to the intervener at divergent steps, optionally only at
    one stratum of positions (docs/contracts.md, "Policies of the lockstep decoder").

    A step is *divergent* where JS > eps on the mixed prefix (online), or, with a
    retrospective map (`map_table`), where its position is one of the map's (the request's
    `map_steps`). The stratum then gates the switch:

    - None: every divergent step.
    - `rerank`: divergent, and the intervener's top-1 token (full, T=1) ranks within the
      primary's top `RERANK_TOP_K` (full, T=1; rank = 1 + the tokens more probable).
    - `tail`: divergent, and the intervener's sampled token has probability < `TAIL_P` under
      the primary's full T=1 distribution.
    - `entropy-matched`: low-divergence steps whose base entropy (full, T=1) matches a
      divergent one's. Per row a pending entropy h, none at the start: a divergent step with
      none pending sets h := its base entropy (no switch); a non-divergent step with h pending
      and |H_base − h| <= `match_tol` switches, and clears h.
    """

    budgeted: ClassVar[bool] = True
    records_js: ClassVar[bool] = True
    intervener: ClassVar[str]
    eps: float
    """JS threshold (nats); a negative eps switches at every step."""
    stratum: str | None = None
    """One of `STRATA` other than `none`; None: every divergent step."""
    match_tol: float | None = None
    """`entropy-matched`: the base-entropy tolerance (nats); None for the other strata."""
    map_table: str | None = None
    """The token table of a retrospective map: divergent steps are its positions with
    js > eps (the requests' `map_steps`); None: online, js > eps on the mixed prefix."""

    def __post_init__(self) -> None:
        if self.stratum not in (None, *STRATA[1:]):
            raise DivscopeError(
                f"--stratify: unknown stratum {self.stratum!r}; known: {', '.join(STRATA)}."
            )
        if (self.stratum == "entropy-matched") != (self.match_tol is not None):
            raise DivscopeError(
                f"policy {self.name!r}: --match-tol applies to the entropy-matched stratum "
                f"only (stratum {self.stratum!r}, match_tol {self.match_tol!r})."
            )

    def params(self) -> dict[str, Any]:
        """eps, and the stratum, its tolerance and the map where set (`map`:
        `retrospective` with a `map_table`)."""
        given = {k: v for k, v in asdict(self).items() if v is not None}
        return given | ({"map": "retrospective"} if self.map_table is not None else {})

    def init_state(
        self, u_response: Tensor, requests: Sequence[Request], steps: int
    ) -> dict[str, Tensor]:
        state: dict[str, Tensor] = {}
        if self.map_table is not None:
            mapped = torch.zeros(len(requests), steps, dtype=torch.bool)  # [B, T]
            for row, request in enumerate(requests):
                if request.map_steps is None:
                    raise DivscopeError(
                        f"policy {self.name!r} with the map {self.map_table}: prompt_id="
                        f"{request.prompt_id!r}, sample_id={request.sample_id} has no map steps."
                    )
                mapped[row, [s for s in request.map_steps if s < steps]] = True
            state["mapped"] = mapped
        if self.stratum == "entropy-matched":
            state["pending"] = torch.full_like(u_response, torch.nan, dtype=torch.float32)
        return state

    def positionwise(self) -> bool:
        """False for the entropy-matched stratum (its pending entropies)."""
        return self.stratum != "entropy-matched"

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        primary, intervener = view.draw(self.primary), view.draw(self.intervener)
        if self.map_table is not None:
            mapped = state["mapped"] = state["mapped"].to(view.u.device)  # once, then no-op
            divergent = view.column(mapped)
        else:
            divergent = view.js > self.eps
        if self.stratum is None:
            want = divergent
        elif self.stratum == "rerank":
            rank = view.rank(self.primary, view.top1(self.intervener))
            want = divergent & (rank <= RERANK_TOP_K)
        elif self.stratum == "tail":
            p = view.probs(self.primary).gather(-1, intervener[:, None])[:, 0]
            want = divergent & (p < TAIL_P)
        else:
            want = self._matched(view, state, divergent)
        return Proposal(primary, intervener, want)

    def _matched(self, view: StepView, state: dict[str, Tensor], divergent: Tensor) -> Tensor:
        """`[B]` the entropy-matched gate; updates the rows' pending entropies."""
        entropy = view.entropy_and_ce[0].float()  # [B]
        pending = state["pending"].to(entropy.device)
        held = ~pending.isnan()
        want = ~divergent & held & ((entropy - pending).abs() <= self.match_tol)
        pending = torch.where(divergent & ~held, entropy, pending)
        state["pending"] = torch.where(want, torch.nan, pending)
        return want

    def __repr__(self) -> str:
        """`Forward(eps=0.05)`, `Forward(eps=0.05, stratum='tail')`: the fields set."""
        given = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) is not None
        )
        return f"{type(self).__name__}({given})"


@dataclass(frozen=True, repr=False)
class Forward(_Intervention):
    """Primary base, intervener RL: switch at divergent steps (forward cross-sampling)."""

    name: ClassVar[str] = "forward"
    intervener: ClassVar[str] = "rl"


@dataclass(frozen=True, repr=False)
class Reverse(_Intervention):
    """Primary RL, intervener base: switch at divergent steps (reverse cross-sampling)."""

    name: ClassVar[str] = "reverse"
    primary: ClassVar[str] = "rl"
    intervener: ClassVar[str] = "base"


@dataclass(frozen=True)
class RandomPositions(Policy):
    """Primary base, intervener RL: switch at random steps (the random-position baseline)."""

    name: ClassVar[str] = "random"
    budgeted: ClassVar[bool] = True
    rate: float
    """Probability of a switch at each step, independent of the models."""

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        return Proposal(view.draw("base"), view.draw("rl"), view.u_switch < self.rate)


@dataclass(frozen=True)
class RandomEffective(Policy):
    """Primary base, intervener RL: the substitution-matched random baseline. It switches only
    where the RL model's draw differs from an independent draw of the base model
    (`StepView.independent`, the draw `n_effective` counts against), so every switch is
    effective and none is an identity swap, and as many times as `forward` at `eps` makes
    effective switches in the same (prompt, sample) and budget (the request's `switches`).

    It takes the first steps where the two draws differ, whatever the divergence: where they
    differ depends on the step's independent uniform, not on a threshold. A plan spreading
    the switches at random over the response fell short of forward's count by two or more in
    1 response of 6 on the lab (a step where a substitution is possible is rare there, and a
    late plan finds none left), so the count is matched first; the switches fall short only
    when the whole response has fewer such steps."""

    name: ClassVar[str] = "random-effective"
    budgeted: ClassVar[bool] = True
    eps: float
    """The JS threshold of the `forward` setting (online, every divergent position) whose
    effective count per response is matched."""

    def init_state(
        self, u_response: Tensor, requests: Sequence[Request], steps: int
    ) -> dict[str, Tensor]:
        missing = [r for r in requests if r.switches is None]
        if missing:
            raise DivscopeError(
                f"policy {self.name!r}: prompt_id={missing[0].prompt_id!r}, sample_id="
                f"{missing[0].sample_id} has no matched switch count; run it with `divscope "
                "cross-sample` beside forward, which decodes forward first."
            )
        return {"owed": torch.tensor([r.switches for r in requests], dtype=torch.int64)}

    def positionwise(self) -> bool:
        """False: the switches still owed."""
        return False

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        primary, intervener = view.draw("base"), view.draw("rl")
        owed = state["owed"].to(view.u.device)
        want = (owed > 0) & (intervener != view.independent("base", self.primary_config(view)))
        state["owed"] = owed - want.to(owed.dtype)
        return Proposal(primary, intervener, want)


@dataclass(frozen=True)
class Early(Policy):
    """Primary base, intervener RL at every step: the RL model writes the first `budget`
    tokens, then the base model (the early-only injection baseline). With `share` ρ, each
    response's budget is ceil(ρ · n), n the length of the same (prompt, sample)'s base
    response (`budget_for`), and the run's budgets do not apply."""

    name: ClassVar[str] = "early"
    share: float | None = None
    """ρ, the share of the base response's length that the RL model writes; None: the run's
    budgets."""

    @property
    def budgeted(self) -> bool:  # type: ignore[override]
        """Runs once per budget, unless `share` sets each response's budget."""
        return self.share is None

    def budget_for(self, n_base: int) -> int:
        """ceil(share · n_base), with `share` read as the decimal it is written as, so that
        a share of 0.1 of 30 tokens is 3 (not 4, as 0.1 · 30 is in floating point).

        >>> Early(share=0.1).budget_for(30), Early(share=0.25).budget_for(9)
        (3, 3)
        """
        if self.share is None:
            raise DivscopeError("policy 'early' has no share; it runs with the run's budgets.")
        return math.ceil(Fraction(repr(self.share)) * n_base)

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        want = torch.ones_like(view.u, dtype=torch.bool)
        return Proposal(view.draw("base"), view.draw("rl"), want)


@dataclass(frozen=True)
class _ArgmaxGate(Policy):
    """Where the base and RL argmaxes differ, emit the `emits` model's argmax; else sample the
    base model at this policy's own temperature and top-p (the run's are not used)."""

    emits: ClassVar[str]
    drawn: ClassVar[tuple[str, ...]] = ()
    temperature: float = REPLACE_TEMPERATURE
    """Temperature of the base model's samples (the run's --temperature is not used)."""
    top_p: float = REPLACE_TOP_P
    """Top-p of the base model's samples (the run's --top-p is not used)."""

    def primary_config(self, view: StepView) -> StatsConfig:
        """The base model's sampled distribution: this policy's temperature and top-p."""
        return StatsConfig(self.top_p, self.temperature, view.sampling.window)

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        top1 = {model: view.top1(model) for model in ("base", "rl")}
        want = top1["base"] != top1["rl"]
        return Proposal(view.draw("base", self.primary_config(view)), top1[self.emits], want)


@dataclass(frozen=True)
class RLReplace(_ArgmaxGate):
    """Emit the RL argmax where the base and RL argmaxes differ, else sample the base model."""

    name: ClassVar[str] = "rl-replace"
    emits: ClassVar[str] = "rl"


@dataclass(frozen=True)
class BaseGreedy(_ArgmaxGate):
    """rl-replace's control: emit the BASE argmax where the base and RL argmaxes differ, else
    sample the base model (the paper's base-greedy control)."""

    name: ClassVar[str] = "base-greedy"
    emits: ClassVar[str] = "base"


@dataclass(frozen=True, repr=False)
class Gated(Policy):
    """One-token RL takeover when s_t = CE(p_b, p_r) > tau and s_t > lam · mean(s over the
    previous `window` steps); with no previous step only the first gate applies.

    Unbudgeted by default (the takeover paper's gate: a one-token takeover at every firing,
    budget −1 only); `budget_sweep=True` (the spec key `budget_sweep=true`) runs it once per
    switch budget of the run instead.

    >>> Gated(tau=2.0, lam=1.5, rate=0.05), Gated(tau=2.0, lam=1.5).budgeted
    (Gated(tau=2.0, lam=1.5, window=16, rate=0.05), False)
    """

    name: ClassVar[str] = "gated"
    tau: float
    """Absolute threshold (`divscope calibrate`)."""
    lam: float
    """Relative threshold: a spike over the recent mean."""
    window: int = GATE_WINDOW
    """W, the previous steps the recent mean covers."""
    rate: float | None = None
    """The calibration's target takeover rate r that set tau and lam (the results' `rate`);
    None for thresholds given by hand."""
    budget_sweep: bool = field(default=False, compare=False)
    """Run once per switch budget (`--budgets`) instead of unbudgeted only (not compared: the
    same gate listed with and without it is the same policy, given twice)."""

    @property
    def budgeted(self) -> bool:  # type: ignore[override]
        """Runs once per budget only with `budget_sweep`."""
        return self.budget_sweep

    def params(self) -> dict[str, Any]:
        """tau, lam, window, and the calibration rate where set (`budget_sweep` is which
        budgets the policy runs at, not a results column)."""
        return {k: v for k, v in asdict(self).items() if k != "budget_sweep" and v is not None}

    def __repr__(self) -> str:
        """`Gated(tau=2.0, lam=1.5, window=16)`: the fields set (`budget_sweep` when True)."""
        given = [f"{k}={v!r}" for k, v in self.params().items()]
        given += ["budget_sweep=True"] if self.budget_sweep else []
        return f"{type(self).__name__}({', '.join(given)})"

    def positionwise(self) -> bool:
        """False: the history of scores."""
        return False

    def score(self, view: StepView) -> Tensor:
        """`[B]` the gated score s_t."""
        return view.entropy_and_ce[1]

    def init_state(
        self, u_response: Tensor, requests: Sequence[Request], steps: int
    ) -> dict[str, Tensor]:
        batch = u_response.shape[0]
        return {"history": torch.zeros(batch, self.window, dtype=torch.float32)}  # [B, W] ring

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        s = self.score(view).float()  # [B]
        history = state["history"].to(s.device)
        step = view.steps(s.shape[0])  # [B] host: the previous steps of each row's history
        seen = step.clamp_max(self.window)
        relative = torch.ones_like(s, dtype=torch.bool)
        for n in seen.unique().tolist():  # rows at one step (every row, step by step) at once
            if not n:
                continue
            if bool((seen == n).all()):
                relative = s > self.lam * history[:, :n].mean(-1)
            else:
                rows = torch.nonzero(seen == n)[:, 0].to(s.device)
                relative[rows] = s[rows] > self.lam * history[rows, :n].mean(-1)
        history[torch.arange(s.shape[0], device=s.device), (step % self.window).to(s.device)] = s
        state["history"] = history
        return Proposal(view.draw("base"), view.draw("rl"), (s > self.tau) & relative)


@dataclass(frozen=True, repr=False)
class EntropyGated(Gated):
    """The `gated` takeover with the base model's entropy as the score (no RL signal)."""

    name: ClassVar[str] = "entropy"

    def score(self, view: StepView) -> Tensor:
        return view.entropy_and_ce[0]


@dataclass(frozen=True)
class Mixture(Policy):
    """Whole-response control: the RL model writes the response with probability alpha, else
    the base model (every step of an RL response counts as a switch)."""

    name: ClassVar[str] = "mixture"
    alpha: float
    """Probability that a response is the RL model's."""
    temperature: float | None = None
    """Sampling temperature of both models; None: the run's (beside `rl-replace`, the
    run samples it at rl-replace's: `settings.Policies.build`)."""
    top_p: float | None = None
    """Sampling top-p of both models; None: the run's."""

    def params(self) -> dict[str, Any]:
        """alpha, and the sampling where this policy sets its own."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def primary_config(self, view: StepView) -> StatsConfig:
        """The run's sampling (`view.sampling`) with this policy's temperature and top-p where
        given; the RL model samples at the same."""
        run = view.sampling
        return StatsConfig(
            top_p=run.top_p if self.top_p is None else self.top_p,
            temperature=run.temperature if self.temperature is None else self.temperature,
            window=run.window,
        )

    def init_state(
        self, u_response: Tensor, requests: Sequence[Request], steps: int
    ) -> dict[str, Tensor]:
        return {"rl": u_response < self.alpha}

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        config = self.primary_config(view)
        rl = state["rl"].to(view.u.device)
        return Proposal(view.draw("base", config), view.draw("rl", config), rl)


@dataclass(frozen=True)
class Rast(Policy):
    """RAST: sample softmax(base + lam · (small_rl − small_base)); every step counts as a
    switch, effective where the steered draw differs from the base model's own."""

    name: ClassVar[str] = "rast"
    models: ClassVar[tuple[str, ...]] = ("base", "rast_base", "rast_rl")
    drawn: ClassVar[tuple[str, ...]] = ("base",)
    lam: float = RAST_LAM
    """Weight of the small pair's logit difference."""

    def propose(self, view: StepView, state: dict[str, Tensor]) -> Proposal:
        base = view.logits["base"]
        delta = view.logits["rast_rl"].to(base.device) - view.logits["rast_base"].to(base.device)
        steered = truncate(base + self.lam * delta, view.sampling)
        want = torch.ones_like(view.u, dtype=torch.bool)
        return Proposal(view.draw("base"), inverse_cdf(steered, view.u), want)


POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (Base, RL, Forward, Reverse, RandomPositions, RandomEffective, Early, RLReplace,
                BaseGreedy, Gated, EntropyGated, Mixture, Rast)
}  # fmt: skip


def build_policy(name: str, **params: Any) -> Policy:
    """A policy from its name and its parameters (None = not given: the policy's default).

    Args:
        name: one of `POLICIES`.
        **params: `eps`, `stratum`, `match_tol`, `map_table`, `rate`, `alpha`, `share`,
            `tau`, `lam`, `window`, `budget_sweep`, `temperature`, `top_p`, each the value for
            this policy
            (`settings.Policies` maps the spec keys and the per-policy flags, e.g.
            `--gate-tau`, to them); the ones a policy does not take are ignored.

    Raises:
        DivscopeError: an unknown policy, or a required parameter missing or out of range,
            naming the flag to set.

    >>> build_policy("gated", tau=2.0, lam=1.5)
    Gated(tau=2.0, lam=1.5, window=16)
    """
    if name not in POLICIES:
        raise DivscopeError(f"unknown policy {name!r}; known policies: {', '.join(POLICIES)}.")
    cls = POLICIES[name]
    kwargs = {}
    for f in fields(cls):
        value = params.get(f.name)
        if value is None and f.default is MISSING:
            raise DivscopeError(f"policy {name!r} needs {flag(name, f.name)}{_HINTS[f.name]}.")
        if value is not None:
            kwargs[f.name] = value
    for key, value in kwargs.items():
        low, high = _RANGES.get(key, (None, None))
        if (low is not None and not value >= low) or (high is not None and not value <= high):
            bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
            raise DivscopeError(f"policy {name!r}: {flag(name, key)} must be {bound}, got {value}.")
    return cls(**kwargs)


def flag(policy: str, param: str) -> str:
    """The option of `divscope cross-sample` that sets `param` of `policy`.

    >>> flag("entropy", "tau"), flag("rl-replace", "top_p")
    ('--entropy-tau', '--replace-top-p')
    """
    return _FLAGS.get((policy, param)) or _FLAGS[(None, param)]


_FLAGS: dict[tuple[str | None, str], str] = {
    (None, "eps"): "--eps",
    (None, "rate"): "--rate",
    (None, "alpha"): "--alpha",
    (None, "share"): "--early-share",
    (None, "temperature"): "--replace-temperature",
    (None, "top_p"): "--replace-top-p",
    (None, "stratum"): "--stratify",
    (None, "match_tol"): "--match-tol",
    (None, "map_table"): "--map-table",
    ("gated", "tau"): "--gate-tau",
    ("gated", "lam"): "--gate-lam",
    ("gated", "window"): "--gate-window",
    ("entropy", "tau"): "--entropy-tau",
    ("entropy", "lam"): "--entropy-lam",
    ("entropy", "window"): "--entropy-window",
    ("rast", "lam"): "--rast-lam",
}
"""(policy, parameter) -> its option; (None, parameter) where every policy shares it."""
_HINTS: dict[str, str] = {
    "eps": " (the JS threshold in nats; negative: switch at every step)",
    "rate": " (the per-step switch probability)",
    "alpha": " (the share of responses written by the RL model)",
    "tau": ", or --calibration from `divscope calibrate`",
    "lam": ", or --calibration from `divscope calibrate`",
}
"""What a required parameter's message adds after its option."""
_RANGES: dict[str, tuple[float | None, float | None]] = {
    "rate": (0.0, 1.0),
    "alpha": (0.0, 1.0),
    "share": (0.0, 1.0),
    "window": (1, None),
    "temperature": (1e-6, None),
    "top_p": (1e-6, 1.0),
    "match_tol": (0.0, None),
}
