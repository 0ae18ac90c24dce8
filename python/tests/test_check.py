"""The Python package on Python functions: run by CTest (python/tests/CMakeLists.txt), one class per test.

Environment: ROPECHECK_BIN (the built `ropecheck`), ROPECHECK_BUILD (the build tree: mutants/*.so,
abi_offsets), PYTHONPATH with python/ and python/tests/.
"""
import json
import os
import subprocess
import sys
import types
import unittest
import warnings

import numpy as np

import ropecheck
from ropecheck import _abi

try:
    import torch
except ImportError:
    torch = None

if torch is not None:  # the examples (examples/python: on PYTHONPATH), run here with their planted bugs
    from flash_attn_table import CONTRACT as FA_CONTRACT, fa_rope, fa_rope_conjugate_ignored
    from hf_eager import hf_rope, hf_rope_cos_sin_swapped as hf_rope_swapped, rotate_half
    from liger_qk import qk_rope, qk_rope_k_backwards as qk_rope_k_sign_bug
    from meta_complex import CONTRACT as META_CONTRACT, meta_rope, meta_rope_conjugated
    from cohere_full_table import CONTRACT as COHERE_CONTRACT, cohere_rope, cohere_rope_rotation_reversed


def numpy_qk_rope(case, k_sign=1.0):
    """The tensor form with tensors="numpy": q and an optional k (strided views of rank 3 or 4), explicit positions
    of one axis; angles in float64, f32 only."""
    if not case.tensor_form or case.dtype != "f32" or case.pos is None:
        case.decline()
    R = case.rotary_dim
    inv = (np.asarray(case.inv_freq, np.float64) if case.inv_freq is not None
           else case.base ** (-np.arange(0, R, 2, dtype=np.float64) / R))
    ang = np.asarray(case.pos, np.float64)[..., None] * case.position_scale * inv  # [T, R/2] or [B, S, R/2]
    c, s = np.cos(ang)[..., None, :], np.sin(ang)[..., None, :]  # over heads

    def rotate(x, sign):
        y = np.array(x, dtype=np.float64)
        i, j = (np.s_[..., 0:R:2], np.s_[..., 1:R:2]) if case.layout == "interleaved" else \
            (np.s_[..., :R // 2], np.s_[..., R // 2:R])
        a, b = y[i].copy(), y[j].copy()
        y[i], y[j] = a * c - b * (sign * s), a * (sign * s) + b * c
        return y.astype(np.float32)

    with np.errstate(all="ignore"), warnings.catch_warnings():  # (inf and NaN inputs are part of the cases)
        warnings.simplefilter("ignore", RuntimeWarning)
        return (rotate(case.q, 1.0), rotate(case.k, k_sign)) if case.k is not None else rotate(case.q, 1.0)


def flashinfer_style(case):
    """FlashInfer's apply_rope_pos_ids as it takes its arguments: the tensor form only (q and k of rank 3), int32
    pos_ids; its angles computed (the example's q/k RoPE)."""
    if not case.tensor_form or case.pos is None or case.pos.dtype != torch.int32 or case.q.dim() != 3:
        case.decline()
    return qk_rope(case)


BUILD = os.environ.get("ROPECHECK_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))


# ---- kernels written the usual ways ------------------------------------------------------------------------
def numpy_rope(case, sign=1.0):
    """f32 RoPE in numpy, angles in float64 (both layouts, partial rotary)."""
    if case.dtype != "f32":
        case.decline()
    x = np.asarray(case.x, dtype=np.float64)
    np.seterr(all="ignore")  # (inf and NaN inputs are part of the cases)
    R = case.rotary_dim
    inv = case.base ** (-np.arange(0, R, 2, dtype=np.float64) / R)
    ang = np.asarray(case.positions, dtype=np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], sign * np.sin(ang)[:, None, :]
    out = x.copy()
    if case.layout == "interleaved":
        a, b = x[..., 0:R:2], x[..., 1:R:2]
        out[..., 0:R:2], out[..., 1:R:2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., : R // 2], x[..., R // 2: R]
        out[..., : R // 2], out[..., R // 2: R] = a * c - b * s, a * s + b * c
    return out.astype(np.float32)


def numpy_rope_sign_bug(case):
    return numpy_rope(case, sign=-1.0)


def llama3_inv_freq(case, rule_ignored=False):
    """transformers' _compute_llama3_parameters (modeling_rope_utils.py), in float32 as it runs there."""
    import math
    R, r = case.rotary_dim, case.freq_rule
    inv = 1.0 / (case.base ** (torch.arange(0, R, 2, dtype=torch.int64).float() / R))
    if r is None:
        return inv
    if r.kind != "llama3":
        case.decline()
    low_wavelen = r.original_max_position_embeddings / r.low_freq_factor
    high_wavelen = r.original_max_position_embeddings / r.high_freq_factor
    wavelen = 2 * math.pi / inv
    if rule_ignored:  # the planted bug: rope_scaling read and dropped
        return inv
    out = torch.where(wavelen > low_wavelen, inv / r.factor, inv)
    L = r.original_max_position_embeddings
    smooth = (L / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor)
    smoothed = (1 - smooth) * out / r.factor + smooth * out
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, out)


def hf_llama3_rope(case, rule_ignored=False):
    """Hugging Face eager Llama 3.1: the llama3 frequency rule, then apply_rotary_pos_emb."""
    x, R = case.x, case.rotary_dim
    inv = llama3_inv_freq(case, rule_ignored)
    freqs = case.positions.float()[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    af = case.attention_factor
    cos = (emb.cos() * af).to(x.dtype)[:, None, :]
    sin = (emb.sin() * af).to(x.dtype)[:, None, :]
    h = R // 2
    xr, xp = x[..., :R], x[..., R:]
    rot = torch.cat((-xr[..., h:], xr[..., :h]), dim=-1)
    return torch.cat((xr * cos + rot * sin, xp), dim=-1)


def run_gate(library, seed, cases=1000, extra=()):
    """`ropecheck gate --kernel LIB --cases 1000` (the sandboxed path): its verdict as data."""
    d = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"rc-py-gate-{os.getpid()}-{os.path.basename(library)}")
    os.makedirs(d, exist_ok=True)
    subprocess.run([ropecheck.find_binary(), "gate", "--kernel", library, "--quiet", "--seed", str(seed),
                    "--cases", str(cases), "--report-dir", d, "--verdict-json", d + "/verdict.json"] + list(extra),
                   stdout=subprocess.DEVNULL)
    with open(d + "/verdict.json") as f:
        return json.load(f)


class _Plain:
    """A rebuilt case as numpy_rope reads it (one head vector per token, base 10000, full rotary)."""

    def __init__(self, c):
        self.x, self.positions, self.dtype, self.layout = c.input, c.positions, "f32", "interleaved"
        self.base, self.rotary_dim = 10000.0, c.input.shape[-1]

    def decline(self):
        raise AssertionError("declined")


class AbiLayout(unittest.TestCase):
    def test_every_offset_is_the_c_compilers(self):
        c = json.loads(subprocess.run([os.path.join(BUILD, "python", "abi_offsets")], capture_output=True,
                                      check=True, text=True).stdout)
        py = _abi.offsets()
        self.assertEqual({k: (c[k], py.get(k)) for k in c if py.get(k) != c[k]}, {})


class NumpyPath(unittest.TestCase):
    def test_a_correct_numpy_kernel_passes(self):
        r = ropecheck.check(numpy_rope, tensors="numpy", dtypes="f32", cases=1000)
        self.assertTrue(r.passed, r.summary())
        self.assertGreater(r.row("matrix f32 interleaved").cases, 0)
        self.assertEqual(r.row("property: composition").result, "pass")
        self.assertEqual(r.row("property: input untouched").result, "pass")
        # Calls using what it never reads are declined for it, and the summary says which.
        self.assertIn("position_scale", r.declined_unread)
        self.assertIn("declined for the function", r.summary())

    def test_a_sign_bug_fails_named_and_shrunk(self):
        r = ropecheck.check(numpy_rope_sign_bug, tensors="numpy", dtypes="f32", layouts="interleaved",
                            cases=1000)
        self.assertFalse(r.passed)
        row = r.row("matrix f32 interleaved")
        self.assertEqual(row.result, "fail")
        self.assertIn("angle negated", row.diagnosis)
        self.assertIn("angle negated", r.row("property: accuracy").diagnosis)
        self.assertEqual((r.cause, r.cause_id, row.cause_id), ("angle negated", "angle-negated", "angle-negated"))
        self.assertLessEqual(len(r.summary().splitlines()), 15)
        self.assertIn("angle negated", r.summary())
        # The printed replay works on the function.
        self.assertTrue(row.replay_file)
        ok, text = ropecheck.replay(numpy_rope_sign_bug, row.replay_file, tensors="numpy")
        self.assertFalse(ok, text)
        self.assertIn("angle negated", text)
        ok, text = ropecheck.replay(numpy_rope, row.replay_file, tensors="numpy")
        self.assertTrue(ok, text)
        # The case rebuilt here: the input, the function's output, the correctly rounded and the exact output.
        case = r.case("matrix f32 interleaved")
        self.assertFalse(case.passed)
        self.assertEqual(case.summary.split()[:3], ["f32", "interleaved", "head_dim=2"])
        self.assertEqual(case.input.shape, case.output.shape)
        self.assertEqual(case.expected.dtype, np.float32)
        self.assertTrue(np.allclose(case.exact, case.expected, rtol=2 ** -23, atol=0))
        self.assertFalse(np.allclose(case.output, case.expected))
        self.assertTrue(np.array_equal(case.output, numpy_rope_sign_bug(_Plain(case))))

    def test_a_property_failure_shrinks(self):
        def tail_bug(case):  # from 64 rotated elements on, the last pair is left unrotated
            out = numpy_rope(case)
            if case.rotary_dim >= 64 and case.layout == "interleaved":
                out[..., case.rotary_dim - 2: case.rotary_dim] = case.x[..., case.rotary_dim - 2: case.rotary_dim]
            return out

        r = ropecheck.check(tail_bug, tensors="numpy", dtypes="f32", layouts="interleaved", cases=1000)
        # Without shrinking the failing execution is a head of 266 (seed 1); RapidCheck shrinks it to 64, the
        # smallest that fails.
        unshrunk = ropecheck.check(tail_bug, tensors="numpy", dtypes="f32", layouts="interleaved",
                                   gate_args=["--shrink-tries", "0"], cases=1000)
        self.assertIn("rotary_dim=266 ", unshrunk.row("property: special values").smallest_case + " ")
        row = r.row("property: special values")
        self.assertEqual(row.result, "fail")
        self.assertIn("rotary_dim=64 ", row.smallest_case + " ")

    def test_an_exception_is_a_failing_case_with_its_traceback(self):
        def partial_unsupported(case):
            if case.rotary_dim != case.head_dim:
                raise ValueError("partial rotary is not implemented")
            return numpy_rope(case)

        r = ropecheck.check(partial_unsupported, tensors="numpy", dtypes="f32", layouts="half-split",
                            cases=1000)
        self.assertFalse(r.passed)
        row = r.row("matrix f32 half-split")
        self.assertIn("exception", row.diagnosis)
        self.assertIn("ValueError: partial rotary is not implemented", row.diagnosis + row.message)
        self.assertIn("partial_unsupported", row.message)  # the traceback's frame

    def test_keyboard_interrupt_stops_the_run(self):
        n = [0]

        def interrupted(case):
            n[0] += 1
            if n[0] == 50:
                raise KeyboardInterrupt
            return numpy_rope(case)

        with self.assertRaises(KeyboardInterrupt):
            ropecheck.check(interrupted, tensors="numpy", dtypes="f32", cases=1000)
        self.assertEqual(n[0], 50)

    def test_a_wrong_shape_or_dtype_is_named(self):
        r = ropecheck.check(lambda case: numpy_rope(case)[:, :, :-1], tensors="numpy", dtypes="f32",
                            layouts="interleaved", name="short", cases=1000)
        self.assertIn("shape", r.row("matrix f32 interleaved").message)
        r = ropecheck.check(lambda case: numpy_rope(case).astype(np.float64), tensors="numpy", dtypes="f32",
                            layouts="interleaved", name="wide", cases=1000)
        self.assertIn("float64", r.row("matrix f32 interleaved").message)

    def test_modifying_the_input_fails_input_untouched(self):
        def writes_input(case):
            out = numpy_rope(case)
            if not case.in_place:
                case.x[...] = out
            return out

        r = ropecheck.check(writes_input, tensors="numpy", dtypes="f32", layouts="interleaved", cases=1000)
        self.assertFalse(r.passed)
        self.assertEqual(r.row("property: input untouched").result, "fail")

    def test_the_tensor_form_with_numpy_arrays(self):
        # Strided numpy views of the gate's buffers (q, k, their outputs, pos); the function returns arrays.
        r = ropecheck.check(numpy_qk_rope, tensors="numpy", dtypes="f32", require="tensor-form,strides,q-and-k",
                            cases=300)
        self.assertTrue(r.passed, r.summary())
        for row in ("v3: strides", "v3: q and k", "property: strides", "property: q and k"):
            self.assertEqual(r.row(row).result, "pass", row)
            self.assertGreater(r.row(row).cases, 0, row)
        bug = ropecheck.check(lambda case: numpy_qk_rope(case, k_sign=-1.0), tensors="numpy", dtypes="f32",
                              layouts="interleaved", cases=300)
        self.assertFalse(bug.passed)
        self.assertIn("k: ", bug.row("v3: q and k").diagnosis)
        self.assertIn("angle negated", bug.row("v3: q and k").diagnosis)


class BothWays(unittest.TestCase):
    """One C kernel through `ropecheck gate --kernel` and through a ctypes wrapper in ropecheck.check, with one
    seed: every row the same (result, accepted cases, worst error)."""

    def compare(self, name):
        import ctypes_kernel
        lib = os.path.join(BUILD, "mutants", name + ".so")
        py = ropecheck.check(ctypes_kernel.wrap(lib), tensors="numpy", seed=7, cases=1000)
        gate = run_gate(lib, 7)
        rows = {r["name"]: r for r in gate["rows"]}
        self.assertEqual([r.name for r in py.rows], list(rows))
        for r in py.rows:
            g = rows[r.name]
            self.assertEqual((r.result, r.cases, r.failed, r.worst_error, r.diagnosis),
                             (g["result"], g["cases"], g["failed"], g["worst_error"], g["diagnosis"]), r.name)
        self.assertEqual(py.passed, gate["pass"])
        return py

    def test_a_correct_v2_kernel(self):
        self.assertTrue(self.compare("ok_v2_double").passed)

    def test_a_planted_sign_bug(self):
        r = self.compare("mut_sign")
        self.assertFalse(r.passed)
        self.assertIn("angle negated", r.reason)


class Isolated(unittest.TestCase):
    """check(isolated=True): each channel's calls in a process forked for it; a crash, an exit or a hang ends that
    process only and is the call's failure, named, shrunk and replayable; the run goes on."""

    OPTIONS = dict(tensors="numpy", dtypes="f32", layouts="interleaved", cases=100, property_cases=3)

    def test_a_crash_is_the_calls_failure_and_both_paths_agree(self):
        # mut_crash writes through a null pointer on heads of 128 elements or more: through a ctypes wrapper,
        # isolated, and through `ropecheck gate --kernel`, with one seed.
        import ctypes_kernel
        lib = os.path.join(BUILD, "mutants", "mut_crash.so")
        narrow = ["--dtype", "f32", "--layout", "interleaved", "--property-cases", "3"]
        r = ropecheck.check(ctypes_kernel.wrap(lib), tensors="numpy", seed=7, cases=100, isolated=True,
                            gate_args=narrow)  # (this interpreter lives on)
        self.assertFalse(r.passed)
        self.assertEqual(r.reason, "failed: crash")
        row = r.row("matrix f32 interleaved")
        self.assertEqual(row.result, "fail")
        # The cause names the signal and where Python's fault handler saw it: the wrapper's call into C.
        self.assertIn("crashed with signal 11 (Segmentation fault): in the Python stack: kernel "
                      "(tests/ctypes_kernel.py, line", row.diagnosis)
        self.assertIn("head_dim=128 ", row.smallest_case + " ")  # the smallest head that crashes
        self.assertLess(row.failed, row.cases)  # the smaller heads of the row were judged, and passed
        self.assertIn("calls served apart", r.verdict)
        # The counts of the processes that crashed are kept: every call, crashed ones included.
        self.assertGreater(r.calls, 400)
        # The smallest case replays apart: the crash again; a correct function passes it.
        ok, text = ropecheck.replay(ctypes_kernel.wrap(lib), row.replay_file, tensors="numpy", isolated=True)
        self.assertFalse(ok)
        self.assertIn("crashed with signal 11", text)
        ok, text = ropecheck.replay(numpy_rope, row.replay_file, tensors="numpy", isolated=True)
        self.assertTrue(ok, text)
        # The gate on the library: every row the same, crash rows included (where differs: the gate's fault
        # handler reads the address, a null pointer; the isolated path has Python's stack).
        gate = run_gate(lib, 7, cases=100, extra=narrow)
        rows = {g["name"]: g for g in gate["rows"]}
        self.assertEqual([x.name for x in r.rows], list(rows))
        cause, crashed = "crash: the kernel crashed with signal 11 (Segmentation fault): ", 0
        for x in r.rows:
            g = rows[x.name]
            self.assertEqual((x.result, x.cases, x.failed, x.worst_error),
                             (g["result"], g["cases"], g["failed"], g["worst_error"]), x.name)
            self.assertEqual(x.diagnosis.startswith(cause), g["diagnosis"].startswith(cause), x.name)
            crashed += x.diagnosis.startswith(cause)
        self.assertGreater(crashed, 10)
        self.assertEqual((r.passed, r.reason), (gate["pass"], gate["verdict"]))

    def test_without_a_crash_isolated_is_the_same_run(self):
        inproc = ropecheck.check(numpy_rope_sign_bug, **self.OPTIONS)
        apart = ropecheck.check(numpy_rope_sign_bug, isolated=True, **self.OPTIONS)
        self.assertEqual([(x.name, x.result, x.cases, x.failed, x.worst_error, x.diagnosis) for x in apart.rows],
                         [(x.name, x.result, x.cases, x.failed, x.worst_error, x.diagnosis) for x in inproc.rows])
        # What the function's calls counted, added up over the processes that made them.
        self.assertEqual((apart.calls, apart.declined_unread), (inproc.calls, inproc.declined_unread))
        self.assertIn("position_scale", apart.declined_unread)
        self.assertIn("angle negated", apart.reason)

    def test_an_exit_and_a_hang_end_only_their_process(self):
        base = ropecheck.check(numpy_rope_sign_bug, **self.OPTIONS)
        path = base.row("matrix f32 interleaved").replay_file

        def exits(case):
            os._exit(3)

        ok, text = ropecheck.replay(exits, path, tensors="numpy", isolated=True)
        self.assertFalse(ok)
        self.assertIn("exited the process (status 3) instead of returning", text)

        def hangs(case):
            import time
            time.sleep(3600)

        ok, text = ropecheck.replay(hangs, path, tensors="numpy", isolated=True, call_timeout=2)
        self.assertFalse(ok)
        self.assertIn("did not return within the timeout", text)

    def test_in_process_a_hang_ends_the_run_naming_its_case(self):
        # Not isolated: the interpreter's thread cannot be stopped, so the call past call_timeout is the last one
        # made -- its row fails "hang" with the case, every later row says why it did not run (issue 51, scope 5;
        # they said "could not be loaded again after an earlier crash", each a failure).
        calls = [0]

        def hangs_once(case):
            calls[0] += 1
            if calls[0] == 40:  # (3 s of timeout: no ordinary call here takes that long, however busy the machine)
                import time
                time.sleep(10)
            return numpy_rope(case)

        r = ropecheck.check(hangs_once, call_timeout=3, **self.OPTIONS)
        self.assertEqual(r.reason, "failed: hang")
        hung = r.failures()
        self.assertEqual(len(hung), 1, r.summary())
        self.assertIn("did not return within the timeout", hung[0].diagnosis)
        self.assertTrue(hung[0].smallest_case)
        after = r.rows[r.rows.index(hung[0]) + 1]
        self.assertEqual(after.result, "not run")
        self.assertIn("not run: the process serving the calls did not answer a call within 3 s", after.note)
        self.assertIn("isolated=True", after.note)
        self.assertNotIn("could not be loaded again", r.verdict)

    def test_keyboard_interrupt_in_a_worker_stops_the_run(self):
        def interrupted(case):
            if case.head_dim == 64:
                raise KeyboardInterrupt
            return numpy_rope(case)

        with self.assertRaises(KeyboardInterrupt):
            ropecheck.check(interrupted, isolated=True, **self.OPTIONS)


def hf_table_rope(case, sin_sign=1.0):
    """Hugging Face's rotate_half on a full-width table [P, R] (cos and sin each with their halves repeated), taken
    from whatever table the gate gives through case.cos_sin("cos-sin-full", ...): half-split layout, no offset."""
    if case.layout != "half-split" or case.rotary_offset:
        case.decline()
    x, R = case.x, case.rotary_dim
    cos, sin = case.cos_sin("cos-sin-full", dtype=x.dtype)  # declines a call without a cos/sin table
    pos = case.positions.long()
    cos, sin = cos[pos][:, None, :], sin_sign * sin[pos][:, None, :]
    if case.direction == "inverse":
        sin = -sin
    xr, xp = x[..., :R], x[..., R:]
    return torch.cat((xr * cos + rotate_half(xr) * sin, xp), dim=-1)


def hf_table_rope_sin_negated(case):
    return hf_table_rope(case, sin_sign=-1.0)


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class Tables(unittest.TestCase):
    """case.cos_sin(kind, dtype): a table-taking function gets every table kind the gate gives, reshaped."""

    def test_a_full_width_table_kernel_takes_every_kind_and_passes(self):
        r = ropecheck.check(hf_table_rope, contract="cos-sin=bf16,arith=bf16", dtypes=("bf16",),
                            layouts=("half-split",), cases=300)
        self.assertTrue(r.passed, r.summary())
        for kind in ("table-cos-sin-2", "table-cos-sin-cat", "table-cos-sin-full"):
            self.assertRegex(r.coverage, kind + r" [1-9]", r.coverage)  # accepted calls of each kind
        self.assertEqual(r.row("v3: tables").result, "pass")

    def test_a_planted_sign_bug_fails_named(self):
        r = ropecheck.check(hf_table_rope_sin_negated, contract="cos-sin=bf16,arith=bf16", dtypes=("bf16",),
                            layouts=("half-split",), cases=300)
        self.assertFalse(r.passed)
        self.assertIn("angle negated", r.summary())

    def test_the_kinds_are_reshapes_of_one_table(self):
        seen = []

        def probe(case):
            if case.table_kind is None or case.table_kind == "angle":
                case.decline()
            c2, s2 = case.cos_sin("cos-sin-2")
            cf, sf = case.cos_sin("cos-sin-full")
            cat = case.cos_sin("cos-sin-cat")
            h = case.rotary_dim // 2
            self.assertTrue(torch.equal(cf[:, :h], c2) and torch.equal(cf[:, h:], c2))
            self.assertTrue(torch.equal(sf[:, :h], s2) and torch.equal(sf[:, h:], s2))
            self.assertTrue(torch.equal(cat[:, :h], c2) and torch.equal(cat[:, h:], s2))
            self.assertEqual(case.cos_sin("cos-sin-2", dtype="f32")[0].dtype, torch.float32)
            with self.assertRaises(ValueError):
                case.cos_sin("cos-sin-3")
            seen.append(case.table_kind)
            case.decline()  # (nothing to judge here)

        ropecheck.check(probe, dtypes=("bf16",), layouts=("half-split",), cases=20)
        self.assertTrue({"cos-sin-2", "cos-sin-cat", "cos-sin-full"} <= set(seen), set(seen))

    def test_every_kind_matches_the_given_table_bytes_under_both_layouts(self):
        # Each kind cos_sin() gives, for each kind the gate sent, against the table's own bytes read by the ABI's
        # definitions (include/ropecheck/kernel_abi.h): cos-sin-2 columns i = pair i; cos-sin-cat cos then sin;
        # cos-sin-full column c = the pair element c belongs to (half-split c mod R/2, interleaved c // 2).
        seen = set()

        def pair_of(c, R, layout):
            return c // 2 if layout == "interleaved" else c % (R // 2)

        def probe(case):
            if case.table_kind not in ("cos-sin-2", "cos-sin-cat", "cos-sin-full"):
                case.decline()
            R, h, lay = case.rotary_dim, case.rotary_dim // 2, case.layout
            t1, t2 = case.table.float(), None if case.table2 is None else case.table2.float()
            if case.table_kind == "cos-sin-2":
                c2, s2 = t1[:, :h], t2[:, :h]
            elif case.table_kind == "cos-sin-cat":
                c2, s2 = t1[:, :h], t1[:, h:R]
            else:  # each pair's two copies are equal in every call the gate makes
                cols = [[c for c in range(R) if pair_of(c, R, lay) == i] for i in range(h)]
                c2 = torch.stack([t1[:, cs[0]] for cs in cols], dim=-1)
                s2 = torch.stack([t2[:, cs[0]] for cs in cols], dim=-1)
                for i, cs in enumerate(cols):
                    self.assertEqual(len(cs), 2)
                    self.assertTrue(torch.equal(t1[:, cs[1]], c2[:, i]) and torch.equal(t2[:, cs[1]], s2[:, i]))
            full_c = torch.stack([c2[:, pair_of(c, R, lay)] for c in range(R)], dim=-1)
            full_s = torch.stack([s2[:, pair_of(c, R, lay)] for c in range(R)], dim=-1)
            got2 = case.cos_sin("cos-sin-2")
            gotf = case.cos_sin("cos-sin-full")
            gotc = case.cos_sin("cos-sin-cat")
            self.assertEqual(got2[0].dtype, case.table.dtype)
            self.assertTrue(torch.equal(got2[0].float(), c2) and torch.equal(got2[1].float(), s2), (case, lay))
            self.assertTrue(torch.equal(gotf[0].float(), full_c) and torch.equal(gotf[1].float(), full_s), (case, lay))
            self.assertTrue(torch.equal(gotc.float(), torch.cat((c2, s2), dim=-1)), (case, lay))
            seen.add((case.table_kind, lay))
            case.decline()  # (nothing to judge here)

        ropecheck.check(probe, dtypes=("bf16", "f32"), cases=60)
        want = {(k, lay) for k in ("cos-sin-2", "cos-sin-cat", "cos-sin-full") for lay in ("interleaved", "half-split")}
        self.assertEqual(want - seen, set())

    def test_an_interleaved_full_table_kernel_passes_and_its_reversed_rotation_fails_named(self):
        # examples/python/cohere_full_table.py: Cohere's repeat_interleave'd cos/sin on interleaved pairs.
        r = ropecheck.check(cohere_rope, contract=COHERE_CONTRACT, dtypes=("bf16",), layouts=("interleaved",),
                            cases=300)
        self.assertTrue(r.passed, r.summary())
        for kind in ("table-cos-sin-2", "table-cos-sin-cat", "table-cos-sin-full"):
            self.assertRegex(r.coverage, kind + r" [1-9]", r.coverage)
        self.assertEqual(r.row("v3: tables").result, "pass")
        bug = ropecheck.check(cohere_rope_rotation_reversed, contract=COHERE_CONTRACT, dtypes=("bf16",),
                              layouts=("interleaved",), cases=300)
        self.assertFalse(bug.passed)
        self.assertEqual(bug.cause, "angle negated", bug.summary())


class CachedRope:
    """A module-style RoPE with a bounded cache (torchtune's RotaryPositionalEmbeddings, HF's cos_cached): cos and
    sin of max_seq_len positions built once per shape in f32, rows gathered by position, rotate_half in the
    activation dtype; a position outside the cache is declined. `shift`: the planted bug (row position + 1)."""

    def __init__(self, max_seq_len=4096, shift=0):
        self.max_seq_len, self.shift, self.cache = max_seq_len, shift, {}

    def __call__(self, case):
        if (case.layout != "half-split" or case.rotary_offset or case.positions is None or
                int(case.positions.min()) < 0 or int(case.positions.max()) >= self.max_seq_len - self.shift):
            case.decline()
        x, R = case.x, case.rotary_dim
        key = (R, float(case.base), x.dtype)
        if key not in self.cache:
            inv_freq = 1.0 / (case.base ** (torch.arange(0, R, 2, dtype=torch.int64).float() / R))
            emb = torch.arange(self.max_seq_len, dtype=torch.float32)[:, None] * inv_freq[None, :]
            emb = torch.cat((emb, emb), dim=-1)
            self.cache[key] = (emb.cos().to(x.dtype), emb.sin().to(x.dtype))
        cos, sin = self.cache[key]
        pos = case.positions.long() + self.shift
        cos, sin = cos[pos][:, None, :], sin[pos][:, None, :]
        xr, xp = x[..., :R], x[..., R:]
        return torch.cat((xr * cos + rotate_half(xr) * sin, xp), dim=-1)


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class Positions(unittest.TestCase):
    """A function that declines positions past its cache: the gate finds the bound, keeps every row within it and
    says so (issue 51, scope 1); a bug in it still fails named; positions asked for beyond it fail coverage."""

    def test_a_module_with_a_4096_row_cache_passes_with_default_options(self):
        # (every layout, positions and cases as by default; f16 data is hf-eager-f16's: arithmetic in f16)
        r = ropecheck.check(CachedRope(), contract="hf-eager-bf16", dtypes=("f32", "bf16"), cases=300)
        self.assertTrue(r.passed, r.summary())
        self.assertEqual(r.position_limit, 4095)
        self.assertIn("the kernel took position 4095 and declined 4096", r.coverage)
        self.assertGreater(r.row("matrix bf16 half-split").cases, 0)

    def test_its_planted_bug_fails_named_and_positions_asked_beyond_it_fail_coverage(self):
        bug = ropecheck.check(CachedRope(shift=1), contract="hf-eager-bf16", dtypes=("bf16",), cases=300)
        self.assertFalse(bug.passed)
        self.assertEqual(bug.cause, "position m+1", bug.summary())
        asked = ropecheck.check(CachedRope(), contract="hf-eager-bf16", dtypes=("bf16",), cases=100,
                                max_position=8191)
        self.assertFalse(asked.passed)
        self.assertIn("no accepted call of positions 4096 .. 8191", asked.reason)


class NeoxPartialRope:
    """GPT-NeoX's partial rotary as its modeling code writes it: rotary_ndims = int(head_size * rotary_pct) of each
    head rotated (rotate_half on them, f32 cos/sin cast to the activation dtype), the rest passed through. It knows
    its rotary_pct, not the case's: a call of any other rotated slice is declined. `sign`: the planted bug (-1: the
    rotation reversed)."""

    def __init__(self, rotary_pct=0.25, sign=1.0):
        self.rotary_pct, self.sign = rotary_pct, sign

    def __call__(self, case):
        x = case.x
        R = int(x.shape[-1] * self.rotary_pct)
        if (case.rotary_dim != R or case.layout != "half-split" or case.rotary_offset or case.positions is None or
                case.inv_freq is not None or case.position_scale != 1.0):
            case.decline()
        inv_freq = 1.0 / (case.base ** (torch.arange(0, R, 2, dtype=torch.int64).float() / R))
        emb = case.positions.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((emb, emb), dim=-1)
        cos, sin = emb.cos().to(x.dtype)[:, None, :], (self.sign * emb.sin()).to(x.dtype)[:, None, :]
        xr, xp = x[..., :R], x[..., R:]
        return torch.cat((xr * cos + rotate_half(xr) * sin, xp), dim=-1)


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class PartialRotary(unittest.TestCase):
    """A function of one rotated slice, without a model config: the gate finds the slice by probing and every row's
    cases take it (issue 51, scope 2); rotary_pct= says it outright; its planted bug fails named."""

    def test_a_gpt_neox_partial_rotary_passes_without_a_config(self):
        r = ropecheck.check(NeoxPartialRope(), contract="hf-eager-bf16", dtypes=("bf16",), cases=300)
        self.assertTrue(r.passed, r.summary())
        self.assertEqual(r.rotary_slice, "rotary_dim = int(head_dim * 0.25)")
        self.assertIn("found by probing: the kernel declined every full-rotary probe", r.coverage)
        row = r.row("matrix bf16 half-split")  # (it declines the cases with an inv_freq table or a position scale)
        self.assertEqual(row.result, "pass")
        self.assertGreater(row.cases, 0)
        self.assertGreater(r.row("random").cases, 0)

    def test_given_as_rotary_pct_and_its_planted_bug_fails_named(self):
        r = ropecheck.check(NeoxPartialRope(rotary_pct=0.5), rotary_pct=0.5, contract="hf-eager-bf16",
                            dtypes=("bf16",), layouts=("half-split",), cases=100)
        self.assertTrue(r.passed, r.summary())
        self.assertIn("given: rotary_pct=0.5", r.coverage)
        bug = ropecheck.check(NeoxPartialRope(sign=-1.0), contract="hf-eager-bf16", dtypes=("bf16",), cases=100)
        self.assertFalse(bug.passed)
        self.assertEqual(bug.cause, "angle negated", bug.summary())
        with self.assertRaises(ValueError):
            ropecheck.check(NeoxPartialRope(), rotary_pct=0.25, rotary_dim=16)


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class TorchPath(unittest.TestCase):
    def test_hf_eager_bf16_passes_under_its_contract(self):
        r = ropecheck.check(hf_rope, contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",),
                            cases=1000)
        self.assertTrue(r.passed, r.summary())
        self.assertEqual(r.row("property: composition").result, "pass")

    def test_causes_and_suggestions_read_as_python(self):
        # Under the default (exact) contract HF eager fails on precision: its causes and suggestions name check's
        # keyword (contract="..."), never the command line's flag; the summary's coverage line fits in 200
        # characters, Result.coverage has the whole line (issue 51, scope 6).
        r = ropecheck.check(hf_rope, dtypes=("bf16",), layouts=("half-split",), cases=100)
        self.assertFalse(r.passed)
        self.assertIn('passes with contract="', r.reason)
        texts = [r.reason, r.cause, r.coverage, r.summary()] + r.causes + [x.diagnosis for x in r.rows]
        self.assertFalse([t for t in texts if "--contract" in t or "--supports" in t])
        self.assertIn("--contract", r.verdict)  # (the gate's own text, as it printed it)
        coverage_line = r.summary().splitlines()[1]
        self.assertTrue(coverage_line.startswith("coverage: "), coverage_line)
        self.assertLessEqual(len(coverage_line), 200, coverage_line)
        self.assertGreater(len(r.coverage), 200)

    def test_hf_eager_with_cos_and_sin_swapped_fails_named(self):
        r = ropecheck.check(hf_rope_swapped, contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",),
                            cases=1000)
        self.assertFalse(r.passed)
        self.assertIn("cos and sin swapped", r.row("matrix bf16 half-split").diagnosis)


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class Examples(unittest.TestCase):
    """examples/python: each passes under its contract, and its planted bug fails naming its cause."""

    def test_meta_complex(self):
        r = ropecheck.check(meta_rope, contract=META_CONTRACT, layouts="interleaved", cases=1000)
        self.assertTrue(r.passed, r.summary())
        bug = ropecheck.check(meta_rope_conjugated, contract=META_CONTRACT, layouts="interleaved", cases=1000)
        self.assertFalse(bug.passed)
        self.assertIn("angle negated", bug.row("matrix bf16 interleaved").diagnosis)

    def test_flash_attention_table_kernel_and_its_conjugate(self):
        r = ropecheck.check(fa_rope, contract=FA_CONTRACT, dtypes="bf16", cases=1000,
                            require="table-cos-sin-2,inverse,partial-rotary")
        self.assertTrue(r.passed, r.summary())
        self.assertEqual(r.row("v3: tables").result, "pass")
        self.assertGreater(r.row("property: inverse").cases, 0)
        bug = ropecheck.check(fa_rope_conjugate_ignored, contract=FA_CONTRACT, dtypes="bf16", cases=1000)
        self.assertFalse(bug.passed)
        self.assertIn("inverse computed as forward", bug.row("v3: inverse").diagnosis)


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class Model(unittest.TestCase):
    def test_llama_31_preset_passes_and_the_rule_dropped_fails_named(self):
        r = ropecheck.check(hf_llama3_rope, preset="llama-3.1-8b", contract="hf-eager-bf16", dtypes=("bf16",),
                            cases=500)
        self.assertTrue(r.passed, r.summary())
        self.assertIn("llama-3.1-8b", r.coverage)
        self.assertNotIn("freq_rule", r.declined_unread)
        bug = ropecheck.check(lambda case: hf_llama3_rope(case, rule_ignored=True), preset="llama-3.1-8b",
                              contract="hf-eager-bf16", dtypes=("bf16",), cases=500, name="llama3_dropped")
        self.assertFalse(bug.passed)
        self.assertIn("frequency rule ignored", bug.row("matrix bf16 half-split").diagnosis)


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class Backward(unittest.TestCase):
    def test_check_backward_judges_autograd_against_the_inverse(self):
        r = ropecheck.check_backward(hf_rope, contract="hf-eager-bf16", dtypes=("bf16",),
                                     layouts=("half-split",), cases=1000)
        self.assertTrue(r.passed, r.summary())
        self.assertGreater(r.row("property: inverse").cases, 0)
        self.assertGreater(r.row("property: adjoint").cases, 0)

    def test_check_backward_catches_a_wrong_gradient(self):
        class Rope(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, case):
                ctx.case = case
                with torch.no_grad():
                    return hf_rope(case)

            @staticmethod
            def backward(ctx, g):  # the planted bug: the forward rotation again, not its transpose
                c = ctx.case
                return _rotate(g, c, sign=+1.0), None

        def custom(case):
            return Rope.apply(case.x, case)

        r = ropecheck.check_backward(custom, contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",),
                                     cases=1000)
        self.assertFalse(r.passed)
        self.assertEqual(r.row("property: inverse").result, "fail")


    def test_a_q_and_k_backward_with_a_wrong_k_gradient_is_named(self):
        # Liger's shape: one autograd.Function for q and k; the planted bug rotates k's gradient forward. The
        # inverse calls of `property: q and k` reach it in the tensor form.
        class QKRope(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, case):
                ctx.case = case
                with torch.no_grad():
                    return qk_rope(case)

            @staticmethod
            def backward(ctx, gq, gk):
                f = {n: getattr(ctx.case, n) for n in dir(ctx.case)}
                right = qk_rope(types.SimpleNamespace(**dict(f, q=gq, k=gk, direction="inverse")))
                wrong = qk_rope(types.SimpleNamespace(**dict(f, q=gq, k=gk, direction="forward")))
                return right[0], wrong[1], None

        def liger_like(case):
            if not case.tensor_form or case.k is None:
                return qk_rope(case)
            return QKRope.apply(case.q, case.k, case)

        good = ropecheck.check_backward(qk_rope, dtypes="f32", layouts="interleaved", cases=200)
        self.assertTrue(good.passed, good.summary())
        self.assertGreater(good.row("property: q and k").cases, 0)
        bad = ropecheck.check_backward(liger_like, dtypes="f32", layouts="interleaved", cases=200)
        self.assertFalse(bad.passed)
        self.assertIn("k: diagnosis: inverse computed as forward", bad.row("property: q and k").diagnosis)
        self.assertEqual(bad.row("property: inverse").result, "pass")  # (q alone: the flat form is right)


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class TensorForm(unittest.TestCase):
    """The ABI v3 tensor form on a Python function: strides, q and k, varlen, int32 positions."""

    def test_a_q_and_k_kernel_passes_every_tensor_row(self):
        r = ropecheck.check(qk_rope, dtypes="f32", require="tensor-form,strides,q-and-k,varlen,int32-positions",
                            cases=1000)
        self.assertTrue(r.passed, r.summary())
        for row in ("v3: strides", "v3: q and k", "v3: sequences", "v3: int32 positions", "property: strides",
                    "property: q and k", "property: sequences", "property: int32 positions",
                    "property: same call twice"):
            self.assertEqual(r.row(row).result, "pass", row)
            self.assertGreater(r.row(row).cases, 0, row)

    def test_a_kernel_that_takes_the_tensor_form_only_gets_every_case_in_it(self):
        # It declines the flat form and int64 positions: the negotiation finds the form it takes, and every row's
        # cases go in it (int32 positions), the matrix and the random cases included.
        r = ropecheck.check(flashinfer_style, dtypes="f32", cases=300)
        self.assertTrue(r.passed, r.summary())
        self.assertIn("in the tensor form only (explicit int32 positions)", r.verdict)
        for row in ("matrix f32 interleaved", "matrix f32 half-split", "random", "v3: q and k", "property: norm",
                    "property: q and k"):
            self.assertEqual(r.row(row).result, "pass", row)
            self.assertGreater(r.row(row).cases, 0, row)

    def test_k_rotated_backwards_is_named(self):
        r = ropecheck.check(qk_rope_k_sign_bug, dtypes="f32", layouts="interleaved", cases=1000)
        self.assertFalse(r.passed)
        self.assertIn("k: ", r.row("v3: q and k").diagnosis)
        self.assertIn("angle negated", r.row("v3: q and k").diagnosis)
        # The failing tensor-form case rebuilt here: q right, k not, each compact beside its expected output.
        case = r.case("v3: q and k")
        self.assertFalse(case.passed)
        self.assertIn("tensor=", case.summary)
        self.assertEqual(tuple(case.k_input.shape)[0], tuple(case.input.shape)[0])
        self.assertEqual(case.k_output.shape, case.k_expected.shape)
        q_err = float((case.output.double() - case.exact).abs().max())
        k_err = float((case.k_output.double() - case.k_exact).abs().max())
        self.assertLess(q_err, 1e-5, case.summary)
        self.assertGreater(k_err, 1e-2, case.summary)
        self.assertEqual(tuple(case.k_exact.shape), tuple(case.k_input.shape))


class _ExplicitPositions:
    """A case as liger_qk's qk_rope sees it, its tensor form's positions made explicit by case.token_positions():
    the example's own positions_of glue (offsets, cu_seqlens, {B, S} rows) never runs."""

    def __init__(self, case):
        self._case = case

    def __getattr__(self, name):
        if name == "pos" and self._case.tensor_form:
            return self._case.token_positions()
        return getattr(self._case, name)


def token_positions_rope(case):
    return qk_rope(_ExplicitPositions(case))


def mrope_rope(case, reversed_axes=False, boundary_shift=0):
    """Qwen2-VL's multimodal RoPE as Hugging Face writes it: the position axes' angles computed apart and taken, per
    pair, from the axis whose section it lies in (case.mrope_section(): [16, 24, 24] for Qwen2-VL-7B); angles and the
    rotation in float64. The planted bugs: `reversed_axes`, the sections read in reverse axis order;
    `boundary_shift`, the first section's end a pair off."""
    if case.tensor_form or case.freq_rule is not None or case.table_kind is not None or case.rotary_offset:
        case.decline()
    sections = case.mrope_section()
    if boundary_shift and len(sections) > 1:  # the planted off-by-one: the first section a pair longer
        sections = [sections[0] + boundary_shift, sections[1] - boundary_shift] + sections[2:]
    x, R = case.x, case.rotary_dim
    pos = case.positions if case.n_pos_axes > 1 else case.positions[None, :]
    axes = torch.arange(len(sections))
    if reversed_axes:
        axes = axes.flip(0)
    axis_of = torch.repeat_interleave(axes, torch.tensor(sections))
    inv = (case.inv_freq.double() if case.inv_freq is not None
           else case.base ** (-torch.arange(0, R, 2, dtype=torch.float64) / R))
    ang = pos.double()[axis_of].T * case.position_scale * inv  # [T, R/2]: pair i at its axis' position
    sign = -1.0 if case.direction == "inverse" else 1.0
    c = (torch.cos(ang) * case.attention_factor)[:, None, :]
    s = (torch.sin(ang) * case.attention_factor * sign)[:, None, :]
    y = x.double().clone()
    i, j = (np.s_[..., 0:R:2], np.s_[..., 1:R:2]) if case.layout == "interleaved" else \
        (np.s_[..., :R // 2], np.s_[..., R // 2:R])
    a, b = y[i].clone(), y[j].clone()
    y[i], y[j] = a * c - b * s, a * s + b * c
    return y.to(x.dtype)


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class Helpers(unittest.TestCase):
    """case.token_positions() and case.mrope_section(): the glue PyTorch kernels write by hand, made once (issue 51,
    scope 4)."""

    def test_token_positions_make_every_tensor_form_explicit(self):
        # liger_qk's kernel with its positions_of glue replaced by the helper: every implicit form (offsets per
        # sequence and per {B, S} row, varlen cu_seqlens, int32 ones) judged as before.
        r = ropecheck.check(token_positions_rope, dtypes="f32", cases=300,
                            require="tensor-form,varlen,implicit-positions,batched,int32-positions")
        self.assertTrue(r.passed, r.summary())
        for row in ("v3: sequences", "property: sequences", "v3: q and k", "matrix f32 half-split"):
            self.assertEqual(r.row(row).result, "pass", row)
            self.assertGreater(r.row(row).cases, 0, row)

    def test_mrope_section_gives_qwen2_vl_its_sections(self):
        r = ropecheck.check(mrope_rope, preset="qwen2-vl-7b", dtypes="f32", cases=200)
        self.assertTrue(r.passed, r.summary())
        self.assertGreater(r.row("matrix f32 half-split").cases, 0)
        # Without a model: the position axes row's sectioned maps taken, the others declined by mrope_section().
        plain = ropecheck.check(mrope_rope, dtypes="f32", layouts="half-split", cases=100)
        self.assertTrue(plain.passed, plain.summary())
        self.assertGreater(plain.row("v2: position axes").cases, 0)
        # Its planted bugs named (issue 50, scope 3), the violations' place beside them: the middle section right.
        bug = ropecheck.check(lambda c: mrope_rope(c, reversed_axes=True), preset="qwen2-vl-7b", dtypes="f32",
                              cases=100, name="mrope_reversed")
        self.assertFalse(bug.passed)
        self.assertEqual(bug.cause, "M-RoPE sections on other axes", bug.summary())
        self.assertEqual(bug.row("matrix f32 half-split").where, "pairs 0-15, 40-63 of 64; every head; every token")
        shifted = ropecheck.check(lambda c: mrope_rope(c, boundary_shift=1), preset="qwen2-vl-7b", dtypes="f32",
                                  cases=100, name="mrope_shifted")
        self.assertFalse(shifted.passed)
        self.assertEqual(shifted.cause, "M-RoPE section boundary shifted", shifted.summary())


@unittest.skipIf(torch is None or not torch.cuda.is_available(), "skipped: no CUDA device")
class Cuda(unittest.TestCase):
    """device="cuda": the same rows on the GPU (runs where torch sees CUDA; says "skipped: no CUDA device" else)."""

    def test_hf_eager_bf16_on_the_gpu(self):
        r = ropecheck.check(hf_rope, contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",),
                            device="cuda", cases=1000)
        self.assertTrue(r.passed, r.summary())
        self.assertIn("cuda", r.row("property: composition").what + r.verdict)

    def test_a_planted_bug_on_the_gpu_is_named(self):
        r = ropecheck.check(hf_rope_swapped, contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",),
                            device="cuda", cases=200)
        self.assertFalse(r.passed)
        self.assertIn("cos and sin swapped", r.row("matrix bf16 half-split").diagnosis)

    def test_backward_on_the_gpu(self):
        r = ropecheck.check_backward(hf_rope, contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",),
                                     device="cuda", cases=200)
        self.assertTrue(r.passed, r.summary())
        self.assertGreater(r.row("property: inverse").cases, 0)

    def test_the_tensor_form_on_the_gpu(self):
        # strided views, q and k, varlen and int32 positions as device tensors; what the call wrote comes back whole
        r = ropecheck.check(qk_rope, dtypes="f32", require="tensor-form,strides,q-and-k,varlen,int32-positions",
                            device="cuda", cases=300)
        self.assertTrue(r.passed, r.summary())
        for row in ("v3: strides", "v3: q and k", "v3: sequences", "property: strides", "property: q and k"):
            self.assertGreater(r.row(row).cases, 0, row)
        bug = ropecheck.check(qk_rope_k_sign_bug, dtypes="f32", layouts="interleaved", device="cuda", cases=300)
        self.assertIn("angle negated", bug.row("v3: q and k").diagnosis)

    def test_a_tensor_form_only_kernel_on_the_gpu(self):
        r = ropecheck.check(flashinfer_style, dtypes="f32", device="cuda", cases=200)
        self.assertTrue(r.passed, r.summary())
        self.assertIn("in the tensor form only (explicit int32 positions)", r.verdict)
        self.assertGreater(r.row("random").cases, 0)

    def test_a_device_side_error_ends_the_run_naming_its_case(self):
        # A sticky CUDA error poisons the process's context for good, so this runs in a child process: the first
        # check ends naming the call; a second check in that process is refused before it starts, saying why.
        child = r"""
import sys, torch, ropecheck
from hf_eager import hf_rope
def oob(case):
    if case.n_tokens > 3:  # an index past the end, on the device: a device-side assert (sticky)
        idx = torch.tensor([10 ** 9], device=case.x.device)
        case.x.reshape(-1)[idx] = 0
    return hf_rope(case)
kw = dict(contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",), device="cuda", cases=1000)
for attempt in ("first", "second"):
    try:
        ropecheck.check(oob if attempt == "first" else hf_rope, **kw)
        print(attempt, "no error")
    except ropecheck.DeviceError as e:
        print(attempt, "DeviceError:", str(e).replace("\n", " "))
"""
        p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
        lines = [line for line in p.stdout.splitlines() if line.startswith(("first", "second"))]
        self.assertEqual(len(lines), 2, p.stdout + p.stderr)
        self.assertIn("first DeviceError", lines[0])
        self.assertIn("tokens=", lines[0])
        self.assertIn("second DeviceError", lines[1])
        self.assertIn("unusable before the run", lines[1])
        self.assertIn("new process", lines[1])


def _rotate(x, case, sign):
    """The planted wrong gradient: the forward rotation (sign +1) of x, as hf_rope computes it."""
    R = case.rotary_dim
    inv = 1.0 / (case.base ** (torch.arange(0, R, 2, dtype=torch.int64).float() / R))
    emb = torch.cat((case.positions.float()[:, None] * inv[None, :],) * 2, dim=-1)
    af = case.attention_factor
    cos, sin = (emb.cos() * af).to(x.dtype)[:, None, :], (sign * af * emb.sin()).to(x.dtype)[:, None, :]
    xr, xp = x[..., :R], x[..., R:]
    return torch.cat((xr * cos + rotate_half(xr) * sin, xp), dim=-1)


if __name__ == "__main__":
    unittest.main()
