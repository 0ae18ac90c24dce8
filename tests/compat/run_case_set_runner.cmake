# A case-set runner written against an earlier manifest version, run unchanged over today's default export:
# `cases export --dir DIR` with no options, the runner (Debian's /usr/bin/python3 and python3-torch), then
# `cases check` under CONTRACT (exit 0) and under the default contract (exit 1), the verdicts it had in its
# release. SCRIPT's SHA-256 must be SHA256 (tests/compat/README.md: the file is kept exactly as written).
# PRESET (optional): export that model's configuration instead; the runner must read it and write every
# output, and `cases check` then fails (exit 1) naming the model's configuration when the runner declined all of
# its cases (CHANGES.md: a model check requires the model).
file(SHA256 ${SCRIPT} sum)
if(NOT sum STREQUAL SHA256)
  message(FATAL_ERROR "${SCRIPT} was edited (SHA-256 ${sum}, recorded ${SHA256}): a runner written against an earlier "
                      "release stays exactly as written (tests/compat/README.md)")
endif()
file(REMOVE_RECURSE ${DIR})
set(export_args "")
if(PRESET)
  set(export_args --preset ${PRESET} --random-cases 8)
endif()
execute_process(COMMAND ${ROPECHECK_EXE} cases export --dir ${DIR} ${export_args} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cases export --dir ${DIR} failed (${rc})")
endif()
file(READ ${DIR}/manifest.json manifest)
string(JSON version GET "${manifest}" version)
if(NOT version EQUAL 4)
  message(FATAL_ERROR "the default export wrote manifest version ${version}: it must be 4, the lowest that can express "
                      "its cases, which a program written against version 4 reads")
endif()
execute_process(COMMAND ${PYTHON} ${SCRIPT} --pipeline ${PIPELINE} --dir ${DIR} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PYTHON} ${SCRIPT} --pipeline ${PIPELINE} failed (${rc}) on today's default export; it needs "
                      "Debian's python3-torch and python3-numpy (scripts/install-deps.sh --pytorch)")
endif()
if(PRESET)
  execute_process(COMMAND ${ROPECHECK_EXE} cases check --dir ${DIR} --contract ${CONTRACT} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE verdict ERROR_VARIABLE verdict)
  message("${verdict}")
  if(NOT rc EQUAL 1 OR NOT verdict MATCHES "the model's configuration \\(${PRESET}\\): 0 of")
    message(FATAL_ERROR "cases check of a ${PRESET} export whose model cases ${PIPELINE} declined exited ${rc}, "
                        "expected 1 naming the model's configuration")
  endif()
  return()
endif()
execute_process(COMMAND ${ROPECHECK_EXE} cases check --dir ${DIR} --contract ${CONTRACT} RESULT_VARIABLE rc
                OUTPUT_VARIABLE verdict ERROR_VARIABLE verdict)
message("${verdict}")
if(NOT rc EQUAL 0 OR NOT verdict MATCHES "\nverdict: PASS")
  message(FATAL_ERROR "cases check --contract ${CONTRACT} of the ${PIPELINE} outputs exited ${rc}, expected 0 (PASS)")
endif()
execute_process(COMMAND ${ROPECHECK_EXE} cases check --dir ${DIR} OUTPUT_QUIET ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "cases check of the ${PIPELINE} outputs under the default contract exited ${rc}, expected 1")
endif()
