// The causes a verdict names, each with a stable id: --verdict-json's and report.json's `cause_id`. A cause's
// text may be reworded from one release to the next; its id does not change (a CI job that keys on ids keeps
// working). Ids are only ever added.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace ropecheck {

struct CauseName {
  std::string_view id;    // "angle-negated", "crash", "cos-sin-bf16", ...
  std::string_view name;  // the text the diagnosis or the fault check names it by: "angle negated", "crash", ...
};

// Every cause a diagnosis, a fault check or the gate's own rows can name (docs/gate.md, "Causes").
std::span<const CauseName> known_causes();

// The id of a row's cause as the verdict says it: a diagnosis ("diagnosis: angle negated (...)"), a fault
// ("crash: the kernel crashed ..."), a joined precision cause ("precision: cos/sin at bf16 precision (...); ...")
// or a bare name; a q/k row's "k: " or "q: " is read past. The longest known name the text starts with; ""
// when none (no id is invented for a text the table does not know).
std::string_view cause_id(std::string_view cause_text);

}  // namespace ropecheck
