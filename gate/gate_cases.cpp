// The gate's case generators: the systematic matrix, the special values and the random cases (deterministic in
// the seed; `cases export` writes the same). docs/gate.md, "Rows".
#include "gate/gate.hpp"
#include "reference/frequency_rules.hpp"
#include "reference/reference.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

namespace ropecheck::gate {

namespace {

using Rng = Mt19937_64;  // std::mt19937_64's sequence, a block at a time (gate/mt64.hpp)

// A finite value of moderate magnitude, exactly representable in d.
template <typename Engine>
float random_value(Engine& rng, Dtype d) {
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-6, 6);
  // The draws in the order the released generator made them (its ldexp(mant(rng), ex(rng)) drew the exponent
  // first), so that a seed keeps its cases; the product is ldexp's, exactly (|e| <= 6).
  const int e = ex(rng);
  const double m = mant(rng);
  const double v = m * Format::pow2(e) * ((rng() & 1) ? -1.0 : 1.0);
  unsigned char b[4];  // (on the stack: one value of each random case's input at a time)
  store_f32(d, b, 0, float(v));
  return load_f32(d, b, 0);
}

// A plain case of the feature rows (v2:, v3:): its shape, base and positions; the input drawn later.
RopeCase feature_case(Dtype d, Layout l, uint32_t head_dim, uint32_t rotary_dim, uint32_t heads, double base,
                      std::vector<int64_t> positions) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = head_dim;
  c.rotary_dim = rotary_dim;
  c.n_heads = heads;
  c.base = base;
  c.positions = std::move(positions);
  return c;
}

// The model's shape on a generated case, before its input is drawn.
void take_model(RopeCase& c, const RopeCase* model, const RotarySlice* slice) {
  if (model) apply_case_template(*model, c);
  if (slice) apply_rotary_slice(*slice, c);
}

template <typename Engine>
void fill_random(RopeCase& c, Engine& rng) {
  c.input.assign(c.n_bytes(), 0);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, random_value(rng, c.dtype));
}

// Positions: 0, small, near powers of two, near max, in a shuffled order.
std::vector<int64_t> position_mix(Rng& rng, int64_t max_position, size_t n) {
  std::vector<int64_t> cand;
  const int top = max_position > 1 ? 63 - __builtin_clzll(uint64_t(max_position)) : 0;
  // Small positions keep every contract tight (a sign flip, a layout swap, an off-by-one position fail there
  // under the loosest one); the largest show angle drift.
  cand.push_back(0);
  for (int64_t p : {1, 2, 3, 7}) cand.push_back(std::min<int64_t>(p, max_position));
  cand.push_back(max_position);
  cand.push_back(std::max<int64_t>(0, max_position - 1));
  while (cand.size() < n) {
    const int k = top >= 1 ? int(rng() % uint64_t(top)) + 1 : 0;
    const int64_t p2 = int64_t(1) << k;
    const int64_t delta = int64_t(rng() % 3) - 1;
    cand.push_back(std::clamp<int64_t>(p2 + delta, 0, max_position));
    if (cand.size() < n) cand.push_back(int64_t(rng() % uint64_t(max_position + 1)));
  }
  cand.resize(n);
  std::shuffle(cand.begin(), cand.end(), rng);
  return cand;
}

template <typename Engine>
std::vector<double> rope_table(Engine& rng, uint32_t rotary_dim, double base) {
  // A llama-3-style scaled table: low frequencies divided by a factor.
  std::vector<double> t(rotary_dim / 2);
  const double factor = double(2 + rng() % 7);
  for (uint32_t i = 0; i < t.size(); ++i) {
    const double th = std::pow(base, -2.0 * i / rotary_dim);
    t[i] = i >= t.size() / 2 ? th / factor : th;
  }
  return t;
}

const std::pair<uint32_t, uint32_t> kDims[] = {
    {2, 2},    {6, 6},    {20, 20},  {64, 64},  {72, 72},   {80, 80},   {96, 96},  {128, 128},
    {256, 256}, {6, 2},   {20, 8},   {64, 32},  {80, 64},   {128, 64},  {96, 40},  {256, 128},
};

}  // namespace

std::vector<RopeCase> systematic_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed,
                                       std::vector<bool>* in_place, const RopeCase* model,
                                       const RotarySlice* slice) {
  Rng rng(seed * 0x9e3779b97f4a7c15ull + uint64_t(d) * 16 + uint64_t(l));
  std::vector<RopeCase> out;
  const double bases[] = {10000.0, 500000.0, 100.0, 1000000.0};
  const double scales[] = {1.0, 0.25, 1.0, 4.0, 1.0 / 32};
  size_t k = 0;
  for (const auto& [hd, rd] : kDims) {
    for (int ip = 0; ip < 2; ++ip, ++k) {
      RopeCase c;
      c.dtype = d;
      c.layout = l;
      c.head_dim = hd;
      c.rotary_dim = rd;
      c.n_heads = uint32_t(1 + k % 3);
      c.positions = position_mix(rng, max_position, hd >= 128 ? 6 : 8);
      c.base = bases[k % 4];
      c.position_scale = scales[(k / 2) % 5];
      if (k % 5 == 3) c.inv_freq = rope_table(rng, rd, c.base);
      take_model(c, model, slice);
      fill_random(c, rng);
      out.push_back(std::move(c));
      if (in_place) in_place->push_back(ip == 1);
    }
  }
  return out;
}

