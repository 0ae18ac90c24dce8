"""A Liger/vLLM-style kernel: q and k in one call with their own head counts and strides, positions explicit
(int32 or int64) or implicit (per-sequence offsets, varlen cu_seqlens), and the plain call.

    PYTHONPATH=python /usr/bin/python3 examples/python/liger_qk.py

Angles and the rotation in float64, rounded once to the activation dtype (so the default, exact contract). The
planted bug: k rotated with the angle negated, q right (the kind of q/k asymmetry of Liger #342).
"""
import torch

import ropecheck


def positions_of(case, q):
    if case.pos is not None:
        return case.pos.long()
    lead = q.shape[:-2]  # (T,) or (B, S)
    dev = q.device
    if q.dim() == 4:
        off = case.seq_offsets.long() if case.seq_offsets is not None else torch.zeros(lead[0], dtype=torch.long,
                                                                                          device=dev)
        return torch.arange(lead[1], device=dev)[None, :] + off[:, None]
    t = torch.arange(lead[0], device=dev)
    off = case.seq_offsets.long() if case.seq_offsets is not None else None
    if case.cu_seqlens is not None:
        cu = case.cu_seqlens.long()
        seq = torch.searchsorted(cu[1:], t, right=True)
        return t - cu[seq] + (off[seq] if off is not None else 0)
    return t + (off[0] if off is not None else 0)


def qk_rope(case, k_sign=1.0):
    if case.freq_rule is not None or case.table_kind is not None or case.n_pos_axes != 1 or case.rotary_offset:
        case.decline()
    flat = not case.tensor_form  # the plain call: x as q, no k
    q, k = (case.x, None) if flat else (case.q, case.k)
    pos = case.positions if flat else positions_of(case, q)
    R = case.rotary_dim
    inv = (case.inv_freq.double() if case.inv_freq is not None
           else case.base ** (-torch.arange(0, R, 2, dtype=torch.float64, device=q.device) / R))
    ang = pos.double()[..., None] * case.position_scale * inv
    sign = -1.0 if case.direction == "inverse" else 1.0
    c, s = torch.cos(ang) * case.attention_factor, torch.sin(ang) * case.attention_factor * sign

    def rotate(x, extra_sign=1.0):
        x64 = x.double()
        out = x64.clone()
        cc, ss = c.unsqueeze(-2), extra_sign * s.unsqueeze(-2)  # over heads
        if case.layout == "interleaved":
            a, b = x64[..., 0:R:2], x64[..., 1:R:2]
            out[..., 0:R:2], out[..., 1:R:2] = a * cc - b * ss, a * ss + b * cc
        else:
            a, b = x64[..., : R // 2], x64[..., R // 2: R]
            out[..., : R // 2], out[..., R // 2: R] = a * cc - b * ss, a * ss + b * cc
        return out.to(x.dtype)

    return (rotate(q), rotate(k, k_sign)) if k is not None else rotate(q)


def qk_rope_k_backwards(case):
    return qk_rope(case, k_sign=-1.0)


if __name__ == "__main__":
    for fn in (qk_rope, qk_rope_k_backwards):
        print(ropecheck.check(fn, dtypes=("f32",)).summary(), "\n")
