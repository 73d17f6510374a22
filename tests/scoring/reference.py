"""A slow, obvious float64 reference of every token-table statistic, and tiny-model helpers.

The reference follows docs/contracts.md, "Definitions" literally: full softmax, a full Python
sort by (prob desc, id asc), counting for ranks, sets for top-k overlaps. It also says, per column,
whether a row is a *near-tie* (two probabilities, or a nucleus boundary, closer than
`NEAR_TIE` but not equal): float32 and float64 may order such rows differently, so discrete
columns are compared everywhere except there.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from divscope.schema import OVERLAP_KS

NEAR_TIE = 1e-6
FLOAT_TOLERANCE = 1e-4

FLOAT_COLUMNS = (
    "logp_base",
    "logp_rl",
    "entropy_base",
    "entropy_rl",
    "js",
    "js_full",
    "kl_base_rl",
    "kl_rl_base",
    "ce_base_rl",
    "p_base_of_rl_top1",
    "p_top1_base",
    "p_top1_rl",
)
DISCRETE_COLUMNS = (
    "top1_base",
    "top1_rl",
    "rl_top1_rank_in_base",
    "rl_top2_rank_in_base",
    "rl_top3_rank_in_base",
    *(f"overlap_{k}" for k in OVERLAP_KS),
    "nucleus_base",
    "nucleus_rl",
)


def _softmax64(logits) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max()
    e = np.exp(x)
    return e / e.sum()


def _order(p: np.ndarray) -> list[int]:
    return sorted(range(len(p)), key=lambda v: (-p[v], v))


def _near(a: float, b: float) -> bool:
    return 0 < abs(a - b) < NEAR_TIE


def _nucleus(p: np.ndarray, top_p: float) -> tuple[list[int], bool]:
    """Kept tokens in order, and whether the row is a near-tie for the boundary."""
    order = _order(p)
    if top_p >= 1.0:  # mass before v < 1 iff p(v) > 0; summing would only add rounding
        return [v for v in order if p[v] > 0], False
    kept, before, ambiguous = [], 0.0, False
    for v in order:
        ambiguous |= abs(before - top_p) < NEAR_TIE
        if before < top_p or not kept:
            kept.append(v)
        before += p[v]
    # Which of two nearly tied tokens at the cut is kept is rounding's choice.
    if len(kept) < len(order):
        ambiguous |= _near(p[kept[-1]], p[order[len(kept)]])
    return kept, ambiguous


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    return sum(p[v] * math.log(p[v] / q[v]) for v in range(len(p)) if p[v] > 0)


def _js(p: np.ndarray, q: np.ndarray) -> float:
    m = (p + q) / 2
    return 0.5 * _kl(p, m) + 0.5 * _kl(q, m)


def reference_row(
    logits_base, logits_rl, token: int | None, top_p: float, temperature: float
) -> tuple[dict[str, float], dict[str, bool]]:
    """Every statistic of one position, and per discrete column whether it is a near-tie."""
    pb, pr = _softmax64(logits_base), _softmax64(logits_rl)
    vocab = len(pb)
    ob, orl = _order(pb), _order(pr)
    out: dict[str, float] = {}
    tie: dict[str, bool] = {}
    if token is not None:
        out["logp_base"] = math.log(pb[token])
        out["logp_rl"] = math.log(pr[token])
    out["entropy_base"] = -sum(x * math.log(x) for x in pb if x > 0)
    out["entropy_rl"] = -sum(x * math.log(x) for x in pr if x > 0)
    out["kl_base_rl"] = _kl(pb, pr)
    out["kl_rl_base"] = _kl(pr, pb)
    out["ce_base_rl"] = -sum(pb[v] * math.log(pr[v]) for v in range(vocab) if pb[v] > 0)
    out["js_full"] = _js(pb, pr)

    tb = _softmax64(np.asarray(logits_base, dtype=np.float64) / temperature)
    tr = _softmax64(np.asarray(logits_rl, dtype=np.float64) / temperature)
    kept_b, tie_b = _nucleus(tb, top_p)
    kept_r, tie_r = _nucleus(tr, top_p)
    qb, qr = np.zeros(vocab), np.zeros(vocab)
    qb[kept_b] = tb[kept_b] / tb[kept_b].sum()
    qr[kept_r] = tr[kept_r] / tr[kept_r].sum()
    out["js"] = _js(qb, qr)
    out["nucleus_base"], out["nucleus_rl"] = len(kept_b), len(kept_r)
    tie["nucleus_base"], tie["nucleus_rl"] = tie_b, tie_r
    tie["js"] = tie_b or tie_r

    out["top1_base"], out["top1_rl"] = ob[0], orl[0]
    tie["top1_base"] = _near(pb[ob[0]], pb[ob[1]])
    tie["top1_rl"] = _near(pr[orl[0]], pr[orl[1]])
    out["p_top1_base"], out["p_top1_rl"] = pb[ob[0]], pr[orl[0]]
    out["p_base_of_rl_top1"] = pb[orl[0]]
    tie["p_base_of_rl_top1"] = tie["top1_rl"]
    for k in (1, 2, 3):
        v = orl[k - 1]
        out[f"rl_top{k}_rank_in_base"] = 1 + sum(1 for u in range(vocab) if pb[u] > pb[v])
        tie[f"rl_top{k}_rank_in_base"] = any(
            _near(pr[v], pr[u]) for u in orl[max(0, k - 2) : k + 1]
        ) or any(_near(pb[u], pb[v]) for u in range(vocab))
    for k in OVERLAP_KS:
        n = min(k, vocab)
        out[f"overlap_{k}"] = len(set(ob[:n]) & set(orl[:n])) / n
        tie[f"overlap_{k}"] = n < vocab and (
            _near(pb[ob[n - 1]], pb[ob[n]]) or _near(pr[orl[n - 1]], pr[orl[n]])
        )
    return out, tie


def compare(got: dict[str, float], want: dict[str, float], tie: dict[str, bool], where: str) -> int:
    """Assert one row matches the reference; return how many discrete columns were skipped."""
    skipped = 0
    for name in FLOAT_COLUMNS:
        if name not in want:
            continue
        if tie.get(name, False):
            skipped += 1
            continue
        assert abs(got[name] - want[name]) <= FLOAT_TOLERANCE, (
            f"{where} {name}: {got[name]} vs reference {want[name]}"
        )
    for name in DISCRETE_COLUMNS:
        if tie.get(name, False):
            skipped += 1
            continue
        # Overlaps are fractions stored as float32; every other discrete column is an integer.
        assert abs(got[name] - want[name]) < 1e-6, (
            f"{where} {name}: {got[name]} vs reference {want[name]}"
        )
    return skipped


# ---------------------------------------------------------------- tiny model edits


def tie_rows(model, rows: tuple[int, ...]) -> None:
    """Give `rows` identical output-head rows, so their logits tie exactly everywhere."""
    with torch.no_grad():
        weight = model.get_output_embeddings().weight  # [rows, d]
        weight[list(rows)] = weight[rows[0]].clone()


def rl_twin(model, seed: int, noise: float = 0.3):
    """A perturbed copy: every weight gets relative Gaussian noise."""
    twin = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in twin.parameters():
            parameter.add_(
                noise * parameter.std() * torch.randn(parameter.shape, generator=generator)
            )
    return twin


def response_hidden(model, prompt: list[int], response: list[int]) -> torch.Tensor:
    """The model's final hidden states `[T, d]` that predict the response tokens (row t predicts
    response token t), from one unbatched forward of its decoder."""
    ids = torch.tensor([prompt + response[:-1]])
    with torch.inference_mode():
        hidden = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state[0]
    return hidden[len(prompt) - 1 :]


def head_twin(model, hidden: torch.Tensor, sigma: float, seed: int = 0):
    """A copy of `model` whose output head alone is perturbed (untied from the input
    embeddings, so both models share every hidden state): its rows are the head's plus
    Gaussian noise, rounded to the head's dtype, scaled so that the true (float64) logit
    differences on `hidden` `[n, d]` have standard deviation `sigma` (to 2%)."""
    twin = copy.deepcopy(model)
    weight = model.get_output_embeddings().weight.detach()  # [V, d]
    noise = torch.randn(weight.shape, generator=torch.Generator().manual_seed(seed))
    exact, states = weight.double(), hidden.double()
    scale = sigma / states.norm(dim=-1).mean().item()
    for _ in range(20):
        perturbed = (exact + scale * noise.double()).to(weight.dtype)  # [V, d]
        spread = ((perturbed.double() - exact) @ states.T).std().item()
        if abs(spread / sigma - 1) < 0.02:
            break
        scale *= sigma / spread
    else:
        raise AssertionError(f"head_twin: logit differences of {spread:.3g}, not {sigma:.3g}")
    twin.get_output_embeddings().weight = torch.nn.Parameter(perturbed, requires_grad=False)
    return twin
