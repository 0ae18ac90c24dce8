// libFuzzer target: a user's kernel, loaded from the shared library named by
// the environment variable ROPECHECK_FUZZ_KERNEL (it exports rc_rope_apply,
// include/ropecheck/kernel_abi.h), against the exact reference under the
// loaded-kernel error model (impls/plugin_loader.hpp). The angle model is
// ROPECHECK_FUZZ_ANGLE_MODEL=exact|fp32 (default exact). Same input format and
// checks as fuzz_differential. Without ROPECHECK_FUZZ_KERNEL it fuzzes
// libfuzz_example_kernel.so from its own directory, if there.
//
//   ROPECHECK_FUZZ_KERNEL=./libmykernel.so ./fuzz_plugin fuzz/corpus/fuzz_plugin
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "fuzz/differential.hpp"
#include "impls/plugin_loader.hpp"

namespace {

const ropecheck::Implementation* g_kernel = nullptr;
ropecheck::KernelPromise g_promise;

[[noreturn]] void usage_error(const std::string& why) {
  std::fprintf(stderr,
               "fuzz_plugin: %s\n"
               "usage: ROPECHECK_FUZZ_KERNEL=path/to/libkernel.so [ROPECHECK_FUZZ_ANGLE_MODEL=exact|fp32] "
               "fuzz_plugin [libFuzzer options] [corpus dirs]\n",
               why.c_str());
  std::exit(2);
}

// Without ROPECHECK_FUZZ_KERNEL: the example kernel next to the executable
// (ClusterFuzzLite runs the target with no environment of ours).
std::string default_kernel() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const std::filesystem::path p = exe.parent_path() / "libfuzz_example_kernel.so";
  return std::filesystem::exists(p, ec) ? p.string() : std::string();
}

void load_kernel() {
  const char* env = std::getenv("ROPECHECK_FUZZ_KERNEL");
  static const std::string path = env && *env ? std::string(env) : default_kernel();
  if (path.empty()) usage_error("ROPECHECK_FUZZ_KERNEL is not set (and no libfuzz_example_kernel.so beside the executable)");
  ropecheck::AngleModel model = ropecheck::AngleModel::exact;
  if (const char* m = std::getenv("ROPECHECK_FUZZ_ANGLE_MODEL"); m && *m) {
    const auto parsed = ropecheck::parse_angle_model(m);
    if (!parsed) usage_error(std::string("ROPECHECK_FUZZ_ANGLE_MODEL must be exact or fp32, got '") + m + "'");
    model = *parsed;
  }
  static ropecheck::PluginLoad load = ropecheck::load_kernel_plugin(path);
  if (!load.impl) usage_error(load.error);
  g_kernel = &*load.impl;
  g_promise = ropecheck::loaded_promise(model);
  std::fprintf(stderr, "fuzz_plugin: fuzzing '%s' (%s angle model)\n", path.c_str(), std::string(to_string(model)).c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  load_kernel();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!g_kernel) load_kernel();
  const std::optional<ropecheck::fuzz::FuzzCase> fc = ropecheck::fuzz::decode_case(data, size);
  if (!fc) return -1;
  if (std::string r = ropecheck::fuzz::check_implementations(*fc, {{g_kernel, g_promise}}); !r.empty()) ropecheck::fuzz::fail(r);
  return 0;
}
