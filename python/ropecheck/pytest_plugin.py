"""pytest plugin: one test item per verdict row (docs/python.md, "pytest").

In conftest.py:

    pytest_plugins = ["ropecheck.pytest_plugin"]

In a test module:

    import ropecheck

    @ropecheck.gate(contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",))
    def test_hf_rope(case):
        return hf_rope(case)

collects test_hf_rope[matrix bf16 half-split], test_hf_rope[property: composition], ... one per row of the gate's
verdict, and test_hf_rope[verdict]. The rows are known before the run (ropecheck.planned_rows: the same options'
rows on the built-in kernel, which takes every case), so collecting (`--collect-only`, `-k`) does not run the
gate; it runs once per decorated function, when the first of its items runs. A failing row fails with its
cause, smallest case and replay call -- one item per cause: a later row failing for the cause of an earlier one
is skipped, "fails for the same cause as NAME[row] (cause): reported there", and the first names every row it
stands for; a row that did not run is skipped with its reason, and so is a planned row the kernel's run does not have; the verdict item fails when the gate failed and no row shows why (a
coverage requirement not met, every call declined), with the verdict's summary. Options: --ropecheck-seed,
--ropecheck-cases, --ropecheck-property-cases, --ropecheck-report-dir, --ropecheck-isolated. JUnit XML comes from pytest's own
--junitxml.
"""
import os

import pytest

import ropecheck


def pytest_addoption(parser):
    g = parser.getgroup("ropecheck")
    g.addoption("--ropecheck-seed", type=int, default=None, help="seed of the gate's cases (default: the gate's, 1)")
    g.addoption("--ropecheck-cases", type=int, default=None, help="random cases per gate run (default: 4000)")
    g.addoption("--ropecheck-property-cases", type=int, default=None,
                help="executions of each property per dtype x layout (default: 25)")
    g.addoption("--ropecheck-isolated", action="store_true", default=False,
                help="make every gated function's calls in forked processes (check(isolated=True)): a crash in "
                     "native code fails its case instead of ending the session")
    g.addoption("--ropecheck-report-dir", default=None,
                help="keep each run's report.json/md/html and replay files under DIR/<test name>")


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    if not (callable(obj) and hasattr(obj, "_ropecheck_options") and collector.funcnamefilter(name)):
        return None
    opts = dict(obj._ropecheck_options)
    cfg = collector.config
    for opt, key in (("ropecheck_seed", "seed"), ("ropecheck_cases", "cases"),
                     ("ropecheck_property_cases", "property_cases")):
        v = cfg.getoption(opt)
        if v is not None:
            opts[key] = v
    if cfg.getoption("ropecheck_isolated"):
        opts["isolated"] = True
    root = cfg.getoption("ropecheck_report_dir")
    if root:
        opts["report_dir"] = os.path.join(root, name)
    opts.setdefault("name", name)
    backward = opts.pop("backward", False)
    planned = ropecheck.planned_rows(**opts)
    run = GateRun(obj, opts, backward)
    items = [GateRow.from_parent(collector, name=f"{name}[{row}]", row_name=row, run=run, planned=planned,
                                 test_name=name) for row in planned]
    items.append(GateVerdict.from_parent(collector, name=f"{name}[verdict]", run=run, planned=set(planned)))
    return items


class GateRun:
    """One gate run of a decorated function, made when the first of its items runs (an error then is each item's)."""

    def __init__(self, fn, opts, backward):
        self.fn, self.opts, self.backward = fn, opts, backward
        self._result = self._error = None

    def result(self):
        if self._result is None and self._error is None:
            try:
                self._result = (ropecheck.check_backward if self.backward else ropecheck.check)(self.fn, **self.opts)
            except Exception as e:  # (KeyboardInterrupt and SystemExit end the session, as anywhere in pytest)
                self._error = e
        if self._error is not None:
            raise self._error
        return self._result


class RowFailed(Exception):
    pass


def _cause(r):
    """A failing row's cause as its item says it: its diagnosis (a fault's description), else its message's first
    line; with the row's note when the diagnosis is a bare name (the bias rows' statistic)."""
    cause = r.diagnosis or (r.message.splitlines()[0] if r.message else "") or r.name
    if cause.startswith("diagnosis: "):
        cause = cause[len("diagnosis: "):]
    if r.note and len(cause) < 40:
        cause += f" ({r.note})"
    return cause


def _cause_key(r):
    return r.cause_id or (r.diagnosis or r.message or r.name).split(" (")[0]


def _same_cause_rows(result, row, planned):
    """The failing planned rows of `result` with row's cause, in the verdict's order (row among them)."""
    key = _cause_key(row)
    return [r for r in result.rows if r.result == "fail" and r.name in planned and _cause_key(r) == key]


class GateRow(pytest.Item):
    def __init__(self, *, row_name, run, planned=(), test_name="", **kw):
        super().__init__(**kw)
        self.row_name, self.run, self.row = row_name, run, None
        self.planned, self.test_name = set(planned), test_name

    def runtest(self):
        result = self.run.result()
        self.row = next((r for r in result.rows if r.name == self.row_name), None)
        if self.row is None:
            pytest.skip(f"not in this run's verdict ({result.reason})"[:300])
        if self.row.result == "not run":
            pytest.skip(self.row.note or "not run")
        if self.row.result == "fail":
            same = _same_cause_rows(result, self.row, self.planned)
            if same and same[0] is not self.row:
                pytest.skip(f"fails for the same cause as {self.test_name}[{same[0].name}] "
                            f"({_cause(same[0]).split(' (')[0]}): reported there")
            raise RowFailed()

    def repr_failure(self, excinfo):
        if not isinstance(excinfo.value, RowFailed):
            return super().repr_failure(excinfo)
        r = self.row
        lines = [f"{r.name}: {_cause(r)}", f"checks: {r.what}"]
        same = _same_cause_rows(self.run.result(), r, self.planned)
        if len(same) > 1:
            lines.append(f"the same cause fails {len(same) - 1} more row(s), skipped as reported here: " +
                         ", ".join(x.name for x in same[1:]))
        if r.smallest_case:
            lines.append(f"smallest failing case: {r.smallest_case}")
        if r.replay_file:
            lines.append(f"replay: ropecheck.replay(fn, {r.replay_file!r})")
        lines.append(f"contract: {self.run.result().contract}")
        return "\n".join(lines)

    def reportinfo(self):
        return self.path, None, self.name


class VerdictFailed(Exception):
    pass


class GateVerdict(pytest.Item):
    """The verdict as a whole: fails when the gate failed and none of the planned rows shows why."""

    def __init__(self, *, run, planned, **kw):
        super().__init__(**kw)
        self.run, self.planned = run, planned

    def runtest(self):
        result = self.run.result()
        if not result.passed and not any(r.result == "fail" and r.name in self.planned for r in result.rows):
            raise VerdictFailed()

    def repr_failure(self, excinfo):
        if not isinstance(excinfo.value, VerdictFailed):
            return super().repr_failure(excinfo)
        return self.run.result().summary()

    def reportinfo(self):
        return self.path, None, self.name
