// The tensor form of the ABI v3 draft in the built-in kernels (impls/tensor_form.hpp): q and k as strided
// DLPack tensors with their own head counts, rank 3 {T, H, D} or rank 4 {B, S, H, D}, explicit int32/int64
// positions (one axis, or the axes first), implicit positions with offsets per sequence, varlen batches
// (cu_seqlens), in place or apart. Each head vector of a tensor-form call must come out bit for bit as the
// same kernel's legacy call of that one head at the same position(s) gives it, every byte around the outputs'
// elements (the strides' gaps) unchanged, the inputs unchanged out of place. The expected positions are the
// ones this test chose before encoding them, never decoded from the call. A malformed call returns 2 and a
// declined one RC_UNSUPPORTED, both before writing anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/rope_case.hpp"
#include "impls/registry.hpp"
#include "tests/random_cases.hpp"

using namespace ropecheck;
using namespace ropecheck::testing;

namespace {

constexpr unsigned char kGap = 0xa5;  // every byte of a buffer that is no element of its tensor

// One activation tensor of a call: its elements somewhere in a buffer padded by the strides' gaps.
struct Tensor {
  std::vector<int64_t> shape, strides;
  Bytes buf;
  size_t es = 0;
  size_t lead = 0;  // bytes before the first element (byte_offset, or folded into data)
  bool in_data = false;  // the lead is in data rather than byte_offset

  size_t offset(const std::vector<int64_t>& idx) const {  // of an element, in bytes from the first
    int64_t e = 0;
    for (size_t d = 0; d < idx.size(); ++d) e += idx[d] * strides[d];
    return size_t(e) * es;
  }
  rc_tensor dl(Dtype d) {
    rc_tensor t{};
    t.data = buf.data() + (in_data ? lead : 0);
    t.byte_offset = in_data ? 0 : lead;
    t.device = {RC_DL_CPU, 0};
    t.ndim = int32_t(shape.size());
    t.dtype = {uint8_t(d == Dtype::bf16 ? RC_DL_BFLOAT : RC_DL_FLOAT), uint8_t(8 * dtype_size(d)), 1};
    t.shape = shape.data();
    t.strides = strides.data();
    return t;
  }
};

// Random padded strides for `shape` (element stride 1; an extent-1 dimension gets an arbitrary stride).
Tensor make_tensor(std::mt19937_64& rng, const std::vector<int64_t>& shape, Dtype d) {
  Tensor t;
  t.shape = shape;
  t.es = dtype_size(d);
  t.strides.assign(shape.size(), 1);
  int64_t inner = shape.back();
  for (size_t k = shape.size() - 1; k-- > 0;) {
    t.strides[k] = inner + int64_t(rng() % 3 == 0 ? rng() % 5 : 0);
    inner = t.strides[k] * shape[k];
    if (shape[k] == 1 && rng() % 3 == 0) t.strides[k] = int64_t(rng() % 100000);  // never stepped over
  }
  int64_t last = 0;  // the last element's offset (-1: no element)
  for (size_t k = 0; k < shape.size(); ++k) last = shape[k] == 0 || last < 0 ? -1 : last + (shape[k] - 1) * t.strides[k];
  t.lead = t.es * size_t(rng() % 3);
  t.in_data = rng() % 2;
  t.buf.assign(t.lead + size_t(last + 1) * t.es + t.es * size_t(1 + rng() % 3), kGap);  // (never empty: data non-NULL)
  return t;
}

// Every head vector of t, in row-major order of the leading indices: its first byte in t.buf.
std::vector<size_t> heads_of(const Tensor& t) {
  std::vector<size_t> at;
  std::vector<int64_t> idx(t.shape.size(), 0);
  const size_t lead_dims = t.shape.size() - 1;
  for (;;) {
    bool empty = false;
    for (size_t d = 0; d < lead_dims; ++d) empty = empty || t.shape[d] == 0;
    if (empty) return at;
    at.push_back(t.lead + t.offset(idx));
    size_t d = lead_dims;
    while (d-- > 0) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
    if (d == size_t(-1)) return at;
  }
}

// The bytes of t's elements (a mask over t.buf).
std::vector<bool> element_mask(const Tensor& t, uint32_t head_dim) {
  std::vector<bool> m(t.buf.size(), false);
  for (size_t h : heads_of(t))
    for (size_t b = 0; b < head_dim * t.es; ++b) m[h + b] = true;
  return m;
}

struct Built {
  RopeCase c;             // the parameters (its positions: the ones this call encodes, axis-major)
  int rank = 3;
  int64_t B = 1, S = 0, T = 0, Hq = 1, Hk = 0;
  Tensor q, q_out, k, k_out;
  bool q_in_place = false, k_in_place = false;
  std::vector<int64_t> pos_shape, so_shape, cu_shape;
  Bytes pos, so, cu;  // int32 or int64 elements
  rc_dl_dtype pos_t{}, so_t{}, cu_t{};
  std::string what;
  rc_rope_args args;

