"""One kernel call as a Python function sees it: `Case` (docs/python.md, "The case"), and the call made of it.

The attributes carry the C ABI's field names (include/ropecheck/kernel_abi.h) with Python values: tensors (torch
when it is installed, else numpy) instead of pointers, names instead of enum values. On the CPU the tensors are
views of the gate's own buffers: writing the input in an out-of-place call is seen, as with a C kernel.
"""
import traceback

import numpy as np

from . import _abi

try:  # torch is optional: without it the tensors are numpy arrays (bf16 as uint16 bit patterns)
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


class Decline(Exception):
    """Raised by a kernel function for a call it does not implement (as RC_UNSUPPORTED: never a failure)."""


class DeviceError(RuntimeError):
    """The device is unusable after a call (a sticky CUDA error: a device-side assert, an illegal address): the
    run ends here, naming the call that left it so."""


_NP = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}
_DL = {(2, 32): np.float32, (2, 16): np.float16, (4, 16): np.uint16, (0, 32): np.int32, (0, 64): np.int64,
       (1, 8): np.uint8}
_DL_NAME = {(2, 32): "f32", (2, 16): "f16", (4, 16): "bf16", (0, 32): "int32", (0, 64): "int64", (1, 8): "uint8"}


def torch_dtype(name):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "int32": torch.int32,
            "int64": torch.int64, "uint8": torch.uint8}[name]


class FreqRule:
    """rc_freq_rule with names: kind ('linear', 'dynamic', 'ntk', 'yarn', 'longrope', 'llama3'), the scalars by
    their ABI names, short_factor/long_factor as float64 tensors (or None)."""

    def __init__(self, r, short_factor, long_factor):
        self.kind = _abi.FREQ_KINDS.get(r.kind, str(r.kind))
        for name, _ in _abi.rc_freq_rule._fields_:
            if name not in ("kind", "short_factor", "long_factor"):
                setattr(self, name, getattr(r, name))
        self.truncate = bool(r.truncate)
        self.short_factor, self.long_factor = short_factor, long_factor

    def __repr__(self):
        return f"FreqRule({self.kind}, factor={self.factor})"


# Which attributes a function must have read to have implemented a call that is not neutral in them (a call is
# declined for it otherwise: see Case.unread). Each entry: (what the call uses, the attributes, any of which).
def _needs(f):
    n = []
    if f["rotary_dim"] != f["head_dim"]:  # (a table's width says it too: FlashAttention reads it there)
        n.append(("rotary_dim", ("rotary_dim", "table", "table2", "cos", "sin")))
    if f["rotary_offset"]:
        n.append(("rotary_offset", ("rotary_offset",)))
    if f["table_kind"] is None:
        if f["inv_freq"] is not None:
            n.append(("inv_freq", ("inv_freq",)))
        elif f["freq_rule"] is None and f["base"] != 10000.0:
            n.append(("base", ("base",)))
        if f["position_scale"] != 1.0:
            n.append(("position_scale", ("position_scale",)))
        if f["freq_rule"] is not None:
            n.append(("freq_rule", ("freq_rule",)))
    else:
        n.append(("table", ("table", "table2", "cos", "sin", "table_kind")))
        if f.get("table_rows") == "token":  # (v4: a function that never asked cannot index rows by token)
            n.append(("table_rows", ("table_rows",)))
    if f["n_pos_axes"] != 1:
        n.append(("n_pos_axes", ("n_pos_axes", "pair_axis")))
    if f["pair_axis"] is not None:
        n.append(("pair_axis", ("pair_axis",)))
    if f["attention_factor"] != 1.0:
        n.append(("attention_factor", ("attention_factor",)))
    if f["direction"] != "forward":
        n.append(("direction", ("direction",)))
    if f.get("tensor_form"):
        n.append(("tensor form", ("q",)))
        if f["k"] is not None:
            n.append(("k", ("k", "k_out")))
        if f["pos"] is not None:
            n.append(("pos", ("pos",)))
        elif f["seq_offsets"] is not None or f["cu_seqlens"] is not None:
            n.append(("implicit positions", ("seq_offsets", "cu_seqlens")))
    return n


