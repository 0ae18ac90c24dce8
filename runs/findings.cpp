#include "runs/findings.hpp"

#include <fmt/format.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "impls/registry.hpp"
#include "impls/simd/simd_kernels.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif
#ifndef ROPECHECK_BUILD_TYPE
#define ROPECHECK_BUILD_TYPE "unknown"
#endif

namespace ropecheck::report {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0 || line.rfind("cpu model", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "unknown";
}

std::string bits_hex(Dtype d, uint32_t bits) {
  return d == Dtype::f32 ? fmt::format("0x{:08x}", bits) : fmt::format("0x{:04x}", bits);
}

}  // namespace

BucketStats bucket_stats(int bucket, const ErrorStats& s, const WorstPair* w, Dtype d) {
  BucketStats b;
  b.bucket = bucket;
  b.label = bucket < 0 ? "all" : bucket_label(bucket);
  b.count = s.count;
  b.max = s.max;
  b.p99 = s.percentile(0.99);
  b.mean = s.mean();
  b.bias = s.bias();
  b.tangential_bias = s.tangential_bias();
  b.rms = s.rms();  // the bias compare's spread
  Decomposition dc;
  dc.max_radial = s.max_radial;
  dc.max_tangential = s.max_tangential;
  dc.angle_count = s.angle_count;
  dc.max_angle_rad = s.max_angle;
  dc.mean_angle_rad = s.mean_angle();
  dc.max_angle_ulps = s.max_angle_ulps;
  dc.resolved_angle_count = s.resolved_angle_count;
  dc.max_resolved_angle_ulps = s.max_resolved_angle_ulps;
  b.decomposition = dc;
  if (w && w->valid()) {
    WorstCase c;
    c.error = w->e;
    c.radial = w->radial;
    c.tangential = w->tangential;
    c.position = w->position;
    c.token = w->token;
    c.head = w->head;
    c.pair = w->pair;
    c.dim0 = w->dim0;
    c.dim1 = w->dim1;
    for (int k = 0; k < 2; ++k) {
      c.input[k] = bits_hex(d, w->in_bits[k]);
      c.got[k] = bits_hex(d, w->got_bits[k]);
      c.rounded[k] = bits_hex(d, w->rounded_bits[k]);
      c.exact[k] = hexfloat(w->exact[k]);
    }
    b.worst = c;
  }
  return b;
}

std::vector<uint64_t> histogram(const std::vector<float>& values, const std::vector<double>& edges) {
  std::vector<uint64_t> h(edges.size(), 0);
  if (edges.empty()) return h;
  // Bin i: the largest i >= 1 with v >= edges[i], else 0 (NaN included). With ascending edges that is a
  // binary search (a gate's report bins millions of values); otherwise the scan from the top.
  const bool ascending = std::is_sorted(edges.begin(), edges.end());
  for (float v : values) {
    size_t i;
    if (ascending && !std::isnan(v)) {
      i = size_t(std::upper_bound(edges.begin() + 1, edges.end(), double(v)) - edges.begin()) - 1;
    } else {
      i = edges.size() - 1;
      while (i > 0 && !(double(v) >= edges[i])) --i;
    }
    ++h[i];
  }
  return h;
}

Environment current_environment() {
  Environment e;
  e.tool_version = ROPECHECK_VERSION;
#if defined(__clang__)
  e.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  e.compiler = "gcc " __VERSION__;
#else
  e.compiler = "unknown";
#endif
  e.build_type = ROPECHECK_BUILD_TYPE;
  e.cpu_model = cpu_model();
  // The targets of the SIMD kernels themselves, not hwy::SupportedAndGeneratedTargets() here: that one
  // answers for this file's HWY_TARGETS, which lack AVX3_DL (impls/simd asks for it with HWY_WANT_AVX3_DL),
  // so reports written before listed no AVX3_DL next to a simd-avx3_dl series.
  for (const simd::SimdTarget& t : simd::supported_targets()) e.simd_targets.emplace_back(hwy::TargetName(t.target));
  e.simd_compiled_targets.emplace();
  for (const simd::SimdTarget& t : simd::compiled_targets())
    e.simd_compiled_targets->emplace_back(hwy::TargetName(t.target));
  e.implementations = implementation_names();
  return e;
}

}  // namespace ropecheck::report