  size_t tokens() const { return size_t(rank == 4 ? B * S : T); }
};

template <class I>
Bytes index_bytes(const std::vector<int64_t>& v) {
  Bytes b(v.size() * sizeof(I));
  for (size_t k = 0; k < v.size(); ++k) {
    const I x = I(v[k]);
    std::memcpy(b.data() + k * sizeof(I), &x, sizeof(I));
  }
  return b;
}

void encode(const std::vector<int64_t>& v, bool wide, Bytes& b, rc_dl_dtype& t) {
  b = wide ? index_bytes<int64_t>(v) : index_bytes<int32_t>(v);
  if (b.empty()) b.assign(8, 0);  // no element, but present: data non-NULL
  t = {uint8_t(RC_DL_INT), uint8_t(wide ? 64 : 32), 1};
}

rc_tensor index_tensor(Bytes& b, std::vector<int64_t>& shape, rc_dl_dtype t) {
  rc_tensor x{};
  x.data = b.data();
  x.device = {RC_DL_CPU, 0};
  x.ndim = int32_t(shape.size());
  x.dtype = t;
  x.shape = shape.data();
  return x;
}

void fill(std::mt19937_64& rng, Tensor& t, const Dtype d, uint32_t head_dim, bool specials) {
  for (size_t h : heads_of(t))
    for (uint32_t e = 0; e < head_dim; ++e) store_f32(d, t.buf.data() + h, e, random_value(rng, d, specials));
}

// A random tensor-form call of a random v3 case's parameters.
Built random_tensor_call(std::mt19937_64& rng) {
  Built b;
  b.c = random_v3_case(rng, rng() % 4 == 0);
  RopeCase& c = b.c;
  const uint32_t D = c.head_dim;
  b.rank = rng() % 2 ? 4 : 3;
  b.Hq = c.n_heads;
  b.Hk = rng() % 3 == 0 ? 0 : 1 + int64_t(rng() % 3);
  const int64_t rows = c.table ? int64_t(c.table->rows) : 0;
  // Positions: implicit (one axis) or explicit, chosen here, then encoded.
  const bool implicit = c.n_pos_axes == 1 && rng() % 3 != 0;
  std::vector<int64_t> lens;  // varlen: the sequences' lengths (rank 3 with cu_seqlens)
  bool varlen = false;
  if (b.rank == 4) {
    b.B = 1 + int64_t(rng() % 3);
    b.S = int64_t(rng() % 4);
  } else {
    varlen = rng() % 2;
    const int64_t nseq = varlen ? 1 + int64_t(rng() % 3) : 1;
    b.T = 0;
    for (int64_t s = 0; s < nseq; ++s) {
      lens.push_back(int64_t(rng() % 4));
      b.T += lens.back();
    }
  }
  const size_t T = b.tokens();
  auto random_position = [&](uint32_t axis) -> int64_t {
    if (rows) return int64_t(rng() % uint64_t(rows));
    if (axis > 0) return int64_t(rng() % 4096) - 2048;
    return rng() % 2 ? int64_t(rng() % 100000) - 1000 : int64_t(rng() >> 2) - (int64_t(1) << 61);
  };
  c.positions.assign(size_t(c.n_pos_axes) * T, 0);
  const bool wide = rng() % 2;
  std::vector<int64_t> offsets;
  if (implicit) {
    const int64_t nseq = b.rank == 4 ? b.B : int64_t(lens.size());
    const int64_t longest = b.rank == 4 ? b.S : (lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end()));
    const bool with_offsets = !(b.rank == 3 && !varlen && rng() % 3 == 0);
    for (int64_t s = 0; s < nseq; ++s) {
      int64_t o = 0;
      if (with_offsets) {
        if (rows) o = int64_t(rng() % uint64_t(std::max<int64_t>(1, rows - longest)));
        else o = random_position(0) / 2;
        if (!wide) o = int64_t(int32_t(o));
      }
      offsets.push_back(o);
    }
    size_t t = 0;
    if (b.rank == 4) {
      for (int64_t bb = 0; bb < b.B; ++bb)
        for (int64_t s = 0; s < b.S; ++s) c.positions[t++] = s + offsets[size_t(bb)];
    } else {
      for (size_t s = 0; s < lens.size(); ++s)
        for (int64_t i = 0; i < lens[s]; ++i) c.positions[t++] = i + (with_offsets ? offsets[s] : 0);
    }
    if (with_offsets) {
      b.so_shape = {nseq};
      encode(offsets, wide, b.so, b.so_t);
    }
    b.what += with_offsets ? " implicit+offsets" : " implicit";
  } else {
    for (uint32_t a = 0; a < c.n_pos_axes; ++a)
      for (size_t t = 0; t < T; ++t) {
        int64_t m = random_position(a);
        if (!wide) m = int64_t(int32_t(m));
        c.positions[a * T + t] = m;
      }
    const bool axes_first = c.n_pos_axes > 1 || rng() % 3 == 0;
    if (axes_first) b.pos_shape.push_back(c.n_pos_axes);
    if (b.rank == 4) {
      b.pos_shape.push_back(b.B);
      b.pos_shape.push_back(b.S);
    } else {
      b.pos_shape.push_back(b.T);
    }
    encode(c.positions, wide, b.pos, b.pos_t);
    b.what += axes_first ? " explicit{A,..}" : " explicit";
  }
  b.what += wide ? " int64" : " int32";
  if (varlen) {
    std::vector<int64_t> cu{0};
    for (int64_t l : lens) cu.push_back(cu.back() + l);
    b.cu_shape = {int64_t(cu.size())};
    encode(cu, rng() % 2, b.cu, b.cu_t);
    b.what += " varlen";
  }
  // q, k and their outputs.
  auto shape = [&](int64_t H) {
    return b.rank == 4 ? std::vector<int64_t>{b.B, b.S, H, D} : std::vector<int64_t>{b.T, H, D};
  };
  const bool specials = rng() % 4 == 0;
  b.q = make_tensor(rng, shape(b.Hq), c.dtype);
  fill(rng, b.q, c.dtype, D, specials);
  b.q_in_place = rng() % 3 == 0;
  if (!b.q_in_place) b.q_out = make_tensor(rng, shape(b.Hq), c.dtype);
  if (b.Hk) {
    b.k = make_tensor(rng, shape(b.Hk), c.dtype);
    fill(rng, b.k, c.dtype, D, specials);
    b.k_in_place = rng() % 3 == 0;
    if (!b.k_in_place) b.k_out = make_tensor(rng, shape(b.Hk), c.dtype);
  }
  b.what = "rank " + std::to_string(b.rank) + " Hq " + std::to_string(b.Hq) + " Hk " + std::to_string(b.Hk) +
           (b.q_in_place ? " q in place" : "") + (b.k_in_place ? " k in place" : "") + b.what + " | " + c.summary();
  return b;
}