class Case:
    """One call: read its attributes, return the output (or call decline()). See docs/python.md."""

    def __init__(self, fields):
        object.__setattr__(self, "_f", fields)
        object.__setattr__(self, "_read", set())
        object.__setattr__(self, "_declined", False)

    def __getattr__(self, name):
        f = object.__getattribute__(self, "_f")
        if name in f:
            object.__getattribute__(self, "_read").add(name)
            return f[name]
        raise AttributeError(f"a ropecheck case has no attribute '{name}' (docs/python.md lists them)")

    def __setattr__(self, name, value):
        raise AttributeError("a ropecheck case is read-only")

    def __dir__(self):
        return sorted(object.__getattribute__(self, "_f"))

    def decline(self):
        """Decline this call (RC_UNSUPPORTED): the function does not implement something it uses."""
        object.__setattr__(self, "_declined", True)
        raise Decline()

    def cos_sin(self, kind="cos-sin-2", dtype=None):
        """The call's cos/sin table in the shape `kind` names, for a kernel that takes a table: "cos-sin-2" ->
        (cos, sin), each [P, R/2], column i the value of pair i (FlashAttention, ONNX); "cos-sin-full" -> (cos,
        sin), each [P, R], column c the value of the pair element c of the rotated slice belongs to under the
        call's layout, as the ABI's RC_TABLE_COS_SIN_FULL: half-split, the halves repeated (Hugging Face's
        cat(freqs, freqs), Liger); interleaved, each value twice in a row (c0, c0, c1, c1, ...: GPT-J's
        repeat_interleave); "cos-sin-cat" -> one [P, R] tensor, cos then sin (vLLM's cache). Row r is position r.
        The values are those of the table given for the call -- the gate builds it per the contract's cos-sin
        clause, correctly rounded -- reshaped, never recomputed, and converted to `dtype` ("f32", "f16", "bf16"
        or a torch dtype) when given (the function's own conversion, to nearest). A call without a cos/sin table
        (angles computed, or an angle table) is declined: a function that always asks for cos_sin() gets every
        case with a table the gate builds (docs/python.md, "Tables")."""
        f = object.__getattribute__(self, "_f")
        object.__getattribute__(self, "_read").update(("table", "table2", "cos", "sin", "table_kind"))
        if kind not in ("cos-sin-2", "cos-sin-full", "cos-sin-cat"):
            raise ValueError(f"cos_sin: kind must be 'cos-sin-2', 'cos-sin-full' or 'cos-sin-cat', not {kind!r}")
        given = f["table_kind"]
        if given not in ("cos-sin-2", "cos-sin-cat", "cos-sin-full"):
            self.decline()
        half = f["rotary_dim"] // 2
        interleaved = f["layout"] == "interleaved"
        cos, sin = f["cos"], f["sin"]
        if given == "cos-sin-full":  # (each pair's value twice, where the call's layout puts the pair's elements)
            pick = slice(0, None, 2) if interleaved else slice(0, half)
            cos, sin = cos[..., pick], sin[..., pick]
        is_torch = torch is not None and isinstance(cos, torch.Tensor)
        if dtype is not None:
            if is_torch:
                dt = torch_dtype(dtype) if isinstance(dtype, str) else dtype
                cos, sin = cos.to(dt), sin.to(dt)
            else:
                if dtype not in ("f32", "f16") and np.dtype(_NP.get(dtype, dtype)) != cos.dtype:
                    raise ValueError(f"cos_sin: numpy arrays convert to 'f32' or 'f16' only (bf16 is uint16 bit "
                                     f"patterns), not {dtype!r}")
                cos, sin = cos.astype(_NP.get(dtype, dtype)), sin.astype(_NP.get(dtype, dtype))
        cat = (lambda a, b: torch.cat((a, b), dim=-1)) if is_torch else (lambda a, b: np.concatenate((a, b), axis=-1))
        if kind == "cos-sin-2":
            return cos, sin
        if kind == "cos-sin-full":
            if not interleaved:
                return cat(cos, cos), cat(sin, sin)
            twice = (lambda a: torch.repeat_interleave(a, 2, dim=-1)) if is_torch else (lambda a: np.repeat(a, 2, axis=-1))
            return twice(cos), twice(sin)
        return cat(cos, sin)

    def token_positions(self):
        """Each token's position, explicit, whatever form the call has: the flat form's `positions`; the tensor
        form's `pos` (as int64); implicit positions computed as the ABI defines them -- token s of sequence b at
        s + seq_offsets[b] (0 without offsets), the sequences of a 3-D q given by cu_seqlens (one without), the
        rows of a 4-D q by its batch index. Shape [T] for the flat form and a 3-D q, [B, S] for a 4-D q ([A, ...]
        with several position axes); int64, on the case's device (numpy with tensors="numpy"). What a kernel that
        takes explicit positions computes from a varlen or offset call, without rebuilding it by hand."""
        f = object.__getattribute__(self, "_f")
        object.__getattribute__(self, "_read").update(("positions", "pos", "seq_offsets", "cu_seqlens"))
        if not f.get("tensor_form"):
            return f["positions"]
        is_torch = torch is not None and isinstance(f["q"], torch.Tensor)
        if f["pos"] is not None:
            return f["pos"].long() if is_torch else np.asarray(f["pos"]).astype(np.int64)

        def host(t):  # (offsets and cu_seqlens are small: computed on the host, the result moved back)
            if t is None:
                return None
            return t.detach().cpu().numpy().astype(np.int64) if is_torch else np.asarray(t).astype(np.int64)

        q = f["q"]
        offsets, cu = host(f["seq_offsets"]), host(f["cu_seqlens"])
        if q.ndim == 4:
            B, S = int(q.shape[0]), int(q.shape[1])
            m = np.arange(S, dtype=np.int64)[None, :] + (offsets[:B, None] if offsets is not None else 0)
            m = np.broadcast_to(m, (B, S)).copy()
        else:
            T = int(q.shape[0])
            cu = cu if cu is not None else np.array([0, T], dtype=np.int64)
            m = np.empty(T, dtype=np.int64)
            for b in range(len(cu) - 1):
                start, end = int(cu[b]), int(cu[b + 1])
                m[start:end] = np.arange(end - start, dtype=np.int64) + (int(offsets[b]) if offsets is not None else 0)
        if is_torch:
            t = torch.from_numpy(m)
            return t.to(q.device) if q.device.type != "cpu" else t
        return m

    def mrope_section(self):
        """The M-RoPE sections of this call as Qwen2-VL's config writes them (`mrope_section`): the number of pairs
        each position axis rotates, in axis order, the pairs of axis 0 first, then axis 1's, ... -- [rotary_dim/2]
        for a call with one axis. A call whose pair_axis map is not such contiguous sections (Qwen3-VL's
        interleaved map, say) is declined: a function that asks for its sections implements those only. The
        mapping from the ABI's pair_axis (one axis per pair) is in docs/python.md, "M-RoPE"."""
        f = object.__getattribute__(self, "_f")
        object.__getattribute__(self, "_read").update(("n_pos_axes", "pair_axis"))
        half, axes = f["rotary_dim"] // 2, f["n_pos_axes"]
        pa = f["pair_axis"]
        if pa is None:
            if axes != 1:
                self.decline()  # (every pair on axis 0 with several axes: not sections of each axis)
            return [half]
        pa = pa.detach().cpu().numpy() if torch is not None and isinstance(pa, torch.Tensor) else np.asarray(pa)
        counts = [int((pa == a).sum()) for a in range(axes)]
        expect = np.concatenate([np.full(c, a, dtype=pa.dtype) for a, c in enumerate(counts)]) if half else pa
        if len(expect) != len(pa) or not np.array_equal(expect, pa):
            self.decline()
        return counts

    def unread(self):
        """The features of this call the function never looked at (it cannot have implemented them)."""
        read = object.__getattribute__(self, "_read")
        return [what for what, names in _needs(self._f) if not read.intersection(names)]

    def __repr__(self):
        f = self._f
        return (f"Case({f['dtype']} {f['layout']} tokens={f['n_tokens']} heads={f['n_heads']} head_dim={f['head_dim']} "
                f"rotary_dim={f['rotary_dim']} direction={f['direction']})")