std::vector<V2Case> v2_feature_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed) {
  Rng rng(seed * 0xd1b54a32d192ed03ull + uint64_t(d) * 16 + uint64_t(l) + 7);
  std::vector<V2Case> out;
  auto make = [&](uint32_t hd, uint32_t rd, double base, size_t tokens) {
    return feature_case(d, l, hd, rd, 2, base, position_mix(rng, max_position, tokens));
  };
  auto add = [&](const char* feature, std::string what, RopeCase c, bool in_place = false) {
    fill_random(c, rng);
    out.push_back({feature, std::move(what), std::move(c), in_place});
  };
  // The attention factor a model's rule implies (HF), rounded to double: what a kernel is passed.
  auto rule_factor = [](const RopeCase& c) {
    return to_double(
        evaluate_frequency_rule(*c.freq_rule, c.rotary_dim, c.base,
                                c.rule_seq_len ? std::optional<uint64_t>(c.rule_seq_len) : std::nullopt)
            .attention_factor);
  };

  // Rotary offset: DeepSeek MLA's rope slice at the end of the head, and a slice in the middle.
  {
    RopeCase c = make(192, 64, 10000.0, 6);
    c.rotary_offset = 128;
    add("rotary offset", "rotary_offset 128, R 64 of head_dim 192 (DeepSeek MLA)", c);
    RopeCase m = make(40, 16, 500000.0, 5);
    m.rotary_offset = 10;
    add("rotary offset", "rotary_offset 10, R 16 of head_dim 40 (pass-through on both sides)", m, true);
  }
  // Position axes.
  {
    const auto axes3 = [&](RopeCase& c, bool negative) {
      const size_t n = c.positions.size();
      c.n_pos_axes = 3;
      std::vector<int64_t> p(3 * n);
      for (size_t t = 0; t < n; ++t) {
        p[t] = c.positions[t];  // temporal: the text position
        const int64_t span = std::min<int64_t>(max_position, 63);
        p[n + t] = int64_t(rng() % uint64_t(span + 1)) - (negative ? span / 2 : 0);
        p[2 * n + t] = int64_t(rng() % uint64_t(span + 1)) - (negative ? span / 2 : 0);
      }
      c.positions = std::move(p);
    };
    RopeCase s = make(128, 128, 1000000.0, 5);
    axes3(s, false);
    s.pair_axis.resize(64);
    for (uint32_t i = 0; i < 64; ++i) s.pair_axis[i] = uint8_t(i < 16 ? 0 : i < 40 ? 1 : 2);  // [16, 24, 24]
    add("position axes", "3 axes, Qwen2-VL sections [16, 24, 24]", s);
    RopeCase q = make(128, 128, 5000000.0, 5);
    axes3(q, false);
    q.pair_axis.resize(64);
    for (uint32_t i = 0; i < 64; ++i)  // Qwen3-VL interleaved [24, 20, 20]
      q.pair_axis[i] = uint8_t(i % 3 == 1 && i < 60 ? 1 : i % 3 == 2 && i < 60 ? 2 : 0);
    add("position axes", "3 axes, Qwen3-VL interleaved [24, 20, 20]", q, true);
    RopeCase v = make(64, 64, 10000.0, 6);
    {
      const size_t n = v.positions.size();
      const int64_t span = std::min<int64_t>(max_position, 63);
      v.n_pos_axes = 2;
      v.positions.resize(2 * n);
      for (int64_t& p : v.positions) p = int64_t(rng() % uint64_t(span + 1)) - span / 2;  // centred on 0
    }
    v.pair_axis.resize(32);
    for (uint32_t i = 0; i < 32; ++i) v.pair_axis[i] = uint8_t(i < 16 ? 0 : 1);
    add("position axes", "2 axes, an axial vision grid with negative positions", v);
  }
  // Attention factor.
  {
    RopeCase a = make(64, 64, 10000.0, 6);
    a.attention_factor = 1.1386294361119891;  // YaRN's 0.1 ln 4 + 1, rounded to double
    add("attention factor", "attention_factor 0.1 ln 4 + 1", a);
    RopeCase b = make(32, 24, 10000.0, 6);
    b.attention_factor = 0.7071067811865476;
    add("attention factor", "attention_factor 2^-1/2, partial rotary", b, true);
  }
  // Frequency rules (the kernel builds theta from the descriptor).
  {
    auto rule_case = [&](uint32_t hd, uint32_t rd, double base, FrequencyRule r, uint64_t seq_len, bool with_factor) {
      RopeCase c = make(hd, rd, base, 6);
      c.freq_rule = std::move(r);
      c.rule_seq_len = seq_len;
      if (with_factor) c.attention_factor = rule_factor(c);
      return c;
    };
    FrequencyRule lin;
    lin.type = FrequencyRuleType::linear;
    lin.factor = 8;
    add("frequency rules", "linear, factor 8", rule_case(64, 64, 10000.0, lin, 0, false));
    FrequencyRule ntk;
    ntk.type = FrequencyRuleType::ntk;
    ntk.factor = 4;
    add("frequency rules", "ntk, alpha 4", rule_case(64, 64, 10000.0, ntk, 0, false));
    FrequencyRule dyn;
    dyn.type = FrequencyRuleType::dynamic;
    dyn.factor = 2;
    dyn.max_position_embeddings = 2048;
    add("frequency rules", "dynamic, factor 2, L 2048, seq_len 6000", rule_case(64, 64, 10000.0, dyn, 6000, false));
    FrequencyRule y4;
    y4.type = FrequencyRuleType::yarn;
    y4.factor = 4;
    y4.original_max_position_embeddings = 32768;
    add("frequency rules", "yarn, factor 4 (Qwen2.5), with its attention factor",
        rule_case(128, 128, 1000000.0, y4, 0, true));
    FrequencyRule y32 = y4;
    y32.factor = 32;
    y32.original_max_position_embeddings = 4096;
    y32.truncate = false;
    add("frequency rules", "yarn, factor 32, truncate false (gpt-oss), with its attention factor",
        rule_case(64, 64, 150000.0, y32, 0, true), true);
    FrequencyRule l3;
    l3.type = FrequencyRuleType::llama3;
    l3.factor = 8;
    l3.original_max_position_embeddings = 8192;
    add("frequency rules", "llama3, factor 8 (Llama-3.1)", rule_case(128, 128, 500000.0, l3, 0, false));
    FrequencyRule lr;
    lr.type = FrequencyRuleType::longrope;
    lr.original_max_position_embeddings = 4096;
    lr.max_position_embeddings = 131072;
    for (uint32_t i = 0; i < 48; ++i) {
      lr.short_factor.push_back(1.0 + double(rng() % 1000) / 4000.0);
      lr.long_factor.push_back(1.0 + double(rng() % 1000) / 20.0);
    }
    add("frequency rules", "longrope, short factors (seq_len 1000)", rule_case(96, 96, 10000.0, lr, 1000, true));
    add("frequency rules", "longrope, long factors (seq_len 8192)", rule_case(96, 96, 10000.0, lr, 8192, true), true);
  }
  // Everything at once, as DeepSeek-V3 would call it: YaRN 40 on an interleaved slice at offset 128.
  {
    FrequencyRule y;
    y.type = FrequencyRuleType::yarn;
    y.factor = 40;
    y.original_max_position_embeddings = 4096;
    y.mscale = 1.0;
    y.mscale_all_dim = 1.0;
    RopeCase c = make(192, 64, 10000.0, 6);
    c.rotary_offset = 128;
    c.freq_rule = y;
    c.attention_factor = rule_factor(c);
    add("combined", "yarn 40 on a rope slice at offset 128 (DeepSeek-V3)", c);
  }
  return out;
}

