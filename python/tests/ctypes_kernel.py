"""A C kernel (rc_rope_apply in a shared library) called from a Python function through ctypes: the case's fields
passed straight back into an rc_rope_args, its output returned. The tests gate one kernel both ways -- the
library through `ropecheck gate --kernel`, this wrapper through ropecheck.check -- and compare the verdicts.
Tables and the tensor form are not marshalled: a call using them is declined here."""
import ctypes

import numpy as np

from ropecheck import _abi

_KINDS = {v: k for k, v in _abi.FREQ_KINDS.items()}


def wrap(library):
    lib = ctypes.CDLL(library)
    apply = lib.rc_rope_apply
    apply.argtypes = [ctypes.POINTER(_abi.rc_rope_args)]
    apply.restype = ctypes.c_int

    def kernel(case):
        if case.table_kind is not None or case.direction != "forward":
            case.decline()
        x = np.ascontiguousarray(case.x)
        out = x if case.in_place else np.empty_like(x)
        keep = [x, out]
        a = _abi.rc_rope_args()
        a.abi_version = case.abi_version
        a.dtype = {"f32": 0, "f16": 1, "bf16": 2}[case.dtype]
        a.layout = {"interleaved": 0, "half-split": 1}[case.layout]
        a.head_dim, a.rotary_dim, a.n_heads, a.n_tokens = case.head_dim, case.rotary_dim, case.n_heads, case.n_tokens
        pos = np.ascontiguousarray(case.positions, dtype=np.int64)
        keep.append(pos)
        a.positions = pos.ctypes.data
        a.base, a.position_scale = case.base, case.position_scale
        if case.inv_freq is not None:
            inv = np.ascontiguousarray(case.inv_freq, dtype=np.float64)
            keep.append(inv)
            a.inv_freq = inv.ctypes.data
        a.in_, a.out = x.ctypes.data, out.ctypes.data
        if case.abi_version >= 2:
            a.rotary_offset, a.n_pos_axes = case.rotary_offset, case.n_pos_axes
            a.attention_factor = case.attention_factor
            if case.pair_axis is not None:
                pa = np.ascontiguousarray(case.pair_axis, dtype=np.uint8)
                keep.append(pa)
                a.pair_axis = pa.ctypes.data
            r = case.freq_rule
            if r is not None:
                fr = _abi.rc_freq_rule()
                fr.kind = _KINDS[r.kind]
                fr.truncate = int(r.truncate)
                for name in ("factor", "max_position_embeddings", "original_max_position_embeddings", "seq_len",
                             "beta_fast", "beta_slow", "low_freq_factor", "high_freq_factor"):
                    setattr(fr, name, getattr(r, name))
                for name in ("short_factor", "long_factor"):
                    v = getattr(r, name)
                    if v is not None:
                        arr = np.ascontiguousarray(v, dtype=np.float64)
                        keep.append(arr)
                        setattr(fr, name, arr.ctypes.data)
                keep.append(fr)
                a.freq_rule = ctypes.addressof(fr)
        rc = apply(ctypes.byref(a))
        if rc == _abi.RC_UNSUPPORTED:
            case.decline()
        if rc != _abi.RC_OK:
            raise RuntimeError(f"rc_rope_apply returned {rc}")
        return out

    kernel.__name__ = library.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return kernel
