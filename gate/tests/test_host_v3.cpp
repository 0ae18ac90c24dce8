// The kernel host marshals ABI v3 (draft) calls: caller-given tables, and the tensor form (q and k laid out
// with the case's strides, each tensor in a region of its own between guard pages, the strides' gaps holding
// the region's pattern; positions as int64, int32 or implicit with seq_offsets; cu_seqlens; every shape and
// stride array in the arena). What comes back: q's and k's outputs compact, bit for bit what the same kernel
// gives the same heads in this process; and every misdeed of a planted kernel named: a write into a gap, into
// an input, into a table, a shape or an index tensor, k left unwritten, a declined call that wrote k.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "gate/gate.hpp"
#include "gate/isolation.hpp"
#include "properties/promise.hpp"
#include "impls/registry.hpp"
#include "tests/random_cases.hpp"

using namespace ropecheck;

namespace {

// The same kernel in this process, in the legacy form: the case's q (or its k as a case of its own).
Bytes legacy_output(const RopeCase& c, bool in_place) {
  RopeCase q = c;
  q.tensor.reset();
  Bytes out = in_place ? q.input : Bytes(q.n_bytes(), 0);
  const rc_rope_args a = q.args(in_place ? out.data() : q.input.data(), out.data(), 3);
  EXPECT_EQ(ropecheck_scalar_rope(&a), RC_OK) << q.summary();
  return out;
}

bool has_finding(const gate::CallResult& r, const std::string& fault, const std::string& text) {
  return std::any_of(r.memory.begin(), r.memory.end(), [&](const gate::MemoryFinding& m) {
    return m.fault == fault && m.message.find(text) != std::string::npos;
  });
}

std::string findings(const gate::CallResult& r) {
  std::string s;
  for (const auto& m : r.memory) s += "\n  " + m.fault + ": " + m.message;
  return s;
}

}  // namespace

TEST(KernelHostV3, TensorFormAndTableCallsComeBackAsTheKernelComputesThem) {
  gate::KernelHost host(gate::KernelSource{"", &ropecheck_scalar_rope}, gate::HostOptions{});
  std::mt19937_64 rng(51);
  int tensor = 0, with_k = 0, implicit = 0, int32 = 0, varlen = 0, tables = 0, legacy_tables = 0;
  for (int n = 0; n < 240; ++n) {
    const bool legacy = n % 4 == 3;  // a legacy-form v3 call (its table, if any, through the host)
    const RopeCase c = legacy ? ropecheck::testing::random_v3_case(rng, n % 5 == 0) : ropecheck::testing::random_tensor_case(rng, n % 5 == 0);
    ASSERT_EQ(c.validate(), "") << n << " " << c.summary();
    const bool in_place = rng() % 3 == 0;
    const gate::CallResult r = host.call_at(c, in_place, 30, 3);
    ASSERT_EQ(r.status, gate::CallStatus::ok) << n << " " << c.summary() << " rc " << r.rc;
    EXPECT_TRUE(r.memory.empty()) << n << " " << c.summary() << findings(r);
    EXPECT_EQ(r.input_changed, 0u) << n;
    EXPECT_EQ(r.guard_before_bytes + r.guard_after_bytes + r.input_guard_bytes, 0u) << n;
    ASSERT_EQ(r.out, legacy_output(c, in_place)) << n << " q: " << c.summary();
    if (c.tensor && c.tensor->k_heads) {
      ASSERT_EQ(r.k_out, legacy_output(c.k_case(), in_place)) << n << " k: " << c.summary();
      ++with_k;
    }
    if (c.tensor) {
      ++tensor;
      implicit += c.tensor->pos == PositionForm::implicit;
      int32 += c.tensor->pos == PositionForm::int32;
      varlen += !c.tensor->cu_seqlens.empty();
      tables += bool(c.table);
    } else {
      legacy_tables += bool(c.table);
    }
  }
  EXPECT_GT(tensor, 150);
  EXPECT_GT(with_k, 80);
  EXPECT_GT(implicit, 20);
  EXPECT_GT(int32, 20);
  EXPECT_GT(varlen, 30);
  EXPECT_GT(tables, 80);
  EXPECT_GT(legacy_tables, 30);
  EXPECT_EQ(host.starts(), 1u);
}