std::vector<V2Case> v3_feature_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed) {
  Rng rng(seed * 0xbf58476d1ce4e5b9ull + uint64_t(d) * 16 + uint64_t(l) + 13);
  std::vector<V2Case> out;
  auto make = [&](uint32_t hd, uint32_t rd, uint32_t heads, size_t tokens) {
    return feature_case(d, l, hd, rd, heads, 10000.0, position_mix(rng, max_position, tokens));
  };
  auto k_values = [&](RopeCase& c) {
    TensorCall& tc = *c.tensor;
    tc.k_input.assign(c.n_tokens() * tc.k_heads * c.head_dim * dtype_size(d), 0);
    for (size_t k = 0; k < c.n_tokens() * tc.k_heads * c.head_dim; ++k)
      store_f32(d, tc.k_input.data(), k, random_value(rng, d));
  };
  auto add = [&](const char* feature, std::string what, RopeCase c, bool in_place = false) {
    fill_random(c, rng);
    if (c.tensor) k_values(c);
    out.push_back({feature, std::move(what), std::move(c), in_place});
  };
  auto table = [&](const RopeCase& c, TableKind k, Dtype td) {
    return *with_given_table(c, k, td, TablePipeline::correctly_rounded);
  };
  // Implicit positions: token s of sequence b at s + offsets[b] (sequences of `lengths`).
  auto implicit = [&](RopeCase& c, const std::vector<int64_t>& lengths, bool offsets) {
    TensorCall& tc = *c.tensor;
    tc.pos = PositionForm::implicit;
    c.positions.clear();
    for (size_t b = 0; b < lengths.size(); ++b) {
      const int64_t o = offsets ? std::min<int64_t>(max_position - lengths[b], int64_t(rng() % 5000)) : 0;
      if (offsets) tc.seq_offsets.push_back(std::max<int64_t>(o, 0));
      for (int64_t s = 0; s < lengths[b]; ++s) c.positions.push_back(s + (offsets ? tc.seq_offsets.back() : 0));
    }
  };

  // The inverse rotation (a backward kernel), with an attention factor it keeps, on a partial head.
  {
    RopeCase c = make(64, 64, 2, 6);
    c.direction = Direction::inverse;
    add("inverse", "inverse, head_dim 64", c);
    RopeCase a = make(80, 48, 3, 5);
    a.direction = Direction::inverse;
    a.attention_factor = 1.1386294361119891;
    add("inverse", "inverse, attention_factor 0.1 ln 4 + 1 (kept), partial rotary, in place", a, true);
  }
  // Caller-given tables of each kind: f32, and the data's own type (vLLM's cache follows the model's dtype).
  {
    add("tables", "cos/sin tables [P][R/2], f32 (FlashAttention, ONNX Runtime)",
        table(make(64, 64, 2, 6), TableKind::cos_sin_2, Dtype::f32));
    add("tables", "one cos|sin table [P][R] in the data's type (vLLM)",
        table(make(128, 128, 2, 5), TableKind::cos_sin_cat, d), true);
    add("tables", "full-width cos and sin tables [P][R], f32, partial rotary (Hugging Face, Liger)",
        table(make(96, 64, 2, 5), TableKind::cos_sin_full, Dtype::f32));
    add("tables", "an f32 angle table [P][R] (TransformerEngine)", table(make(64, 64, 2, 5), TableKind::angle, Dtype::f32));
    RopeCase inv = table(make(64, 32, 2, 5), TableKind::cos_sin_2, d);
    inv.direction = Direction::inverse;
    add("tables", "cos/sin tables in the data's type, inverse (FlashAttention's conjugate)", inv);
  }
  // Strides: rows and heads apart in input and output (a fused qkv buffer's slice), out of place and in place.
  {
    RopeCase c = make(64, 64, 4, 5);
    c.tensor = TensorCall{};
    c.tensor->pad[0][0] = 3;   // q: heads 3 elements apart beyond head_dim
    c.tensor->pad[0][1] = 64;  // q: tokens 64 more apart
    c.tensor->pad[1][1] = 7;   // q_out: its own token stride
    add("strides", "q's heads and tokens apart, q_out's tokens apart (a fused qkv slice)", c);
    RopeCase ip = make(128, 64, 2, 4);
    ip.tensor = TensorCall{};
    ip.tensor->pad[0][0] = 128;
    ip.tensor->pad[0][1] = 256;
    add("strides", "in place on a strided slice, partial rotary", ip, true);
    RopeCase i32 = make(64, 64, 2, 5);  // (kernels that take int32 positions only: ggml)
    i32.tensor = TensorCall{};
    i32.tensor->pos = PositionForm::int32;
    i32.tensor->pad[0][1] = 32;
    i32.tensor->pad[1][0] = 4;
    add("strides", "q's tokens apart, q_out's heads apart, int32 positions", i32);
  }
  // q and k in one call, their own head counts (GQA 4:1, MQA 8:1), k strided.
  {
    RopeCase g = make(64, 64, 4, 5);
    g.tensor = TensorCall{};
    g.tensor->k_heads = 1;
    g.tensor->pad[2][1] = 64;
    add("q and k", "q 4 heads, k 1 head (GQA), k's tokens apart", g);
    RopeCase m = make(128, 128, 8, 3);
    m.tensor = TensorCall{};
    m.tensor->k_heads = 2;
    m.tensor->pad[2][0] = 8;  // k's heads 8 elements apart beyond head_dim: not q's head stride
    add("q and k", "q 8 heads, k 2 heads 8 elements apart, in place", m, true);
    // Compact (vLLM's CPU kernel: heads head_dim apart, in place), and int32 positions (ggml).
    RopeCase v = make(64, 64, 4, 4);
    v.tensor = TensorCall{};
    v.tensor->k_heads = 2;
    add("q and k", "q 4 heads, k 2 heads, compact, in place", v, true);
    RopeCase i = make(64, 64, 4, 4);
    i.tensor = TensorCall{};
    i.tensor->k_heads = 2;
    i.tensor->pos = PositionForm::int32;
    i.tensor->pad[2][0] = 4;
    add("q and k", "q 4 heads, k 2 heads 4 elements apart, int32 positions", i);
  }
  // Sequences: varlen with a length-1 and an empty sequence, implicit positions; a batch of rank 4.
  {
    RopeCase v = make(64, 64, 2, 1);
    v.tensor = TensorCall{};
    v.tensor->cu_seqlens = {0, 3, 4, 4, 7};
    implicit(v, {3, 1, 0, 3}, true);
    add("sequences", "varlen cu_seqlens {0, 3, 4, 4, 7} (a length-1 and an empty sequence), implicit positions with "
        "offsets per sequence", v);
    RopeCase b = make(64, 32, 2, 1);
    b.tensor = TensorCall{};
    b.tensor->rank = 4;
    b.tensor->batch = 3;
    implicit(b, {2, 2, 2}, true);
    add("sequences", "rank 4: 3 sequences of 2 tokens, implicit positions with offsets, partial rotary", b);
    RopeCase e = make(64, 64, 2, 6);
    e.tensor = TensorCall{};
    e.tensor->rank = 4;
    e.tensor->batch = 2;
    e.tensor->k_heads = 1;
    add("sequences", "rank 4: 2 sequences of 3 tokens, explicit positions, with k", e);
  }
  // int32 positions and indices (ggml, TransformerEngine, MLX, FlashInfer).
  {
    RopeCase p = make(64, 64, 2, 6);
    for (int64_t& m : p.positions) m = std::min<int64_t>(m, INT32_MAX);
    p.tensor = TensorCall{};
    p.tensor->pos = PositionForm::int32;
    add("int32 positions", "explicit int32 positions", p);
    RopeCase v = make(64, 64, 2, 1);
    v.tensor = TensorCall{};
    v.tensor->cu_seqlens = {0, 2, 5};
    v.tensor->index_int32 = true;
    implicit(v, {2, 3}, true);
    add("int32 positions", "int32 cu_seqlens and seq_offsets, implicit positions", v);
  }
  // Element offsets past 2^31 (a kernel that computes them in 32 bits: int32 indices, Triton's default): q's
  // tokens 2^31 - 128 elements apart, so token 1's elements end at 2^31 - 1 (their byte offsets past 2^31 for
  // every dtype) and token 2 lies at 2^32 - 256, which as int32 is -256: a wrapped offset, of elements or of
  // bytes, falls in the guard page before q. The tensor is sparse in the host (isolation.cpp): only its elements'
  // pages are memory, every page between them a guard page. Last, so no other case's draw moves.
  {
    RopeCase w = make(64, 64, 2, 3);
    w.tensor = TensorCall{};
    w.tensor->pad[0][1] = uint32_t((uint64_t(1) << 31) - 128 - 2 * 64);
    add("strides", "q's tokens 2^31 - 128 elements apart, in place: element offsets up to 2^32 - 1", w, true);
    out.back().gate_only = true;
    // The same out of place, q_out laid out as q (its wrapped offsets fall in the guard page before q_out): a kernel
    // that takes out-of-place calls only sees it too.
    RopeCase o = make(64, 64, 2, 3);
    o.tensor = TensorCall{};
    o.tensor->pad[0][1] = o.tensor->pad[1][1] = uint32_t((uint64_t(1) << 31) - 128 - 2 * 64);
    add("strides", "q's and q_out's tokens 2^31 - 128 elements apart, out of place: element offsets up to 2^32 - 1", o);
    out.back().gate_only = true;
  }
  // A prefill from position 0 with the table real kernels assume: row r is position r, consecutive rows for the
  // consecutive positions (ONNX Runtime's and XNNPACK's callers build it so), a few rows past the last.
  {
    RopeCase p = make(64, 64, 2, 1);
    p.positions = {0, 1, 2, 3, 4, 5};
    p.table = build_table(p, TableKind::cos_sin_2, Dtype::f32, 9, TablePipeline::correctly_rounded);
    add("tables", "a prefill from position 0: rows 0..8 of positions 0..8, f32 cos and sin [P][R/2]", p);
    RopeCase q = make(64, 64, 2, 1);
    q.positions = {0, 1, 2, 3};
    q.table = build_table(q, TableKind::cos_sin_cat, d, 4, TablePipeline::correctly_rounded);
    add("tables", "a prefill from position 0: one cos|sin table [P][R] of the data's type, rows 0..3, in place", q, true);
  }
  return out;
}

