"""The one step pyproject.toml cannot say: the `ropecheck` executable bundled into the package (ropecheck/bin), from
$ROPECHECK_BUNDLE or the clone's build/ropecheck, when there is one."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithExecutable(build_py):
    def run(self):
        super().run()
        exe = os.environ.get("ROPECHECK_BUNDLE") or os.path.join(HERE, "..", "build", "ropecheck")
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            dest = os.path.join(self.build_lib, "ropecheck", "bin")
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(exe, os.path.join(dest, "ropecheck"))
        elif os.environ.get("ROPECHECK_BUNDLE"):
            raise SystemExit(f"ROPECHECK_BUNDLE={exe} is not an executable")


setup(cmdclass={"build_py": BuildWithExecutable})
