"""The lockstep two-model decoder, its intervention policies and the gate calibration."""

from divscope.decoding.decoder import DecodeConfig, Decoded, DecodeStats
from divscope.decoding.lockstep import Lockstep, decode, decode_stream
from divscope.decoding.policies import POLICIES, Policy, build_policy
from divscope.decoding.randomness import Stream, inverse_cdf, uniforms
from divscope.decoding.request import Request

__all__ = [
    "POLICIES",
    "DecodeConfig",
    "DecodeStats",
    "Decoded",
    "Lockstep",
    "Policy",
    "Request",
    "Stream",
    "build_policy",
    "decode",
    "decode_stream",
    "inverse_cdf",
    "uniforms",
]