std::vector<RopeCase> special_value_cases(Dtype d, Layout l, uint64_t seed, int64_t max_position,
                                          const RopeCase* model, const RotarySlice* slice) {
  Rng rng(seed * 31 + 7 + uint64_t(d) * 2 + uint64_t(l));
  const Format f = format_of(d);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f,
                            -0.0f,
                            float(std::ldexp(1.0, f.emin - f.precision + 1)),   // smallest subnormal
                            -float(std::ldexp(1.0, f.emin - 1)),                // a subnormal
                            float(f.max_finite()),                              // huge
                            -float(f.max_finite() / 2),
                            std::numeric_limits<float>::quiet_NaN(),
                            inf,
                            -inf,
                            float(std::ldexp(1.0, f.emin))};                    // smallest normal
  std::vector<RopeCase> out;
  const std::pair<uint32_t, uint32_t> dims[] = {{8, 6}, {8, 8}, {20, 20}};
  for (const auto& [hd, rd] : dims) {
    RopeCase c;
    c.dtype = d;
    c.layout = l;
    c.head_dim = hd;
    c.rotary_dim = rd;
    c.n_heads = 2;
    for (int64_t p : {0, 3, 77777, 1, 1000}) c.positions.push_back(std::min(p, max_position));
    take_model(c, model, slice);
    c.input.assign(c.n_bytes(), 0);
    for (size_t k = 0; k < c.n_elements(); ++k) {
      const float v = (rng() % 2) ? specials[rng() % std::size(specials)] : random_value(rng, d);
      store_f32(d, c.input.data(), k, v);
    }
    out.push_back(std::move(c));
  }
  return out;
}

