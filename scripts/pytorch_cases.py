#!/usr/bin/python3
"""Run a faithful PyTorch RoPE pipeline over a `ropecheck cases export` directory.

Reads DIR/manifest.json and every case's input ([n_tokens][n_heads][head_dim]; '<f4' f32, '<f2' f16,
'<u2' bf16 bit patterns), runs the named pipeline on it with the case's parameters and writes the
case's "output" (NNNN.RUN.out.npy: the manifest's run id in the name ties it to this export) of the
same shape and element type. Then `ropecheck cases check --dir DIR --contract SPEC` judges the
outputs (docs/real-kernels.md, "PyTorch pipelines"; the protocol: docs/gate.md, "Kernels that cannot
be loaded").

Pipelines (each written the way its source model code computes, step by step, in the same dtypes):

  hf-eager      Hugging Face LlamaRotaryEmbedding + apply_rotary_pos_emb (rotate_half), half-split:
                inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim)) (or the case's table
                as f32); freqs = inv_freq @ position_ids.float() (positions divided by the linear
                scaling factor 1/position_scale first, as LlamaLinearScalingRotaryEmbedding does);
                emb = cat(freqs, freqs); cos, sin = emb.cos().to(dtype), emb.sin().to(dtype);
                q_embed = q * cos + rotate_half(q) * sin in the activation dtype; pass-through dims
                [rotary_dim, head_dim) concatenated unchanged (partial rotary, as Phi / GPT-NeoX).
                Needs: angles=f32,cos-sin=D,arith=D for D = bf16/f16 data; angles=f32 for f32.
  hf-eager-f32  the same angles, but q upcast to f32, cos/sin kept in f32, the output rounded to
                the activation dtype once. Needs: angles=f32.
  meta-complex  Meta llama's precompute_freqs_cis (torch.polar) + apply_rotary_emb
                (view_as_complex of xq.float(), complex64 product, view_as_real, .type_as(xq)),
                interleaved; a table case uses the table as its freqs (as llama 3.1's
                apply_scaling produces one); Meta's code has no linear position scaling, so a case
                with position_scale != 1 divides the f32 positions by 1/position_scale as the HF
                code does. Needs: angles=f32.

Tables (manifest version 5, an export with `--supports table-...`): a case that gives its cos and sin as a table
is run on the table as given, as the model code would run on a cache it was handed -- hf-eager* on a
`cos-sin-full` table (HF's own cos/sin layout, [P][R]: cos = table[position_ids].to(dtype), or kept in f32 by
hf-eager-f32), meta-complex on a `cos-sin-2` table (freqs_cis = complex(cos, sin)) or an `angle` table
(torch.polar of the given angles); other kinds, the inverse direction and the tensor form are declined.

--device DEV (default cpu) runs every tensor operation of the pipeline on that torch device ("cuda" for a GPU):
the input is copied there, the positions, frequencies and tables are made there, and the output is copied back
to the host, bit for bit, before it is written. The pipeline's code is the same on every device; what a device
computes differently (its cos, sin and pow, fused multiply-adds) is what `check` then judges.

A pipeline implements one layout: it declines every case of the other (writes the case's
"declined" marker, an empty file, instead of an output), as a kernel returns RC_UNSUPPORTED, and
`check` counts those cases as declined. The pipelines are functional (no in-place form): a case
marked "in_place" gets its result written into the input tensor (x.copy_(y)), as a caller of an
in-place wrapper would see it. Version 1 and 2 manifests (no declines) must hold only the
pipeline's layout (`ropecheck cases export --layout half-split` for hf-eager*, `--layout
interleaved` for meta-complex).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

PIPELINES = {"hf-eager": "half-split", "hf-eager-f32": "half-split", "meta-complex": "interleaved"}
TORCH_DTYPE = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
NPY_DESCR = {"f32": "<f4", "f16": "<f2", "bf16": "<u2"}


def hexf(v):
    """A double from the manifest: a C99 hex-float string (or a plain JSON number)."""
    return float.fromhex(v) if isinstance(v, str) else float(v)


def load_input(path, dtype):
    a = np.load(path, allow_pickle=False)
    if a.dtype.str != NPY_DESCR[dtype]:
        raise SystemExit(f"{path}: element type {a.dtype.str}, the case's dtype {dtype} needs {NPY_DESCR[dtype]}")
    if dtype == "bf16":  # bf16 bit patterns -> torch.bfloat16 (same bits)
        return torch.from_numpy(a.astype(np.uint16).view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def to_numpy(t, dtype):
    if dtype == "bf16":
        return t.contiguous().view(torch.int16).numpy().view(np.uint16).astype("<u2")
    return t.contiguous().numpy().astype(NPY_DESCR[dtype])


# ---- Hugging Face (transformers' modeling_llama, eager attention) ---------------------------------

def hf_inv_freq(c):
    dim = c["rotary_dim"]
    if c["inv_freq"]:
        return torch.tensor([hexf(v) for v in c["inv_freq"]], dtype=torch.float64).float()
    base = hexf(c["base"])
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def load_table(dir_, t, name, positions):
    """Rows `positions` of a case's table file (a v5 entry's `table`), as a float32 tensor [seq, columns]: the
    values exactly as stored (f16/bf16 widen exactly)."""
    a = np.load(os.path.join(dir_, t[name]), allow_pickle=False)
    descr = {"f32": "<f4", "f16": "<f2", "bf16": "<u2"}[t["dtype"]]
    if a.dtype.str != descr or a.shape != (t["rows"], t["columns"]):
        raise SystemExit(f"{t[name]}: {a.dtype.str} {a.shape}, the table needs {descr} ({t['rows']}, {t['columns']})")
    v = load_input(os.path.join(dir_, t[name]), t["dtype"]).float()
    return v[torch.tensor(positions, dtype=torch.int64, device="cpu")]


TABLE_KINDS = {"hf-eager": ("cos-sin-full",), "hf-eager-f32": ("cos-sin-full",),
               "meta-complex": ("cos-sin-2", "angle")}


def hf_rotary_embedding(x, position_ids, c, out_dtype):
    """LlamaRotaryEmbedding.forward (attention_scaling = 1): cos, sin [batch, seq, rotary_dim]."""
    inv_freq = hf_inv_freq(c)
    scale = hexf(c["position_scale"])
    pos = position_ids.float()
    if scale != 1.0:  # LlamaLinearScalingRotaryEmbedding: position_ids.float() / scaling_factor
        pos = pos / (1.0 / scale)
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = pos[:, None, :]
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos()
    sin = emb.sin()
    return cos.to(dtype=out_dtype), sin.to(dtype=out_dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin)


def run_hf(x, c, upcast, table=None):
    """x [tokens, heads, head_dim] -> the same; HF's q is [batch, heads, seq, head_dim]. table: the case's
    cos-sin-full rows (cos, sin) [seq, R] in f32, used instead of LlamaRotaryEmbedding's."""
    rd = c["rotary_dim"]
    q = x.transpose(0, 1)[None]
    position_ids = torch.tensor(c["positions"], dtype=torch.int64)[None]
    q_rot, q_pass = q[..., :rd], q[..., rd:]
    out_dtype = torch.float32 if upcast else q.dtype
    if table is not None:
        cos, sin = (t[None].to(device=q.device, dtype=out_dtype) for t in table)
    else:
        cos, sin = hf_rotary_embedding(q_rot, position_ids, c, out_dtype)
    if upcast:
        q_embed = apply_rotary_pos_emb(q_rot.float(), cos, sin).to(q.dtype)
    else:
        q_embed = apply_rotary_pos_emb(q_rot, cos, sin)
    out = torch.cat((q_embed, q_pass), dim=-1)
    return out[0].transpose(0, 1)