// Planted kernels: each computes the call with the scalar kernel, then does one thing wrong.
namespace {
enum Misdeed { kGapWrite, kKInputWrite, kShapeWrite, kTableWrite, kPosWrite, kKUnwritten, kDeclineAfterK, kKInverted };
Misdeed g_misdeed;

int planted(const rc_rope_args* a) {
  if (g_misdeed == kKInverted && a->k.data) {  // q right; k rotated the other way
    rc_rope_args q = *a, k = *a;
    q.k = q.k_out = rc_tensor{};
    k.q = a->k;
    k.q_out = a->k_out;
    k.k = k.k_out = rc_tensor{};
    k.direction = a->direction == RC_INVERSE ? RC_FORWARD : RC_INVERSE;
    const int rc = ropecheck_scalar_rope(&q);
    return rc != RC_OK ? rc : ropecheck_scalar_rope(&k);
  }
  if (g_misdeed == kKUnwritten || g_misdeed == kDeclineAfterK) {
    rc_rope_args q = *a;
    q.k = q.k_out = rc_tensor{};
    const int rc = ropecheck_scalar_rope(&q);  // q only
    if (g_misdeed == kKUnwritten) return rc;
    std::memset(static_cast<char*>(a->k_out.data) + a->k_out.byte_offset, 0, 2);
    return RC_UNSUPPORTED;
  }
  const int rc = ropecheck_scalar_rope(a);
  const size_t es = a->dtype == RC_F32 ? 4 : 2;
  switch (g_misdeed) {
    case kGapWrite: {  // one element past the first head of q_out: the head stride's gap
      const rc_tensor& t = a->q_out;
      static_cast<char*>(t.data)[t.byte_offset + size_t(a->head_dim) * es] ^= 1;
      break;
    }
    case kKInputWrite: static_cast<char*>(a->k.data)[a->k.byte_offset] ^= 1; break;
    case kShapeWrite: a->q.strides[0] += 1; break;
    case kTableWrite: static_cast<char*>(a->table.data)[0] ^= 1; break;
    case kPosWrite: static_cast<char*>(a->pos.data)[0] ^= 1; break;
    default: break;
  }
  return rc;
}
}  // namespace

TEST(KernelHostV3, PlantedMisdeedsAreNamed) {
  std::mt19937_64 rng(52);
  // A case fit for every misdeed: out of place, a head stride with a gap, k, explicit positions, a table.
  RopeCase c;
  do c = ropecheck::testing::random_tensor_case(rng, false);
  while (!(c.table && c.tensor->k_heads && c.tensor->pos != PositionForm::implicit && c.tensor->pad[1][0] > 0 &&
           c.n_tokens() > 0));
  const struct {
    Misdeed m;
    const char* fault;
    const char* text;
  } plan[] = {
      {kGapWrite, "out-of-bounds write", "between the elements of q_out"},
      {kKInputWrite, "input modified", "into its input k"},
      {kShapeWrite, "argument modified", "shapes or strides"},
      {kTableWrite, "argument modified", "(const) table"},
      {kPosWrite, "argument modified", "positions, seq_offsets or cu_seqlens"},
      {kKUnwritten, "unwritten output", "of k_out still hold the poison"},
      {kDeclineAfterK, "declined after writing", "element(s) of k_out"},
  };
  for (const auto& p : plan) {
    g_misdeed = p.m;  // (a host forked after this sees it)
    gate::KernelHost host(gate::KernelSource{"", &planted}, gate::HostOptions{});
    const gate::CallResult r = host.call_at(c, false, 30, 3);
    EXPECT_TRUE(has_finding(r, p.fault, p.text)) << p.fault << " / " << p.text << " in " << c.summary() << findings(r);
  }
}

