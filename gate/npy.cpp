#include "gate/npy.hpp"

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ropecheck::gate {


namespace {

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw std::runtime_error(what + ": not a valid .npy file for ropecheck: " + why);
}

// The value text after 'key': in a Python dict literal, up to the next top-level ',' or '}'.
std::string dict_value(const std::string& h, const std::string& key, const std::string& what) {
  const std::string k1 = "'" + key + "'";
  size_t p = h.find(k1);
  if (p == std::string::npos) bad(what, "header has no " + k1);
  p = h.find(':', p + k1.size());
  if (p == std::string::npos) bad(what, "header: no ':' after " + k1);
  ++p;
  while (p < h.size() && std::isspace(static_cast<unsigned char>(h[p]))) ++p;
  size_t e = p;
  int depth = 0;
  while (e < h.size()) {
    const char c = h[e];
    if (c == '(') ++depth;
    if (c == ')') {
      if (depth == 0) bad(what, "header: unbalanced ')'");
      --depth;
    }
    if (depth == 0 && (c == ',' || c == '}')) break;
    ++e;
  }
  if (e >= h.size()) bad(what, "header: unterminated value of " + k1);
  std::string v = h.substr(p, e - p);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  return v;
}

}  // namespace

size_t npy_item_size(const std::string& descr) {
  if (descr == "<f4") return 4;
  if (descr == "<f2" || descr == "<u2") return 2;
  return 0;
}

std::string npy_encode(const NpyArray& a) {
  std::string shape = "(";
  for (size_t i = 0; i < a.shape.size(); ++i) shape += std::to_string(a.shape[i]) + (a.shape.size() == 1 || i + 1 < a.shape.size() ? "," : "");
  shape += ")";
  std::string dict = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t pre = 10;
  size_t total = pre + dict.size() + 1;
  const size_t pad = (64 - total % 64) % 64;
  dict += std::string(pad, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(dict.size() & 0xff);
  out += char((dict.size() >> 8) & 0xff);
  out += dict;
  out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  return out;
}

NpyArray npy_decode(const std::string& b, const std::string& what) {
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0) bad(what, "missing the \\x93NUMPY magic");
  const int major = static_cast<unsigned char>(b[6]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = size_t(static_cast<unsigned char>(b[8])) | size_t(static_cast<unsigned char>(b[9])) << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) bad(what, "truncated header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= size_t(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    hstart = 12;
  } else {
    bad(what, "unsupported format version " + std::to_string(major));
  }
  if (hlen > 1 << 20 || hstart + hlen > b.size()) bad(what, "header length " + std::to_string(hlen) + " beyond the file");
  const std::string h = b.substr(hstart, hlen);
  NpyArray a;
  std::string descr = dict_value(h, "descr", what);
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"') || descr.back() != descr.front())
    bad(what, "'descr' is not a string");
  a.descr = descr.substr(1, descr.size() - 2);
  if (a.descr == "|u2" || a.descr == "=u2") a.descr = "<u2";
  if (a.descr == "=f4") a.descr = "<f4";
  if (a.descr == "=f2") a.descr = "<f2";
  if (!npy_item_size(a.descr)) bad(what, "element type '" + a.descr + "' is not one of '<f4', '<f2', '<u2'");
  const std::string fo = dict_value(h, "fortran_order", what);
  if (fo == "True") bad(what, "fortran_order True is not supported (write a C-ordered array)");
  if (fo != "False") bad(what, "'fortran_order' is not False");
  const std::string sh = dict_value(h, "shape", what);
  if (sh.size() < 2 || sh.front() != '(' || sh.back() != ')') bad(what, "'shape' is not a tuple");
  std::stringstream ss(sh.substr(1, sh.size() - 2));
  std::string item;
  uint64_t count = 1;
  while (std::getline(ss, item, ',')) {
    size_t s = 0, e = item.size();
    while (s < e && std::isspace(static_cast<unsigned char>(item[s]))) ++s;
    while (e > s && std::isspace(static_cast<unsigned char>(item[e - 1]))) --e;
    if (s == e) continue;
    uint64_t v = 0;
    for (size_t i = s; i < e; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(item[i]))) bad(what, "'shape' holds a non-integer: " + item);
      if (v > (uint64_t(1) << 40)) bad(what, "'shape' dimension too large");
      v = v * 10 + uint64_t(item[i] - '0');
    }
    a.shape.push_back(v);
    if (v && count > (uint64_t(1) << 40) / v) bad(what, "'shape' too large");
    count *= v;
  }
  if (a.shape.size() > 8) bad(what, "too many dimensions");
  const size_t nbytes = size_t(count) * npy_item_size(a.descr);
  const size_t have = b.size() - hstart - hlen;
  if (have != nbytes)
    bad(what, "data holds " + std::to_string(have) + " bytes, the shape needs " + std::to_string(nbytes));
  a.data.assign(b.begin() + long(hstart + hlen), b.end());
  return a;
}

void npy_write(const std::string& path, const NpyArray& a) {
  std::ofstream f(path, std::ios::binary);
  const std::string s = npy_encode(a);
  f.write(s.data(), long(s.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

NpyArray npy_read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  f.seekg(0, std::ios::end);
  const auto size = f.tellg();
  if (size < 0 || size > (std::streamoff(1) << 32)) throw std::runtime_error(path + ": unreadable or too large");
  f.seekg(0);
  std::string b(size_t(size), '\0');
  f.read(b.data(), size);
  if (!f) throw std::runtime_error("cannot read " + path);
  return npy_decode(b, path);
}

}  // namespace ropecheck::gate