// The call's arguments (pointing into b's buffers).
rc_rope_args tensor_args(Built& b) {
  rc_rope_args a = b.c.args(nullptr, nullptr, 3);
  a.in = nullptr;
  a.out = nullptr;
  a.positions = nullptr;
  a.n_tokens = 0;
  a.n_heads = 0;
  const Dtype d = b.c.dtype;
  a.q = b.q.dl(d);
  a.q_out = b.q_in_place ? a.q : b.q_out.dl(d);
  if (b.Hk) {
    a.k = b.k.dl(d);
    a.k_out = b.k_in_place ? a.k : b.k_out.dl(d);
  }
  if (!b.pos_shape.empty()) a.pos = index_tensor(b.pos, b.pos_shape, b.pos_t);
  if (!b.so_shape.empty()) a.seq_offsets = index_tensor(b.so, b.so_shape, b.so_t);
  if (!b.cu_shape.empty()) a.cu_seqlens = index_tensor(b.cu, b.cu_shape, b.cu_t);
  return a;
}

// The legacy call of one head vector at token t's positions: its output.
Bytes legacy_head(const Implementation& k, const RopeCase& c, size_t T, size_t t, const unsigned char* head) {
  const size_t nb = c.head_dim * dtype_size(c.dtype);
  Bytes in(head, head + nb), out(nb, 0);
  std::vector<int64_t> m(c.n_pos_axes);
  for (uint32_t a = 0; a < c.n_pos_axes; ++a) m[a] = c.positions[a * T + t];
  rc_rope_args a = c.args(in.data(), out.data(), 3);
  a.n_tokens = 1;
  a.n_heads = 1;
  a.positions = m.data();
  EXPECT_EQ(k.fn(&a), RC_OK);
  return out;
}