// The gate's judge takes k as a case of its own: the scalar kernel's tensor-form calls pass, with k's pairs
// counted; a kernel that rotates k the other way fails, its finding said as k's.
TEST(KernelHostV3, TheJudgeTakesKAsACaseOfItsOwn) {
  const Implementation& scalar = *find_implementation("scalar");
  const KernelPromise p = promise_of(scalar);
  const Criteria cr = Criteria::of(p.error_model, p.contract);
  gate::KernelHost good(gate::KernelSource{"", &ropecheck_scalar_rope}, gate::HostOptions{});
  g_misdeed = kKInverted;
  gate::KernelHost bad(gate::KernelSource{"", &planted}, gate::HostOptions{});
  std::mt19937_64 rng(53);
  int judged = 0, caught = 0;
  for (int n = 0; n < 60; ++n) {
    RopeCase c = ropecheck::testing::random_tensor_case(rng, false);
    if (!c.tensor->k_heads) continue;
    const gate::CaseVerdict g = gate::judge_call(c, false, p.angle_model, cr, good.call_at(c, false, 30, 3));
    ASSERT_TRUE(g.accepted && g.pass) << n << " " << c.summary() << "\n" << g.message;
    EXPECT_EQ(g.judgement.pairs, c.n_tokens() * (c.n_heads + c.tensor->k_heads) * (c.rotary_dim / 2))
        << "q's and k's pairs";
    ++judged;
    const gate::CaseVerdict b = gate::judge_call(c, false, p.angle_model, cr, bad.call_at(c, false, 30, 3));
    if (!b.pass) {
      ++caught;
      EXPECT_EQ(b.message.rfind("k: ", 0), 0u) << b.message;  // q is right: the finding is k's alone
      const std::string why = gate::diagnose_call(c, p.angle_model, cr, b, bad.call_at(c, false, 30, 3));
      EXPECT_EQ(why.rfind("k: ", 0), 0u) << why;  // and so is the diagnosis
    }
  }
  EXPECT_GT(judged, 25);
  EXPECT_GT(caught, judged * 3 / 4);
}

// A tensor whose strides spread it over gigabytes (element offsets past 2^31: the gate's "v3: strides" case that a
// kernel computing offsets in 32 bits fails) is sparse in the arena: the gate writes and reads only the pages its
// elements lie on, and every page between them is a guard page in the kernel's process. So the scalar kernel's
// call comes back as in this process with the gate's memory barely grown; a write between the elements faults
// and is named; a wrapped 32-bit offset is named with the element it would have been; a write into a gap on an
// element's page is seen as before.
namespace {
enum WideMisdeed { kWideNone, kWideBetween, kWideInt32Read, kWideGapOnPage };
WideMisdeed g_wide;

int planted_wide(const rc_rope_args* a) {
  const int rc = ropecheck_scalar_rope(a);
  auto* out = static_cast<char*>(a->q_out.data) + a->q_out.byte_offset;
  const auto* in = static_cast<const char*>(a->q.data) + a->q.byte_offset;
  const int64_t st = a->q.strides[0], st_out = a->q_out.strides[0];
  volatile char sink = 0;
  switch (g_wide) {
    case kWideBetween: out[int64_t(1) << 31] = 1; break;  // element 2^30 of q_out (f16): between tokens 0 and 1
    case kWideInt32Read: sink = in[int64_t(int32_t(uint32_t(2 * st))) * 2]; break;  // token 2, offset as int32
    case kWideGapOnPage: out[(st_out - 1) * 2] = 1; break;  // the element before token 1: its page's gap
    default: break;
  }
  (void)sink;
  return rc;
}

uint64_t rss_shmem_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("RssShmem:", 0) == 0) return std::stoull(line.substr(9));
  return 0;
}
}  // namespace

