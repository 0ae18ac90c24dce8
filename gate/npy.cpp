#include "gate/npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
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
  if (descr == "<i4") return 4;  // int32 positions, seq_offsets, cu_seqlens (case-set version 5)
  if (descr == "<i8") return 8;  // int64 ones
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

namespace {

constexpr size_t kMaxHeader = 64 * 1024;  // numpy writes headers of well under 1 KiB

// The preamble's length: 10 (version 1) or 12 (versions 2, 3) bytes; 0 if b is too short to tell.
size_t preamble_size(const std::string& b, const std::string& what) {
  if (b.size() < 8 || b.compare(0, 6, "\x93NUMPY") != 0) bad(what, "missing the \\x93NUMPY magic");
  const int major = static_cast<unsigned char>(b[6]);
  if (major == 1) return 10;
  if (major == 2 || major == 3) return 12;
  bad(what, "unsupported format version " + std::to_string(major));
}

// The header's length from a complete preamble.
size_t header_length(const std::string& b, size_t pre) {
  size_t hlen = 0;
  for (size_t i = 8; i < pre; ++i) hlen |= size_t(static_cast<unsigned char>(b[i])) << (8 * (i - 8));
  return hlen;
}

// Parses the header dict h into a (descr, shape); returns the data bytes the shape needs.
uint64_t parse_header(const std::string& h, NpyArray& a, const std::string& what) {
  std::string descr = dict_value(h, "descr", what);
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"') || descr.back() != descr.front())
    bad(what, "'descr' is not a string");
  a.descr = descr.substr(1, descr.size() - 2);
  if (a.descr == "|u2" || a.descr == "=u2") a.descr = "<u2";
  if (a.descr == "=f4") a.descr = "<f4";
  if (a.descr == "=f2") a.descr = "<f2";
  if (a.descr == "=i4") a.descr = "<i4";
  if (a.descr == "=i8") a.descr = "<i8";
  if (!npy_item_size(a.descr)) bad(what, "element type '" + a.descr + "' is not one of '<f4', '<f2', '<u2', '<i4', '<i8'");
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
    if (a.shape.size() > 8) bad(what, "too many dimensions");
  }
  return count * npy_item_size(a.descr);
}

// Opens path for reading only if it is a regular file (not a symlink, FIFO, device or directory).
int open_regular(const std::string& path, struct stat& st) {
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0) {
    if (errno == ENOENT) throw std::runtime_error(path + ": missing");
    throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  }
  auto kind = [](mode_t m) -> std::string {
    return S_ISLNK(m) ? "a symbolic link" : S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
  };
  if (!S_ISREG(lst.st_mode))
    throw std::runtime_error(path + ": " + kind(lst.st_mode) + ", not a regular file (refused)");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ELOOP) throw std::runtime_error(path + ": a symbolic link, not a regular file (refused)");
    throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // replaced between lstat and open
    ::close(fd);
    throw std::runtime_error(path + ": " + kind(st.st_mode) + ", not a regular file (refused)");
  }
  return fd;
}

struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

// Reads exactly n bytes at offset off.
void read_at(int fd, char* dst, size_t n, uint64_t off, const std::string& path) {
  while (n) {
    const ssize_t k = ::pread(fd, dst, n, off_t(off));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw std::runtime_error("cannot read " + path + (k < 0 ? ": " + std::string(std::strerror(errno)) : ": truncated while reading"));
    dst += k;
    n -= size_t(k);
    off += uint64_t(k);
  }
}

}  // namespace

NpyArray npy_decode(const std::string& b, const std::string& what) {
  if (b.size() < 10) bad(what, "missing the \\x93NUMPY magic");
  const size_t hstart = preamble_size(b, what);
  if (b.size() < hstart) bad(what, "truncated header");
  const size_t hlen = header_length(b, hstart);
  if (hlen > kMaxHeader || hstart + hlen > b.size())
    bad(what, "header length " + std::to_string(hlen) + " beyond the file");
  NpyArray a;
  const uint64_t nbytes = parse_header(b.substr(hstart, hlen), a, what);
  const size_t have = b.size() - hstart - hlen;
  if (have != nbytes)
    bad(what, "data holds " + std::to_string(have) + " bytes, the shape needs " + std::to_string(nbytes));
  a.data.assign(b.begin() + long(hstart + hlen), b.end());
  return a;
}

void npy_write(const std::string& path, const NpyArray& a) { write_regular_file(path, npy_encode(a)); }

void write_regular_file(const std::string& path, const std::string& bytes) {
  // O_NOFOLLOW: a symlink is not followed; O_NONBLOCK: opening a FIFO does not wait for a reader; fstat: only a
  // regular file is written (and truncated only then).
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) {
    if (errno == ELOOP) throw std::runtime_error("cannot write " + path + ": a symbolic link (refused)");
    if (errno == ENXIO) throw std::runtime_error("cannot write " + path + ": a FIFO (refused)");
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  }
  const Fd f{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw std::runtime_error("cannot write " + path + ": not a regular file (refused)");
  if (::ftruncate(fd, 0) != 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  const char* p = bytes.data();
  size_t n = bytes.size();
  while (n) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    p += k;
    n -= size_t(k);
  }
}

NpyArray npy_read(const std::string& path, const std::function<void(const NpyArray&)>& check_header,
                  uint64_t max_data_bytes) {
  struct stat st {};
  const Fd f{open_regular(path, st)};
  const uint64_t size = uint64_t(st.st_size);
  std::string b(size_t(std::min<uint64_t>(size, 12)), '\0');
  read_at(f.fd, b.data(), b.size(), 0, path);
  if (b.size() < 10) bad(path, "missing the \\x93NUMPY magic");
  const size_t hstart = preamble_size(b, path);
  if (b.size() < hstart) bad(path, "truncated header");
  const size_t hlen = header_length(b, hstart);
  if (hlen > kMaxHeader || hstart + hlen > size) bad(path, "header length " + std::to_string(hlen) + " beyond the file");
  std::string h(hlen, '\0');
  read_at(f.fd, h.data(), hlen, hstart, path);
  NpyArray a;
  const uint64_t nbytes = parse_header(h, a, path);
  if (check_header) check_header(a);
  const uint64_t have = size - hstart - hlen;
  if (have != nbytes)
    bad(path, "data holds " + std::to_string(have) + " bytes, the shape needs " + std::to_string(nbytes));
  if (nbytes > max_data_bytes)
    bad(path, "data of " + std::to_string(nbytes) + " bytes, more than the " + std::to_string(max_data_bytes) +
                  " allowed");
  a.data.resize(size_t(nbytes));
  read_at(f.fd, reinterpret_cast<char*>(a.data.data()), size_t(nbytes), hstart + hlen, path);
  return a;
}

std::string read_bounded_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  struct stat st {};
  const Fd f{open_regular(path, st)};
  const uint64_t size = uint64_t(st.st_size);
  if (size > max_bytes)
    throw std::runtime_error(path + ": " + what + " of " + std::to_string(size) + " bytes, larger than the " +
                             std::to_string(max_bytes >> 20) + " MiB allowed (refused before reading)");
  std::string b(size_t(size), '\0');
  read_at(f.fd, b.data(), b.size(), 0, path);
  return b;
}

}  // namespace ropecheck::gate
