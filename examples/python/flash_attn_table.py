"""A FlashAttention-style kernel: cos and sin given as tables [P, rotary_dim/2], and its conjugate (the backward).

    PYTHONPATH=python /usr/bin/python3 examples/python/flash_attn_table.py

apply_rotary_emb_torch of flash_attn/layers/rotary.py: the table rows of the call's positions, repeated to the
full rotated width (interleaved: each value twice, adjacently; half-split: the two halves), x * cos + rotate(x) *
sin in the activation dtype, the rest of the head passed through. The backward of FlashAttention's kernel is
the same call with conjugate=True (sin negated): here, direction == "inverse". The planted bug: conjugate
ignored, so the backward rotates forward again.
"""
import torch

import ropecheck


def rotate_half(x, interleaved):
    if not interleaved:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary_emb_torch(x, cos, sin, interleaved=False):
    ro_dim = cos.shape[-1] * 2
    if interleaved:
        cos = cos.repeat_interleave(2, dim=-1)
        sin = sin.repeat_interleave(2, dim=-1)
    else:
        cos = torch.cat((cos, cos), dim=-1)
        sin = torch.cat((sin, sin), dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]  # over heads
    return torch.cat([x[..., :ro_dim] * cos + rotate_half(x[..., :ro_dim], interleaved) * sin, x[..., ro_dim:]],
                     dim=-1)


def fa_rope(case, conjugate_ignored=False):
    if case.table_kind != "cos-sin-2" or case.rotary_offset:
        case.decline()  # this kernel takes cos and sin tables [P, R/2] only
    pos = case.positions.long()
    cos, sin = case.cos[pos].to(case.x.dtype), case.sin[pos].to(case.x.dtype)
    if case.direction == "inverse" and not conjugate_ignored:
        sin = -sin  # conjugate=True
    return apply_rotary_emb_torch(case.x, cos, sin, interleaved=case.layout == "interleaved")


def fa_rope_conjugate_ignored(case):
    return fa_rope(case, conjugate_ignored=True)


# The table given is correctly rounded in its dtype (the contract's cos-sin clause); the arithmetic is the
# activation dtype's.
CONTRACT = "cos-sin=bf16,arith=bf16"

if __name__ == "__main__":
    for fn in (fa_rope, fa_rope_conjugate_ignored):
        print(ropecheck.check(fn, contract=CONTRACT, dtypes=("bf16",)).summary(), "\n")
