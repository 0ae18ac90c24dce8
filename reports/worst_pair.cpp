#include "reports/worst_pair.hpp"

#include <cmath>

#include "properties/error_model.hpp"

namespace ropecheck {

std::map<int, WorstPair> worst_pairs_by_bucket(const RopeCase& c, const ReferenceOutput& ref, const void* got) {
  std::map<int, WorstPair> out;
  const Dtype d = c.dtype;
  const uint32_t npairs = c.rotary_dim / 2;
  for (size_t t = 0; t < c.n_tokens(); ++t) {
    const int bucket = position_bucket(c.positions[t]);
    for (size_t h = 0; h < c.n_heads; ++h) {
      const size_t base = head_offset(c, t, h);
      for (uint32_t i = 0; i < npairs; ++i) {
        const auto [d0, d1] = pair_dims(c.layout, c.rotary_dim, i);
        const size_t k0 = base + d0, k1 = base + d1;
        const double x0 = load_f32(d, c.input.data(), k0), x1 = load_f32(d, c.input.data(), k1);
        const double y0 = load_f32(d, got, k0), y1 = load_f32(d, got, k1);
        const double e0 = ref.exact[k0], e1 = ref.exact[k1];
        if (!std::isfinite(x0) || !std::isfinite(x1) || !std::isfinite(y0) || !std::isfinite(y1) ||
            !std::isfinite(e0) || !std::isfinite(e1))
          continue;
        const PairError pe = pair_error(d, x0, x1, y0, y1, e0, e1);
        WorstPair& w = out[bucket];
        if (!(pe.e > w.e)) continue;
        w.e = pe.e;
        w.radial = pe.radial;
        w.tangential = pe.tangential;
        w.position = c.positions[t];
        w.token = t;
        w.head = h;
        w.pair = i;
        w.dim0 = d0;
        w.dim1 = d1;
        w.in_bits[0] = load_bits(d, c.input.data(), k0);
        w.in_bits[1] = load_bits(d, c.input.data(), k1);
        w.got_bits[0] = load_bits(d, got, k0);
        w.got_bits[1] = load_bits(d, got, k1);
        w.rounded_bits[0] = load_bits(d, ref.rounded.data(), k0);
        w.rounded_bits[1] = load_bits(d, ref.rounded.data(), k1);
        w.exact[0] = e0;
        w.exact[1] = e1;
      }
    }
  }
  return out;
}

}  // namespace ropecheck
