#include "gate/case_json.hpp"

#include "gate/npy.hpp"
#include "properties/predicates.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ropecheck::gate {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

const json& need(const json& j, const char* key) {
  if (!j.is_object()) fail("expected a JSON object");
  auto it = j.find(key);
  if (it == j.end()) fail(std::string("missing field '") + key + "'");
  return *it;
}

template <class T>
T need_uint(const json& j, const char* key, T max) {
  const json& v = need(j, key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    fail(std::string("field '") + key + "' must be a non-negative integer");
  const uint64_t x = v.get<uint64_t>();
  if (x > uint64_t(max)) fail(std::string("field '") + key + "' is too large (" + std::to_string(x) + ")");
  return T(x);
}

// The same for a field of a nested object, named by its path in messages ("tensor.rank"): a malformed v3 field
// is then told from the case's own field of the same name.
const json& need_at(const json& j, const std::string& path, const char* key) {
  if (!j.is_object()) fail("field '" + path + "' must be an object");
  auto it = j.find(key);
  if (it == j.end()) fail("missing field '" + path + "." + key + "'");
  return *it;
}

template <class T>
T need_uint_at(const json& j, const std::string& path, const char* key, T max) {
  const json& v = need_at(j, path, key);
  const std::string name = path + "." + key;
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    fail("field '" + name + "' must be a non-negative integer");
  const uint64_t x = v.get<uint64_t>();
  if (x > uint64_t(max)) fail("field '" + name + "' is too large (" + std::to_string(x) + ", at most " +
                              std::to_string(uint64_t(max)) + ")");
  return T(x);
}

bool need_bool_at(const json& j, const std::string& path, const char* key) {
  const json& v = need_at(j, path, key);
  if (!v.is_boolean()) fail("field '" + path + "." + key + "' must be true or false");
  return v.get<bool>();
}

// Elements of a dtype as their bit patterns (input_bits, tensor.k_input_bits): exact, NaN payloads included.
json bits_to_json(Dtype d, const Bytes& b) {
  json::array_t bits;
  bits.reserve(b.size() / dtype_size(d));
  for (size_t k = 0; k < b.size() / dtype_size(d); ++k) bits.emplace_back(load_bits(d, b.data(), k));
  return json(std::move(bits));
}

// Reads `n` bit patterns of dtype d from field `name` into out; `of` says whose count n is in the message.
void bits_from_json(const json& bits, const std::string& name, Dtype d, uint64_t n, const std::string& of, Bytes& out) {
  if (!bits.is_array()) fail("field '" + name + "' must be an array");
  // (n is compared before anything is allocated: a count in the file never sizes a buffer of its own)
  if (bits.size() != n)
    fail("field '" + name + "' has " + std::to_string(bits.size()) + " elements, " + of + " has " + std::to_string(n));
  out.assign(n * dtype_size(d), 0);
  const uint64_t maxbits = d == Dtype::f32 ? 0xffffffffull : 0xffffull;
  for (size_t k = 0; k < bits.size(); ++k) {
    if (!bits[k].is_number_unsigned() || bits[k].get<uint64_t>() > maxbits)
      fail(name + "[" + std::to_string(k) + "] is not a bit pattern of " + std::string(to_string(d)));
    store_bits(d, out.data(), k, uint32_t(bits[k].get<uint64_t>()));
  }
}

// Names of the v3 enums as to_string (core/rope_case.cpp) writes them.
std::optional<Direction> parse_direction(const std::string& s) {
  for (Direction d : {Direction::forward, Direction::inverse})
    if (to_string(d) == s) return d;
  return std::nullopt;
}

std::optional<TableKind> parse_table_kind(const std::string& s) {
  for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full, TableKind::angle})
    if (to_string(k) == s) return k;
  return std::nullopt;
}

std::optional<PositionForm> parse_position_form(const std::string& s) {
  for (PositionForm f : {PositionForm::int64, PositionForm::int32, PositionForm::implicit})
    if (to_string(f) == s) return f;
  return std::nullopt;
}