namespace {
template <typename Engine>
RopeCase random_case_of(Dtype d, Layout l, int64_t max_position, Engine& rng, const RopeCase* model,
                        const RotarySlice* slice) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = uint32_t(2 + rng() % 255);
  c.rotary_dim = 2 * uint32_t(1 + rng() % (c.head_dim / 2));
  if (rng() % 2) c.rotary_dim = c.head_dim - c.head_dim % 2;
  c.n_heads = uint32_t(1 + rng() % 4);
  const size_t nt = 1 + rng() % 6;
  for (size_t t = 0; t < nt; ++t) {
    // log-uniform positions in [0, max]
    const double lg = std::uniform_real_distribution<double>(0, std::log2(double(max_position) + 1))(rng);
    c.positions.push_back(std::min<int64_t>(max_position, int64_t(std::exp2(lg)) - 1));
  }
  // Half the time a base models ship (kernels with a fixed base would otherwise accept almost no random
  // case: llama2.c's, docs/real-kernels.md), else log-uniform in [2, 2e6].
  const double common_bases[] = {10000.0, 500000.0, 1000000.0, 100000.0};
  c.base = rng() % 2 ? common_bases[rng() % std::size(common_bases)]
                     : std::exp(std::uniform_real_distribution<double>(std::log(2.0), std::log(2e6))(rng));
  if (rng() % 4 == 0) c.position_scale = std::ldexp(1.0, int(rng() % 7) - 4);
  if (rng() % 5 == 0) c.inv_freq = rope_table(rng, c.rotary_dim, c.base);
  take_model(c, model, slice);
  fill_random(c, rng);
  return c;
}
}  // namespace

