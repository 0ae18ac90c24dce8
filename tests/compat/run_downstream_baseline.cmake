# The downstream example of an earlier release with its committed baseline: its kernel (KERNEL_SRC, built here
# against today's header) is gated with `--baseline BASELINE` and must pass (exit 0: the verdict and the
# compare), and `report compare` of the new report against the old baseline must pass. The files' SHA-256 must
# be the recorded ones (tests/compat/README.md).
foreach(pair "${KERNEL_SRC}=${KERNEL_SHA256}" "${BASELINE}=${BASELINE_SHA256}")
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 f)
  list(GET pair 1 want)
  file(SHA256 ${f} sum)
  if(NOT sum STREQUAL want)
    message(FATAL_ERROR "${f} was edited (SHA-256 ${sum}, recorded ${want}): files of an earlier release stay exactly "
                        "as written (tests/compat/README.md)")
  endif()
endforeach()
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${CC} -shared -fPIC -O2 -ffp-contract=off -fvisibility=hidden -I${INCLUDE_DIR} -o
                        ${DIR}/libmykernel.so ${KERNEL_SRC} -lm
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building ${KERNEL_SRC} against today's header failed (${rc}):\n${out}")
endif()
execute_process(COMMAND ${ROPECHECK_EXE} gate --kernel ${DIR}/libmykernel.so --budget-seconds 120 --quiet
                        --report-dir ${DIR}/report --baseline ${BASELINE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gate --baseline (the baseline of an earlier release) exited ${rc}, expected 0")
endif()
execute_process(COMMAND ${ROPECHECK_EXE} report compare --baseline ${BASELINE} --current ${DIR}/report/report.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "report compare against the baseline of an earlier release exited ${rc}, expected 0")
endif()
