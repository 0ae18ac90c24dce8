// The build's paths a test program reads (see rc_test_paths() in CMakeLists.txt): each is defined, as a
// string, in the program's generated <target>_test_paths.cpp, and named ROPECHECK_<KEY> only in programs
// given that key -- `#ifdef ROPECHECK_MUTANT_DIR` still says whether the program has one.
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
extern const char rc_test_path_cli[];
extern const char rc_test_path_source_dir[];
extern const char rc_test_path_mutant_dir[];
extern const char rc_test_path_hostile_dir[];
extern const char rc_test_path_abi_dir[];
extern const char rc_test_path_test_tmp[];
extern const char rc_test_path_report_test_dir[];
#ifdef __cplusplus
}
#endif