// (the same draws from either engine: they give the same sequence)
RopeCase random_case(Dtype d, Layout l, int64_t max_position, std::mt19937_64& rng, const RopeCase* model,
                     const RotarySlice* slice) {
  return random_case_of(d, l, max_position, rng, model, slice);
}

RopeCase random_case(Dtype d, Layout l, int64_t max_position, Mt19937_64& rng, const RopeCase* model,
                     const RotarySlice* slice) {
  return random_case_of(d, l, max_position, rng, model, slice);
}

std::vector<RopeCase> sequence_cases(const std::vector<std::pair<Dtype, Layout>>& combos, int64_t max_position,
                                     uint64_t seed, const RopeCase* model, const RotarySlice* slice) {
  if (combos.empty()) return {};
  Rng rng(seed ^ 0x5e9e0cull);
  const auto [d0, l0] = combos[0];
  RopeCase base;
  base.dtype = d0;
  base.layout = l0;
  base.head_dim = 64;
  base.rotary_dim = 64;
  base.n_heads = 2;
  base.base = 10000;
  std::vector<RopeCase> variants;
  auto variant = [&](auto change) {
    RopeCase v = base;
    change(v);
    variants.push_back(v);
  };
  if (!model) {  // a model fixes these
    variant([](RopeCase& v) { v.base = 500000; });
    variant([](RopeCase& v) { v.rotary_dim = 32; });
    variant([](RopeCase& v) { v.head_dim = v.rotary_dim = 128; });
    variant([](RopeCase& v) { v.head_dim = 96; });
    variant([](RopeCase& v) { v.position_scale = 0.25; });
    variant([&](RopeCase& v) { v.inv_freq = rope_table(rng, v.rotary_dim, v.base); });
  }
  for (const auto& [d, l] : combos)
    if (d != d0 || l != l0) variant([&, d = d, l = l](RopeCase& v) {
      v.dtype = d;
      v.layout = l;
    });
  // base, v1, base, v2, ..., base, vn, then vn .. v1 back to back.
  std::vector<const RopeCase*> order;
  for (const RopeCase& v : variants) {
    order.push_back(&base);
    order.push_back(&v);
  }
  for (auto it = variants.rbegin(); it != variants.rend(); ++it) order.push_back(&*it);
  order.push_back(&base);
  std::vector<RopeCase> out;
  for (const RopeCase* shape : order) {
    RopeCase c = *shape;
    c.positions = position_mix(rng, max_position, 4);
    if (model) {
      const Layout l = c.layout;  // a layout variant keeps its layout
      take_model(c, model, nullptr);
      c.layout = l;
    } else if (slice) {
      apply_rotary_slice(*slice, c);
    }
    fill_random(c, rng);
    out.push_back(std::move(c));
  }
  return out;
}

RopeCase repeat_case(Dtype d, Layout l, int64_t max_position, uint64_t seed, const RopeCase* model,
                     const RotarySlice* slice) {
  Rng rng(seed ^ 0x3e9ea7ull);
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = 80;
  c.rotary_dim = 64;
  c.n_heads = 2;
  c.base = 10000;
  c.positions = position_mix(rng, max_position, 3);
  take_model(c, model, slice);
  fill_random(c, rng);
  return c;
}

