"""Meta's llama RoPE (precompute_freqs_cis with torch.polar, apply_rotary_emb with view_as_complex), gated.

    PYTHONPATH=python /usr/bin/python3 examples/python/meta_complex.py

As Meta's model.py: freqs = 1 / theta^(arange(0, dim, 2)[: dim/2].float() / dim), t = positions (f32),
freqs_cis = polar(1, outer(t, freqs)) in complex64, x viewed as complex pairs (interleaved) in f32, the product,
view_as_real, .type_as(x). Interleaved only (Meta's pairing). The planted bug: freqs_cis conjugated.
"""
import torch

import ropecheck


def meta_rope(case, conjugate=False):
    if case.layout != "interleaved":
        case.decline()
    x, R = case.x, case.rotary_dim
    freqs = 1.0 / (case.base ** (torch.arange(0, R, 2, device=x.device)[: R // 2].float() / R))
    t = case.positions.float()
    freqs_cis = torch.polar(torch.ones(t.shape[0], R // 2, device=x.device), torch.outer(t, freqs))
    if conjugate:  # the planted bug
        freqs_cis = freqs_cis.conj()
    xr, xp = x[..., :R], x[..., R:]
    x_ = torch.view_as_complex(xr.float().contiguous().reshape(*xr.shape[:-1], -1, 2))
    out = torch.view_as_real(x_ * freqs_cis[:, None, :]).flatten(2)
    return torch.cat((out.type_as(x), xp), dim=-1)


def meta_rope_conjugated(case):
    return meta_rope(case, conjugate=True)


CONTRACT = "angles=f32"  # f32 angles; the product in f32, rounded once to the activation dtype

if __name__ == "__main__":
    for fn in (meta_rope, meta_rope_conjugated):
        print(ropecheck.check(fn, contract=CONTRACT, layouts=("interleaved",)).summary(), "\n")