// The caller's table (ABI v3): its kind, dtype, rows, and the values per (row, pair) as hex floats; an angle
// table has no "sin".
json table_to_json(const CosSinTable& t) {
  json j;
  j["kind"] = std::string(to_string(t.kind));
  j["dtype"] = std::string(to_string(t.dtype));
  j["rows"] = t.rows;
  // (optional keys, written only when set: a replay file of an earlier release reads as before)
  if (!t.stored.empty()) j["stored_rows"] = t.stored;  // a sparse table: the rows kept, cos and sin in their order
  if (t.by_token) j["by_token"] = true;                // ABI v4: laid out with a row per token
  json cv = json::array(), sv = json::array();
  for (double v : t.cos) cv.push_back(double_to_text(v));
  j["cos"] = cv;
  if (!t.is_angle() || !t.sin.empty()) {  // (a malformed angle table's sin kept, for validate() to name)
    for (double v : t.sin) sv.push_back(double_to_text(v));
    j["sin"] = sv;
  }
  return j;
}

// Values, dtype and the positions' rows are validate()'s (validate_table); here the shape, before anything
// is allocated: rows x rotary_dim/2 values in each array, at most 2^24.
CosSinTable table_from_json(const json& j, uint32_t rotary_dim) {
  if (!j.is_object()) fail("field 'table' must be an object");
  CosSinTable t;
  const json& k = need_at(j, "table", "kind");
  const auto kind = k.is_string() ? parse_table_kind(k.get<std::string>()) : std::nullopt;
  if (!kind) fail("field 'table.kind' must be \"cos-sin-2\", \"cos-sin-cat\", \"cos-sin-full\" or \"angle\"");
  t.kind = *kind;
  const json& dt = need_at(j, "table", "dtype");
  const auto d = dt.is_string() ? parse_dtype(dt.get<std::string>()) : std::nullopt;
  if (!d) fail("field 'table.dtype' must be \"f32\", \"f16\" or \"bf16\"");
  t.dtype = *d;
  constexpr uint64_t kMaxValues = uint64_t(1) << 24;
  if (j.contains("stored_rows")) {
    // A sparse table: its rows may reach 2^62 (positions past 2^31 indexing it), its kept rows at most 2^24 values.
    t.rows = need_uint_at<uint64_t>(j, "table", "rows", uint64_t(1) << 62);
    const json& st = j["stored_rows"];
    if (!st.is_array() || st.empty() || st.size() > kMaxValues)
      fail("field 'table.stored_rows' must be a non-empty array of the rows a sparse table keeps");
    for (const json& x : st) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0)
        fail("field 'table.stored_rows' must hold row numbers (integers >= 0)");
      t.stored.push_back(x.get<int64_t>());
    }
  } else {
    t.rows = need_uint_at<uint64_t>(j, "table", "rows", kMaxValues);
  }
  if (j.contains("by_token")) {
    if (!j["by_token"].is_boolean()) fail("field 'table.by_token' must be true or false");
    t.by_token = j["by_token"].get<bool>();
  }
  const uint64_t np = rotary_dim / 2, kept = t.stored.empty() ? t.rows : t.stored.size(), n = kept * np;
  if (n > kMaxValues)
    fail("field 'table.rows': " + std::to_string(kept) + " rows of rotary_dim/2 = " + std::to_string(np) +
         " values is more than 2^24 values");
  auto values = [&](const char* key, std::vector<double>& out) {
    const std::string name = std::string("table.") + key;
    const json& a = need_at(j, "table", key);
    if (!a.is_array()) fail("field '" + name + "' must be an array of hex-float strings");
    if (a.size() != n)
      fail("field '" + name + "' has " + std::to_string(a.size()) + " values, expected rows x rotary_dim/2 = " +
           std::to_string(kept) + " x " + std::to_string(np) + " = " + std::to_string(n));
    out.reserve(n);
    for (const json& x : a) out.push_back(double_from_json(x, name.c_str()));
  };
  values("cos", t.cos);
  if (!t.is_angle()) {
    values("sin", t.sin);
  } else if (j.contains("sin") && !(j["sin"].is_array() && j["sin"].empty())) {
    fail("field 'table.sin': an angle table has angles only (\"sin\" absent or empty)");
  }
  return t;
}