def _first_line(e):
    """An exception's first line (torch's CUDA errors go on for lines of advice)."""
    text = str(e).strip()
    return (text.splitlines() or [type(e).__name__])[0]


class Caller:
    """Makes the gate's calls on `fn` (the serving side of _host.serve)."""

    def __init__(self, fn, device="cpu", backward=False, tensors="torch"):
        self.fn, self.device, self.backward = fn, device, backward
        self.use_torch = tensors == "torch"
        if self.use_torch and torch is None:
            raise ImportError("ropecheck: tensors='torch' needs torch (python3-torch); tensors='numpy' works without")
        self.cuda = self.use_torch and str(device).startswith("cuda")
        self.calls = 0
        self.unread = {}  # feature -> calls declined because the function never read it
        self.stop = None  # the KeyboardInterrupt (or SystemExit) that ends the run

    # ---- served apart (check(isolated=True)): what a forked process's calls leave to this one -----------
    def worker_start(self):
        """In a process forked to serve a channel apart: count from zero (merge_worker adds the counts up)."""
        self.calls, self.unread, self.stop = 0, {}, None

    def worker_summary(self):
        """In a process serving a channel apart, at its end: its counts and what stopped it, for merge_worker."""
        stop = None
        if isinstance(self.stop, SystemExit):
            stop = ("SystemExit", self.stop.code if isinstance(self.stop.code, (int, str, type(None))) else 1)
        elif self.stop is not None:
            stop = (type(self.stop).__name__, str(self.stop))
        return {"calls": self.calls, "unread": dict(self.unread), "stop": stop}

    def merge_worker(self, summary):
        """In the serving process: add a finished worker's counts; its stop (KeyboardInterrupt, SystemExit,
        DeviceError), raised here, ends the run as it would have in process."""
        self.calls += summary["calls"]
        for k, v in summary["unread"].items():
            self.unread[k] = self.unread.get(k, 0) + v
        if summary["stop"] is not None and self.stop is None:
            kind, arg = summary["stop"]
            self.stop = (KeyboardInterrupt() if kind == "KeyboardInterrupt" else SystemExit(arg) if kind == "SystemExit"
                         else DeviceError(arg) if kind == "DeviceError" else RuntimeError(arg))
            raise self.stop

    # ---- the gate's buffers as arrays --------------------------------------------------------------------
    @staticmethod
    def _array(ch, p, dtype, count):
        if count == 0:
            return np.zeros(0, dtype)
        return np.frombuffer(ch.mm, dtype, count, ch.offset(p, count * np.dtype(dtype).itemsize))

    def _tensor(self, a, dname=None):
        """A numpy array as the function sees it: a torch tensor (bf16 viewed), on the device when not the CPU."""
        if not self.use_torch or a is None:
            return a
        if dname == "bf16":  # (torch has no uint16 before 2.3: the bits go through int16)
            t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(a)
        return t.to(self.device) if self.device != "cpu" else t

    @staticmethod
    def _tensor_cpu(a, dname):
        if dname == "bf16":
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a)

    def _dl_view(self, ch, t, spans=None):
        """An rc_tensor as a strided numpy view of the arena (None when absent), with its dtype's name."""
        if t.data == 0:
            return None, None
        key = (t.dtype.code, t.dtype.bits)
        if key not in _DL:
            raise ValueError(f"ropecheck: a tensor of DLPack dtype {key} (not one the ABI uses)")
        dt = np.dtype(_DL[key])
        shape = [int(v) for v in self._array(ch, t.shape, np.int64, t.ndim)]
        if t.strides:
            strides = [int(v) for v in self._array(ch, t.strides, np.int64, t.ndim)]
        else:
            strides, acc = [], 1
            for e in reversed(shape):
                strides.insert(0, acc)
                acc *= e
        span = 0 if 0 in shape else 1 + sum((e - 1) * s for e, s in zip(shape, strides))
        start = ch.offset(t.data) + t.byte_offset
        base = np.frombuffer(ch.mm, dt, span, start) if span else np.zeros(0, dt)
        view = np.lib.stride_tricks.as_strided(base, shape, [s * dt.itemsize for s in strides])
        if spans is not None:
            spans[id(view)] = (base, start, shape, strides)
        return view, _DL_NAME[key]

    # ---- one call ----------------------------------------------------------------------------------------
    def __call__(self, ch, args_off):
        try:
            return self._call(ch, args_off)
        except (KeyboardInterrupt, SystemExit, DeviceError) as e:
            self.stop = e
            raise
        except Exception as e:  # preparing a call failed (copying the case to the device, say): is it the device?
            if self.cuda and self._device_error() is not None:
                self.stop = DeviceError(f"ropecheck: the device {self.device} became unusable while a call was being "
                                        f"prepared (a sticky CUDA error left by an earlier call): {_first_line(e)}")
                raise self.stop from e
            raise

    def ready(self):
        """Before a run: a CUDA device with a sticky error from earlier in this process (a device-side assert, an
        illegal address) cannot be used again in it, and every call would fail: say so instead of running."""
        if self.cuda:
            e = self._device_error()
            if e is not None:
                raise DeviceError(f"ropecheck: the device {self.device} is unusable before the run: a sticky CUDA "
                                  f"error left earlier in this process cannot be cleared; run the check in a new "
                                  f"process ({_first_line(e)})") from e

    def _device_error(self):
        """The exception a trivial computation on the device raises now, or None if it works."""
        try:
            torch.cuda.synchronize()
            torch.zeros(1, device=self.device).add_(1).cpu()
        except Exception as e:
            return e
        return None

    def _fields(self, ch, a):
        v = a.abi_version
        dname = _abi.DTYPES.get(a.dtype)
        f = {"abi_version": v, "dtype": dname, "layout": _abi.LAYOUTS.get(a.layout), "head_dim": a.head_dim,
             "rotary_dim": a.rotary_dim, "n_heads": a.n_heads, "n_tokens": a.n_tokens, "base": a.base,
             "position_scale": a.position_scale, "device": self.device,
             "rotary_offset": 0, "n_pos_axes": 1, "pair_axis": None, "attention_factor": 1.0, "freq_rule": None,
             "direction": "forward", "table_kind": None, "table_rows": "position", "table": None, "table2": None,
             "cos": None, "sin": None,
             "tensor_form": False, "q": None, "k": None, "q_out": None, "k_out": None, "pos": None,
             "seq_offsets": None, "cu_seqlens": None}
        if v >= 2:
            f["rotary_offset"] = a.rotary_offset
            f["n_pos_axes"] = a.n_pos_axes or 1
            f["attention_factor"] = a.attention_factor or 1.0
            if a.pair_axis:
                f["pair_axis"] = self._tensor(self._array(ch, a.pair_axis, np.uint8, a.rotary_dim // 2))
            if a.freq_rule:
                size = _abi.ctypes.sizeof(_abi.rc_freq_rule)
                r = _abi.rc_freq_rule.from_buffer_copy(ch.mm, ch.offset(a.freq_rule, size))
                half = a.rotary_dim // 2
                sf = self._tensor(self._array(ch, r.short_factor, np.float64, half)) if r.short_factor else None
                lf = self._tensor(self._array(ch, r.long_factor, np.float64, half)) if r.long_factor else None
                f["freq_rule"] = FreqRule(r, sf, lf)
        f["inv_freq"] = (self._tensor(self._array(ch, a.inv_freq, np.float64, a.rotary_dim // 2))
                         if a.inv_freq else None)
        tensor_form = False
        if v >= 3:
            f["direction"] = _abi.DIRECTIONS.get(a.direction, str(a.direction))
            f["table_kind"] = _abi.TABLE_KINDS.get(a.table_kind, str(a.table_kind))
            tensor_form = a.q.data != 0
            if f["table_kind"] is not None:
                t1, n1 = self._dl_view(ch, a.table)
                t2, n2 = self._dl_view(ch, a.table2)
                f["table"], f["table2"] = self._tensor(t1, n1), self._tensor(t2, n2)
                kind, R = f["table_kind"], a.rotary_dim
                if v >= 4:
                    f["table_rows"] = _abi.TABLE_ROWS.get(a.table_rows, str(a.table_rows))
                if kind == "cos-sin-cat" and t1 is not None:
                    f["cos"], f["sin"] = self._tensor(t1[..., : R // 2], n1), self._tensor(t1[..., R // 2:], n1)
                elif kind in ("cos-sin-2", "cos-sin-full"):
                    f["cos"], f["sin"] = f["table"], f["table2"]
        return f, tensor_form

    def _call(self, ch, args_off):
        size = _abi.ctypes.sizeof(_abi.rc_rope_args)
        if args_off + size > ch.nbytes:
            raise ValueError(f"the gate sent an args offset outside its arena: {args_off:#x}")
        a = _abi.rc_rope_args.from_buffer_copy(ch.mm, args_off)
        self.calls += 1
        if a.abi_version < 1 or a.abi_version > _abi.NEWEST_ABI_VERSION:
            return _abi.RC_UNSUPPORTED, b""
        f, tensor_form = self._fields(ch, a)
        if f["dtype"] is None or f["layout"] is None:
            return _abi.RC_UNSUPPORTED, b""
        if tensor_form:
            return self._call_tensor(ch, a, f)
        dname = f["dtype"]
        shape = (a.n_tokens, a.n_heads, a.head_dim)
        n = a.n_tokens * a.n_heads * a.head_dim
        x_np = self._array(ch, a.in_, _NP[dname], n).reshape(shape)
        out_np = x_np if a.out == a.in_ else self._array(ch, a.out, _NP[dname], n).reshape(shape)
        in_place = a.out == a.in_
        axes = f["n_pos_axes"]
        pos = self._array(ch, a.positions, np.int64, axes * a.n_tokens)
        f["positions"] = self._tensor(pos if axes == 1 else pos.reshape(axes, a.n_tokens))
        f["in_place"] = in_place
        x = self._tensor(x_np, dname)
        gate_out = {"q_out": f["q_out"], "k_out": f["k_out"]}  # the gate's output buffers (on the CPU: views)
        inverse_by_autograd = self.backward and f["direction"] == "inverse"
        if inverse_by_autograd:
            # The gradient of the forward rotation is the inverse one (its transpose; the attention factor kept):
            # the function's forward pass, differentiated by autograd at the incoming gradient x.
            leaf = torch.zeros(shape, dtype=x.dtype, device=x.device, requires_grad=True)
            f["x"] = leaf
            f["direction"] = "forward"
        else:
            f["x"] = x
        case = Case(f)

        def compute():
            ret = self.fn(case)
            if inverse_by_autograd:
                if ret is None:
                    raise TypeError("the function returned None (in place): autograd cannot differentiate it")
                ret.backward(x.clone())  # (autograd's incoming gradient is the function's to overwrite, not the gate's)
                ret = leaf.grad
                if ret is None:
                    raise TypeError("autograd gave no gradient for case.x (is the output detached from it?)")
            return ret

        return self._make(case, compute, lambda ret: self._store(ret, x, x_np, out_np, shape, dname, in_place),
                          inverse_by_autograd)

    def _make(self, case, compute, store, inverse_by_autograd=False):
        """One call's policy, for both forms: compute() runs the function and store(ret) writes its output. A
        decline, or a call using a field the function never read, is RC_UNSUPPORTED (an exception then too); any
        other exception is a failing case with its traceback; KeyboardInterrupt and SystemExit end the run."""
        try:
            ret = compute()
        except (Decline, NotImplementedError):
            return _abi.RC_UNSUPPORTED, b""
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:
            self._check_device(case, e)
            if self._unread(case, inverse_by_autograd):
                return _abi.RC_UNSUPPORTED, b""
            return _abi.RC_RAISED, _raised_text(e)
        if object.__getattribute__(case, "_declined") or self._unread(case, inverse_by_autograd):
            return _abi.RC_UNSUPPORTED, b""
        try:
            store(ret)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:
            self._check_device(case, e)
            return _abi.RC_RAISED, _raised_text(e)
        return _abi.RC_OK, b""

    def _check_device(self, case, e):
        """After an exception on CUDA: if the device no longer works (a sticky error), end the run naming the call."""
        if not self.cuda:
            return
        sticky = self._device_error()
        if sticky is not None:  # every later call would fail the same way: stop here
            self.stop = DeviceError(f"ropecheck: the device is unusable after the call {case!r}: {_first_line(e)} "
                                    f"(then: {_first_line(sticky)})")
            raise self.stop from e

    def _unread(self, case, inverse_by_autograd):
        """Whether the call uses something the function never read (counted by feature): then it is declined."""
        unread = [u for u in case.unread() if not (inverse_by_autograd and u == "direction")]
        for u in unread:
            self.unread[u] = self.unread.get(u, 0) + 1
        return bool(unread)

    def _call_tensor(self, ch, a, f):
        """A tensor-form call (ABI v3): q and k with their own strides and head counts, explicit int32/int64 or
        implicit positions (seq_offsets, cu_seqlens). The function gets strided tensors -- on the CPU views of the
        gate's buffers, on a device copies of each buffer's whole span with the same strides -- and returns
        q's output, (q_out, k_out), or None after writing case.q_out and case.k_out."""
        spans = {}
        np_views = {}
        for name in ("q", "q_out", "k", "k_out", "pos", "seq_offsets", "cu_seqlens"):
            np_views[name] = self._dl_view(ch, getattr(a, name), spans)
        mirrors = {}  # a buffer's start -> its device copy (q_out in place shares q's)

        def as_tensor(name):
            arr, dn = np_views[name]
            if arr is None or not self.use_torch:
                return arr  # (numpy: the view itself, bf16 as uint16 bits)
            base, start, shape, strides = spans[id(arr)]
            if self.device == "cpu":
                return self._tensor_cpu(arr, dn)
            if start not in mirrors:
                mirrors[start] = (self._tensor_cpu(base, dn), self._tensor_cpu(base, dn).to(self.device))
            return torch.as_strided(mirrors[start][1], shape, strides)

        for name in np_views:
            f[name] = as_tensor(name)
        f["tensor_form"] = True
        f["x"], f["positions"] = None, None
        f["in_place"] = np_views["q_out"][0].ctypes.data == np_views["q"][0].ctypes.data
        gate_out = {"q_out": f["q_out"], "k_out": f["k_out"]}  # the gate's output buffers (on the CPU: views)
        inverse_by_autograd = self.backward and f["direction"] == "inverse"
        if inverse_by_autograd:
            # As for the flat form: the function's forward pass on leaves, differentiated by autograd at the
            # incoming gradients (the call's q and k); the gradients are the call's outputs. The function sees
            # an out-of-place forward call (q_out and k_out fresh tensors it may ignore).
            grads = [f["q"]] + ([f["k"]] if f["k"] is not None else [])
            leaves = [torch.zeros(g.shape, dtype=g.dtype, device=g.device, requires_grad=True) for g in grads]
            f["q"], f["q_out"] = leaves[0], torch.empty_like(grads[0])
            if f["k"] is not None:
                f["k"], f["k_out"] = leaves[1], torch.empty_like(grads[1])
            f["direction"], f["in_place"] = "forward", False
        case = Case(f)

        def compute():
            ret = self.fn(case)
            if not inverse_by_autograd:
                return ret
            if ret is None:
                raise TypeError("the function returned None (wrote q_out in place): autograd cannot differentiate "
                                "it; return the outputs")
            outs = [ret] if isinstance(ret, torch.Tensor) else [t for t in ret if t is not None]
            if len(outs) != len(leaves):
                raise TypeError(f"the function returned {len(outs)} tensor(s) for a call with "
                                f"{'q and k' if len(leaves) == 2 else 'q only'}")
            torch.autograd.backward(outs, [g.clone() for g in grads])  # (a backward may overwrite its gradients)
            got = [leaf.grad for leaf in leaves]
            if any(g is None for g in got):
                raise TypeError("autograd gave no gradient for case.q or case.k (is an output detached from it?)")
            return tuple(got)

        want = [("q_out", "q")] + ([("k_out", "k")] if f["k"] is not None else [])

        def outputs(ret, kind, noun):
            """What the function returned, as one output per tensor of the call (none: it wrote them)."""
            outs = [] if ret is None else [ret] if isinstance(ret, kind) else list(ret)
            if ret is not None and len(outs) != len(want):
                raise TypeError(f"the function returned {len(outs)} {noun}(s) for a call with "
                                f"{'q and k' if len(want) == 2 else 'q only'}: return q's output"
                                f"{' and k' + chr(39) + 's' if len(want) == 2 else ''} (or None after writing "
                                f"case.q_out{' and case.k_out' if len(want) == 2 else ''})")
            return outs

        def store_numpy(ret):
            outs = outputs(ret, np.ndarray, "array")
            for t, (oname, iname) in zip(outs, want):
                if not isinstance(t, np.ndarray):
                    raise TypeError(f"the function returned {type(t).__name__} for {oname}, not a numpy array")
                dst = gate_out[oname]
                if t.dtype != dst.dtype or t.shape != dst.shape:
                    raise TypeError(f"the function returned {t.dtype} {t.shape} for {oname}, not {dst.dtype} "
                                    f"{dst.shape}{' (bf16 as uint16 bits)' if f['dtype'] == 'bf16' else ''}")
                if t.ctypes.data != dst.ctypes.data or t.strides != dst.strides:
                    np.copyto(dst, t)

        def store(ret):
            if not self.use_torch:
                return store_numpy(ret)
            outs = outputs(ret, torch.Tensor, "tensor")
            if self.cuda:
                torch.cuda.synchronize()
            if self.device != "cpu":  # what the call did on the device comes back, whole spans (gaps included)
                for host, dev in mirrors.values():
                    host.copy_(dev.cpu())
            for t, (oname, iname) in zip(outs, want):
                dst = gate_out[oname] if self.device == "cpu" else self._tensor_cpu(*np_views[oname])
                if not isinstance(t, torch.Tensor):
                    raise TypeError(f"the function returned {type(t).__name__} for {oname}, not a torch tensor")
                if t.dtype != f[iname].dtype or tuple(t.shape) != tuple(f[iname].shape):
                    raise TypeError(f"the function returned {t.dtype} {tuple(t.shape)} for {oname}, not "
                                    f"{f[iname].dtype} {tuple(f[iname].shape)}")
                r = t.detach()
                if r.device.type != "cpu":
                    r = r.cpu()
                if r.data_ptr() != dst.data_ptr() or r.stride() != dst.stride():
                    dst.copy_(r)

        return self._make(case, compute, store, inverse_by_autograd)

    def _store(self, ret, x, x_np, out_np, shape, dname, in_place):
        """Write the function's output into the gate's output buffer, bit for bit, after checking it."""
        if ret is None:
            ret = x  # the function wrote case.x in place
        if self.use_torch:
            if not isinstance(ret, torch.Tensor):
                raise TypeError(f"the function returned {type(ret).__name__}, not a torch tensor")
            want = torch_dtype(dname)
            if ret.dtype != want:
                raise TypeError(f"the function returned a {ret.dtype} tensor for a {dname} case ({want})")
            if tuple(ret.shape) != tuple(shape):
                raise TypeError(f"the function returned shape {tuple(ret.shape)}, not case.x's {tuple(shape)}")
            if str(ret.device) != str(x.device) and not (ret.device.type == x.device.type == "cuda"):
                raise TypeError(f"the function returned a tensor on {ret.device}, not on {x.device}")
            if self.cuda:
                torch.cuda.synchronize()  # an asynchronous error is this call's
            r = ret.detach()
            if r.device.type != "cpu":
                r = r.cpu()
            out_t = self._tensor_cpu(out_np, dname)
            if r.data_ptr() != out_t.data_ptr():
                out_t.copy_(r)
            if x.device.type != "cpu" and not in_place:
                # What the call did to its input on the device comes back too: the gate checks it.
                self._tensor_cpu(x_np, dname).copy_(x.detach().cpu())
        else:
            r = np.asarray(ret)
            if r.dtype != np.dtype(_NP[dname]):
                raise TypeError(f"the function returned a {r.dtype} array for a {dname} case "
                                f"({np.dtype(_NP[dname])}{', bf16 as uint16 bits' if dname == 'bf16' else ''})")
            if r.shape != tuple(shape):
                raise TypeError(f"the function returned shape {r.shape}, not case.x's {tuple(shape)}")
            if not np.shares_memory(r, out_np) or r.ctypes.data != out_np.ctypes.data:
                np.copyto(out_np, r)


def _raised_text(e):
    """The exception and the last lines of its traceback, within the reply's 1 023 bytes."""
    head = f"{type(e).__name__}: {e}".strip()
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    lines = [l.rstrip() for chunk in tb[1:-1] for l in chunk.splitlines() if l.strip()]
    text = head
    tail = "\n".join(lines[-6:])
    if tail:
        text += "\n" + tail
    return text.encode("utf-8", "replace")[:1023]
