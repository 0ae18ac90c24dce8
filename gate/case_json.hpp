// Cases as JSON: the replay files the gate writes for failing cases, and the
// manifest of an exported case set. Doubles are written as C99 hex floats
// (exact) with their decimal value beside for reading; input elements as their
// bit patterns.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "properties/contract.hpp"
#include "properties/predicates.hpp"
#include "reference/reference.hpp"

namespace ropecheck::gate {

// A failing (or exported) kernel call: the case and how it was called and judged.
struct CaseRecord {
  RopeCase c;
  bool in_place = false;
  AngleModel angle_model = AngleModel::exact;
  double bound = 0;     // the case's flat bound (u of the storage type), for display
  std::string check;    // the gate check it belongs to
  std::string failure;  // what went wrong (replay files)
  Contract contract;    // what the kernel was held to
  double tolerance = 0; // > 0: a flat --tolerance override replaced the contract's allowances
  std::string diagnosis;  // what the kernel most likely computes
  std::string suggestion;  // the --contract SPEC the diagnosis suggests (not written: the gate verifies it first)
  std::string fault;       // the fault it failed with ("crash", ...; empty: its output failed; not written)
  bool fault_free() const { return fault.empty(); }
  // A property's failure (properties/engine.hpp): the property's id, and how the engine reproduces its
  // smallest failing execution; `c` is that execution's first call.
  std::string property;
  Layout property_layout = Layout::interleaved;
  uint64_t property_seed = 0, property_case = 0, property_cases = 0;
  // The driver's discard ratio: property_case (an execution index, declined executions included) is below
  // property_cases * (1 + ratio).
  uint64_t property_max_discard_ratio = props::kDefaultMaxDiscardRatio;
  std::vector<size_t> property_shrink;
  int64_t property_max_position = 0;
  // The bytes after each input and table the kernel may read (gate --input-padding; 0: none): the call is placed
  // as the gate placed it.
  uint64_t input_padding = 0;
};
// The largest --input-padding (a page: the guard page after a buffer moves by at most that).
inline constexpr uint64_t kMaxInputPadding = 4096;

// The parameters of a case (no input) as JSON.
nlohmann::json case_params_to_json(const RopeCase& c);
// Parse the parameters into c (input left empty). Throws std::runtime_error
// with a clear message on anything missing, mistyped or out of range.
void case_params_from_json(const nlohmann::json& j, RopeCase& c);

nlohmann::json record_to_json(const CaseRecord& r);
std::string record_text(const CaseRecord& r);  // record_to_json(r).dump(1), what write_record writes
CaseRecord record_from_json(const nlohmann::json& j);  // throws std::runtime_error

// A replay file is at most this large (the gate writes well under 1 MiB): a larger one is refused before it is
// read, so reading one costs at most ~25x this in parsed JSON.
inline constexpr uint64_t kMaxReplayFileBytes = uint64_t(16) << 20;
inline constexpr uint64_t kMaxReplayFileValues = uint64_t(2) << 20;  // JSON values: ~2M input elements

void write_record(const std::string& path, const CaseRecord& r);  // throws std::runtime_error
// Reads a replay file: a regular file (no symlink, FIFO or device) of at most kMaxReplayFileBytes.
CaseRecord read_record(const std::string& path);                  // throws std::runtime_error

// Parses JSON text holding at most max_values values (scalars, arrays and objects; nesting at most 64 deep),
// counted in a SAX pass before the document is built: a file of tiny values ("[0,0,0,...]") costs ~20x its
// size as a document, so the count, not only the size, bounds the memory. Throws std::runtime_error naming
// `what` (not JSON, too many values, too deep).
nlohmann::json parse_json_bounded(const std::string& text, uint64_t max_values, const std::string& what);

// Exact double <-> hex float string (also accepts decimal).
std::string double_to_text(double v);
double double_from_json(const nlohmann::json& j, const char* what);

}  // namespace ropecheck::gate