std::vector<V2Case> v4_feature_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed) {
  Rng rng(seed * 0x94d049bb133111ebull + uint64_t(d) * 16 + uint64_t(l) + 17);
  std::vector<V2Case> out;
  auto make = [&](uint32_t hd, uint32_t rd, uint32_t heads, size_t tokens) {
    return feature_case(d, l, hd, rd, heads, 10000.0, position_mix(rng, max_position, tokens));
  };
  auto per_token = [&](RopeCase c, TableKind k, Dtype td) {
    return *with_given_table(c, k, td, TablePipeline::correctly_rounded, nullptr, GivenRows::by_token);
  };
  auto add = [&](const char* what, RopeCase c, bool in_place = false) {
    fill_random(c, rng);
    if (c.tensor && c.tensor->k_heads) {
      TensorCall& tc = *c.tensor;
      tc.k_input.assign(c.n_tokens() * tc.k_heads * c.head_dim * dtype_size(d), 0);
      for (size_t k = 0; k < c.n_tokens() * tc.k_heads * c.head_dim; ++k)
        store_f32(d, tc.k_input.data(), k, random_value(rng, d));
    }
    out.push_back({"per-token tables", what, std::move(c), in_place});
  };
  // Each kind, a row per token (a position repeated: its rows repeat), f32 and the data's type, the flat form.
  {
    RopeCase c = make(64, 64, 2, 6);
    c.positions[3] = c.positions[1];
    add("full-width cos and sin [T][R], f32, the flat form (Hugging Face's cos[position_ids])",
        per_token(c, TableKind::cos_sin_full, Dtype::f32));
    add("cos and sin [T][R/2] in the data's type, partial rotary, in place",
        per_token(make(96, 64, 2, 5), TableKind::cos_sin_2, d), true);
    add("one cos|sin table [T][R], f32", per_token(make(64, 64, 1, 5), TableKind::cos_sin_cat, Dtype::f32));
    add("f32 angles [T][R]", per_token(make(64, 64, 2, 4), TableKind::angle, Dtype::f32));
  }
  // The tensor form: q and k with their own head counts (Liger), a {B, S} batch with one set of rows for every
  // sequence ({1, S, R}: the same positions in each) and with rows of its own per sequence, implicit positions, the
  // inverse.
  {
    RopeCase g = make(64, 64, 4, 5);
    g.tensor = TensorCall{};
    g.tensor->k_heads = 2;
    add("q 4 heads and k 2 heads, full-width tables in the data's type", per_token(g, TableKind::cos_sin_full, d));
    RopeCase b = make(64, 64, 2, 3);
    b.positions = {0, 1, 2, 0, 1, 2};  // two sequences from 0: one {1, S, R} table for both
    b.tensor = TensorCall{};
    b.tensor->rank = 4;
    b.tensor->batch = 2;
    b.tensor->k_heads = 1;
    add("rank 4, 2 sequences from position 0 sharing one {1, S, R} table, k 1 head, in place",
        per_token(b, TableKind::cos_sin_full, Dtype::f32), true);
    RopeCase r = make(64, 32, 2, 6);
    r.tensor = TensorCall{};
    r.tensor->rank = 4;
    r.tensor->batch = 2;
    add("rank 4, 2 sequences with rows of their own {B, S, R}, partial rotary",
        per_token(r, TableKind::cos_sin_cat, Dtype::f32));
    RopeCase v = make(64, 64, 2, 1);
    v.tensor = TensorCall{};
    v.tensor->cu_seqlens = {0, 2, 5};
    v.tensor->pos = PositionForm::implicit;
    v.tensor->seq_offsets = {7, 1000};
    v.positions = {7, 8, 1000, 1001, 1002};
    add("varlen sequences, implicit positions, a row per token", per_token(v, TableKind::cos_sin_2, Dtype::f32));
    RopeCase i = per_token(make(64, 64, 2, 5), TableKind::cos_sin_full, d);
    i.direction = Direction::inverse;
    add("the inverse (Liger's backward: sin negated)", i);
  }
  return out;
}

int64_t long_table_max_position(const RopeCase* model, const RotarySlice* slice) {
  // A row of 8 f32 values (rotary_dim 8), or the model's rotary_dim of them, or the widest the slice gives the row's
  // heads (16 and 12 elements, raised to one the slice has): (rows + 2^31) rows within 2^42 bytes.
  uint32_t rd = model ? model->rotary_dim : kLongTableRotaryDim;
  if (!model && slice)
    for (uint32_t hd : {2 * kLongTableRotaryDim, kLongTableRotaryDim + 4})
      if (const uint32_t h = slice->head_dim_from(hd)) rd = std::max(rd, slice->rotary_dim_of(h));
  const uint64_t row = uint64_t(rd) * 4;
  return std::min<int64_t>(kLongTableMaxPosition, int64_t((uint64_t(1) << 42) / row - (uint64_t(1) << 31)));
}

