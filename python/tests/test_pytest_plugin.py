"""The pytest plugin, run as a user runs it: a conftest.py naming it, decorated test functions, `pytest`."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
import xml.etree.ElementTree as ET

CONFTEST = 'pytest_plugins = ["ropecheck.pytest_plugin"]\n'
TESTS = textwrap.dedent('''
    import ropecheck
    from test_check import numpy_rope, numpy_rope_sign_bug

    OPTS = dict(tensors="numpy", dtypes="f32", layouts="interleaved", cases=200)

    @ropecheck.gate(**OPTS)
    def test_correct(case):
        return numpy_rope(case)

    @ropecheck.gate(**OPTS)
    def test_sign_bug(case):
        return numpy_rope_sign_bug(case)

    @ropecheck.gate(**OPTS)
    def test_declines_everything(case):
        case.decline()

    def test_plain():  # an ordinary test beside them is collected as usual
        assert True
''')

# A function that segfaults on the large row's heads, in a session run with --ropecheck-isolated.
CRASHES = textwrap.dedent('''
    import ctypes
    import ropecheck
    from test_check import numpy_rope

    @ropecheck.gate(tensors="numpy", dtypes="f32", layouts="interleaved", cases=100)
    def test_crashes_on_huge_heads(case):
        if case.head_dim == 576 and case.n_tokens >= 32:  # (the large row's shape only)
            ctypes.string_at(0)
        return numpy_rope(case)
''')

# Collecting does not run the gate: a function that notes each call it gets.
COLLECT_ONLY = textwrap.dedent('''
    import os
    import ropecheck
    from test_check import numpy_rope

    @ropecheck.gate(tensors="numpy", dtypes="f32", layouts="interleaved", cases=20)
    def test_noted(case):
        open(os.environ["RC_CALLS_FILE"], "a").write("call\\n")
        return numpy_rope(case)
''')


def pytest_session(prefix, module, text, *options):
    """pytest run as a user runs it, on a new directory with the conftest and one test module: (exit code, output,
    the JUnit XML's test cases by name)."""
    d = tempfile.mkdtemp(prefix=prefix)
    with open(os.path.join(d, "conftest.py"), "w") as f:
        f.write(CONFTEST)
    with open(os.path.join(d, module), "w") as f:
        f.write(text)
    junit = os.path.join(d, "junit.xml")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", junit,
                        *options, d], capture_output=True, text=True, cwd=d)
    names = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")} if os.path.exists(junit) else {}
    return p.returncode, p.stdout + p.stderr, names


class PytestPlugin(unittest.TestCase):
    def test_one_item_per_row_failures_with_their_cause(self):
        rc, out, names = pytest_session("rc-pytest-", "test_kernels.py", TESTS, "--ropecheck-property-cases", "3",
                                        "-rs")
        self.assertEqual(rc, 1, out)  # failures
        self.assertIn("test_plain", names)
        correct = [n for n in names if n.startswith("test_correct[")]
        bug = [n for n in names if n.startswith("test_sign_bug[")]
        self.assertGreater(len(correct), 20)
        self.assertEqual(len(correct), len(bug))  # one item per row, the same rows (known before the run)
        self.assertIn("test_correct[verdict]", names)
        self.assertIsNone(names["test_correct[verdict]"].find("failure"), out)
        # The sign bug's failure is its rows': the verdict item does not repeat it.
        self.assertIsNone(names["test_sign_bug[verdict]"].find("failure"), out)
        # A kernel that declines everything: its rows are skipped, and the verdict item fails with the summary.
        self.assertIsNotNone(names["test_declines_everything[matrix f32 interleaved]"].find("skipped"), out)
        declined = names["test_declines_everything[verdict]"].find("failure")
        self.assertIsNotNone(declined, out)
        self.assertIn("ropecheck: FAIL", declined.text or declined.get("message", ""))
        self.assertTrue(all(names[n].find("failure") is None for n in correct), out)
        failed = names["test_sign_bug[matrix f32 interleaved]"].find("failure")
        self.assertIsNotNone(failed, out)
        text = failed.text or failed.get("message", "")
        self.assertIn("angle negated", text)
        self.assertIn("ropecheck.replay(fn, ", text)
        self.assertLessEqual(len(text.strip().splitlines()), 6, text)
        # A row that did not run is a skip with its reason.
        skipped = names["test_correct[v2: rotary offset]"].find("skipped")
        self.assertIsNotNone(skipped, out)
        # One failing item per cause (issue 51, scope 6): the sign bug fails many rows, reported by the first of each
        # cause; the others are skipped naming it, and each failing item's first line names its cause.
        failing = [n for n in bug if names[n].find("failure") is not None]
        folded = [n for n in bug if names[n].find("skipped") is not None and
                  "fails for the same cause as test_sign_bug[" in (names[n].find("skipped").get("message") or "")]
        self.assertIn("test_sign_bug[matrix f32 interleaved]", failing)
        self.assertLessEqual(len(failing), 3, failing)
        self.assertGreater(len(folded), 5, out)
        for n in failing:
            first = (names[n].find("failure").text or "").strip().splitlines()[0]
            self.assertRegex(first, r"^[^:]+: \S", n)
        self.assertIn("the same cause fails", text)


    def test_isolated_a_crash_fails_its_row_and_the_session_goes_on(self):
        rc, out, names = pytest_session("rc-pytest-isolated-", "test_crashes.py", CRASHES,
                                        "--ropecheck-property-cases", "2", "--ropecheck-isolated")
        self.assertEqual(rc, 1, out)  # failures, not a crashed session
        failed = names["test_crashes_on_huge_heads[large]"].find("failure")
        self.assertIsNotNone(failed, out)
        text = failed.text or failed.get("message", "")
        self.assertIn("crashed with signal 11 (Segmentation fault): in the Python stack: string_at", text)
        self.assertIn("test_crashes_on_huge_heads", text)
        self.assertIsNone(names["test_crashes_on_huge_heads[matrix f32 interleaved]"].find("failure"), out)

    def test_collecting_does_not_run_the_gate(self):
        d = tempfile.mkdtemp(prefix="rc-pytest-collect-")
        with open(os.path.join(d, "conftest.py"), "w") as f:
            f.write(CONFTEST)
        with open(os.path.join(d, "test_noted.py"), "w") as f:
            f.write(COLLECT_ONLY)
        calls = os.path.join(d, "calls.txt")
        env = dict(os.environ, RC_CALLS_FILE=calls)
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", d],
                           capture_output=True, text=True, cwd=d, env=env)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("test_noted[matrix f32 interleaved]", out)
        self.assertIn("test_noted[verdict]", out)
        self.assertFalse(os.path.exists(calls), out)  # the function was never called
        # Selecting one row runs the gate once, for that item.
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "random", d],
                           capture_output=True, text=True, cwd=d, env=env)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("1 passed", out)
        self.assertTrue(os.path.exists(calls), out)


if __name__ == "__main__":
    unittest.main()