// The tensor form (ABI v3): every field written, k's input as bit patterns of the case's dtype.
json tensor_to_json(const TensorCall& tc, Dtype d) {
  json j;
  j["rank"] = tc.rank;
  j["batch"] = tc.batch;
  j["k_heads"] = tc.k_heads;
  j["pos"] = std::string(to_string(tc.pos));
  j["axes_first"] = tc.axes_first;
  j["seq_offsets"] = tc.seq_offsets;
  j["cu_seqlens"] = tc.cu_seqlens;
  j["index_int32"] = tc.index_int32;
  json pad = json::array();
  for (const auto& p : tc.pad) pad.push_back({p[0], p[1], p[2]});
  j["pad"] = pad;
  j["k_input_bits"] = bits_to_json(d, tc.k_input);
  return j;
}

// "rank" and "pos" are required; the rest default to their neutral values (a hand-written file may leave them
// out). The sequences' consistency with the tokens and positions is validate()'s (validate_tensor); here each
// field's type and range, and k's element count (n_tokens x k_heads x head_dim) before it is allocated.
TensorCall tensor_from_json(const json& j, const RopeCase& c) {
  if (!j.is_object()) fail("field 'tensor' must be an object");
  TensorCall tc;
  const json& rk = need_at(j, "tensor", "rank");
  if (!rk.is_number_integer() || (rk.get<int64_t>() != 3 && rk.get<int64_t>() != 4))
    fail("field 'tensor.rank' must be 3 or 4 (got " + rk.dump() + ")");
  tc.rank = uint32_t(rk.get<int64_t>());
  constexpr uint64_t kMaxTokens = uint64_t(1) << 24;  // as 'positions'
  if (j.contains("batch")) tc.batch = need_uint_at<uint64_t>(j, "tensor", "batch", kMaxTokens);
  if (j.contains("k_heads")) tc.k_heads = need_uint_at<uint32_t>(j, "tensor", "k_heads", 1u << 16);  // as n_heads
  const json& ps = need_at(j, "tensor", "pos");
  const auto pos = ps.is_string() ? parse_position_form(ps.get<std::string>()) : std::nullopt;
  if (!pos) fail("field 'tensor.pos' must be \"int64\", \"int32\" or \"implicit\"");
  tc.pos = *pos;
  if (j.contains("axes_first")) tc.axes_first = need_bool_at(j, "tensor", "axes_first");
  if (j.contains("index_int32")) tc.index_int32 = need_bool_at(j, "tensor", "index_int32");
  auto ints = [&](const char* key, std::vector<int64_t>& out) {
    if (!j.contains(key)) return;
    const json& a = j[key];
    const std::string name = std::string("tensor.") + key;
    if (!a.is_array()) fail("field '" + name + "' must be an array of integers");
    if (a.size() > kMaxTokens + 1) fail("field '" + name + "' is too long (" + std::to_string(a.size()) + ")");
    for (const json& x : a) {
      if (!x.is_number_integer()) fail("field '" + name + "' must hold integers only");
      out.push_back(x.get<int64_t>());
    }
  };
  ints("seq_offsets", tc.seq_offsets);
  ints("cu_seqlens", tc.cu_seqlens);
  if (j.contains("pad")) {
    const json& pad = j["pad"];
    if (!pad.is_array() || pad.size() != 4)
      fail("field 'tensor.pad' must be 4 arrays (q, q_out, k, k_out) of 3 stride paddings");
    for (int w = 0; w < 4; ++w) {
      if (!pad[w].is_array() || pad[w].size() != 3)
        fail("field 'tensor.pad[" + std::to_string(w) + "]' must be an array of 3 stride paddings");
      for (int p = 0; p < 3; ++p) {
        const json& x = pad[w][p];
        // (up to 2^31: the gate's wide-span case; its host lays such tensors out sparse)
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > (int64_t(1) << 31))
          fail("field 'tensor.pad[" + std::to_string(w) + "][" + std::to_string(p) + "]' must be an integer 0..2^31");
        tc.pad[w][p] = uint32_t(x.get<int64_t>());
      }
    }
  }
  // Each tensor's span (its last element's offset + 1) below 2^34 elements: computed as RopeCase::tensor_layout does,
  // in double (the strides grow with the pads past what int64 holds; a bound needs no exact value).
  {
    const double T = double(c.n_tokens()), B = tc.rank == 4 ? double(tc.batch) : 1.0;
    for (int w = 0; w < 4; ++w) {
      const double H = w >= 2 ? tc.k_heads : c.n_heads, D = c.head_dim;
      if (T < 1 || H < 1 || D < 1 || B < 1) continue;  // (no element; validate() says what else is wrong)
      const double hs = D + tc.pad[w][0], ts = H * hs + tc.pad[w][1], S = std::max(1.0, std::floor(T / B));
      double span = (H - 1) * hs + D;
      if (tc.rank == 4) span += (B - 1) * (S * ts + tc.pad[w][2]) + (S - 1) * ts;
      else span += (T - 1) * ts;
      if (span > std::ldexp(1.0, 34))
        fail("field 'tensor.pad': the case's tensors would span more than 2^34 elements");
    }
  }
  // (each factor is bounded above: n_tokens 2^24, k_heads 2^16, head_dim 2^20; the product fits in 64 bits)
  const uint64_t k_elems = uint64_t(c.n_tokens()) * tc.k_heads * c.head_dim;
  if (double(k_elems) > double(1u << 28)) fail("the case's k is too large (" + std::to_string(k_elems) + " elements)");
  if (j.contains("k_input_bits") || k_elems)
    bits_from_json(need_at(j, "tensor", "k_input_bits"), "tensor.k_input_bits", c.dtype, k_elems,
                   "the case's k (n_tokens x k_heads x head_dim)", tc.k_input);
  return tc;
}

}  // namespace

