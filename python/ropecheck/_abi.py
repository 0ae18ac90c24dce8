"""The C ABI's argument struct (include/ropecheck/kernel_abi.h), as ctypes sees it.

Pointer fields are read as integers: they hold the gate's addresses, which the serving process translates into
its own mapping of the arena (_host.py). tests/test_abi_layout.py compares every offset with the C compiler's.
"""
import ctypes

RC_OK = 0
RC_UNSUPPORTED = 1
RC_RAISED = 3  # what the serving process returns when the Python function raised (the text goes with it)

DTYPES = {0: "f32", 1: "f16", 2: "bf16"}
LAYOUTS = {0: "interleaved", 1: "half-split"}
FREQ_KINDS = {0: "default", 1: "linear", 2: "dynamic", 3: "ntk", 4: "yarn", 5: "longrope", 6: "llama3"}
TABLE_KINDS = {0: None, 1: "cos-sin-2", 2: "cos-sin-cat", 3: "cos-sin-full", 4: "angle"}
DIRECTIONS = {0: "forward", 1: "inverse"}
TABLE_ROWS = {0: "position", 1: "token"}  # v4: a table's rows by position (v3), or one per token
NEWEST_ABI_VERSION = 4
DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat"}

_p = ctypes.c_uint64  # a pointer in the gate's address space


class rc_freq_rule(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_uint32),
        ("truncate", ctypes.c_uint32),
        ("factor", ctypes.c_double),
        ("max_position_embeddings", ctypes.c_uint64),
        ("original_max_position_embeddings", ctypes.c_uint64),
        ("seq_len", ctypes.c_uint64),
        ("beta_fast", ctypes.c_double),
        ("beta_slow", ctypes.c_double),
        ("low_freq_factor", ctypes.c_double),
        ("high_freq_factor", ctypes.c_double),
        ("short_factor", _p),
        ("long_factor", _p),
    ]


class rc_dl_device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class rc_dl_dtype(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class rc_tensor(ctypes.Structure):
    _fields_ = [
        ("data", _p),
        ("device", rc_dl_device),
        ("ndim", ctypes.c_int32),
        ("dtype", rc_dl_dtype),
        ("shape", _p),
        ("strides", _p),
        ("byte_offset", ctypes.c_uint64),
    ]


class rc_rope_args(ctypes.Structure):
    _fields_ = [
        # v1
        ("abi_version", ctypes.c_uint32),
        ("dtype", ctypes.c_uint32),
        ("layout", ctypes.c_uint32),
        ("head_dim", ctypes.c_uint32),
        ("rotary_dim", ctypes.c_uint32),
        ("n_heads", ctypes.c_uint32),
        ("n_tokens", ctypes.c_uint64),
        ("positions", _p),
        ("base", ctypes.c_double),
        ("position_scale", ctypes.c_double),
        ("inv_freq", _p),
        ("in_", _p),
        ("out", _p),
        # v2
        ("rotary_offset", ctypes.c_uint32),
        ("n_pos_axes", ctypes.c_uint32),
        ("pair_axis", _p),
        ("attention_factor", ctypes.c_double),
        ("freq_rule", _p),
        # v3
        ("direction", ctypes.c_uint32),
        ("table_kind", ctypes.c_uint32),
        ("table", rc_tensor),
        ("table2", rc_tensor),
        ("q", rc_tensor),
        ("q_out", rc_tensor),
        ("k", rc_tensor),
        ("k_out", rc_tensor),
        ("pos", rc_tensor),
        ("seq_offsets", rc_tensor),
        ("cu_seqlens", rc_tensor),
        # v4
        ("table_rows", ctypes.c_uint32),
    ]


def offsets():
    """Every field's offset, by its C name (`in` for in_), nested structs as 'args.q.shape'."""
    out = {}

    def walk(t, prefix):
        for name, ftype in t._fields_:
            cname = "in" if name == "in_" else name
            out[prefix + cname] = getattr(t, name).offset
            if isinstance(ftype, type) and issubclass(ftype, ctypes.Structure):
                for sub, _ in ftype._fields_:
                    out[prefix + cname + "." + sub] = getattr(t, name).offset + getattr(ftype, sub).offset

    walk(rc_rope_args, "")
    out["sizeof"] = ctypes.sizeof(rc_rope_args)
    out["freq_rule.sizeof"] = ctypes.sizeof(rc_freq_rule)
    for name, _ in rc_freq_rule._fields_:
        out["rc_freq_rule." + name] = getattr(rc_freq_rule, name).offset
    return out
