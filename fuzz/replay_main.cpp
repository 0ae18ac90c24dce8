// A main() for running a libFuzzer target without libFuzzer (any compiler):
// every file named on the command line, and every regular file in every
// directory named, is passed once to LLVMFuzzerTestOneInput, in sorted order.
// A failing input aborts (the target's own check; with
// ROPECHECK_FUZZ_KEEP_GOING=1 the kernel targets print every failure and the
// replay exits 1 at the end); a missing path or no input at all is an error
// (exit 2), so the replay cannot pass vacuously.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);
// Defined by the kernel targets (fuzz/differential.cpp): failures printed under
// ROPECHECK_FUZZ_KEEP_GOING.
namespace ropecheck::fuzz {
__attribute__((weak)) size_t failures_kept();
}

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> in_dir;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') in_dir.push_back(e.path());
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs (usage: %s FILE_OR_DIR...)\n", argc > 0 ? argv[0] : "replay");
    return 2;
  }
  for (const fs::path& f : files) {
    std::ifstream s(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
    if (!s.good() && !s.eof()) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 2;
    }
    // An exact-size copy, so a sanitizer sees reads past the end of the input.
    std::unique_ptr<uint8_t[]> data(new uint8_t[bytes.size() ? bytes.size() : 1]);
    std::copy(bytes.begin(), bytes.end(), data.get());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", f.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(data.get(), bytes.size());
  }
  const size_t kept = ropecheck::fuzz::failures_kept ? ropecheck::fuzz::failures_kept() : 0;
  if (kept) {
    std::fprintf(stderr, "replay: %zu failure(s) in %zu input(s)\n", kept, files.size());
    return 1;
  }
  std::fprintf(stderr, "replay: %zu input(s) passed\n", files.size());
  return 0;
}
