"""The output head divscope computes logits with, and the checks that a model's head fits it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from divscope.errors import DivscopeError

if TYPE_CHECKING:
    import torch


HEAD_DTYPES: tuple[str | None, ...] = (None, "float32")
"""The output head's dtypes: None (the weights') or float32 (--head-dtype)."""


def check_head_dtype(head_dtype: str | None) -> None:
    """Raise unless `head_dtype` is one of `HEAD_DTYPES`.

    >>> check_head_dtype("bfloat16")
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: --head-dtype 'bfloat16': only float32 is supported.
    """
    if head_dtype not in HEAD_DTYPES:
        raise DivscopeError(f"--head-dtype {head_dtype!r}: only float32 is supported.")


HEAD_CHUNK_BYTES = 64 * 2**20
"""Bytes of the float32 copy of one slice of the head's rows that `float32_logits` makes at a
time where no float32-output product exists (the CPU; torch < 2.8 on CUDA)."""


class OutputHead:
    """A causal LM's output head on the tokenizer's rows, with the final logit transform its
    class applies after the head (softcapping, scaling), returning float32 logits (float64
    for a float64 model).

    The products of a half-precision (bf16, fp16) head and hidden states are accumulated and
    returned in float32 (`float32_logits`), never rounded to the half-precision type first: a
    bf16 logit near 16 is a multiple of 0.0625, far coarser than the differences RL makes at
    most positions, and rounding both models' logits that way fills the near-zero divergences
    with noise (`bench/bf16_head.py`).

    Args:
        model: the loaded causal LM.
        vocab: the tokenizer's size; padded head rows beyond it are dropped.
        dtype: `float32`: multiply in float32 from a float32 copy of the head (the same
            float32 products, without converting slices of a half-precision head at each call;
            costs 4 bytes per vocabulary entry and hidden unit, e.g. 2.2 GB for a 152k x 3,584
            head). None: from the weights as they are.
        device: where the logits are computed, when not on the head's own device (the
            statistics device of a run whose models sit on several devices): a copy of the
            head's rows (V x d) is kept there and the hidden states `[rows, d]` go to it, so
            no `[rows, V]` logits ever cross devices. None: the head's device.
    """

    def __init__(
        self,
        model,
        vocab: int,
        dtype: str | None = None,
        device: str | torch.device | None = None,
    ) -> None:
        import torch

        head = model.get_output_embeddings()
        weight = head.weight[:vocab]  # [V, d]; a view, padded rows dropped
        bias = getattr(head, "bias", None)
        self.device = weight.device if device is None else _indexed(torch.device(device))
        wide = torch.float32 if dtype == "float32" else weight.dtype
        # At most one copy (to float32, to `device`, or both); none when neither changes.
        self.weight = weight.to(device=self.device, dtype=wide)
        self.bias = None if bias is None else bias[:vocab].to(device=self.device, dtype=wide)
        config = model.config.get_text_config()
        self.softcap = getattr(config, "final_logit_softcapping", None)
        scale = getattr(config, "logit_scale", None)  # Cohere multiplies
        divisor = getattr(config, "logits_scaling", None)  # Granite divides
        self.scale = (scale or 1.0) / (divisor or 1.0)

    def __call__(self, hidden):
        """float32 logits `[..., V]` of final hidden states `[..., d]` (float64 for a float64
        head), accumulated in float32 from a half-precision head."""
        import torch

        hidden = hidden.to(device=self.device, dtype=self.weight.dtype)
        if self.weight.dtype in (torch.float32, torch.float64):
            logits = torch.nn.functional.linear(hidden, self.weight, self.bias)  # [..., V]
        else:
            logits = float32_logits(hidden, self.weight, self.bias)  # [..., V]
        if self.scale != 1.0:
            logits = logits * self.scale
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits


def float32_logits(hidden, weight, bias=None, *, chunk_bytes: int = HEAD_CHUNK_BYTES):
    """`hidden @ weight.T + bias` of half-precision operands, accumulated and returned in float32.

    On CUDA with torch >= 2.8, one matrix product with a float32 output (`torch.mm(...,
    out_dtype=torch.float32)`). Elsewhere the operands are converted to float32 (exactly: a bf16
    or fp16 value is a float32 value) and multiplied in float32, the head `chunk_bytes` of its
    float32 rows at a time, so the extra memory stays bounded; with TF32 allowed on CUDA the
    products stay exact too (TF32 keeps 10 mantissa bits, bf16 has 7 and fp16 10).

    Args:
        hidden: `[..., d]` hidden states, in `weight`'s dtype.
        weight: `[V, d]` the head's rows, bf16 or fp16.
        bias: `[V]` or None.
        chunk_bytes: bytes of the float32 copy of head rows made at a time (no copy on CUDA
            with torch >= 2.8).

    Returns:
        float32 logits `[..., V]`.

    >>> import torch
    >>> hidden = torch.tensor([[1.0, 1.0]], dtype=torch.bfloat16)
    >>> weight = torch.tensor([[16.0, 0.0625], [-1.0, 2.0]], dtype=torch.bfloat16)  # exact in bf16
    >>> float32_logits(hidden, weight).tolist(), torch.nn.functional.linear(hidden, weight).tolist()
    ([[16.0625, 1.0]], [[16.0, 1.0]])
    """
    import torch

    flat = hidden.reshape(-1, hidden.shape[-1])  # [n, d]
    vocab, width = weight.shape
    if flat.is_cuda and "dtype" in torch.ops.aten.mm.overloads():  # torch >= 2.8
        logits = torch.mm(flat, weight.T, out_dtype=torch.float32)  # [n, V]
    else:
        wide = flat.float()  # [n, d]
        logits = torch.empty(flat.shape[0], vocab, dtype=torch.float32, device=flat.device)
        step = max(1, chunk_bytes // (4 * width))
        for lo in range(0, vocab, step):
            logits[:, lo : lo + step] = wide @ weight[lo : lo + step].float().T  # [n, step]
    if bias is not None:
        logits += bias.float()
    return logits.reshape(*hidden.shape[:-1], vocab)


def _indexed(device: torch.device) -> torch.device:
    """`cuda` as the `cuda:N` it stands for (the current GPU), so that it compares equal to the
    device of a tensor there; other devices as they are."""
    import torch

    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def check_output_head(model, name: str, vocab: int) -> None:
    """Refuse a model with no output head, or one with fewer rows than the tokenizer has tokens.

    Raises:
        DivscopeError: naming the model (`name`, e.g. `base`) and what is wrong.
    """
    head = model.get_output_embeddings()
    if head is None or not hasattr(head, "weight"):
        raise DivscopeError(
            f"the {name} model ({type(model).__name__}) has no output head "
            "(get_output_embeddings()); score a causal LM (AutoModelForCausalLM)."
        )
    if head.weight.shape[0] < vocab:
        raise DivscopeError(
            f"the {name} model's output head has {head.weight.shape[0]} rows but the tokenizer "
            f"has {vocab} tokens; the model and tokenizer do not belong together."
        )


def check_head_reproduces_logits(model, name: str, ids: Sequence[int], vocab: int) -> None:
    """Refuse a model whose causal-LM forward transforms its logits in a way `OutputHead` does
    not reproduce (compared on the probe `ids` against the model's own full forward): the
    scorer and the lockstep decoder both compute logits with `OutputHead`.

    Raises:
        DivscopeError: naming the model and the largest difference on the probe.
    """
    import torch

    device = model.get_input_embeddings().weight.device
    with torch.inference_mode():
        input_ids = torch.tensor([list(ids)], device=device)  # [1, s]
        expected = model(input_ids=input_ids, use_cache=False).logits[0, :, :vocab].float()
        hidden = model.get_decoder()(input_ids=input_ids, use_cache=False).last_hidden_state[0]
        got = OutputHead(model, vocab)(hidden).to(expected.device)  # [s, V]
    scale = 1.0 + expected.abs().max().item()
    tolerance = (1e-4 if model.dtype == torch.float32 else 3e-2) * scale
    error = (got - expected).abs().max().item()
    if not error <= tolerance:
        raise DivscopeError(
            f"the {name} model ({type(model).__name__}) transforms its logits after the output "
            f"head in a way divscope does not reproduce (max difference {error:.3g} on a probe). "
            "Its architecture is not supported by divscope's scorer and decoder yet; please file "
            "an issue."
        )
