# ropecheck_add_gate(): a CTest test that gates a kernel library with `ropecheck gate` (docs/install.md).
#
#   ropecheck_add_gate(NAME TARGET lib [CONTRACT spec] [SUPPORTS list] [REQUIRE list] [BASELINE report.json]
#                      [PRESET name] [ARGS ...])
#
# The test runs `ropecheck gate --kernel $<TARGET_FILE:lib>` with its JUnit XML at <build dir>/NAME.junit.xml and its
# report (report.json/md/html, failing cases as replay files) in <build dir>/NAME-report, and fails when the gate
# does (exit 1: FAIL, or a regression against BASELINE; 2: a usage or load error). SUPPORTS and REQUIRE take CMake
# lists or comma lists of feature names (docs/gate.md, "Features"); ARGS go to the gate as they are. The executable
# is the target ropecheck::ropecheck: the installed one (find_package(ropecheck)), or the one built beside it
# (add_subdirectory / FetchContent).
include_guard(GLOBAL)

function(ropecheck_add_gate name)
  cmake_parse_arguments(PARSE_ARGV 1 G "" "TARGET;CONTRACT;BASELINE;PRESET" "SUPPORTS;REQUIRE;ARGS")
  if(G_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ropecheck_add_gate(${name}): unknown arguments: ${G_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT G_TARGET)
    message(FATAL_ERROR "ropecheck_add_gate(${name}): TARGET <library> is required")
  endif()
  if(NOT TARGET ${G_TARGET})
    message(FATAL_ERROR "ropecheck_add_gate(${name}): ${G_TARGET} is not a target")
  endif()
  if(NOT TARGET ropecheck::ropecheck)
    message(FATAL_ERROR "ropecheck_add_gate(${name}): no ropecheck::ropecheck target: find_package(ropecheck) first")
  endif()
  set(cmd $<TARGET_FILE:ropecheck::ropecheck> gate --kernel $<TARGET_FILE:${G_TARGET}>
          --junit ${CMAKE_CURRENT_BINARY_DIR}/${name}.junit.xml --report-dir ${CMAKE_CURRENT_BINARY_DIR}/${name}-report)
  if(G_CONTRACT)
    list(APPEND cmd --contract ${G_CONTRACT})
  endif()
  foreach(opt SUPPORTS REQUIRE)
    if(G_${opt})
      string(TOLOWER "${opt}" flag)
      list(JOIN G_${opt} "," value)
      list(APPEND cmd --${flag} ${value})
    endif()
  endforeach()
  if(G_PRESET)
    list(APPEND cmd --preset ${G_PRESET})
  endif()
  if(G_BASELINE)
    get_filename_component(baseline "${G_BASELINE}" ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND cmd --baseline ${baseline})
  endif()
  list(APPEND cmd ${G_ARGS})
  add_test(NAME ${name} COMMAND ${cmd})
  set_tests_properties(${name} PROPERTIES LABELS ropecheck)
endfunction()
