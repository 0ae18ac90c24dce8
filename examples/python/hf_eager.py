"""Hugging Face eager RoPE (LlamaRotaryEmbedding + apply_rotary_pos_emb, transformers 4.45), gated by ropecheck.

    PYTHONPATH=python /usr/bin/python3 examples/python/hf_eager.py

hf_rope is the pipeline as transformers runs it: inv_freq in f32 (int64 arange -> float, as the Llama code),
f32 angles, cos and sin cast to the activation dtype, rotate_half in it; rotary_dim < head_dim passes the rest
through (the GPT-NeoX/Phi partial rotary); the attention factor multiplies cos and sin (attention_scaling).
The planted bug (cos and sin swapped) fails naming its cause.
"""
import torch

import ropecheck


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def hf_rope(case, swap=False):
    x, R = case.x, case.rotary_dim
    inv_freq = 1.0 / (case.base ** (torch.arange(0, R, 2, dtype=torch.int64, device=x.device).float() / R))
    freqs = case.positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = (emb.cos() * case.attention_factor).to(x.dtype)[:, None, :]
    sin = (emb.sin() * case.attention_factor).to(x.dtype)[:, None, :]
    if swap:  # the planted bug
        cos, sin = sin, cos
    xr, xp = x[..., :R], x[..., R:]
    return torch.cat((xr * cos + rotate_half(xr) * sin, xp), dim=-1)


def hf_rope_cos_sin_swapped(case):
    return hf_rope(case, swap=True)


CONTRACT = "hf-eager-bf16"  # angles=f32, cos-sin=bf16, arith=bf16 (`ropecheck contract hf-eager-bf16`)

if __name__ == "__main__":
    for fn in (hf_rope, hf_rope_cos_sin_swapped):
        print(ropecheck.check(fn, contract=CONTRACT, dtypes=("bf16",), layouts=("half-split",)).summary(), "\n")