namespace {

// Counts values and depth; stops the parse (returns false) beyond the limits.
struct BoundedSax : nlohmann::json_sax<json> {
  uint64_t max_values, values = 0;
  int depth = 0;
  std::string error;
  explicit BoundedSax(uint64_t m) : max_values(m) {}
  bool value() {
    if (++values > max_values) {
      error = "more than " + std::to_string(max_values) + " JSON values";
      return false;
    }
    return true;
  }
  bool open() {
    if (++depth > 64) {
      error = "nested more than 64 deep";
      return false;
    }
    return value();
  }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { --depth; return true; }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { --depth; return true; }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& e) override {
    error = std::string("not valid JSON: ") + e.what() + " (byte " + std::to_string(pos) + ")";
    return false;
  }
};

}  // namespace

json parse_json_bounded(const std::string& text, uint64_t max_values, const std::string& what) {
  BoundedSax sax(max_values);
  if (!json::sax_parse(text, &sax) || !sax.error.empty())
    fail(what + ": " + (sax.error.empty() ? std::string("not valid JSON") : sax.error));
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(what + ": not valid JSON: " + e.what());
  }
}

std::string double_to_text(double v) { return hexfloat(v); }

double double_from_json(const json& j, const char* what) {
  if (j.is_number()) return j.get<double>();
  if (!j.is_string()) fail(std::string("field '") + what + "' must be a number or a hex-float string");
  const std::string s = j.get<std::string>();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) fail(std::string("field '") + what + "': not a number: '" + s + "'");
  return v;
}

