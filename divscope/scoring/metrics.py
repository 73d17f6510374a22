"""Per-position statistics of two next-token distributions: every token-table column in one pass.

`pair_stats` takes the base and RL logits of the same positions (`[n, V]`, already cut to the
tokenizer's vocabulary) and returns every per-position column of the token table, computed in
float32 exactly as docs/contracts.md, "Definitions" states. It is shared by the teacher-forced
engine (row chunks of a batch) and the lockstep decoder (one row per sequence and step), which
also takes the few columns it needs per step, computed the same way, from `truncate`,
`truncated_js`, `entropy_and_cross_entropy` and `top1`.

Top-p, top-k and ranks never sort the vocabulary: they read a sorted top-K window, which is
exact for every position whose probability is strictly above the window's last one. Rows that
need more (a nucleus wider than the window, or a tie group cut by the window's edge) are redone
with a wider window (64, then `window`), and finally with an exact full sort, counted in
`PairStats.fallback_rows`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Annotated

import torch
from torch import Tensor

from divscope.defaults import TEMPERATURE, TOP_P, WINDOW
from divscope.errors import DivscopeError
from divscope.params import Flag
from divscope.schema import OVERLAP_KS

# Largest k of the top-k statistics: the RL model's top-3 tokens and the overlap_k columns.
_KMAX = max(3, *OVERLAP_KS)
_FLOAT_MAX = torch.finfo(torch.float32).max
# Width of the first, narrow window (above the largest top-k, 50).
_FIRST_WINDOW = 64
LN2 = math.log(2.0)


@dataclass(frozen=True)
class StatsConfig:
    """How the divergence statistics are computed."""

    top_p: Annotated[float, Flag(min=0.0, max=1.0)] = TOP_P
    """Nucleus mass of the truncated distributions behind `js` (0 < top_p <= 1; --top-p)."""
    temperature: Annotated[float, Flag(min=0.0)] = TEMPERATURE
    """Temperature dividing the logits before top-p, for `js` and `nucleus_*` only
    (--temperature)."""
    window: int = WINDOW
    """Width K of the widest sorted top-K window (after a first one of 64); rows whose nucleus
    or top-k does not fit fall back to an exact full sort."""

    def __post_init__(self) -> None:
        if not 0.0 < self.top_p <= 1.0:
            raise DivscopeError(f"top_p must be in (0, 1], got {self.top_p}; set --top-p.")
        if not self.temperature > 0.0:
            raise DivscopeError(
                f"temperature must be > 0, got {self.temperature}; set --temperature."
            )
        if self.window < 1:
            raise DivscopeError(f"window must be >= 1, got {self.window}.")


@dataclass(frozen=True)
class Nucleus:
    """A top-p nucleus per row, described by its last kept token.

    Token v (probability p) is in the nucleus iff p > cut_prob, or p == cut_prob and
    v <= cut_id: the kept tokens are exactly a prefix of the (prob desc, id asc) order.
    """

    size: Tensor  # [n] int64, number of kept tokens
    mass: Tensor  # [n] float32, total probability of the kept tokens
    cut_prob: Tensor  # [n] float32, probability of the last kept token
    cut_id: Tensor  # [n] int64, id of the last kept token

    def contains(self, ids: Tensor, probs: Tensor) -> Tensor:
        """Membership of tokens `ids` whose probabilities are `probs` (both `[n, m]`)."""
        cut_prob = self.cut_prob[:, None]
        return (probs > cut_prob) | ((probs == cut_prob) & (ids <= self.cut_id[:, None]))

    def mask(self, probs: Tensor) -> Tensor:
        """Dense membership `[n, V]` for a full probability matrix (e.g. to sample from)."""
        ids = torch.arange(probs.shape[-1], device=probs.device)[None, :]
        return self.contains(ids, probs)


@dataclass(frozen=True)
class Truncated:
    """A top-p truncated distribution per row, read from a sorted window that holds its nucleus.

    `pair_stats` takes `js` between two of them; the lockstep decoder samples from them.
    """

    ids: Tensor  # [n, K] int64, token ids in (prob desc, id asc) order
    sorted_probs: Tensor  # [n, K] float32, their (tempered, untruncated) probabilities
    probs: Tensor  # [n, V] float32, the whole tempered distribution
    nucleus: Nucleus


@dataclass(frozen=True)
class PairStats:
    """The token-table columns of n positions (`[n]` tensors unless noted), base vs RL."""

    logp_base: Tensor | None  # None when no token ids were given
    logp_rl: Tensor | None
    entropy_base: Tensor
    entropy_rl: Tensor
    js: Tensor
    js_full: Tensor
    kl_base_rl: Tensor
    kl_rl_base: Tensor
    ce_base_rl: Tensor
    top1_base: Tensor
    top1_rl: Tensor
    rl_top_rank_in_base: Tensor  # [n, 3]: rank under p_b of the RL model's 1st, 2nd, 3rd token
    p_base_of_rl_top1: Tensor
    p_top1_base: Tensor
    p_top1_rl: Tensor
    overlap: Tensor  # [n, len(OVERLAP_KS)]
    nucleus_base: Tensor
    nucleus_rl: Tensor
    fallback_rows: int
    """Rows whose window was not enough and that were redone with a full sort."""

    def columns(self) -> dict[str, Tensor]:
        """The token-table columns by name, each `[n]`."""
        out: dict[str, Tensor] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "rl_top_rank_in_base":
                out.update({f"rl_top{k + 1}_rank_in_base": value[:, k] for k in range(3)})
            elif f.name == "overlap":
                out.update({f"overlap_{k}": value[:, i] for i, k in enumerate(OVERLAP_KS)})
            elif isinstance(value, Tensor):
                out[f.name] = value
        return out


def sorted_window(probs: Tensor, width: int) -> tuple[Tensor, Tensor]:
    """The `width` most probable tokens of each row, ordered by (prob desc, id asc).

    `torch.topk` and `torch.sort` do not order ties, so the order is made explicit: the window
    is sorted by id, then stably by probability. Every position whose probability is strictly
    above the window's last one is exact; a tie group cut by the window's edge may hold any of
    its members there. `width >= V` is an exact full sort.

    Returns:
        ids `[n, width]` (int64) and probabilities `[n, width]`.
    """
    if width >= probs.shape[-1]:
        # Stable sort of the rows as they are (ids ascending) puts ties in id order.
        sorted_probs, ids = torch.sort(probs, dim=-1, descending=True, stable=True)
        return ids, sorted_probs
    top_probs, top_ids = torch.topk(probs, width, dim=-1, sorted=False)  # [n, K]
    top_ids, by_id = torch.sort(top_ids, dim=-1)
    top_probs = top_probs.gather(-1, by_id)
    sorted_probs, by_prob = torch.sort(top_probs, dim=-1, descending=True, stable=True)
    return top_ids.gather(-1, by_prob), sorted_probs


def window_nucleus(ids: Tensor, sorted_probs: Tensor, top_p: float) -> Nucleus:
    """The top-p nucleus read from a sorted window (`sorted_window`'s output).

    Keeps the token at position j iff the mass before it is < top_p (the first always).
    The result is exact only if the window holds it (see `window_exact`).
    """
    cum = sorted_probs.double().cumsum(-1)  # [n, K]; float64 so the boundary test is exact-ish
    before = cum - sorted_probs.double()
    size = (before < top_p).sum(-1).clamp_min(1)  # `before` is non-decreasing: a prefix
    last = (size - 1)[:, None]
    return Nucleus(
        size=size,
        mass=cum.gather(-1, last).squeeze(-1).float(),
        cut_prob=sorted_probs.gather(-1, last).squeeze(-1),
        cut_id=ids.gather(-1, last).squeeze(-1),
    )


def window_exact(sorted_probs: Tensor, needed: Tensor | int, vocab: int) -> Tensor:
    """Whether the first `needed` positions of each row's window are exact (`[n]` bool)."""
    n, width = sorted_probs.shape
    if width >= vocab:
        return torch.ones(n, dtype=torch.bool, device=sorted_probs.device)
    needed = torch.as_tensor(needed, device=sorted_probs.device).expand(n).clamp(1, width)
    return sorted_probs.gather(-1, (needed - 1)[:, None]).squeeze(-1) > sorted_probs[:, -1]


def top_p_nucleus(probs: Tensor, top_p: float, window: int = 1024) -> Nucleus:
    """The top-p nucleus of each row of `probs` (`[n, V]`), exact, via a window.

    >>> top_p_nucleus(torch.tensor([[0.25, 0.5, 0.25]]), 0.6).size
    tensor([2])
    """
    return _truncate_probs(probs, top_p, window).nucleus


def truncate(logits: Tensor, config: StatsConfig) -> Truncated:
    """The top-p truncated distribution of each row of `logits` (`[n, V]`) at the configured
    temperature, exact. Probabilities are computed as `pair_stats` computes them.

    >>> t = truncate(torch.tensor([[0.0, 1.0, 0.0]]), StatsConfig(top_p=0.5))
    >>> t.ids[0, : int(t.nucleus.size[0])].tolist()
    [1]
    """
    if config.temperature == 1.0:
        probs = _log_softmax(logits).exp()  # [n, V]
    else:
        probs = torch.softmax(logits.float() / config.temperature, dim=-1)  # [n, V]
    return _truncate_probs(probs, config.top_p, config.window)


def _truncate_probs(probs: Tensor, top_p: float, window: int) -> Truncated:
    """The top-p truncation of each row of `probs` (`[n, V]`): from a sorted window of `window`
    when every row's nucleus fits it, else from a full sort of every row."""
    vocab = probs.shape[-1]
    if top_p >= 1.0:  # every token of non-zero probability
        ids, sorted_probs = sorted_window(probs, vocab)  # [n, V]
        return Truncated(
            ids=ids, sorted_probs=sorted_probs, probs=probs, nucleus=_full_nucleus(probs)
        )
    ids, sorted_probs = sorted_window(probs, min(max(window, 3), vocab))  # [n, K]
    nucleus = window_nucleus(ids, sorted_probs, top_p)
    if not bool(window_exact(sorted_probs, nucleus.size, vocab).all()):
        ids, sorted_probs = sorted_window(probs, vocab)  # [n, V]
        nucleus = window_nucleus(ids, sorted_probs, top_p)
    return Truncated(ids=ids, sorted_probs=sorted_probs, probs=probs, nucleus=nucleus)


def _full_nucleus(probs: Tensor) -> Nucleus:
    """top_p = 1: every token of non-zero probability (mass before it is then < 1)."""
    positive = probs > 0
    inf = torch.full_like(probs, math.inf)
    return Nucleus(
        size=positive.sum(-1),
        mass=probs.sum(-1),
        cut_prob=torch.where(positive, probs, inf).min(-1).values,
        cut_id=torch.full_like(probs[:, 0], probs.shape[-1] - 1, dtype=torch.int64),
    )


def _kl_to_mixture(p: Tensor, q: Tensor) -> Tensor:
    """Σ p·log(p/m), m = (p + q)/2, over the last axis, 0 where p = 0 (for narrow windows).

    Written as −p·log1p((q − p)/(2p)): exactly 0 where q = p and accurate where they are
    close (where JS is near zero); the clamp keeps a tiny p under a large q finite.
    """
    ratio = ((q - p) / (2 * p)).clamp_max(_FLOAT_MAX)
    return torch.where(p > 0, -p * torch.log1p(ratio), 0.0).sum(-1)


@dataclass(frozen=True)
class _Dense:
    """The full-distribution statistics of a pair of rows `[n, V]` (each `[n]`)."""

    entropy_p: Tensor
    entropy_q: Tensor
    kl_p_q: Tensor
    kl_q_p: Tensor
    js: Tensor

    @property
    def cross_entropy_p_q(self) -> Tensor:
        """−Σ p log q = H(p) + KL(p‖q)."""
        return self.entropy_p + self.kl_p_q


def _dense(log_p: Tensor, log_q: Tensor, p: Tensor, q: Tensor) -> _Dense:
    """Entropies, both KLs and JS of full distributions, with few passes over `[n, V]`.

    Memory-bound, so passes are few: row dot products without product buffers, and JS
    reuses log(q/p): with L = log(m/p) = softplus(log q/p) − ln 2,
    JS = ½Σ p·log(p/m) + ½Σ q·log(q/m) = ½ KL(q‖p) − ½Σ (p + q)·L, exactly 0 where q = p.
    """
    dot = torch.linalg.vecdot  # Σ a·b per row, no [n, V] product buffer, pairwise sums

    log_ratio = log_q - log_p  # [n, V], log(q/p)
    kl_p_q = -dot(p, log_ratio)
    kl_q_p = dot(q, log_ratio)
    half_log = torch.nn.functional.softplus(log_ratio).sub_(LN2)  # [n, V], log(m/p)
    js = 0.5 * (kl_q_p - dot(p, half_log) - dot(q, half_log))
    # KL, JS >= 0: clamp what rounding leaves of nearly identical rows.
    return _Dense(
        entropy_p=-dot(p, log_p),
        entropy_q=-dot(q, log_q),
        kl_p_q=kl_p_q.clamp_min(0.0),
        kl_q_p=kl_q_p.clamp_min(0.0),
        js=js.clamp_min(0.0),
    )


def _log_softmax(logits: Tensor) -> Tensor:
    """float32 log-probabilities `[n, V]`; −inf logits become the most negative float so that
    0·log 0 = 0 in the row dot products (such tokens must be masked in both models)."""
    return torch.log_softmax(logits.float(), dim=-1).clamp_(min=-_FLOAT_MAX)


def pair_stats(
    logits_base: Tensor,
    logits_rl: Tensor,
    token_ids: Tensor | None = None,
    config: StatsConfig = StatsConfig(),  # noqa: B008 (frozen, hashable)
) -> PairStats:
    """Every per-position token-table statistic of base vs RL, in float32, in one pass.

    Args:
        logits_base: `[n, V]` base-model logits (any float dtype; V = the tokenizer's size).
        logits_rl: `[n, V]` RL-model logits of the same positions.
        token_ids: `[n]` the tokens whose log-probabilities fill `logp_*`; None to skip them.
        config: top-p, temperature and window.

    >>> s = pair_stats(torch.zeros(1, 4), torch.zeros(1, 4), torch.tensor([2]))
    >>> float(s.js), int(s.nucleus_base), float(s.overlap[0, 0])
    (0.0, 3, 1.0)
    """
    n, vocab = logits_base.shape
    if logits_rl.shape != (n, vocab):
        raise ValueError(
            f"logits shapes differ: {tuple(logits_base.shape)} vs {tuple(logits_rl.shape)}"
        )
    if vocab < 3:
        raise ValueError(f"vocabulary of {vocab} tokens; the rank columns need at least 3.")
    log_pb, log_pr = _log_softmax(logits_base), _log_softmax(logits_rl)  # [n, V]
    pb, pr = log_pb.exp(), log_pr.exp()  # [n, V]
    dense = _dense(log_pb, log_pr, pb, pr)

    tb = tr = None  # tempered probabilities, when temperature != 1
    if config.temperature != 1.0:
        tb = torch.softmax(logits_base.float() / config.temperature, dim=-1)  # [n, V]
        tr = torch.softmax(logits_rl.float() / config.temperature, dim=-1)  # [n, V]

    # Windows tried in turn, each for the rows the previous one could not settle: a narrow one
    # (cheap to select and sort) fits most rows, `window` most of the rest, a full sort all.
    # At least 3 wide: the RL model's top-3 tokens come from its window.
    widths = sorted({min(max(w, 3), vocab) for w in (_FIRST_WINDOW, config.window, vocab)})
    ranked = _ranked_stats(pb, pr, tb, tr, config, widths[0])
    redo = ~ranked.pop("exact")  # [n]
    fallback_rows = 0
    for width in widths[1:]:
        rows = redo.nonzero().squeeze(-1)
        if not rows.numel():
            break
        fallback_rows = rows.numel() if width > config.window else 0  # past every window
        sub_t = (None, None) if tb is None else (tb[rows], tr[rows])
        part = _ranked_stats(pb[rows], pr[rows], *sub_t, config, width)
        redo[rows] = ~part.pop("exact")
        for name, value in ranked.items():
            value[rows] = part[name]
    if config.top_p >= 1.0:  # the nuclei are the supports: JS of the full tempered rows
        js = dense.js
        if tb is not None:
            log_tb = _log_softmax(logits_base / config.temperature)
            log_tr = _log_softmax(logits_rl / config.temperature)
            js = _dense(log_tb, log_tr, tb, tr).js
        ranked["js"] = js

    if token_ids is not None:
        token_ids = token_ids.to(device=pb.device, dtype=torch.int64)[:, None]
        logp_base = log_pb.gather(-1, token_ids).squeeze(-1)
        logp_rl = log_pr.gather(-1, token_ids).squeeze(-1)
    else:
        logp_base = logp_rl = None
    return PairStats(
        logp_base=logp_base,
        logp_rl=logp_rl,
        entropy_base=dense.entropy_p,
        entropy_rl=dense.entropy_q,
        js_full=dense.js,
        kl_base_rl=dense.kl_p_q,
        kl_rl_base=dense.kl_q_p,
        ce_base_rl=dense.cross_entropy_p_q,
        fallback_rows=fallback_rows,
        **ranked,
    )


def _ranked_stats(
    pb: Tensor,
    pr: Tensor,
    tb: Tensor | None,
    tr: Tensor | None,
    config: StatsConfig,
    width: int,
) -> dict[str, Tensor]:
    """The order-based columns from sorted windows of `width`, plus `exact` `[n]`: rows whose
    windows held everything they needed (always true when width >= V). `tb`, `tr` are the
    tempered probabilities for top-p, None when they are `pb`, `pr` (temperature 1)."""
    vocab = pb.shape[-1]
    kmax = min(_KMAX, vocab)
    b_ids, b_probs = sorted_window(pb, width)  # [n, K]
    r_ids, r_probs = sorted_window(pr, width)  # [n, K]
    exact = window_exact(b_probs, kmax, vocab) & window_exact(r_probs, kmax, vocab)

    # The top-p nuclei at the configured temperature, and the JS of the truncated distributions
    # (with top_p = 1, the caller's JS of the full rows).
    out: dict[str, Tensor] = {}
    tb, tr = (pb, pr) if tb is None else (tb, tr)
    if config.top_p >= 1.0:
        nucleus_base, nucleus_rl = (tb > 0).sum(-1), (tr > 0).sum(-1)
    else:
        tb_ids, tb_probs = (b_ids, b_probs) if tb is pb else sorted_window(tb, width)
        tr_ids, tr_probs = (r_ids, r_probs) if tr is pr else sorted_window(tr, width)
        nb = window_nucleus(tb_ids, tb_probs, config.top_p)
        nr = window_nucleus(tr_ids, tr_probs, config.top_p)
        exact &= window_exact(tb_probs, nb.size, vocab) & window_exact(tr_probs, nr.size, vocab)
        out["js"] = truncated_js(
            Truncated(ids=tb_ids, sorted_probs=tb_probs, probs=tb, nucleus=nb),
            Truncated(ids=tr_ids, sorted_probs=tr_probs, probs=tr, nucleus=nr),
        )
        nucleus_base, nucleus_rl = nb.size, nr.size

    # Ranks under p_b of the RL model's top-3, by counting: from the base window when the
    # token's probability is above the window's edge (all larger ones are inside), else the row.
    rl_top3 = r_ids[:, :3]  # [n, 3]
    p_at = pb.gather(-1, rl_top3)  # [n, 3]
    rank = 1 + (b_probs[:, None, :] > p_at[:, :, None]).sum(-1)  # [n, 3]
    if width < vocab:
        outside = p_at <= b_probs[:, -1:]
        if outside.any():
            rows, cols = outside.nonzero(as_tuple=True)
            rank[rows, cols] = 1 + (pb[rows] > p_at[rows, cols][:, None]).sum(-1)

    same = b_ids[:, :kmax, None] == r_ids[:, None, :kmax]  # [n, kmax, kmax]
    overlap = torch.stack(
        [same[:, : min(k, vocab), : min(k, vocab)].sum((1, 2)) / min(k, vocab) for k in OVERLAP_KS],
        dim=-1,
    ).float()  # [n, len(OVERLAP_KS)]
    return {
        **out,
        "top1_base": b_ids[:, 0],
        "top1_rl": r_ids[:, 0],
        "rl_top_rank_in_base": rank,
        "p_base_of_rl_top1": p_at[:, 0],
        "p_top1_base": b_probs[:, 0],
        "p_top1_rl": r_probs[:, 0],
        "overlap": overlap,
        "nucleus_base": nucleus_base,
        "nucleus_rl": nucleus_rl,
        "exact": exact,
    }


def truncated_js(base: Truncated, rl: Truncated) -> Tensor:
    """JS divergence `[n]` of two truncated, renormalized distributions: the token table's `js`."""
    return 0.5 * (
        _truncated_kl_to_mixture(base, rl) + _truncated_kl_to_mixture(rl, base)
    ).clamp_min(0.0)


def _truncated_kl_to_mixture(this: Truncated, other: Truncated) -> Tensor:
    """Σ_v q(v)·log(q(v)/m(v)) over this model's nucleus (a prefix of its window), where q and
    q' are the two renormalized truncated distributions and m = (q + q')/2."""
    ids, nucleus = this.ids, this.nucleus
    kept = torch.arange(ids.shape[-1], device=ids.device)[None, :] < nucleus.size[:, None]  # [n, K]
    q = torch.where(kept, this.sorted_probs / nucleus.mass[:, None], 0.0)  # [n, K]
    other_p = other.probs.gather(-1, ids)  # [n, K]
    q_other = torch.where(
        other.nucleus.contains(ids, other_p), other_p / other.nucleus.mass[:, None], 0.0
    )  # [n, K]
    return _kl_to_mixture(q, q_other)


def entropy_and_cross_entropy(logits_base: Tensor, logits_rl: Tensor) -> tuple[Tensor, Tensor]:
    """`entropy_base` and `ce_base_rl` (`[n]` each, full distributions, T=1) as `pair_stats`
    computes them."""
    log_pb, log_pr = _log_softmax(logits_base), _log_softmax(logits_rl)  # [n, V]
    dense = _dense(log_pb, log_pr, log_pb.exp(), log_pr.exp())
    return dense.entropy_p, dense.cross_entropy_p_q


def full_js(logits_base: Tensor, logits_rl: Tensor) -> Tensor:
    """`js_full` (`[n]`: JS of the full T=1 distributions, in nats) as `pair_stats` computes it.

    >>> p, q = torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, math.log(3.0)]])  # ½ ½, ¼ ¾
    >>> round(float(full_js(p, q)), 6)
    0.033822
    """
    log_pb, log_pr = _log_softmax(logits_base), _log_softmax(logits_rl)  # [n, V]
    return _dense(log_pb, log_pr, log_pb.exp(), log_pr.exp()).js


def top1(logits: Tensor) -> Tensor:
    """The most probable token `[n]` of the T=1 distribution, ties to the lowest id: the token
    table's `top1_*`."""
    return _log_softmax(logits).exp().argmax(-1)
