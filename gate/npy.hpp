// Minimal NumPy .npy reader/writer for case sets: little-endian '<f4', '<f2'
// and '<u2' (bf16 as its bit patterns), and '<i4', '<i8' (positions and indices), C order. The reader never trusts the
// file: every malformed or unexpected byte is a std::runtime_error with a
// clear message.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ropecheck::gate {

struct NpyArray {
  std::string descr;            // "<f4", "<f2", "<u2"; "<i4", "<i8" (indices)
  std::vector<uint64_t> shape;
  std::vector<unsigned char> data;  // raw little-endian elements, C order
};

size_t npy_item_size(const std::string& descr);  // 0 if unsupported

std::string npy_encode(const NpyArray& a);
NpyArray npy_decode(const std::string& bytes, const std::string& what);  // throws std::runtime_error

// Writes only a regular file: an existing symlink, FIFO or device at path is refused, never followed, opened
// for writing or waited on. Throws std::runtime_error.
void npy_write(const std::string& path, const NpyArray& a);
void write_regular_file(const std::string& path, const std::string& bytes);

// Reads a .npy file without trusting it: the path must name a regular file (a symlink, FIFO, device or
// directory is an error, never followed or opened for reading: lstat, then O_NOFOLLOW|O_NONBLOCK and fstat);
// only the header is read first (at most 64 KiB), then `check_header` (when given) judges its descr and shape
// (data empty; throw to refuse), the file's size must equal header + the bytes the shape needs, and the data
// (at most max_data_bytes) is read last. Memory: the header plus the data the shape needs, whatever the
// file's size. Throws std::runtime_error naming the path.
NpyArray npy_read(const std::string& path, const std::function<void(const NpyArray&)>& check_header = {},
                  uint64_t max_data_bytes = uint64_t(1) << 30);

// Reads a whole file that must be a regular file (the same checks as npy_read) of at most max_bytes:
// larger is an error that says so, before anything is read. Throws std::runtime_error.
std::string read_bounded_file(const std::string& path, uint64_t max_bytes, const std::string& what);

}  // namespace ropecheck::gate