json case_params_to_json(const RopeCase& c) {
  json j;
  j["dtype"] = std::string(to_string(c.dtype));
  j["layout"] = std::string(to_string(c.layout));
  j["head_dim"] = c.head_dim;
  j["rotary_dim"] = c.rotary_dim;
  j["n_heads"] = c.n_heads;
  j["n_tokens"] = c.n_tokens();
  j["positions"] = c.positions;
  j["base"] = double_to_text(c.base);
  j["base_decimal"] = c.base;
  j["position_scale"] = double_to_text(c.position_scale);
  j["position_scale_decimal"] = c.position_scale;
  json t = json::array();
  for (double f : c.inv_freq) t.push_back(double_to_text(f));
  j["inv_freq"] = t;
  // ABI v2 fields, written only when not neutral (a v1 case reads as before).
  if (c.rotary_offset) j["rotary_offset"] = c.rotary_offset;
  if (c.n_pos_axes != 1) j["n_pos_axes"] = c.n_pos_axes;
  if (!c.pair_axis.empty()) {
    json a = json::array();
    for (uint8_t x : c.pair_axis) a.push_back(int(x));
    j["pair_axis"] = a;
  }
  if (c.attention_factor != 1.0) {
    j["attention_factor"] = double_to_text(c.attention_factor);
    j["attention_factor_decimal"] = c.attention_factor;
  }
  if (c.freq_rule) {
    const FrequencyRule& r = *c.freq_rule;
    json fr;
    fr["type"] = std::string(to_string(r.type));
    if (r.factor) fr["factor"] = double_to_text(*r.factor);
    fr["max_position_embeddings"] = r.max_position_embeddings;
    fr["original_max_position_embeddings"] = r.original_max_position_embeddings;
    fr["low_freq_factor"] = double_to_text(r.low_freq_factor);
    fr["high_freq_factor"] = double_to_text(r.high_freq_factor);
    fr["beta_fast"] = double_to_text(r.beta_fast);
    fr["beta_slow"] = double_to_text(r.beta_slow);
    fr["truncate"] = r.truncate;
    json sf = json::array(), lf = json::array();
    for (double f : r.short_factor) sf.push_back(double_to_text(f));
    for (double f : r.long_factor) lf.push_back(double_to_text(f));
    fr["short_factor"] = sf;
    fr["long_factor"] = lf;
    if (c.rule_seq_len) fr["seq_len"] = c.rule_seq_len;
    j["freq_rule"] = fr;
  }
  // ABI v3 fields, likewise only when not neutral (forward, no table, not the tensor form): a v1 or v2 case
  // writes exactly what it did before, for readers of the released format.
  if (c.direction != Direction::forward) j["direction"] = std::string(to_string(c.direction));
  if (c.table) j["table"] = table_to_json(*c.table);
  if (c.tensor) j["tensor"] = tensor_to_json(*c.tensor, c.dtype);
  return j;
}

