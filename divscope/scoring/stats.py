"""Per-position statistics of two next-token distributions: every token-table column in one pass.

`pair_stats` takes the base and RL logits of the same positions (`[n, V]`, already cut to the
tokenizer's vocabulary) and returns every per-position column of the token table, computed in
float32 exactly as the README's "Definitions" state. It is shared by the teacher-forced engine
(row chunks of a batch) and the lockstep decoder (one row per sequence and step).

Top-p, top-k and ranks never sort the vocabulary: they read a sorted top-K window (`window`),
which is exact for every position whose probability is strictly above the window's last one;
rows that need more than that (a nucleus wider than the window, or a tie group cut by the
window's edge) are redone with an exact full sort and counted in `PairStats.fallback_rows`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from divscope.schema import OVERLAP_KS

# Largest k of the top-k statistics: the RL model's top-3 tokens and the overlap_k columns.
_KMAX = max(3, *OVERLAP_KS)
_FLOAT_MAX = torch.finfo(torch.float32).max


@dataclass(frozen=True)
class StatsConfig:
    """How the divergence statistics are computed."""

    top_p: float = 0.7
    """Nucleus mass of the truncated distributions behind `js` (0 < top_p <= 1)."""
    temperature: float = 1.0
    """Temperature dividing the logits before top-p, for `js` and `nucleus_*` only."""
    window: int = 1024
    """Width K of the sorted top-K window; wider rows fall back to an exact full sort."""

    def __post_init__(self) -> None:
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}; set --top-p.")
        if not self.temperature > 0.0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}; set --temperature.")
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}.")


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
    vocab = probs.shape[-1]
    if top_p >= 1.0:
        return _full_nucleus(probs)
    ids, sorted_probs = sorted_window(probs, min(window, vocab))
    nucleus = window_nucleus(ids, sorted_probs, top_p)
    redo = ~window_exact(sorted_probs, nucleus.size, vocab)
    if redo.any():
        rows = redo.nonzero().squeeze(-1)
        exact = window_nucleus(*sorted_window(probs[rows], vocab), top_p)
        for name in ("size", "mass", "cut_prob", "cut_id"):
            getattr(nucleus, name)[rows] = getattr(exact, name)
    return nucleus


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


def _xlogy_sum(p: Tensor, log_q: Tensor) -> Tensor:
    """Σ p·log q over the last axis with 0·log q = 0 (no ε smoothing)."""
    return torch.where(p > 0, p * log_q, 0.0).sum(-1)


def _kl_to_mixture(p: Tensor, q: Tensor) -> Tensor:
    """Σ p·log(p/m), m = (p + q)/2, over the last axis, 0 where p = 0.

    Written as −p·log1p((q − p)/(2p)): exactly 0 where q = p and accurate where they are
    close (where JS is near zero); the clamp keeps a tiny p under a large q finite.
    """
    ratio = ((q - p) / (2 * p)).clamp_max(_FLOAT_MAX)
    return torch.where(p > 0, -p * torch.log1p(ratio), 0.0).sum(-1)


def _js_dense(p: Tensor, q: Tensor) -> Tensor:
    """JS(P, Q) in nats of full distributions `[n, V]`; >= 0 (rounding cannot make it negative)."""
    return (0.5 * (_kl_to_mixture(p, q) + _kl_to_mixture(q, p))).clamp_min(0.0)


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
    logits_base, logits_rl = logits_base.float(), logits_rl.float()
    log_pb = torch.log_softmax(logits_base, dim=-1)  # [n, V]
    log_pr = torch.log_softmax(logits_rl, dim=-1)  # [n, V]
    pb, pr = log_pb.exp(), log_pr.exp()  # [n, V]

    entropy_base = -_xlogy_sum(pb, log_pb)
    entropy_rl = -_xlogy_sum(pr, log_pr)
    ce_base_rl = -_xlogy_sum(pb, log_pr)
    # KL >= 0: clamp the rounding of nearly identical rows.
    kl_base_rl = _xlogy_sum(pb, log_pb - log_pr).clamp_min(0.0)
    kl_rl_base = _xlogy_sum(pr, log_pr - log_pb).clamp_min(0.0)
    js_full = _js_dense(pb, pr)

    if config.temperature == 1.0:
        tb, tr = pb, pr
    else:
        tb = torch.softmax(logits_base / config.temperature, dim=-1)  # [n, V]
        tr = torch.softmax(logits_rl / config.temperature, dim=-1)  # [n, V]

    # At least 3 wide: the RL model's top-3 tokens come from its window.
    ranked = _ranked_stats(pb, pr, tb, tr, config, min(max(config.window, 3), vocab))
    exact = ranked.pop("exact")
    redo = (~exact).nonzero().squeeze(-1)
    if redo.numel():
        full = _ranked_stats(pb[redo], pr[redo], tb[redo], tr[redo], config, vocab)
        for name, value in ranked.items():
            value[redo] = full[name]

    if token_ids is not None:
        token_ids = token_ids.to(device=pb.device, dtype=torch.int64)[:, None]
        logp_base = log_pb.gather(-1, token_ids).squeeze(-1)
        logp_rl = log_pr.gather(-1, token_ids).squeeze(-1)
    else:
        logp_base = logp_rl = None
    return PairStats(
        logp_base=logp_base,
        logp_rl=logp_rl,
        entropy_base=entropy_base,
        entropy_rl=entropy_rl,
        js_full=js_full,
        kl_base_rl=kl_base_rl,
        kl_rl_base=kl_rl_base,
        ce_base_rl=ce_base_rl,
        fallback_rows=int(redo.numel()),
        **ranked,
    )


def _ranked_stats(
    pb: Tensor, pr: Tensor, tb: Tensor, tr: Tensor, config: StatsConfig, width: int
) -> dict[str, Tensor]:
    """The order-based columns from sorted windows of `width`, plus `exact` `[n]`: rows whose
    windows held everything they needed (always true when width >= V)."""
    vocab = pb.shape[-1]
    kmax = min(_KMAX, vocab)
    b_ids, b_probs = sorted_window(pb, width)  # [n, K]
    r_ids, r_probs = sorted_window(pr, width)  # [n, K]
    exact = window_exact(b_probs, kmax, vocab) & window_exact(r_probs, kmax, vocab)

    # The top-p nuclei at the configured temperature, and the JS of the truncated distributions.
    if config.top_p >= 1.0:
        nb, nr = _full_nucleus(tb), _full_nucleus(tr)
        js = _js_dense(tb, tr)
    else:
        tb_ids, tb_probs = (b_ids, b_probs) if tb is pb else sorted_window(tb, width)
        tr_ids, tr_probs = (r_ids, r_probs) if tr is pr else sorted_window(tr, width)
        nb = window_nucleus(tb_ids, tb_probs, config.top_p)
        nr = window_nucleus(tr_ids, tr_probs, config.top_p)
        exact &= window_exact(tb_probs, nb.size, vocab) & window_exact(tr_probs, nr.size, vocab)
        js = 0.5 * (
            _truncated_kl_to_mixture(tb_ids, tb_probs, nb, tr, nr)
            + _truncated_kl_to_mixture(tr_ids, tr_probs, nr, tb, nb)
        ).clamp_min(0.0)

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
        "js": js,
        "top1_base": b_ids[:, 0],
        "top1_rl": r_ids[:, 0],
        "rl_top_rank_in_base": rank,
        "p_base_of_rl_top1": p_at[:, 0],
        "p_top1_base": b_probs[:, 0],
        "p_top1_rl": r_probs[:, 0],
        "overlap": overlap,
        "nucleus_base": nb.size,
        "nucleus_rl": nr.size,
        "exact": exact,
    }


def _truncated_kl_to_mixture(
    ids: Tensor, sorted_probs: Tensor, nucleus: Nucleus, other: Tensor, other_nucleus: Nucleus
) -> Tensor:
    """Σ_v q(v)·log(q(v)/m(v)) over this model's nucleus (a prefix of its window), where q and
    q' are the two renormalized truncated distributions and m = (q + q')/2."""
    kept = torch.arange(ids.shape[-1], device=ids.device)[None, :] < nucleus.size[:, None]  # [n, K]
    q = torch.where(kept, sorted_probs / nucleus.mass[:, None], 0.0)  # [n, K]
    other_p = other.gather(-1, ids)  # [n, K]
    q_other = torch.where(
        other_nucleus.contains(ids, other_p), other_p / other_nucleus.mass[:, None], 0.0
    )  # [n, K]
    return _kl_to_mixture(q, q_other)
