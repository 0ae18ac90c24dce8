// Minimal NumPy .npy reader/writer for case sets: little-endian '<f4', '<f2'
// and '<u2' (bf16 as its bit patterns), C order. The reader never trusts the
// file: every malformed or unexpected byte is a std::runtime_error with a
// clear message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ropecheck::gate {

struct NpyArray {
  std::string descr;            // "<f4", "<f2", "<u2"
  std::vector<uint64_t> shape;
  std::vector<unsigned char> data;  // raw little-endian elements, C order
};

size_t npy_item_size(const std::string& descr);  // 0 if unsupported

std::string npy_encode(const NpyArray& a);
NpyArray npy_decode(const std::string& bytes, const std::string& what);  // throws std::runtime_error

void npy_write(const std::string& path, const NpyArray& a);  // throws std::runtime_error
NpyArray npy_read(const std::string& path);                  // throws std::runtime_error

}  // namespace ropecheck::gate