TEST(KernelHostV3, AWideTensorIsSparseAndItsPagesBetweenElementsAreGuardPages) {
  std::mt19937_64 rng(54);
  RopeCase c;
  c.dtype = Dtype::f16;
  c.head_dim = c.rotary_dim = 64;
  c.n_heads = 2;
  c.positions = {3, 70000, 12};
  c.tensor = TensorCall{};
  c.tensor->k_heads = 1;
  const uint32_t pad = uint32_t((uint64_t(1) << 31) - 256);  // tokens 2^31 - 128 elements apart
  c.tensor->pad[0][1] = c.tensor->pad[1][1] = pad;
  std::uniform_real_distribution<float> u(-2, 2);
  c.input.assign(c.n_bytes(), 0);
  for (size_t e = 0; e < c.n_elements(); ++e) store_f32(c.dtype, c.input.data(), e, u(rng));
  c.tensor->k_input.assign(c.n_tokens() * c.head_dim * 2, 0);
  for (size_t e = 0; e < c.n_tokens() * c.head_dim; ++e) store_f32(c.dtype, c.tensor->k_input.data(), e, u(rng));
  ASSERT_EQ(c.validate(), "");
  ASSERT_EQ(c.tensor_layout(1).span, (uint64_t(1) << 32) - 128);  // token 2 at 2^32 - 256

  g_wide = kWideNone;
  const uint64_t shmem0 = rss_shmem_kb();
  {
    gate::KernelHost host(gate::KernelSource{"", &planted_wide}, gate::HostOptions{});
    const gate::CallResult r = host.call_at(c, false, 30, 3);
    ASSERT_EQ(r.status, gate::CallStatus::ok) << findings(r);
    EXPECT_TRUE(r.memory.empty()) << findings(r);
    EXPECT_EQ(r.guard_before_bytes + r.guard_after_bytes + r.input_guard_bytes, 0u);
    EXPECT_EQ(r.out, legacy_output(c, false));
    EXPECT_EQ(r.k_out, legacy_output(c.k_case(), false));
    // Two tensors of 8 GiB each: what the gate touched of them is a few pages.
    EXPECT_LT(rss_shmem_kb() - std::min(rss_shmem_kb(), shmem0), 64u * 1024) << "KiB of shared memory touched";
    // In place too (q's own pages hold the output).
    const gate::CallResult ip = host.call_at(c, true, 30, 3);
    ASSERT_EQ(ip.status, gate::CallStatus::ok) << findings(ip);
    EXPECT_TRUE(ip.memory.empty()) << findings(ip);
    EXPECT_EQ(ip.out, legacy_output(c, true));
  }
  const struct {
    WideMisdeed m;
    const char* where;     // in fault_where (a crash), or in a memory finding
    const char* wrapped;   // in wrapped_offset (null: empty)
  } plan[] = {
      {kWideBetween, "a write of a guard page between the elements of the q_out buffer, 2147483648 byte(s) from its "
                     "start", nullptr},
      {kWideInt32Read, "a read of the guard page before the q buffer, 512 byte(s) before its first",
       "q[2][0][0] (element offset 4294967040; as int32 -256)"},
      {kWideGapOnPage, "between the elements of q_out (its strides' gaps) were written", nullptr},
  };
  for (const auto& p : plan) {
    g_wide = p.m;
    gate::KernelHost host(gate::KernelSource{"", &planted_wide}, gate::HostOptions{});
    const gate::CallResult r = host.call_at(c, false, 30, 3);
    if (p.m == kWideGapOnPage) {
      EXPECT_TRUE(has_finding(r, "out-of-bounds write", p.where)) << findings(r);
      continue;
    }
    ASSERT_EQ(r.status, gate::CallStatus::crashed) << p.where;
    EXPECT_NE(r.fault_where.find(p.where), std::string::npos) << r.fault_where;
    EXPECT_EQ(r.wrapped_offset, p.wrapped ? p.wrapped : "") << r.fault_where;
    // and the verdict's cause
    const gate::CaseVerdict v = gate::check_call(c, false, r);
    EXPECT_EQ(v.fault, p.wrapped ? "element offsets computed in 32 bits" : "crash") << v.message;
  }
}
