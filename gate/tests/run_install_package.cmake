# `cmake --install` of this build into a prefix, then examples/cmake-package configured against it as a user would
# (find_package(ropecheck), ropecheck::abi, ropecheck_add_gate): its gate passes, and fails with its planted bug;
# the same example from the build tree (-Dropecheck_DIR); the pkg-config file; the Python package from the prefix
# finds the prefix's executable.
file(REMOVE_RECURSE ${BIN})
set(prefix ${BIN}/prefix)
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}${err}")
  endif()
  set(out "${out}${err}" PARENT_SCOPE)
endfunction()
run("installing" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
foreach(f bin/ropecheck include/ropecheck/kernel_abi.h lib/cmake/ropecheck/ropecheckConfig.cmake
          lib/cmake/ropecheck/ropecheckConfigVersion.cmake lib/cmake/ropecheck/RopecheckGate.cmake
          share/pkgconfig/ropecheck-abi.pc lib/python3/dist-packages/ropecheck/__init__.py
          share/doc/ropecheck/gate.md share/doc/ropecheck/CHANGES.md)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
run("ropecheck --version from the prefix" ${prefix}/bin/ropecheck --version)
if(NOT out MATCHES "^ropecheck [0-9]+\\.[0-9]+\\.[0-9]+ \\(kernel ABI [0-9]+\\)")
  message(FATAL_ERROR "ropecheck --version: ${out}")
endif()
# The pkg-config file, relocated with the prefix.
set(ENV{PKG_CONFIG_PATH} ${prefix}/share/pkgconfig)
run("pkg-config" pkg-config --cflags ropecheck-abi)
string(STRIP "${out}" cflags)
string(REGEX REPLACE "^-I" "" incdir "${cflags}")
get_filename_component(incdir "${incdir}" REALPATH)
get_filename_component(want "${prefix}/include" REALPATH)
if(NOT incdir STREQUAL want)
  message(FATAL_ERROR "pkg-config --cflags ropecheck-abi: ${cflags} (want -I${want})")
endif()
# The example against the prefix: a pass; its planted bug: a FAIL naming the sign.
foreach(variant ok bug)
  set(b ${BIN}/example-${variant})
  if(variant STREQUAL "bug")
    set(bug_flag -DMYROPE_SIGN_BUG=ON)
  else()
    set(bug_flag -DMYROPE_SIGN_BUG=OFF)
  endif()
  run("configuring the example (${variant})" ${CMAKE_COMMAND} -S ${SRC} -B ${b} -G "${GENERATOR}"
      -DCMAKE_PREFIX_PATH=${prefix} ${bug_flag})
  run("building the example (${variant})" ${CMAKE_COMMAND} --build ${b})
  execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${b} --output-on-failure
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(variant STREQUAL "ok" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "the example's gate failed against the installed prefix:\n${out}${err}")
  endif()
  if(variant STREQUAL "bug" AND (rc EQUAL 0 OR NOT "${out}${err}" MATCHES "verdict: FAIL \\(failed: angle negated"))
    message(FATAL_ERROR "the example's planted bug did not fail named:\n${out}${err}")
  endif()
  if(NOT EXISTS ${b}/myrope_gate.junit.xml OR NOT EXISTS ${b}/myrope_gate-report/report.html)
    message(FATAL_ERROR "the example's gate wrote no JUnit file or report")
  endif()
endforeach()
# The build tree as the package.
run("configuring the example from the build tree" ${CMAKE_COMMAND} -S ${SRC} -B ${BIN}/example-tree -G "${GENERATOR}"
    -Dropecheck_DIR=${BUILD})
run("building the example from the build tree" ${CMAKE_COMMAND} --build ${BIN}/example-tree)
run("the example's gate from the build tree" ${CMAKE_CTEST_COMMAND} --test-dir ${BIN}/example-tree --output-on-failure)
# The Python package installed in the prefix finds the prefix's executable (no ROPECHECK_BIN).
unset(ENV{ROPECHECK_BIN})
set(ENV{PYTHONPATH} ${prefix}/lib/python3/dist-packages)
run("importing the installed Python package" ${PYTHON} -c "print(__import__('ropecheck').find_binary())")
string(STRIP "${out}" found)
get_filename_component(found "${found}" REALPATH)
get_filename_component(want "${prefix}/bin/ropecheck" REALPATH)
if(NOT found STREQUAL want)
  message(FATAL_ERROR "the installed package found ${found} (want ${want})")
endif()
