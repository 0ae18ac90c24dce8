// One shape for every failure a property or a check reports (after LLVM libc's MPFR matcher, whose every
// failure prints the input bits, what was got, what is exact and the error): a headline that says what does
// not hold and by how much, then indented lines -- the case, where in it, and each element involved as bits
// and value.
//
//   <what>: <a> = A, <b> = B, |difference| D > tolerance T = <how T is made>
//     case: <RopeCase::summary()>
//     token 3 (position 7), head 0
//     x: 0x3f800000 (0x1p+0 = 1), 0x00000000 (0x0p+0 = 0)
//
// The headline is the first line, which the gate, replay and the reports quote alone; everything after it is
// detail. Numbers are printed with 9 significant digits (enough to tell a difference from its tolerance) and
// elements by describe_element (the bits, hexfloat and decimal).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/rope_case.hpp"

namespace ropecheck {

class FailureText {
 public:
  explicit FailureText(std::string_view what);

  // The headline's evidence. An equation that must hold within a tolerance: "a_name = a, b_name = b, |difference|
  // d > tolerance t". A distance that must stay within one: "name = v > tolerance t". Then, optionally, how the
  // tolerance is made (" = E_a + E_b = ..."): `because`.
  FailureText& sides(std::string_view a_name, double a, std::string_view b_name, double b, double tolerance);
  FailureText& distance(std::string_view name, double v, double tolerance);
  FailureText& because(std::string_view how_the_tolerance_is_made);
  // Anything else the headline says (appended as written).
  FailureText& note(std::string_view text);

  // Detail lines, indented under the headline.
  FailureText& in(const RopeCase& c, std::string_view label = "case");  // "  case: <summary>"
  FailureText& line(std::string_view text);                              // "  <text>"
  FailureText& line(std::string_view label, std::string_view text);      // "  <label>: <text>"
  // "  <label>: <element k0>, <element k1>, ..." -- the elements of buf (laid out as c) as describe_element.
  FailureText& elements(std::string_view label, const RopeCase& c, const void* buf, std::initializer_list<size_t> ks);
  FailureText& elements(std::string_view label, const RopeCase& c, const void* buf, const std::vector<size_t>& ks);
  // Detail already formatted as indented lines (a judgement's report, another check's message).
  FailureText& detail(std::string_view lines);

  const std::string& str() const { return text_; }
  operator const std::string&() const { return text_; }

 private:
  std::string text_;
  bool headline_ = true;  // still writing the first line
};

// A number as the failure texts print it: 9 significant digits ("%.9g").
std::string number_text(double v);

}  // namespace ropecheck
