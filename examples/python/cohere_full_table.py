"""An interleaved kernel on full-width cos/sin tables (Hugging Face's Cohere RoPE), gated by ropecheck.

    PYTHONPATH=python /usr/bin/python3 examples/python/cohere_full_table.py

transformers' CohereRotaryEmbedding repeats each frequency adjacently (`repeat_interleave(freqs, 2, dim=-1)`), so
its cos and sin are [P, R] with each pair's value twice in a row (c0, c0, c1, c1, ...), and apply_rotary_pos_emb
rotates interleaved pairs (x[2i], x[2i+1]): x * cos + rotate_every_two(x) * sin in the activation dtype.
`case.cos_sin("cos-sin-full")` gives the call's table in exactly that shape under the interleaved layout (the
ABI's RC_TABLE_COS_SIN_FULL: each value where the layout puts its pair's elements). The planted bug: the signs of
rotate_every_two swapped (stack((x2, -x1))), which rotates every pair the other way.
"""
import torch

import ropecheck


def rotate_every_two(x, reversed_=False):
    x1, x2 = x[..., ::2], x[..., 1::2]
    if reversed_:  # the planted bug
        return torch.stack((x2, -x1), dim=-1).flatten(-2)
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def cohere_rope(case, reversed_=False):
    if case.layout != "interleaved" or case.rotary_offset:
        case.decline()  # this kernel rotates adjacent pairs of the head's leading slice only
    x, R = case.x, case.rotary_dim
    cos, sin = case.cos_sin("cos-sin-full", dtype=x.dtype)  # declines a call without a cos/sin table
    pos = case.positions.long()
    cos, sin = cos[pos][:, None, :], sin[pos][:, None, :]  # over heads
    if case.direction == "inverse":
        sin = -sin
    xr, xp = x[..., :R], x[..., R:]
    return torch.cat((xr * cos + rotate_every_two(xr, reversed_) * sin, xp), dim=-1)


def cohere_rope_rotation_reversed(case):
    return cohere_rope(case, reversed_=True)


# The table given is correctly rounded in its dtype (the contract's cos-sin clause); the arithmetic is the
# activation dtype's.
CONTRACT = "cos-sin=bf16,arith=bf16"

if __name__ == "__main__":
    for fn in (cohere_rope, cohere_rope_rotation_reversed):
        print(ropecheck.check(fn, contract=CONTRACT, dtypes=("bf16",), layouts=("interleaved",)).summary(), "\n")
