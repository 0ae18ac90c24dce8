# Configure, build and ctest examples/downstream-kernel in a fresh directory.
file(REMOVE_RECURSE ${BIN})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${BIN} -G "${GENERATOR}"
                        -DROPECHECK_EXE=${ROPECHECK_EXE} -DROPECHECK_INCLUDE_DIR=${ROPECHECK_INCLUDE_DIR}
                        -DROPECHECK_GATE_BUDGET=20
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