# ---- Meta llama (llama/model.py) -------------------------------------------------------------------

def precompute_freqs_cis(c):
    dim = c["rotary_dim"]
    if c["inv_freq"]:
        freqs = torch.tensor([hexf(v) for v in c["inv_freq"]], dtype=torch.float64).float()
    else:
        theta = hexf(c["base"])
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.tensor(c["positions"], dtype=torch.int64)  # the rows of arange(end) the positions index
    scale = hexf(c["position_scale"])
    if scale != 1.0:
        t = t.float() / (1.0 / scale)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def run_meta(x, c, table=None, kind=None):
    """table: the case's rows [seq, R/2] in f32 -- (cos, sin) of a cos-sin-2 table, or (angles,) of an angle table
    (whose pair i is at both of its elements: column 2i) -- used as freqs_cis instead of precompute_freqs_cis's."""
    rd = c["rotary_dim"]
    xq = x[None]  # [batch, seq, heads, head_dim], as Meta's xq
    xq_rot, xq_pass = xq[..., :rd], xq[..., rd:]
    if table is None:
        freqs_cis = precompute_freqs_cis(c)
    elif kind == "cos-sin-2":
        freqs_cis = torch.complex(table[0], table[1]).to(x.device)
    else:
        freqs = table[0][:, 0::2].to(x.device)
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    # .contiguous(): the rotated slice of a partial-rotary head (Meta's heads are fully rotated, and
    # for f32 .float() returns the slice itself); no effect on any value.
    xq_ = torch.view_as_complex(xq_rot.float().contiguous().reshape(*xq_rot.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])  # reshape_for_broadcast
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    out = torch.cat((xq_out.type_as(xq), xq_pass), dim=-1)
    return out[0]


