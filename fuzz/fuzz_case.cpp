#include "fuzz/fuzz_case.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "properties/error_model.hpp"

namespace ropecheck::fuzz {
namespace {

class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  uint8_t u8() { return pos_ < n_ ? d_[pos_++] : 0; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(u8()) << (8 * i);
    return v;
  }
  uint16_t u16() { return uint16_t(u8() | (uint16_t(u8()) << 8)); }
  double f64() { return std::bit_cast<double>(u64()); }
  const uint8_t* rest() const { return d_ + std::min(pos_, n_); }
  size_t rest_size() const { return n_ > pos_ ? n_ - pos_ : 0; }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t pos_ = 0;
};

class Writer {
 public:
  void u8(uint8_t v) { b.push_back(v); }
  void u16(uint16_t v) {
    u8(uint8_t(v));
    u8(uint8_t(v >> 8));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(uint8_t(v >> (8 * i)));
  }
  void f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
  std::vector<uint8_t> b;
};

template <size_t N>
std::optional<uint8_t> index_of(const double (&table)[N], double v) {
  for (size_t i = 0; i < N; ++i)
    if (std::bit_cast<uint64_t>(table[i]) == std::bit_cast<uint64_t>(v)) return uint8_t(i);
  return std::nullopt;
}

double decode_scale_raw(double s) {
  if (!std::isfinite(s)) return 1.0;
  if (std::fabs(s) > 0x1p20) return std::fmod(s, 0x1p20);
  return s;
}

double decode_table_entry(double f) {
  if (!std::isfinite(f)) return 1.0;
  if (std::fabs(f) > 4.0) return std::fmod(f, 4.0);
  return f;
}

}  // namespace

std::optional<FuzzCase> decode_case(const uint8_t* data, size_t size) {
  Reader r(data, size);
  FuzzCase fc;
  RopeCase& c = fc.rope;
  const uint8_t flags = r.u8();
  const uint8_t dims = r.u8();
  const uint8_t counts = r.u8();
  c.dtype = (flags & 3) == 1 ? Dtype::f16 : (flags & 3) == 2 ? Dtype::bf16 : Dtype::f32;
  c.layout = (flags >> 2) & 1 ? Layout::half_split : Layout::interleaved;
  fc.in_place = (flags >> 3) & 1;
  const bool table = (flags >> 4) & 1;
  const int scale_mode = (flags >> 5) & 3;
  const bool raw_base = (flags >> 7) & 1;
  c.rotary_dim = 2 * (1 + (dims & 15u));
  c.head_dim = c.rotary_dim + (dims >> 4) % 5;
  c.n_heads = 1 + (counts & 3u);
  const size_t n_tokens = 1 + ((counts >> 2) & 7u);

  if (raw_base) {
    c.base = r.f64();
    if (!std::isfinite(c.base) || !(c.base > 0)) c.base = 10000.0;
  } else {
    c.base = kBases[r.u8() % std::size(kBases)];
  }
  if (scale_mode == 0) c.position_scale = 1.0;
  else if (scale_mode == 1) c.position_scale = kScales[r.u8() % std::size(kScales)];
  else c.position_scale = decode_scale_raw(r.f64());
  if (table) {
    c.inv_freq.resize(c.rotary_dim / 2);
    for (double& f : c.inv_freq) f = decode_table_entry(r.f64());
  }
  c.positions.resize(n_tokens);
  for (int64_t& m : c.positions) {
    const uint8_t mode = r.u8();
    switch (mode & 3) {
      case 0: m = mode >> 2; break;
      case 1: m = r.u16(); break;
      case 2: {
        const int k = r.u8() % 63;
        const int d = int8_t(r.u8());
        m = std::max<int64_t>(0, (int64_t(1) << k) + d);
        break;
      }
      default: m = int64_t(r.u64() & 0x7fffffffffffffffull); break;
    }
  }
  c.input.resize(c.n_bytes());
  const size_t avail = r.rest_size();
  if (avail > 0)
    for (size_t k = 0; k < c.input.size(); ++k) c.input[k] = r.rest()[k % avail];
  if (!(max_abs_angle(c) <= std::ldexp(1.0, kMaxAngleLog2))) return std::nullopt;
  return fc;
}

std::vector<uint8_t> encode_case(const FuzzCase& fc) {
  const RopeCase& c = fc.rope;
  if (!c.validate_for_kernel().empty()) throw std::invalid_argument("encode_case: " + c.validate_for_kernel());
  if (c.rotary_dim > 32 || c.head_dim - c.rotary_dim > 4 || c.n_heads > 4 || c.n_tokens() > 8)
    throw std::invalid_argument("encode_case: dims, heads or tokens beyond the fuzz format: " + c.summary());
  const std::optional<uint8_t> base_index = index_of(kBases, c.base);
  const std::optional<uint8_t> scale_index = index_of(kScales, c.position_scale);
  int scale_mode = c.position_scale == 1.0 && !std::signbit(c.position_scale) ? 0 : scale_index ? 1 : 2;
  if (scale_mode == 2 && decode_scale_raw(c.position_scale) != c.position_scale)
    throw std::invalid_argument("encode_case: position_scale beyond the fuzz format");
  for (double f : c.inv_freq)
    if (decode_table_entry(f) != f) throw std::invalid_argument("encode_case: inv_freq entry beyond the fuzz format");
  Writer w;
  const uint8_t dt = c.dtype == Dtype::f16 ? 1 : c.dtype == Dtype::bf16 ? 2 : 0;
  w.u8(uint8_t(dt | (c.layout == Layout::half_split ? 4 : 0) | (fc.in_place ? 8 : 0) |
               (c.inv_freq.empty() ? 0 : 16) | (scale_mode << 5) | (base_index ? 0 : 128)));
  w.u8(uint8_t((c.rotary_dim / 2 - 1) | ((c.head_dim - c.rotary_dim) << 4)));
  w.u8(uint8_t((c.n_heads - 1) | ((c.n_tokens() - 1) << 2)));
  if (base_index) w.u8(*base_index);
  else w.f64(c.base);
  if (scale_mode == 1) w.u8(*scale_index);
  else if (scale_mode == 2) w.f64(c.position_scale);
  for (double f : c.inv_freq) w.f64(f);
  for (int64_t m : c.positions) {
    if (m < 64) {
      w.u8(uint8_t(m << 2));
    } else if (m < 65536) {
      w.u8(1);
      w.u16(uint16_t(m));
    } else {
      w.u8(3);
      w.u64(uint64_t(m));
    }
  }
  w.b.insert(w.b.end(), c.input.begin(), c.input.end());
  return w.b;
}

std::string describe_case(const RopeCase& c) {
  std::ostringstream o;
  o << "  " << c.summary() << "\n  positions:";
  for (int64_t m : c.positions) o << " " << m;
  o << "\n";
  if (!c.inv_freq.empty()) {
    o << "  inv_freq:";
    for (double f : c.inv_freq) o << " " << hexfloat(f);
    o << "\n";
  }
  o << "  input bits (token-major, head, dim):";
  for (size_t k = 0; k < c.n_elements(); ++k) {
    if (k % c.head_dim == 0) o << "\n   ";
    char buf[16];
    std::snprintf(buf, sizeof buf, c.dtype == Dtype::f32 ? " %08x" : " %04x", unsigned(load_bits(c.dtype, c.input.data(), k)));
    o << buf;
  }
  o << "\n";
  return o.str();
}

}  // namespace ropecheck::fuzz
