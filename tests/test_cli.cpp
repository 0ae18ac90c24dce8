// `ropecheck reference`: runs the built CLI (ROPECHECK_CLI) and checks its %a
// lines against values computed here with Boost cpp_bin_float (no MPFR), and
// that bad input exits with status 2 and a message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/math/constants/constants.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace mp = boost::multiprecision;
using HP = mp::number<mp::cpp_bin_float<300, mp::digit_base_2>, mp::et_off>;

struct CliRun {
  int status = -1;
  std::string out;  // stdout and stderr
};

CliRun run_cli(const std::string& args) {
  const std::string cmd = std::string(ROPECHECK_CLI) + " " + args + " 2>&1";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The lines "<%a> <%.9g>" as (hex value, decimal value).
std::vector<std::pair<double, double>> parse_lines(const std::string& out) {
  std::vector<std::pair<double, double>> v;
  std::istringstream in(out);
  std::string hex, dec;
  while (in >> hex >> dec) v.emplace_back(std::strtod(hex.c_str(), nullptr), std::strtod(dec.c_str(), nullptr));
  return v;
}

// Correctly rounded f32 of a nonzero HP (no subnormals or overflow needed here).
float to_f32(const HP& y) {
  int e;
  (void)frexp(y, &e);
  const int q = (e - 1) - 23;
  const HP t = ldexp(y, -q), fl = floor(t), fr = t - fl;
  HP k = fr > HP(0.5) ? fl + 1 : fr < HP(0.5) ? fl : (fmod(fl, HP(2)) == 0 ? fl : fl + 1);
  return float(std::ldexp(static_cast<double>(k), q));
}

// RoPE of one f32 head vector at an exact angle per pair.
std::vector<float> rope(const std::vector<float>& x, const std::vector<HP>& angles, bool interleaved) {
  std::vector<float> y = x;
  const size_t half = angles.size();
  const HP two_pi = 2 * boost::math::constants::pi<HP>();
  for (size_t i = 0; i < half; ++i) {
    const size_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
    const HP r = angles[i] - round(angles[i] / two_pi) * two_pi;
    const HP c = cos(r), s = sin(r);
    y[a] = to_f32(HP(x[a]) * c - HP(x[b]) * s);
    y[b] = to_f32(HP(x[a]) * s + HP(x[b]) * c);
  }
  return y;
}

void expect_lines(const CliRun& r, const std::vector<float>& want) {
  ASSERT_EQ(r.status, 0) << r.out;
  const auto lines = parse_lines(r.out);
  ASSERT_EQ(lines.size(), want.size()) << r.out;
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(lines[k].first, double(want[k])) << "line " << k << ": " << r.out;
    EXPECT_EQ(float(lines[k].second), want[k]) << "line " << k << " (decimal): " << r.out;
  }
}

const std::string kExample =
    "reference --dtype f32 --layout interleaved --head-dim 4 --rotary-dim 4 --base 10000 --position 1000000 "
    "--values 1.5,-2,0.25,3";

TEST(Cli, ReferenceExampleFromTheIssue) {
  // theta_0 = 1, theta_1 = 10000^(-1/2) = 0.01: angles 1e6 and 1e4 exactly.
  const std::vector<float> want = rope({1.5f, -2.0f, 0.25f, 3.0f}, {HP(1000000), HP(10000)}, true);
  expect_lines(run_cli(kExample), want);
}

TEST(Cli, HalfSplitPositionScaleAndNegativePosition) {
  // half-split: pairs (0,2), (1,3); position -300 scaled by 0.5 -> angles -150 and -150 * 10^-2
  const std::vector<float> want = rope({1.5f, -2.0f, 0.25f, 3.0f}, {HP(-150), HP(-150) / 100}, false);
  expect_lines(run_cli("reference --dtype f32 --layout half-split --head-dim 4 --base 10000 --position -300 "
                       "--position-scale 0.5 --values 1.5,-2,0.25,3"),
               want);
}

TEST(Cli, Fp32AngleModelAndPassThrough) {
  // fp32 model: pair 0 angle f32(1e6 + 1) * 1 = 1000001; pair 1 inv = 1/f32(10000^0.5) = f32(0.01),
  // angle f32(1000001 * f32(0.01)). Dim 4 passes through.
  const float inv1 = 1.0f / 100.0f;
  const float a1 = 1000001.0f * inv1;
  const std::vector<float> rot = rope({1.5f, -2.0f, 0.25f, 3.0f}, {HP(1000001), HP(a1)}, true);
  std::vector<float> want = rot;
  want.push_back(-7.5f);
  expect_lines(run_cli("reference --head-dim 5 --rotary-dim 4 --position 1000001 --angle-model fp32 "
                       "--values 1.5,-2,0.25,3,-7.5"),
               want);
}

TEST(Cli, InvFreqTable) {
  const std::vector<float> want = rope({1.0f, 2.0f, 3.0f, 4.0f}, {HP(7) * HP(0.125), HP(7) * HP(3)}, true);
  expect_lines(run_cli("reference --head-dim 4 --position 7 --inv-freq 0x1p-3,3 --values 1,2,3,4"), want);
}

TEST(Cli, BadInputExitsTwoWithAMessage) {
  const char* bad[] = {
      "reference --head-dim 4 --values 1,2,3",                        // too few values
      "reference --head-dim 4 --rotary-dim 3 --values 1,2,3,4",       // odd rotary_dim
      "reference --head-dim 4 --rotary-dim 6 --values 1,2,3,4",       // rotary_dim > head_dim
      "reference --head-dim 4 --values 1,x,3,4",                      // not a number
      "reference --head-dim 4 --dtype f64 --values 1,2,3,4",          // unknown dtype
      "reference --head-dim 4 --base -1 --values 1,2,3,4",            // bad base
      "reference --head-dim 4 --inv-freq 1 --values 1,2,3,4",         // table of the wrong size
      "reference --head-dim 4 --angle-model fast --values 1,2,3,4",   // unknown model
      "reference --values 1,2",                                       // missing --head-dim
  };
  for (const char* args : bad) {
    const CliRun r = run_cli(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_FALSE(r.out.empty()) << args;
    EXPECT_EQ(r.out.find("\n0x"), std::string::npos) << args << " printed results:\n" << r.out;
    EXPECT_NE(r.out.rfind("0x", 0), 0u) << args << " printed results:\n" << r.out;
  }
}

}  // namespace