std::vector<std::pair<RopeCase, bool>> long_position_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed,
                                                           const RopeCase* model, bool for_tables,
                                                           const RotarySlice* slice) {
  std::vector<std::pair<RopeCase, bool>> out;
  if (for_tables) max_position = std::min(max_position, long_table_max_position(model, slice));
  if (max_position < kLongPositionsFrom) return out;
  Rng rng(seed * 0x94d049bb133111ebull + uint64_t(d) * 16 + uint64_t(l) + 11);
  const int64_t int32_top = int64_t(INT32_MAX);
  // Log-uniform in [lo, hi], forced odd (an odd integer above 2^24 is not an f32).
  auto draw = [&](int64_t lo, int64_t hi) {
    const double lg = std::uniform_real_distribution<double>(std::log2(double(lo)), std::log2(double(hi)))(rng);
    return std::clamp<int64_t>(int64_t(std::exp2(lg)) | 1, lo, hi);
  };
  auto make = [&](uint32_t hd, uint32_t rd, double base, std::vector<int64_t> positions, bool in_place) {
    for (int64_t& p : positions) p = std::min(p, max_position);
    if (for_tables) {  // narrow rows: a table indexed by these positions spans (position + 1) rows
      hd = hd == 64 ? 2 * kLongTableRotaryDim : kLongTableRotaryDim + 4;
      rd = kLongTableRotaryDim;
    }
    RopeCase c;
    c.dtype = d;
    c.layout = l;
    c.head_dim = hd;
    c.rotary_dim = rd;
    c.n_heads = 2;
    c.base = base;
    c.positions = std::move(positions);
    take_model(c, model, slice);
    fill_random(c, rng);
    out.push_back({std::move(c), in_place});
  };
  // Within int32, where f32 no longer holds every integer: a position rounded to f32 moves by up to 64 (a whole
  // radian and more on the fastest pairs), 2^31 - 1 rounds up to 2^31. (For a table: 2^31 - 2, so that the table's
  // 2^31 - 1 rows fit the int a kernel may keep its row count in: ONNX Runtime's max_sequence_length.)
  const int64_t top32 = std::min(max_position, for_tables ? int32_top - 1 : int32_top);
  make(64, 64, 10000.0,
       {top32, (int64_t(1) << 25) + 1, (int64_t(1) << 28) + 3,
        (int64_t(1) << 30) + 5, draw(kLongPositionsFrom, top32), std::max<int64_t>(kLongPositionsFrom, top32 - 2)},
       false);
  if (max_position <= int32_top) return out;
  // Beyond int32: truncated to 32 bits, 2^31 becomes -2^31 (or 2^31 unsigned) and 2^32 + k becomes k.
  std::vector<int64_t> beyond = {int64_t(1) << 31, (int64_t(1) << 31) + 1, (int64_t(1) << 32) - 1,
                                 (int64_t(1) << 32) + 1, (int64_t(1) << 33) + 3, draw(int64_t(1) << 31, max_position),
                                 max_position, max_position - 1};
  make(64, 64, 10000.0, beyond, false);
  // The same range on a partial head with another base, in place.
  std::shuffle(beyond.begin(), beyond.end(), rng);
  beyond.resize(6);
  make(96, 64, 500000.0, beyond, true);
  return out;
}

std::vector<std::pair<RopeCase, bool>> large_cases(const std::vector<std::pair<Dtype, Layout>>& combos,
                                                   int64_t max_position, uint64_t seed,
                                                   const RopeCase* model, const RotarySlice* slice) {
  std::vector<std::pair<RopeCase, bool>> out;
  Rng rng(seed ^ 0x1a7e5ull);
  struct Shape {
    uint32_t tokens, heads, head_dim, rotary_dim;
  };
  // Many heads per token keep the exact reference's cost (one cos/sin per distinct position and pair) low.
  const Shape shapes[] = {{128, 16, 128, 128}, {128, 16, 576, 64}, {32, 8, 576, 576}};
  // Each shape once, the accepted dtype x layout combinations taking turns (with all six accepted: f32
  // interleaved, f16 half-split, bf16 interleaved).
  for (size_t k = 0; k < std::size(shapes) && !combos.empty(); ++k) {
    const auto [d, l] = combos[(2 * k + k % 2) % combos.size()];
    {
      const Shape& sh = shapes[k];
      RopeCase c;
      c.dtype = d;
      c.layout = l;
      c.head_dim = sh.head_dim;
      c.rotary_dim = sh.rotary_dim;
      c.n_heads = sh.heads;
      c.base = k % 2 ? 10000 : 1000000;
      // A prefill: consecutive positions from a random start.
      const int64_t span = int64_t(sh.tokens);
      const int64_t start = max_position > span ? int64_t(rng() % uint64_t(max_position - span + 1)) : 0;
      for (int64_t t = 0; t < span; ++t) c.positions.push_back(std::min(max_position, start + t));
      take_model(c, model, slice);
      fill_random(c, rng);
      out.push_back({std::move(c), k % 2 == 1});
    }
  }
  return out;
}

}  // namespace ropecheck::gate