// Checks one tensor pair (q or k) after a tensor-form call: every head as its legacy call, gaps unchanged,
// the input unchanged out of place. Returns "" or what differs.
std::string check_pair(const Implementation& k, const RopeCase& c, size_t T, const Tensor& in_before,
                       const Tensor& in_after, const Tensor& out, bool in_place, const char* name) {
  const Tensor& o = in_place ? in_after : out;
  const std::vector<size_t> hi = heads_of(in_before), ho = heads_of(o);
  if (hi.size() != ho.size() || (T == 0 ? !hi.empty() : hi.size() % T != 0)) return "head count";
  const size_t H = T ? hi.size() / T : 0, nb = c.head_dim * dtype_size(c.dtype);
  for (size_t j = 0; j < hi.size(); ++j) {
    const Bytes want = legacy_head(k, c, T, j / H, in_before.buf.data() + hi[j]);
    if (std::memcmp(want.data(), o.buf.data() + ho[j], nb) != 0)
      return std::string(name) + " token " + std::to_string(j / H) + " head " + std::to_string(j % H) +
             ": not the legacy call's output";
  }
  const std::vector<bool> mask = element_mask(o, c.head_dim);
  for (size_t b = 0; b < o.buf.size(); ++b)
    if (!mask[b] && o.buf[b] != (in_place ? in_before.buf[b] : kGap))
      return std::string(name) + "'s output: byte " + std::to_string(b) + " outside its elements was written";
  if (!in_place && in_after.buf != in_before.buf) return std::string(name) + ": the input was modified";
  return "";
}

