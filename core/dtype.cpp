#include "core/dtype.hpp"

namespace ropecheck {

std::string_view to_string(Dtype d) {
  switch (d) {
    case Dtype::f32: return "f32";
    case Dtype::f16: return "f16";
    case Dtype::bf16: return "bf16";
  }
  return "?";
}

std::string_view to_string(Layout l) {
  return l == Layout::interleaved ? "interleaved" : "half-split";
}

std::optional<Dtype> parse_dtype(std::string_view s) {
  if (s == "f32") return Dtype::f32;
  if (s == "f16") return Dtype::f16;
  if (s == "bf16") return Dtype::bf16;
  return std::nullopt;
}

std::optional<Layout> parse_layout(std::string_view s) {
  if (s == "interleaved") return Layout::interleaved;
  if (s == "half-split" || s == "half_split" || s == "halfsplit") return Layout::half_split;
  return std::nullopt;
}

namespace {
template <class T, size_t N, class Parse>
bool parse_list(std::string_view s, std::vector<T>& out, const T (&all)[N], Parse parse) {
  out.clear();
  if (s == "all") {
    out.assign(all, all + N);
    return true;
  }
  while (true) {
    const size_t comma = s.find(',');
    const auto v = parse(s.substr(0, comma));
    if (!v) return false;
    out.push_back(*v);
    if (comma == std::string_view::npos) return true;
    s.remove_prefix(comma + 1);
  }
}
}  // namespace

bool parse_dtype_list(std::string_view s, std::vector<Dtype>& out) { return parse_list(s, out, kAllDtypes, parse_dtype); }
bool parse_layout_list(std::string_view s, std::vector<Layout>& out) {
  return parse_list(s, out, kAllLayouts, parse_layout);
}

}  // namespace ropecheck
