"""pytest plugin: one test item per verdict row (docs/python.md, "pytest").

In conftest.py:

    pytest_plugins = ["ropecheck.pytest_plugin"]

In a test module:

    import ropecheck

    @ropecheck.gate(contract="hf-eager-bf16", dtypes=("bf16",), layouts=("half-split",))
    def test_hf_rope(case):
        return hf_rope(case)

collects test_hf_rope[matrix bf16 half-split], test_hf_rope[property: composition], ... one per row of the gate's
verdict: a failing row fails with its cause, smallest case and replay call; a row that did not run is skipped
with its reason. The gate runs once per decorated function, when pytest collects it (so `--collect-only` runs
it too). Options: --ropecheck-seed, --ropecheck-cases, --ropecheck-property-cases, --ropecheck-report-dir.
JUnit XML comes from pytest's own --junitxml.
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
    root = cfg.getoption("ropecheck_report_dir")
    if root:
        opts["report_dir"] = os.path.join(root, name)
    opts.setdefault("name", name)
    backward = opts.pop("backward", False)
    result = (ropecheck.check_backward if backward else ropecheck.check)(obj, **opts)
    return [GateRow.from_parent(collector, name=f"{name}[{row.name}]", row=row, result=result)
            for row in result.rows]


class RowFailed(Exception):
    pass


class GateRow(pytest.Item):
    def __init__(self, *, row, result, **kw):
        super().__init__(**kw)
        self.row, self.result = row, result

    def runtest(self):
        if self.row.result == "not run":
            pytest.skip(self.row.note or "not run")
        if self.row.result == "fail":
            raise RowFailed()

    def repr_failure(self, excinfo):
        if not isinstance(excinfo.value, RowFailed):
            return super().repr_failure(excinfo)
        r = self.row
        lines = [f"{r.name}: {r.what}", r.diagnosis or (r.message.splitlines()[0] if r.message else "")]
        if r.smallest_case:
            lines.append(f"smallest failing case: {r.smallest_case}")
        if r.replay_file:
            lines.append(f"replay: ropecheck.replay(fn, {r.replay_file!r})")
        lines.append(f"contract: {self.result.contract}")
        return "\n".join(lines)

    def reportinfo(self):
        return self.path, None, self.name