void expect_tensor_form_matches_legacy(const Implementation& k, uint64_t seed, int cases) {
  std::mt19937_64 rng(seed);
  int checked = 0, with_k = 0, implicit = 0, varlen = 0, tables = 0, rank4 = 0, strided = 0, empty = 0;
  for (int n = 0; n < cases; ++n) {
    Built b = random_tensor_call(rng);
    const Tensor q0 = b.q, k0 = b.k;
    const rc_rope_args a = tensor_args(b);
    const int rc = k.fn(&a);
    if (rc == RC_UNSUPPORTED) {  // a feature the kernel declines: nothing written
      EXPECT_EQ(b.q.buf, q0.buf) << n;
      continue;
    }
    ASSERT_EQ(rc, RC_OK) << k.name << " case " << n << ": " << b.what;
    const size_t T = b.tokens();
    std::string why = check_pair(k, b.c, T, q0, b.q, b.q_out, b.q_in_place, "q");
    if (why.empty() && b.Hk) why = check_pair(k, b.c, T, k0, b.k, b.k_out, b.k_in_place, "k");
    ASSERT_EQ(why, "") << k.name << " case " << n << ": " << b.what;
    ++checked;
    with_k += b.Hk > 0;
    implicit += b.pos_shape.empty();
    varlen += !b.cu_shape.empty();
    tables += bool(b.c.table);
    rank4 += b.rank == 4;
    empty += T == 0;
    strided += b.q.strides[b.q.shape.size() - 2] != int64_t(b.c.head_dim);
  }
  ::testing::Test::RecordProperty("checked", checked);
  EXPECT_GT(checked, cases / 2) << k.name;
  EXPECT_GT(with_k, cases / 4);
  EXPECT_GT(implicit, cases / 8);
  EXPECT_GT(varlen, cases / 8);
  EXPECT_GT(tables, cases / 4);
  EXPECT_GT(rank4, cases / 4);
  EXPECT_GT(strided, cases / 10);
  EXPECT_GT(empty, 0);
}

}  // namespace

TEST(TensorForm, ScalarKernelGivesEachHeadItsLegacyOutput) {
  expect_tensor_form_matches_legacy(*find_implementation("scalar"), 41, 400);
}

// Every SIMD target (and the dispatched one) takes the tensor form through the same adapter: its heads are
// its own legacy calls' (and those are the scalar kernel's bit for bit: tests/test_simd.cpp, SimdKernelsV3).
TEST(TensorForm, EverySimdTargetGivesEachHeadItsLegacyOutput) {
  int targets = 0;
  for (const Implementation& k : implementations())
    if (k.name == "simd" || k.name.rfind("simd-", 0) == 0) {
      expect_tensor_form_matches_legacy(k, 43, 120);
      ++targets;
    }
  EXPECT_GE(targets, 2);
}

