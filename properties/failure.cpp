#include "properties/failure.hpp"

#include <cstdio>

#include "properties/judge.hpp"  // describe_element

namespace ropecheck {

std::string number_text(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

FailureText::FailureText(std::string_view what) : text_(what) {}

FailureText& FailureText::sides(std::string_view a_name, double a, std::string_view b_name, double b,
                                double tolerance) {
  const double diff = a - b;
  return note(": " + std::string(a_name) + " = " + number_text(a) + ", " + std::string(b_name) + " = " +
              number_text(b) + ", |difference| " + number_text(diff < 0 ? -diff : diff) + " > tolerance " +
              number_text(tolerance));
}

FailureText& FailureText::distance(std::string_view name, double v, double tolerance) {
  return note(": " + std::string(name) + " = " + number_text(v) + " > tolerance " + number_text(tolerance));
}

FailureText& FailureText::because(std::string_view how) { return note(" = " + std::string(how)); }

FailureText& FailureText::note(std::string_view text) {
  if (!headline_) {  // the headline is closed once a detail line is written: a note after it is a line
    return line(text);
  }
  text_ += text;
  return *this;
}

FailureText& FailureText::in(const RopeCase& c, std::string_view label) { return line(label, c.summary()); }

FailureText& FailureText::line(std::string_view text) {
  headline_ = false;
  text_ += "\n  ";
  text_ += text;
  return *this;
}

FailureText& FailureText::line(std::string_view label, std::string_view text) {
  return line(std::string(label) + ": " + std::string(text));
}

FailureText& FailureText::elements(std::string_view label, const RopeCase& c, const void* buf,
                                   std::initializer_list<size_t> ks) {
  return elements(label, c, buf, std::vector<size_t>(ks));
}

FailureText& FailureText::elements(std::string_view label, const RopeCase& c, const void* buf,
                                   const std::vector<size_t>& ks) {
  std::string s;
  for (size_t k : ks) {
    if (!s.empty()) s += ", ";
    s += describe_element(c.dtype, load_bits(c.dtype, buf, k));
  }
  return line(label, s);
}

FailureText& FailureText::detail(std::string_view lines) {
  headline_ = false;
  if (lines.empty()) return *this;
  if (lines.front() != '\n') text_ += '\n';
  text_ += lines;
  while (!text_.empty() && text_.back() == '\n') text_.pop_back();
  return *this;
}

}  // namespace ropecheck
