"""ropecheck for Python: the gate's rows on a Python function (docs/python.md).

    import ropecheck

    def my_rope(case):                   # case.x: [n_tokens, n_heads, head_dim], on case.device
        return apply_rotary(case.x, case.positions, base=case.base, interleaved=case.layout == "interleaved")

    result = ropecheck.check(my_rope, contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",))
    assert result.passed, result.summary()

Nothing is judged in Python: `check` starts the same `ropecheck gate` as the command line, which serves its
kernel calls from this process (_host.py), so every row, property, shrinking step, judgement and diagnosis is
the engine's own.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import weakref

from ._case import Case, Decline, DeviceError, FreqRule  # noqa: F401  (the public names)
from ._case import Caller, torch
from . import _host

__all__ = ["check", "check_backward", "gate", "replay", "Case", "Decline", "DeviceError", "Result", "Row", "find_binary"]


def find_binary():
    """The `ropecheck` executable: $ROPECHECK_BIN, else the build tree next to this package (a clone's
    build/ropecheck), else the one pip bundled into it (ropecheck/bin), else the installed prefix's (`cmake --install`
    and the .deb put the package in <prefix>/lib/python3/dist-packages, the executable in <prefix>/bin), else one on
    PATH."""
    env = os.environ.get("ROPECHECK_BIN")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "..", "..", "build", "ropecheck"), os.path.join(here, "bin", "ropecheck"),
                 os.path.join(here, "..", "..", "..", "..", "bin", "ropecheck")):
        if os.access(cand, os.X_OK):
            return os.path.normpath(cand)
    found = shutil.which("ropecheck")
    if found:
        return found
    raise FileNotFoundError("ropecheck: the `ropecheck` executable was not found: build it (scripts/build.sh, or "
                            "cmake --build build), or set ROPECHECK_BIN")


# The gate's options as check's keywords: a cause, a suggestion or a note the gate writes in command-line syntax
# ("would pass with --contract cos-sin=bf16") reads as Python in Result ("would pass with contract="cos-sin=bf16"").
_FLAG_KWARGS = {"--contract": ("contract", True), "--supports": ("supports", True), "--require": ("require", True),
                "--max-position": ("max_position", False), "--budget-seconds": ("budget_seconds", False),
                "--rotary-pct": ("rotary_pct", False), "--rotary-dim": ("rotary_dim", False),
                "--rotary-offset": ("rotary_offset", False), "--preset": ("preset", True),
                "--hf-config": ("hf_config", True), "--seq-len": ("seq_len", False), "--dtype": ("dtypes", True),
                "--layout": ("layouts", True), "--cases": ("cases", False), "--call-timeout": ("call_timeout", False)}
_FLAG = re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in sorted(_FLAG_KWARGS, key=len, reverse=True)) +
                   r")(?![\w-])(?: ([A-Za-z0-9_=:.,+/-]*[A-Za-z0-9_=+/-]))?")


_PROSE = {"to", "declares", "declare", "and", "or", "but", "is", "are", "the", "a", "of", "in", "with", "by"}


def _pythonic(text):
    """The gate's text with its options written as check's keywords: `--contract X` -> `contract="X"`, `--max-position
    N` -> `max_position=N`, a flag named alone (`outside --supports`) -> `supports=`. Other text is unchanged."""
    if not text or "--" not in text:
        return text

    def sub(m):
        flag, value = m.group(1), m.group(2)
        name, quoted = _FLAG_KWARGS[flag]
        # (a word after the flag is its value only where it can be one: "with --supports to have them run" names the
        # option, "--max-position N" gives it)
        if value is not None and (value in _PROSE if quoted else not re.fullmatch(r"[0-9][0-9.e+-]*", value)):
            return f"{name}= {value}"
        if value is None:
            return name + "="
        return f'{name}="{value}"' if quoted else f"{name}={value}"

    return _FLAG.sub(sub, text)


def _brief_coverage(line, position_limit, rotary_slice, limit=200):
    """The coverage line within `limit` characters for summary(): the calls accepted, the positions (and the bound a
    function took them within), the rotated slice, the model's tally, then as many further parts as fit, their
    parenthesised details dropped; Result.coverage has the whole line."""
    parts, depth, cur = [], 0, ""
    for ch in line:  # (split at the "; " outside parentheses)
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
        if depth == 0 and cur.endswith("; "):
            parts.append(cur[:-2])
            cur = ""
    parts.append(cur)

    def bare(p):
        while True:
            q = re.sub(r" ?\([^()]*\)", "", p)
            if q == p:
                return q.strip()
            p = q

    head = parts[0].split(": most were declined")[0]
    out, more = [head], []
    for p in parts[1:]:
        if p.startswith("positions "):
            pos = bare(p)
            if position_limit is not None:
                pos += f" (it declined every position >= {position_limit + 1})"
            out.append(pos)
        elif p.startswith("every case's rotated slice"):
            out.append(f"rotated slice {rotary_slice}" if rotary_slice else bare(p))
        elif p.startswith("model "):
            out.append(p)
        else:
            more.append(bare(p))
    tail = "; ... (result.coverage has it all)"
    text = "; ".join(out)
    for p in more:
        if len(text) + 2 + len(p) + len(tail) > limit:
            return (text + tail) if len(text) + len(tail) <= limit else text[: limit - 3] + "..."
        text += "; " + p
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Row:
    """One verdict row (the gate's): name, result ('pass', 'fail', 'not run'), cases, declined, failed,
    worst_error and worst_bound (u), diagnosis, cause_id, where (which pairs, heads, tokens, tensor and angles its
    violations are at), message, smallest_case, replay_file, note."""

    def __init__(self, d):
        self.__dict__.update(d)
        for k in ("diagnosis", "message", "note"):  # (in Python's syntax: _pythonic)
            if isinstance(d.get(k), str):
                setattr(self, k, _pythonic(d[k]))
        self.passed = d["result"] != "fail"

    def __repr__(self):
        return f"Row({self.name!r}, {self.result}, cases={self.cases}, declined={self.declined})"


class Result:
    """What `check` found. `passed`; `rows`; `summary()` (at most 15 lines); `verdict` (the gate's whole
    verdict text); `write_report(dir)` (report.json/md/html, as `ropecheck gate` writes them)."""

    def __init__(self, verdict_data, text, report_dir, caller, exit_code, stderr):
        self.passed = bool(verdict_data.get("pass")) and exit_code == 0
        # The gate's words, its options written as check's keywords (contract="...", supports=...); `verdict` is the
        # gate's text as it printed it.
        self.reason = _pythonic(verdict_data.get("verdict", ""))
        # A failing verdict's cause (the one explaining the most failing rows) and its stable id (docs/gate.md,
        # "Causes"); each Row has its own cause_id.
        self.cause = _pythonic(verdict_data.get("cause", ""))
        self.cause_id = verdict_data.get("cause_id", "")
        self.coverage = _pythonic(verdict_data.get("coverage", ""))
        # The largest position the function took, where it declined a larger one the rows would have given (the
        # rows then stayed within it: docs/python.md, "Positions"); None: no such bound was found.
        limit = verdict_data.get("position_limit", -1)
        self.position_limit = None if limit is None or limit < 0 else limit
        # The rotated slice every case took (rotary_dim=/rotary_pct= given, or found by probing a function that
        # declined every full-rotary call: docs/python.md, "Partial rotary"), as the gate says it; "" for none.
        self.rotary_slice = verdict_data.get("rotary_slice", "")
        # Every cause of a failing verdict, the first the verdict's (reason shows as many as fit on one line).
        self.causes = [_pythonic(c) for c in verdict_data.get("causes", [])]
        self.contract = verdict_data.get("contract", "")
        self.rows = [Row(r) for r in verdict_data.get("rows", [])]
        self.verdict = text
        self.report_dir = report_dir
        self.calls = caller.calls
        # Calls the harness declined for the function because it never read an attribute the call used.
        self.declined_unread = dict(caller.unread)
        self.exit_code = exit_code
        self.stderr = stderr

    def failures(self):
        return [r for r in self.rows if r.result == "fail"]

    def row(self, name):
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    def summary(self, max_lines=15):
        """The verdict, the coverage, and each failing row with its cause and how to replay it."""
        lines = [f"ropecheck: {'PASS' if self.passed else 'FAIL'} ({self.reason})",
                 _brief_coverage(self.coverage, self.position_limit, self.rotary_slice)]
        if self.declined_unread:
            lines.append("declined for the function (it never read them): " +
                         ", ".join(f"{k} {v}" for k, v in sorted(self.declined_unread.items())))
        fails = self.failures()
        # Rows failing for one cause are one line: the cause, the rows, the first row's smallest case and replay.
        groups = {}
        for r in fails:
            cause = r.diagnosis or (r.message.splitlines()[0] if r.message else "")
            groups.setdefault(cause.split(" (")[0], []).append((r, cause))
        for k, members in enumerate(groups.values()):
            rows, cause = [m[0] for m in members], members[0][1]
            if len(lines) >= max_lines - 1:
                lines.append(f"... and {len(groups) - k} more cause(s): result.verdict has every row")
                break
            names = ", ".join(r.name for r in rows[:4]) + (f" and {len(rows) - 4} more" if len(rows) > 4 else "")
            lines.append(f"FAIL {names}: {cause}" + (f"; where: {rows[0].where}" if getattr(rows[0], "where", "") else ""))
            r = rows[0]
            if r.smallest_case and len(lines) < max_lines - 1:
                lines.append(f"  smallest ({r.name}): {r.smallest_case}" +
                             (f"; replay: ropecheck.replay(fn, {r.replay_file!r})" if r.replay_file else ""))
        if not fails and self.exit_code not in (0, 1):
            lines.append(f"the gate exited {self.exit_code}: {self.stderr.strip()[-400:]}")
        return "\n".join(lines[:max_lines])

    def case(self, row):
        """A failing row's smallest case, rebuilt here: its replay rerun on the function, and as arrays -- input,
        output (the function's, None if it declined or raised), expected (correctly rounded), exact (float64: the
        exact output rounded to double), positions -- with `summary` and the replay's `text` and `passed`. A
        tensor-form case's arrays are compact ([tokens][heads][head_dim], its strides in `summary`), with k's as
        k_input, k_output, k_expected, k_exact (None without k). `row`: a Row or its name."""
        r = row if isinstance(row, Row) else self.row(row)
        if not r.replay_file:
            raise ValueError(f"row {r.name!r} has no failing case to rebuild")
        d = tempfile.mkdtemp(prefix="ropecheck-case-")
        opts = dict(self._replay_options)
        passed, text = replay(self._fn, r.replay_file, dump=d, **opts)
        return _load_case(d, passed, text, opts.get("tensors", "torch"))

    def write_report(self, directory):
        """Copy report.json, report.md and report.html (and the failing cases' replay files) into `directory`."""
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(self.report_dir):
            src = os.path.join(self.report_dir, name)
            if os.path.isfile(src):
                shutil.copy2(src, os.path.join(directory, name))

    def __repr__(self):
        return f"Result(passed={self.passed}, rows={len(self.rows)})"


class RebuiltCase:
    """A failing case rebuilt by Result.case: arrays (torch tensors when torch is used) and its text."""

    def __repr__(self):
        return f"RebuiltCase({self.summary}, passed={self.passed})"


def _load_case(d, passed, text, tensors):
    import numpy as np

    c = RebuiltCase()
    c.passed, c.text = passed, text
    with open(os.path.join(d, "case.txt")) as f:
        c.summary = f.read().strip()
    bf16 = c.summary.startswith("bf16")

    def load(name):
        p = os.path.join(d, name)
        if not os.path.exists(p):
            return None
        a = np.load(p)
        if tensors == "torch" and torch is not None:
            t = torch.from_numpy(a.view(np.int16) if a.dtype == np.uint16 else a)
            return t.view(torch.bfloat16) if bf16 and a.dtype == np.uint16 else t
        return a

    def exact_of(prefix):
        p = os.path.join(d, prefix + "exact.txt")
        if not os.path.exists(p):
            return None
        with open(p) as f:
            exact = np.array([float.fromhex(v) for v in f.read().split()], dtype=np.float64)
        exact = exact.reshape(np.load(os.path.join(d, prefix + "input.npy")).shape)
        return torch.from_numpy(exact) if tensors == "torch" and torch is not None else exact

    c.input, c.output, c.expected, c.positions = (load(n) for n in ("input.npy", "output.npy", "expected.npy",
                                                                   "positions.npy"))
    c.exact = exact_of("")
    # A tensor-form case's k ([tokens][k_heads][head_dim]; None without k); q's arrays above are compact too.
    c.k_input, c.k_output, c.k_expected = (load("k_" + n) for n in ("input.npy", "output.npy", "expected.npy"))
    c.k_exact = exact_of("k_")
    shutil.rmtree(d, ignore_errors=True)
    return c


def _list(v):
    return v if isinstance(v, str) else ",".join(v)


def _gate_args(contract, dtypes, layouts, preset, hf_config, seq_len, max_position, seed, cases, property_cases,
               supports, require, budget_seconds, call_timeout, extra, rotary_dim=None, rotary_pct=None,
               rotary_offset=None):
    args = []
    if rotary_dim is not None and rotary_pct is not None:
        raise ValueError("ropecheck: give rotary_dim= or rotary_pct=, not both")
    if rotary_offset is not None and rotary_dim is None and rotary_pct is None:
        raise ValueError("ropecheck: rotary_offset= needs rotary_dim= or rotary_pct= (the slice it offsets)")
    for flag, v in (("--rotary-dim", rotary_dim), ("--rotary-offset", rotary_offset)):
        if v is not None:
            args += [flag, str(int(v))]
    if rotary_pct is not None:
        args += ["--rotary-pct", repr(float(rotary_pct))]
    for flag, v in (("--contract", contract), ("--preset", preset), ("--hf-config", hf_config)):
        if v is not None:
            args += [flag, str(v)]
    for flag, v in (("--dtype", dtypes), ("--layout", layouts), ("--supports", supports), ("--require", require)):
        if v is not None:
            args += [flag, _list(v)]
    for flag, v in (("--seq-len", seq_len), ("--max-position", max_position), ("--seed", seed), ("--cases", cases),
                    ("--property-cases", property_cases)):
        if v is not None:
            args += [flag, str(int(v))]
    args += ["--budget-seconds", repr(float(budget_seconds)), "--call-timeout", repr(float(call_timeout))]
    return args + list(extra or ())


def _describe(device, tensors):
    d = f"Python {sys.version.split()[0]}"
    if tensors == "torch" and torch is not None:
        d += f", torch {torch.__version__} ({device})"
    else:
        d += ", numpy tensors"
    return d


def _run(command, fn, device, backward, tensors, name, isolated=False):
    """Start `ropecheck COMMAND... --host-fd FD` and serve its calls from `fn` until it exits (isolated: each
    channel from a process forked for it)."""
    caller = Caller(fn, device=device, backward=backward, tensors=tensors)
    if isolated and caller.cuda and torch.cuda.is_initialized():
        raise ValueError("ropecheck: isolated=True forks a process for the calls, and CUDA cannot be used in a process "
                         "forked after this one initialised it: run an isolated check of a CUDA kernel before anything "
                         "in this process touches CUDA (a pytest session of its own, say)")
    if not isolated:
        caller.ready()  # (isolated: in each forked process, which is the first to touch the device)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    try:
        argv = [find_binary()] + command + ["--host-fd", str(theirs.fileno()), "--host-name", name]
        proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        theirs.close()
        describe = _describe(device, tensors if torch is not None else "numpy")
        _host.serve(proc, mine, caller, describe + (", isolated=True" if isolated else ""), apart=isolated)
        out.seek(0)
        err.seek(0)
        return caller, proc.returncode, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
    finally:
        mine.close()
        out.close()
        err.close()


def check(fn, *, contract=None, dtypes=None, layouts=None, preset=None, hf_config=None, seq_len=None,
          max_position=None, device="cpu", seed=None, cases=None, property_cases=None, supports=None, require=None,
          report_dir=None, budget_seconds=600, call_timeout=600, tensors="torch", name=None, backward=False,
          gate_args=None, isolated=False, rotary_dim=None, rotary_pct=None, rotary_offset=None):
    """Run the gate's rows on `fn(case)` and return a Result. The options are the gate's (docs/python.md):
    contract, dtypes, layouts, preset / hf_config (+ seq_len), max_position, seed, cases (random cases),
    property_cases, supports / require (feature names, docs/gate.md "Features"), budget_seconds, call_timeout;
    rotary_dim= / rotary_pct= (+ rotary_offset=): every case rotates that slice of each head, for a function of one
    partial rotary shape without a model config (a function that declines every full-rotary call has its slice
    found by probing without them: Result.rotary_slice says which);
    device where case.x lives ("cpu", "cuda", ...); tensors="numpy" without torch. isolated=True: the calls are
    made in processes forked from this one, a process per channel, so that a crash (a segfault in native code, an
    exit) or a hang ends only that process and is the call's failure, named, shrunk and replayable, and the run
    goes on (docs/python.md, "Isolated")."""
    if tensors == "torch" and torch is None:
        tensors = "numpy"
    tmp = None
    if report_dir is None:  # removed with the Result (its replay files are named in it)
        report_dir = tempfile.mkdtemp(prefix="ropecheck-")
        tmp = weakref.finalize  # (set on the Result below)
    os.makedirs(report_dir, exist_ok=True)
    verdict_path = os.path.join(report_dir, "verdict.json")
    if os.path.exists(verdict_path):
        os.remove(verdict_path)
    command = ["gate", "--quiet", "--verbose", "--report-dir", report_dir, "--verdict-json", verdict_path]
    command += _gate_args(contract, dtypes, layouts, preset, hf_config, seq_len, max_position, seed, cases,
                          property_cases, supports, require, budget_seconds, call_timeout, gate_args, rotary_dim,
                          rotary_pct, rotary_offset)
    name = name or getattr(fn, "__name__", "python")
    caller, rc, text, err = _run(command, fn, device, backward, tensors, name, isolated)
    if caller.stop is not None:
        raise caller.stop
    if not os.path.exists(verdict_path):
        raise RuntimeError(f"ropecheck gate exited {rc} without a verdict: {err.strip()}")
    with open(verdict_path) as f:
        data = json.load(f)
    result = Result(data, text, report_dir, caller, rc, err)
    result._fn = fn
    result._replay_options = dict(device=device, tensors=tensors, backward=backward, call_timeout=call_timeout,
                                  isolated=isolated)
    if tmp is not None:
        weakref.finalize(result, shutil.rmtree, report_dir, True)
    return result


def planned_rows(*, contract=None, dtypes=None, layouts=None, preset=None, hf_config=None, seq_len=None,
                 max_position=None, supports=None, require=None, gate_args=None, rotary_dim=None, rotary_pct=None,
                 rotary_offset=None, **_other):
    """The names of the rows a `check` with these options reports, known before it runs: the rows the gate has
    with the same options on the built-in scalar kernel, which takes every case (one random case and one execution
    per property, no shrinking: a second or so). A kernel whose run lacks one of them (it declined a whole
    dtype, say) has that row missing from its verdict; options that only change how cases are called (device,
    tensors, seed, cases, ...) do not change the rows."""
    d = tempfile.mkdtemp(prefix="ropecheck-plan-")
    try:
        verdict = os.path.join(d, "verdict.json")
        command = [find_binary(), "gate", "--impl", "scalar", "--quiet", "--report-dir", os.path.join(d, "report"),
                   "--verdict-json", verdict, "--shrink-tries", "0"]
        command += _gate_args(contract, dtypes, layouts, preset, hf_config, seq_len, max_position, None, 1, 1,
                              supports, require, 600, 600, gate_args, rotary_dim, rotary_pct, rotary_offset)
        p = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if not os.path.exists(verdict):
            raise RuntimeError(f"ropecheck gate exited {p.returncode} listing its rows: {p.stderr.strip()}")
        with open(verdict) as f:
            return [r["name"] for r in json.load(f)["rows"]]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def gate(**options):
    """Mark a pytest test function as a kernel to gate (the pytest plugin, ropecheck.pytest_plugin): each row of
    its verdict becomes a test item. The options are check's (backward=True: check_backward's)."""

    def mark(fn):
        fn._ropecheck_options = dict(options)
        return fn

    return mark


def check_backward(fn, **kw):
    """`check` for a differentiable function: its forward calls as `check` makes them, and each inverse-direction
    call (the property rows' inverse and adjoint, the v3 rows) answered by autograd -- the gradient of fn's
    forward pass at the incoming gradient case.x -- judged against the exact inverse rotation (the attention
    factor kept). Needs torch."""
    if torch is None:
        raise ImportError("ropecheck.check_backward needs torch (python3-torch)")
    return check(fn, backward=True, **kw)


def replay(fn, path, *, contract=None, device="cpu", tensors="torch", backward=False, call_timeout=600, dump=None,
           isolated=False):
    """Replay one saved case (a replay file the gate wrote) on fn: (passed, text). dump=DIR also writes the case as
    arrays there (`ropecheck replay --dump`); isolated=True: as check's."""
    if tensors == "torch" and torch is None:
        tensors = "numpy"
    command = ["replay", path, "--call-timeout", repr(float(call_timeout))]
    if contract:
        command += ["--contract", contract]
    if dump:
        command += ["--dump", dump]
    caller, rc, text, err = _run(command, fn, device, backward, tensors, getattr(fn, "__name__", "python"), isolated)
    if caller.stop is not None:
        raise caller.stop
    if rc not in (0, 1):
        raise RuntimeError(f"ropecheck replay exited {rc}: {err.strip()}")
    return rc == 0, text
