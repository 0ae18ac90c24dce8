# Configure, build and ctest examples/downstream-kernel in a fresh directory.
file(REMOVE_RECURSE ${BIN})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${BIN} -G "${GENERATOR}"
                        -DROPECHECK_EXE=${ROPECHECK_EXE} -DROPECHECK_INCLUDE_DIR=${ROPECHECK_INCLUDE_DIR}
                        -DROPECHECK_GATE_BUDGET=120
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the downstream example failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} -j1 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the downstream example failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${BIN} --output-on-failure RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the downstream example's gate test failed (${rc})")
endif()
if(NOT EXISTS ${BIN}/ropecheck-gate.xml)
  message(FATAL_ERROR "the downstream example's gate wrote no JUnit file")
endif()
if(NOT EXISTS ${BIN}/ropecheck-gate-report/report.json OR NOT EXISTS ${BIN}/ropecheck-gate-report/report.html)
  message(FATAL_ERROR "the downstream example's gate wrote no report")
endif()

# The degraded build (f32 cos/sin and arithmetic) passes its gate but fails the compare with the committed
# baseline: the downstream CI catches an accuracy regression that stays within the contract.
file(REMOVE_RECURSE ${BIN}-degraded)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${BIN}-degraded -G "${GENERATOR}"
                        -DROPECHECK_EXE=${ROPECHECK_EXE} -DROPECHECK_INCLUDE_DIR=${ROPECHECK_INCLUDE_DIR}
                        -DROPECHECK_GATE_BUDGET=120 -DMYKERNEL_DEGRADED=ON
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the degraded downstream example failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN}-degraded -j1 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the degraded downstream example failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${BIN}-degraded --output-on-failure
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "the degraded build passed its baseline compare:\n${out}${err}")
endif()
string(FIND "${out}${err}" "verdict: PASS" pass_at)
string(FIND "${out}${err}" "regression" regression_at)
if(pass_at EQUAL -1 OR regression_at EQUAL -1)
  message(FATAL_ERROR "the degraded build should pass its gate and fail as a regression:\n${out}${err}")
endif()
