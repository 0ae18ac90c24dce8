# Export a case set, run a PyTorch pipeline over it (scripts/pytorch_cases.py with Debian's
# /usr/bin/python3 and python3-torch), then check the outputs: they must pass under CONTRACT and,
# when DEFAULT_MUST_FAIL is set, fail under the default contract (the clauses are needed); when EXPECT is set,
# the passing verdict must match that regular expression.
# With DEVICE (cuda), the pipeline runs there (--device); without a CUDA device torch can see, the test says
# "skipped: no CUDA device" (its SKIP_REGULAR_EXPRESSION) and stops.
set(device_args "")
if(DEVICE)
  execute_process(COMMAND ${PYTHON} -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message("skipped: no CUDA device (torch in ${PYTHON} sees none)")
    return()
  endif()
  set(device_args --device ${DEVICE})
endif()
file(REMOVE_RECURSE ${DIR})
# SUPPORTS: the export's --supports (a pipeline's v3 tables: manifest version 5).
set(export_args "")
if(SUPPORTS)
  set(export_args --supports ${SUPPORTS})
endif()
execute_process(COMMAND ${ROPECHECK_EXE} cases export --dir ${DIR} --layout ${LAYOUT} --dtype ${DTYPE} ${export_args}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cases export failed (${rc})")
endif()
execute_process(COMMAND ${PYTHON} ${SCRIPT} --pipeline ${PIPELINE} --dir ${DIR} ${device_args} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PYTHON} ${SCRIPT} --pipeline ${PIPELINE} failed (${rc}); it needs Debian's python3-torch "
                      "and python3-numpy (scripts/install-deps.sh --pytorch)")
endif()
execute_process(COMMAND ${ROPECHECK_EXE} cases check --dir ${DIR} --contract ${CONTRACT} RESULT_VARIABLE rc
                OUTPUT_VARIABLE verdict ERROR_VARIABLE verdict)
message("${verdict}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cases check --contract ${CONTRACT} of the ${PIPELINE} outputs exited ${rc}, expected 0")
endif()
if(EXPECT AND NOT verdict MATCHES "${EXPECT}")
  message(FATAL_ERROR "the verdict of cases check --contract ${CONTRACT} does not match '${EXPECT}'")
endif()
if(DEFAULT_MUST_FAIL)
  execute_process(COMMAND ${ROPECHECK_EXE} cases check --dir ${DIR} OUTPUT_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 1)
    message(FATAL_ERROR "cases check of the ${PIPELINE} outputs under the default contract exited ${rc}, expected 1")
  endif()
endif()
