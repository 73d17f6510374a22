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


class OutputHead:
    """A causal LM's output head on the tokenizer's rows, with the final logit transform its
    class applies after the head (softcapping, scaling), returning float32 logits (float64
    for a float64 model).

    Args:
        model: the loaded causal LM.
        vocab: the tokenizer's size; padded head rows beyond it are dropped.
        dtype: `float32`: multiply in float32, from a float32 copy of the head (fewer exact
            ties among bf16 logits; costs 4 bytes per vocabulary entry and hidden unit, e.g.
            2.2 GB for a 152k x 3,584 head). None: in the weights' dtype.
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
        """float32 logits `[..., V]` of final hidden states `[..., d]`."""
        import torch

        hidden = hidden.to(device=self.device, dtype=self.weight.dtype)
        logits = torch.nn.functional.linear(hidden, self.weight, self.bias)  # [..., V]
        if logits.dtype != torch.float64:
            logits = logits.float()
        if self.scale != 1.0:
            logits = logits * self.scale
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits


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