def remove_stale(dir_, name):
    """A case gets an output or a decline marker: the other, left by an earlier run over this export (another
    pipeline), goes (`check` refuses a case that has both)."""
    if name is not None:
        try:
            os.remove(os.path.join(dir_, name))
        except FileNotFoundError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipeline", required=True, choices=sorted(PIPELINES))
    ap.add_argument("--dir", required=True)
    ap.add_argument("--device", default="cpu", help="the torch device the pipeline runs on (cpu, cuda, cuda:1, ...)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    device = torch.device(args.device)
    if device.type != "cpu":
        if device.type == "cuda" and not torch.cuda.is_available():
            raise SystemExit(f"--device {args.device}: torch {torch.__version__} sees no CUDA device")
        if not hasattr(torch, "set_default_device"):
            raise SystemExit(f"--device {args.device}: needs torch 2.0 or later (torch.set_default_device); this is "
                             f"torch {torch.__version__}")
        torch.set_default_device(device)  # every tensor the pipelines make (positions, frequencies) is made there
    with open(os.path.join(args.dir, "manifest.json")) as f:
        m = json.load(f)
    if m.get("format") != "ropecheck-case-set" or m.get("version") not in (1, 2, 3, 4, 5):
        raise SystemExit(f"{args.dir}/manifest.json: not a ropecheck case-set manifest (version 1 to 5)")
    layout = PIPELINES[args.pipeline]
    n = declined = 0
    for e in m["cases"]:
        c = e["case"]
        names = [e["input"], e["output"]] + ([e["declined"]] if "declined" in e else [])
        for name in names:
            if os.path.basename(name) != name:
                raise SystemExit(f"case {e['id']}: file names must be plain names in the directory")
        # ABI v2 features (offset slice, position axes, attention factor, frequency rule, negative positions):
        # these pipelines are the plain HF/Meta modules, so they decline such cases as a v1 kernel does.
        v2 = any(k in c for k in ("rotary_offset", "n_pos_axes", "pair_axis", "attention_factor", "freq_rule")) or \
            min(c["positions"]) < 0
        t = e.get("table")
        # ABI v3: the tensor form and the inverse are not what these pipelines are; a table of their own kind is.
        v3 = "tensors" in e or e.get("direction", "forward") != "forward" or \
            (t is not None and t["table_kind"] not in TABLE_KINDS[args.pipeline])
        if c["layout"] != layout or v2 or v3:
            if "declined" not in e:
                raise SystemExit(f"case {e['id']}: layout {c['layout']}{' (ABI v2)' if v2 else ''}; pipeline "
                                 f"{args.pipeline} implements only {layout} v1 cases (export with --layout {layout})")
            open(os.path.join(args.dir, e["declined"]), "wb").close()
            remove_stale(args.dir, e["output"])
            declined += 1
            continue
        dtype = c["dtype"]
        x = load_input(os.path.join(args.dir, e["input"]), dtype)
        want = (c["n_tokens"], c["n_heads"], c["head_dim"])
        if tuple(x.shape) != want:
            raise SystemExit(f"case {e['id']}: input shape {tuple(x.shape)}, the case needs {want}")
        if device.type != "cpu":
            x = x.to(device)
        table = None
        if t is not None:
            for name in ("table", "table2"):
                if name in t and os.path.basename(t[name]) != t[name]:
                    raise SystemExit(f"case {e['id']}: file names must be plain names in the directory")
            table = tuple(load_table(args.dir, t, name, c["positions"]) for name in ("table", "table2") if name in t)
        if args.pipeline == "meta-complex":
            y = run_meta(x, c, table, t and t["table_kind"])
        else:
            y = run_hf(x, c, upcast=args.pipeline == "hf-eager-f32", table=table)
        assert tuple(y.shape) == want and y.dtype == TORCH_DTYPE[dtype], (y.shape, y.dtype)
        if e.get("in_place"):
            x.copy_(y)
            y = x
        if device.type != "cpu":
            y = y.cpu()  # synchronises: an asynchronous device error surfaces at this case
        np.save(os.path.join(args.dir, e["output"]), to_numpy(y, dtype), allow_pickle=False)
        remove_stale(args.dir, e.get("declined"))
        n += 1
    on = "" if device.type == "cpu" else f" on {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else device})"
    print(f"pytorch_cases: {args.pipeline} wrote {n} outputs and declined {declined} cases (not {layout}, or not its form) in "
          f"{args.dir}{on} (run {m.get('run_id', '-')}, torch {torch.__version__})")


if __name__ == "__main__":
    sys.exit(main())