// Each malformed call returns 2 and each declined one RC_UNSUPPORTED, and neither writes a byte.
TEST(TensorForm, MalformedAndDeclinedCallsWriteNothing) {
  const Implementation& k = *find_implementation("scalar");
  std::mt19937_64 rng(42);
  Built b;
  do b = random_tensor_call(rng);
  while (!(b.rank == 3 && !b.cu_shape.empty() && b.T > 0 && b.Hk && !b.q_in_place && !b.k_in_place && b.c.table &&
           !b.c.table->is_angle() && !b.pos_shape.empty() && b.c.n_pos_axes == 1));
  const Tensor q0 = b.q, qo0 = b.q_out, k0 = b.k, ko0 = b.k_out;
  {
    const rc_rope_args a = tensor_args(b);
    ASSERT_EQ(k.fn(&a), RC_OK) << b.what;
  }
  b.q = q0, b.q_out = qo0, b.k = k0, b.k_out = ko0;
  std::vector<int64_t> other = {b.T + 1, b.Hq, int64_t(b.c.head_dim)}, bad_strides = {1, 1, 2};
  int64_t big = 1 << 20;
  struct Edit {
    const char* what;
    int want;
    std::function<void(rc_rope_args&)> f;
  };
  std::vector<int64_t> cu_bad = {0, b.T + 1}, cu_bad_shape = {2};
  Bytes cu_bytes = index_bytes<int64_t>(cu_bad);
  const std::vector<Edit> edits = {
      {"q_out's shape differs", 2, [&](rc_rope_args& a) { a.q_out.shape = other.data(); }},
      {"k without k_out", 2, [&](rc_rope_args& a) { a.k_out = rc_tensor{}; }},
      {"k_out without k", 2, [&](rc_rope_args& a) { a.k = rc_tensor{}; }},
      {"q and q_out of rank 2", 2, [&](rc_rope_args& a) { a.q.ndim = a.q_out.ndim = 2; }},
      {"k's rank differs", 2, [&](rc_rope_args& a) { a.k.ndim = 2; }},
      {"an element stride other than 1", 2, [&](rc_rope_args& a) { a.q.strides = bad_strides.data(); }},
      {"q's dtype is not the call's", 2, [&](rc_rope_args& a) { a.q.dtype.bits = a.q.dtype.bits == 32 ? 16 : 32; }},
      {"a device other than the CPU", 2, [&](rc_rope_args& a) { a.k.device.device_type = 2; }},
      {"the legacy fields set too", 2, [&](rc_rope_args& a) { a.n_tokens = 1; }},
      {"cu_seqlens not ending at T", 2,
       [&](rc_rope_args& a) { a.cu_seqlens = index_tensor(cu_bytes, cu_bad_shape, {uint8_t(RC_DL_INT), 64, 1}); }},
      {"positions of another length", 2, [&](rc_rope_args& a) { a.pos.shape = &big; }},
      {"seq_offsets with explicit positions", 2, [&](rc_rope_args& a) { a.seq_offsets = a.pos; }},
      {"a position outside the table", 2,
       [&](rc_rope_args& a) {
         const int64_t top = *std::max_element(b.c.positions.begin(), b.c.positions.end());
         a.table.shape[0] = top;  // the largest position is one row past the table
         if (a.table2.data) a.table2.shape[0] = top;
       }},
      {"an attention factor with a cos/sin table (declined)", RC_UNSUPPORTED,
       [&](rc_rope_args& a) { a.attention_factor = 2.0; }},
  };
  for (const Edit& e : edits) {
    b.q = q0, b.q_out = qo0, b.k = k0, b.k_out = ko0;
    rc_rope_args a = tensor_args(b);
    const int64_t rows[2] = {b.c.abi_table_shape[0][0], b.c.abi_table_shape[1][0]};
    e.f(a);
    EXPECT_EQ(k.fn(&a), e.want) << e.what;
    b.c.abi_table_shape[0][0] = rows[0];
    b.c.abi_table_shape[1][0] = rows[1];
    EXPECT_EQ(b.q_out.buf, qo0.buf) << e.what;
    EXPECT_EQ(b.k_out.buf, ko0.buf) << e.what;
    EXPECT_EQ(b.q.buf, q0.buf) << e.what;
    EXPECT_EQ(b.k.buf, k0.buf) << e.what;
  }
}

// Implicit positions past INT64_MAX (a sequence offset near it) are malformed, not wrapped.
TEST(TensorForm, ImplicitPositionsThatOverflowAreMalformed) {
  RopeCase c;
  c.dtype = Dtype::f32;
  c.head_dim = c.rotary_dim = 4;
  c.n_heads = 1;
  c.positions = {0};
  c.input.assign(c.n_bytes(), 0);
  Tensor q;
  q.shape = {1, 2, 1, 4};
  q.strides = {8, 4, 4, 1};
  q.es = 4;
  q.buf.assign(32, kGap);
  Tensor out = q;
  rc_rope_args a = c.args(nullptr, nullptr, 3);
  a.in = a.out = nullptr;
  a.positions = nullptr;
  a.n_tokens = a.n_heads = 0;
  a.q = q.dl(Dtype::f32);
  a.q_out = out.dl(Dtype::f32);
  std::vector<int64_t> so{INT64_MAX}, so_shape{1};
  Bytes sob = index_bytes<int64_t>(so);
  a.seq_offsets = index_tensor(sob, so_shape, {uint8_t(RC_DL_INT), 64, 1});
  EXPECT_EQ(ropecheck_scalar_rope(&a), 2);  // token 1 of the sequence: INT64_MAX + 1
  EXPECT_EQ(out.buf, Bytes(32, kGap));
  so = {INT64_MAX - 1};
  sob = index_bytes<int64_t>(so);
  a.seq_offsets.data = sob.data();
  EXPECT_EQ(ropecheck_scalar_rope(&a), RC_OK);
}