void case_params_from_json(const json& j, RopeCase& c) {
  const json& dt = need(j, "dtype");
  if (!dt.is_string() || !parse_dtype(dt.get<std::string>())) fail("field 'dtype' must be \"f32\", \"f16\" or \"bf16\"");
  c.dtype = *parse_dtype(dt.get<std::string>());
  const json& ly = need(j, "layout");
  if (!ly.is_string() || !parse_layout(ly.get<std::string>()))
    fail("field 'layout' must be \"interleaved\" or \"half-split\"");
  c.layout = *parse_layout(ly.get<std::string>());
  c.head_dim = need_uint<uint32_t>(j, "head_dim", 1u << 20);
  c.rotary_dim = need_uint<uint32_t>(j, "rotary_dim", 1u << 20);
  c.n_heads = need_uint<uint32_t>(j, "n_heads", 1u << 16);
  const json& pos = need(j, "positions");
  if (!pos.is_array()) fail("field 'positions' must be an array of integers");
  if (pos.size() > (1u << 24)) fail("field 'positions' is too long");
  c.positions.clear();
  for (const json& p : pos) {
    if (!p.is_number_integer()) fail("field 'positions' must hold integers only");
    c.positions.push_back(p.get<int64_t>());
  }
  c.n_pos_axes = j.contains("n_pos_axes") ? need_uint<uint32_t>(j, "n_pos_axes", 4) : 1;
  if (c.n_pos_axes == 0) fail("field 'n_pos_axes' must be 1..4");
  if (c.positions.size() % c.n_pos_axes != 0) fail("field 'positions' must hold n_pos_axes positions per token");
  if (j.contains("n_tokens") &&
      need_uint<uint64_t>(j, "n_tokens", ~uint64_t(0)) != c.positions.size() / c.n_pos_axes)
    fail("field 'n_tokens' does not match the number of positions");
  c.rotary_offset = j.contains("rotary_offset") ? need_uint<uint32_t>(j, "rotary_offset", 1u << 20) : 0;
  c.pair_axis.clear();
  if (j.contains("pair_axis")) {
    const json& a = j["pair_axis"];
    if (!a.is_array() || a.size() > (1u << 19)) fail("field 'pair_axis' must be an array of axis indices");
    for (const json& x : a) {
      // (signed or unsigned: the writer's int(x) is a signed number until the JSON goes through text)
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 3)
        fail("field 'pair_axis' must hold axis indices 0..3");
      c.pair_axis.push_back(uint8_t(x.get<int64_t>()));
    }
  }
  c.attention_factor =
      j.contains("attention_factor") ? double_from_json(j["attention_factor"], "attention_factor") : 1.0;
  c.freq_rule.reset();
  c.rule_seq_len = 0;
  if (j.contains("freq_rule")) {
    const json& fr = j["freq_rule"];
    if (!fr.is_object()) fail("field 'freq_rule' must be an object");
    FrequencyRule r;
    const json& ty = need(fr, "type");
    if (!ty.is_string() || !parse_frequency_rule_type(ty.get<std::string>()))
      fail("field 'freq_rule.type' must be default, linear, dynamic, ntk, yarn, longrope or llama3");
    r.type = *parse_frequency_rule_type(ty.get<std::string>());
    if (fr.contains("factor")) r.factor = double_from_json(fr["factor"], "freq_rule.factor");
    auto u64 = [&](const char* k) { return fr.contains(k) ? need_uint<uint64_t>(fr, k, uint64_t(1) << 53) : 0; };
    auto dbl = [&](const char* k, double d) { return fr.contains(k) ? double_from_json(fr[k], k) : d; };
    r.max_position_embeddings = u64("max_position_embeddings");
    r.original_max_position_embeddings = u64("original_max_position_embeddings");
    r.low_freq_factor = dbl("low_freq_factor", r.low_freq_factor);
    r.high_freq_factor = dbl("high_freq_factor", r.high_freq_factor);
    r.beta_fast = dbl("beta_fast", r.beta_fast);
    r.beta_slow = dbl("beta_slow", r.beta_slow);
    if (fr.contains("truncate")) {
      if (!fr["truncate"].is_boolean()) fail("field 'freq_rule.truncate' must be true or false");
      r.truncate = fr["truncate"].get<bool>();
    }
    for (const char* k : {"short_factor", "long_factor"})
      if (fr.contains(k)) {
        const json& a = fr[k];
        if (!a.is_array() || a.size() > (1u << 19)) fail(std::string("field 'freq_rule.") + k + "' must be an array");
        auto& v = std::string_view(k) == "short_factor" ? r.short_factor : r.long_factor;
        for (const json& x : a) v.push_back(double_from_json(x, k));
      }
    c.rule_seq_len = u64("seq_len");
    c.freq_rule = std::move(r);
  }
  c.base = double_from_json(need(j, "base"), "base");
  c.position_scale = double_from_json(need(j, "position_scale"), "position_scale");
  c.inv_freq.clear();
  if (j.contains("inv_freq")) {
    const json& t = j["inv_freq"];
    if (!t.is_array()) fail("field 'inv_freq' must be an array");
    for (const json& f : t) c.inv_freq.push_back(double_from_json(f, "inv_freq"));
  }
  const double elems = double(c.positions.size()) * c.n_heads * c.head_dim;
  if (elems > double(1u << 28)) fail("the case is too large (" + std::to_string(elems) + " elements)");
  // ABI v3. Unlike q's input, k's input is part of the parameters (tensor.k_input_bits): a case set's
  // input file holds q only, and a record's case then carries its k wherever it is read.
  c.direction = Direction::forward;
  if (j.contains("direction")) {
    const json& d = j["direction"];
    const auto dir = d.is_string() ? parse_direction(d.get<std::string>()) : std::nullopt;
    if (!dir) fail("field 'direction' must be \"forward\" or \"inverse\"");
    c.direction = *dir;
  }
  c.table.reset();
  if (j.contains("table")) c.table = table_from_json(j["table"], c.rotary_dim);
  c.tensor.reset();
  if (j.contains("tensor")) c.tensor = tensor_from_json(j["tensor"], c);
  c.input.clear();
}

