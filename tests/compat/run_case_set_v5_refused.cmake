# A case-set runner written against manifest version 4, given an export that opted in to ABI v3 cases (manifest
# version 5: `--supports` naming a v3 feature): it must refuse the manifest (exit non-zero, naming the versions
# it reads) and write no output, never make a v3 call as a v1 one. SCRIPT's SHA-256 must be SHA256 (the runner is
# kept exactly as written: tests/compat/README.md).
file(SHA256 ${SCRIPT} sum)
if(NOT sum STREQUAL SHA256)
  message(FATAL_ERROR "${SCRIPT} was edited (SHA-256 ${sum}, recorded ${SHA256}): a runner written against an earlier "
                      "release stays exactly as written (tests/compat/README.md)")
endif()
file(REMOVE_RECURSE ${DIR})
execute_process(COMMAND ${ROPECHECK_EXE} cases export --dir ${DIR} --dtype f32 --layout interleaved --random-cases 0
                        --property-cases 1 --supports f32,interleaved,in-place,inverse,tensor-form,strides
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cases export with ABI v3 features failed (${rc})")
endif()
file(READ ${DIR}/manifest.json manifest)
string(JSON version GET "${manifest}" version)
if(NOT version EQUAL 5)
  message(FATAL_ERROR "an export with ABI v3 cases wrote manifest version ${version}, expected 5")
endif()
execute_process(COMMAND ${PYTHON} ${SCRIPT} --pipeline ${PIPELINE} --dir ${DIR} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
file(GLOB written ${DIR}/*.out.npy ${DIR}/*.declined)
if(rc EQUAL 0 OR NOT out MATCHES "version 1 to 4" OR written)
  message(FATAL_ERROR "the version-4 runner over a version-5 manifest exited ${rc} and wrote '${written}': it must "
                      "refuse the manifest (naming versions 1 to 4) and write nothing")
endif()
