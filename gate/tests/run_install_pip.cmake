# The Python package as pip installs it, offline (--no-build-isolation --no-index: Debian's setuptools builds it) from
# a copy of python/ (the clone stays clean), with this build's executable bundled ($ROPECHECK_BUNDLE): `import
# ropecheck` from the install finds that executable, and the pytest plugin is a pytest11 entry point.
file(REMOVE_RECURSE ${BIN})
file(MAKE_DIRECTORY ${BIN}/src)
file(COPY ${SRC}/ropecheck ${SRC}/pyproject.toml ${SRC}/setup.py DESTINATION ${BIN}/src
     PATTERN "__pycache__" EXCLUDE)
set(ENV{ROPECHECK_BUNDLE} ${EXE})
set(ENV{PIP_NO_CACHE_DIR} 1)
execute_process(COMMAND ${PYTHON} -m pip install --no-build-isolation --no-index --no-deps --disable-pip-version-check
                        --target ${BIN}/site ${BIN}/src
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pip install failed (${rc}):\n${out}${err}")
endif()
unset(ENV{ROPECHECK_BIN})
unset(ENV{ROPECHECK_BUNDLE})
set(ENV{PYTHONPATH} ${BIN}/site)
execute_process(COMMAND ${PYTHON} -c [=[
import importlib.metadata as md, os, ropecheck, subprocess
print(os.path.realpath(ropecheck.find_binary()))
print(subprocess.run([ropecheck.find_binary(), "--version"], capture_output=True, text=True).stdout.strip())
eps = [e for d in md.distributions(path=[os.environ["PYTHONPATH"]]) for e in d.entry_points if e.group == "pytest11"]
print(",".join(f"{e.name}={e.value}" for e in eps))
]=] RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err WORKING_DIRECTORY ${BIN})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "importing the pip-installed package failed (${rc}):\n${out}${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
list(GET lines 0 found)
list(GET lines 1 version)
list(GET lines 2 plugins)
get_filename_component(want ${BIN}/site/ropecheck/bin/ropecheck REALPATH)
if(NOT found STREQUAL want)
  message(FATAL_ERROR "the installed package found ${found} (want its bundled ${want})")
endif()
if(NOT version MATCHES "^ropecheck [0-9]")
  message(FATAL_ERROR "the bundled executable's --version: ${version}")
endif()
if(NOT plugins STREQUAL "ropecheck.pytest_plugin=ropecheck.pytest_plugin")
  message(FATAL_ERROR "pytest11 entry points: '${plugins}'")
endif()