namespace {

// Every field of a record but its input_bits.
json record_fields(const CaseRecord& r) {
  json j;
  j["format"] = "ropecheck-case";
  // 4: the case uses an ABI v3 field (direction, table, tensor form), which a reader of version 3 would drop
  // without a word (it ignores keys it does not know): such a reader refuses the file instead. Every other case
  // is written as version 3, byte for byte what it was.
  // 5: a sparse or per-token table (ABI v4), or inputs read with a declared padding (input_padding): a reader of
  // version 4 would lay the table out or place the buffers otherwise.
  const bool v5 = r.input_padding > 0 || (r.c.table && !r.c.table->stored.empty());
  j["version"] = v5 ? 5 : r.c.uses_v3() ? 4 : 3;
  if (r.input_padding > 0) j["input_padding"] = r.input_padding;
  j["check"] = r.check;
  j["failure"] = r.failure;
  j["contract"] = r.contract.spec();
  if (r.tolerance > 0) j["tolerance"] = double_to_text(r.tolerance);
  if (!r.diagnosis.empty()) j["diagnosis"] = r.diagnosis;
  if (!r.property.empty()) {
    json p;
    p["id"] = r.property;
    p["layout"] = std::string(to_string(r.property_layout));
    p["seed"] = r.property_seed;
    p["case"] = r.property_case;
    p["cases"] = r.property_cases;
    p["max_discard_ratio"] = r.property_max_discard_ratio;
    p["shrink"] = props::shrink_path_text(r.property_shrink);
    p["max_position"] = r.property_max_position;
    j["property"] = p;
  }
  j["summary"] = r.c.summary();
  j["in_place"] = r.in_place;
  j["angle_model"] = std::string(to_string(r.angle_model));
  j["bound"] = double_to_text(r.bound);
  j["bound_decimal"] = r.bound;
  j["case"] = case_params_to_json(r.c);  // (a tensor-form case's k input: its "tensor.k_input_bits")
  return j;
}

}  // namespace

json record_to_json(const CaseRecord& r) {
  json j = record_fields(r);
  j["input_bits"] = bits_to_json(r.c.dtype, r.c.input);
  return j;
}

std::string record_text(const CaseRecord& r) {
  // record_to_json(r).dump(1), with input_bits (up to ~2M elements: the large row's cases) written here rather
  // than built as a JSON value per element: an empty array in its place, then its elements put in as dump(1)
  // writes them, one per line at indent 2 and the closing bracket at indent 1 (test
  // CaseJson.RecordTextIsTheRecordsJson). The key is found as the top level writes it, on a line of its own;
  // a string holding those characters has its newline and quotes escaped.
  json j = record_fields(r);
  j["input_bits"] = json::array();
  std::string text = j.dump(1);
  const std::string key = "\n \"input_bits\": []";
  const size_t at = text.find(key);
  if (at == std::string::npos) fail("internal: input_bits not found in the record's JSON");
  const size_t n = r.c.input.size() / dtype_size(r.c.dtype);
  if (n == 0) return text;
  std::string bits = "[\n";
  bits.reserve(n * 9 + 8);
  char num[16];
  for (size_t k = 0; k < n; ++k) {
    bits += "  ";
    const auto res = std::to_chars(num, num + sizeof num, load_bits(r.c.dtype, r.c.input.data(), k));
    bits.append(num, res.ptr);
    bits += k + 1 < n ? ",\n" : "\n ]";
  }
  text.replace(at + key.size() - 2, 2, bits);
  return text;
}

CaseRecord record_from_json(const json& j) {
  CaseRecord r;
  const json& f = need(j, "format");
  if (!f.is_string() || f.get<std::string>() != "ropecheck-case") fail("not a ropecheck case file (format field)");
  const int version = need_uint<int>(j, "version", 1000);
  if (version < 1 || version > 5) fail("unsupported case file version " + std::to_string(version));
  if (j.contains("input_padding")) r.input_padding = need_uint<uint64_t>(j, "input_padding", kMaxInputPadding);
  if (j.contains("check") && j["check"].is_string()) r.check = j["check"].get<std::string>();
  if (j.contains("failure") && j["failure"].is_string()) r.failure = j["failure"].get<std::string>();
  if (j.contains("diagnosis") && j["diagnosis"].is_string()) r.diagnosis = j["diagnosis"].get<std::string>();
  if (version >= 2) {
    const json& ct = need(j, "contract");
    std::string err;
    const auto c = ct.is_string() ? parse_contract(ct.get<std::string>(), &err) : std::nullopt;
    if (!c) fail("field 'contract': " + (err.empty() ? std::string("must be a contract SPEC string") : err));
    r.contract = *c;
    if (j.contains("tolerance")) {
      r.tolerance = double_from_json(j["tolerance"], "tolerance");
      if (!(r.tolerance > 0) || !std::isfinite(r.tolerance)) fail("field 'tolerance' must be a positive number");
    }
    if (j.contains("property")) {
      const json& p = j["property"];
      if (version < 3 || !p.is_object())
        fail("field 'property': a property failure written by an older ropecheck (properties are now reproduced by "
             "the property engine): run the gate again");
      const json& id = need(p, "id");
      // The name's form here; `replay` finds the property (an unknown one is its error).
      if (!id.is_string() || id.get<std::string>().empty() || id.get<std::string>().size() > 64 ||
          id.get<std::string>().find_first_not_of("abcdefghijklmnopqrstuvwxyz-") != std::string::npos)
        fail("field 'property.id' must be a property's id (lower-case letters and dashes)");
      r.property = id.get<std::string>();
      const json& pl = need(p, "layout");
      if (!pl.is_string() || !parse_layout(pl.get<std::string>()))
        fail("field 'property.layout' must be interleaved or half-split");
      r.property_layout = *parse_layout(pl.get<std::string>());
      r.property_seed = need_uint<uint64_t>(p, "seed", UINT64_MAX);
      r.property_cases = need_uint<uint64_t>(p, "cases", uint64_t(1) << 40);
      if (r.property_cases == 0) fail("field 'property.cases' must be positive");
      // Absent in files written before it was recorded: their driver's ratio.
      if (p.contains("max_discard_ratio"))
        r.property_max_discard_ratio = need_uint<uint64_t>(p, "max_discard_ratio", 1000);
      // An execution index: executions with a declined call are discarded and the driver goes on, up to
      // cases * (1 + ratio) executions (properties/engine.hpp), so the failing one may lie past 'cases'.
      r.property_case = need_uint<uint64_t>(p, "case", uint64_t(1) << 52);
      if (r.property_case >= r.property_cases * (1 + r.property_max_discard_ratio))
        fail("field 'property.case' must be below 'property.cases' x (1 + 'property.max_discard_ratio') = " +
             std::to_string(r.property_cases * (1 + r.property_max_discard_ratio)) +
             " (the property driver's executions)");
      const json& sh = need(p, "shrink");
      if (!sh.is_string()) fail("field 'property.shrink' must be a string of numbers separated by dots");
      try {
        r.property_shrink = props::parse_shrink_path(sh.get<std::string>());
      } catch (const std::invalid_argument& e) {
        fail(std::string("field 'property.shrink': ") + e.what());
      }
      if (r.property_shrink.size() > 100000) fail("field 'property.shrink' is too long");
      r.property_max_position = need_uint<int64_t>(p, "max_position", int64_t(1) << 62);
      if (r.property_max_position < 1) fail("field 'property.max_position' must be at least 1");
    }
  }
  const json& ip = need(j, "in_place");
  if (!ip.is_boolean()) fail("field 'in_place' must be true or false");
  r.in_place = ip.get<bool>();
  const json& am = need(j, "angle_model");
  if (!am.is_string() || !parse_angle_model(am.get<std::string>())) fail("field 'angle_model' must be exact or fp32");
  r.angle_model = *parse_angle_model(am.get<std::string>());
  r.bound = double_from_json(need(j, "bound"), "bound");
  if (!(r.bound > 0) || !std::isfinite(r.bound)) fail("field 'bound' must be a positive number");
  if (version == 1) r.tolerance = r.bound;  // version 1 held every pair to this flat bound
  // The parameters, k's input with them (tensor.k_input_bits, read with the checks of input_bits), then q's.
  case_params_from_json(need(j, "case"), r.c);
  bits_from_json(need(j, "input_bits"), "input_bits", r.c.dtype, r.c.n_elements(), "the case", r.c.input);
  // Every v1..v3 field's consistency (the table's shape and values, the tensor form's sequences and positions).
  if (std::string why = r.c.validate_for_kernel(); !why.empty()) fail("malformed case: " + why);
  return r;
}

void write_record(const std::string& path, const CaseRecord& r) {
  std::ofstream f(path);
  if (!f) fail("cannot write " + path);
  f << record_text(r) << "\n";
  if (!f) fail("cannot write " + path);
}

CaseRecord read_record(const std::string& path) {
  const std::string text = read_bounded_file(path, kMaxReplayFileBytes, "replay file");
  const json j = parse_json_bounded(text, kMaxReplayFileValues, path);
  try {
    return record_from_json(j);
  } catch (const std::exception& e) {
    fail(path + ": " + e.what());
  }
}

}  // namespace ropecheck::gate
