#include "reference/frequency_rules.hpp"

#include <mpfr.h>

#include <boost/math/constants/constants.hpp>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace ropecheck {
namespace {

namespace mp = boost::multiprecision;

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

// Sets MpFloat's default precision for the lifetime of the guard, so that every value constructed in an
// evaluation (and every result computed from them) carries at least `bits` bits.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(unsigned bits) : saved_(MpFloat::default_precision()) {
    // Boost's precision is in decimal digits; ceil(bits*log10(2)) + 1 digits give >= bits bits.
    MpFloat::default_precision(static_cast<unsigned>(std::ceil(bits * 0.30102999566398120)) + 1);
  }
  ~PrecisionGuard() { MpFloat::default_precision(saved_); }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  unsigned saved_;
};

// base^(-2i/R) for i < R/2, the default table, at the current default precision p. engine: HF computes
// base ** (torch.arange(0, R, 2).float() / R) in float32 (the base rounded to float32, the exponent 2i/R
// rounded to float32, a float32 pow) and then 1.0 / that in float32.
// One pow and products (a pow per pair dominated the gate's rule cases): at W = p + 64 bits,
// q = base^RN(-2/R) is within ((2/R)|ln base| + 1) 2^-W (1 + 2^-50) of base^(-2/R) (the exponent's rounding
// amplified by (2/R)|ln base|, pow's own), and t_i = RN(t_(i-1) q) within i((2/R)|ln base| + 2) 2^-W
// (1 + 2^-40) of base^(-2i/R), below 2^-(W-42) for any i < 2^31 and |ln base| < 2^10; each is then rounded
// once to p bits: within half an ulp plus 2^-22 ulp of the real value (a pow of the exponent rounded to p
// bits, as before, was within half an ulp plus i(2/R)|ln base| 2^-p).
std::vector<MpFloat> default_table(const MpFloat& base, uint32_t R) {
  std::vector<MpFloat> out(R / 2);  // the default precision
  const mpfr_prec_t W = mpfr_get_prec(out.front().backend().data()) + 64;
  mpfr_t e, q, cur, next;
  mpfr_inits2(W, e, q, cur, next, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_si(e, -2, MPFR_RNDN);
  mpfr_div_ui(e, e, R, MPFR_RNDN);
  mpfr_pow(q, base.backend().data(), e, MPFR_RNDN);
  mpfr_set_ui(cur, 1, MPFR_RNDN);
  for (MpFloat& v : out) {
    mpfr_set(v.backend().data(), cur, MPFR_RNDN);
    mpfr_mul(next, cur, q, MPFR_RNDN);
    mpfr_swap(cur, next);
  }
  mpfr_clears(e, q, cur, next, static_cast<mpfr_ptr>(nullptr));
  return out;
}

// YaRN's get_mscale(scale, m) = 0.1*m*ln(scale) + 1 for scale > 1, else 1. The 0.1 is the real 1/10
// (engine: HF's Python float 0.1 and math.log in double).
MpFloat yarn_get_mscale(const MpFloat& scale, const MpFloat& m) {
  if (scale <= 1) return MpFloat(1);
  return m * mp::log(scale) / 10 + 1;
}

// floor/ceil of a value that is never an integer for real inputs (it would make pi algebraic), but make
// sure the MPFR value is far enough from one that the rounding is decided at this precision.
MpFloat decided(const MpFloat& v, bool up, unsigned bits, const char* what) {
  const MpFloat r = up ? MpFloat(mp::ceil(v)) : MpFloat(mp::floor(v));
  const MpFloat d = mp::abs(v - mp::round(v));
  if (d < mp::ldexp(MpFloat(1), -static_cast<int>(bits) + 32) * (mp::abs(v) + 1))
    throw std::runtime_error(fmt::format("yarn: {} is within MPFR rounding of an integer; floor/ceil undecided",
                                         what));
  return r;
}

void validate_factor(const FrequencyRule& r, const char* rule, const char* name = "factor") {
  if (!r.factor) bad(fmt::format("{}: {} is required", rule, name));
  if (!finite_positive(*r.factor)) bad(fmt::format("{}: {} must be finite and > 0 (got {})", rule, name, *r.factor));
}

void validate_optional_positive(const std::optional<double>& v, const char* rule, const char* name) {
  if (v && !finite_positive(*v)) bad(fmt::format("{}: {} must be finite and > 0 (got {})", rule, name, *v));
}

void validate_factors(const std::vector<double>& f, const char* name, uint32_t pairs) {
  if (f.size() != pairs)
    bad(fmt::format("longrope: {} has {} entries, expected rotary_dim/2 = {}", name, f.size(), pairs));
  for (size_t i = 0; i < f.size(); ++i)
    if (!finite_positive(f[i])) bad(fmt::format("longrope: {}[{}] must be finite and > 0 (got {})", name, i, f[i]));
}

double yarn_beta(double v, double dflt) { return v == 0 ? dflt : v; }  // HF: .get("beta_fast") or 32

}  // namespace

std::string_view to_string(FrequencyRuleType t) {
  switch (t) {
    case FrequencyRuleType::default_: return "default";
    case FrequencyRuleType::linear: return "linear";
    case FrequencyRuleType::dynamic: return "dynamic";
    case FrequencyRuleType::ntk: return "ntk";
    case FrequencyRuleType::yarn: return "yarn";
    case FrequencyRuleType::longrope: return "longrope";
    case FrequencyRuleType::llama3: return "llama3";
  }
  return "?";
}

std::optional<FrequencyRuleType> parse_frequency_rule_type(std::string_view s) {
  for (auto t : {FrequencyRuleType::default_, FrequencyRuleType::linear, FrequencyRuleType::dynamic,
                 FrequencyRuleType::ntk, FrequencyRuleType::yarn, FrequencyRuleType::longrope,
                 FrequencyRuleType::llama3})
    if (to_string(t) == s) return t;
  return std::nullopt;
}

void validate_frequency_rule(const FrequencyRule& r, uint32_t rotary_dim, double base) {
  if (rotary_dim < 2 || rotary_dim % 2 != 0)
    bad(fmt::format("rotary_dim must be even and >= 2 (got {})", rotary_dim));
  if (!finite_positive(base)) bad(fmt::format("base must be finite and > 0 (got {})", base));
  const uint32_t pairs = rotary_dim / 2;
  switch (r.type) {
    case FrequencyRuleType::default_: break;
    case FrequencyRuleType::linear: validate_factor(r, "linear"); break;
    case FrequencyRuleType::dynamic:
      validate_factor(r, "dynamic");
      if (r.max_position_embeddings == 0) bad("dynamic: max_position_embeddings must be > 0");
      if (rotary_dim <= 2) bad(fmt::format("dynamic: rotary_dim must be > 2 (the exponent R/(R-2)); got {}", rotary_dim));
      break;
    case FrequencyRuleType::ntk:
      validate_factor(r, "ntk", "factor (alpha)");
      if (rotary_dim <= 2) bad(fmt::format("ntk: rotary_dim must be > 2 (the exponent R/(R-2)); got {}", rotary_dim));
      break;
    case FrequencyRuleType::yarn: {
      validate_factor(r, "yarn");
      if (r.original_max_position_embeddings == 0) bad("yarn: original_max_position_embeddings must be > 0");
      if (base == 1) bad("yarn: base must be != 1 (the correction range divides by ln(base))");
      if (!std::isfinite(r.beta_fast) || r.beta_fast < 0)
        bad(fmt::format("yarn: beta_fast must be finite and >= 0, 0 meaning the default 32 (got {})", r.beta_fast));
      if (!std::isfinite(r.beta_slow) || r.beta_slow < 0)
        bad(fmt::format("yarn: beta_slow must be finite and >= 0, 0 meaning the default 1 (got {})", r.beta_slow));
      const double bf = yarn_beta(r.beta_fast, 32), bs = yarn_beta(r.beta_slow, 1);
      if (bf < bs)
        bad(fmt::format("yarn: beta_fast ({}) must be >= beta_slow ({}): the ramp would run backwards", bf, bs));
      if (r.mscale && !std::isfinite(*r.mscale)) bad(fmt::format("yarn: mscale must be finite (got {})", *r.mscale));
      if (r.mscale_all_dim && !std::isfinite(*r.mscale_all_dim))
        bad(fmt::format("yarn: mscale_all_dim must be finite (got {})", *r.mscale_all_dim));
      validate_optional_positive(r.attention_factor, "yarn", "attention_factor");
      break;
    }
    case FrequencyRuleType::longrope: {
      validate_factors(r.short_factor, "short_factor", pairs);
      validate_factors(r.long_factor, "long_factor", pairs);
      if (r.original_max_position_embeddings == 0) bad("longrope: original_max_position_embeddings must be > 0");
      validate_optional_positive(r.factor, "longrope", "factor");
      validate_optional_positive(r.attention_factor, "longrope", "attention_factor");
      if (!r.factor && r.max_position_embeddings == 0)
        bad("longrope: factor is absent and cannot be derived (max_position_embeddings is 0)");
      if (!r.attention_factor && r.original_max_position_embeddings == 1)
        bad("longrope: original_max_position_embeddings must be > 1 (the attention factor divides by its log)");
      break;
    }
    case FrequencyRuleType::llama3:
      validate_factor(r, "llama3");
      if (r.original_max_position_embeddings == 0) bad("llama3: original_max_position_embeddings must be > 0");
      if (!finite_positive(r.low_freq_factor))
        bad(fmt::format("llama3: low_freq_factor must be finite and > 0 (got {})", r.low_freq_factor));
      if (!finite_positive(r.high_freq_factor))
        bad(fmt::format("llama3: high_freq_factor must be finite and > 0 (got {})", r.high_freq_factor));
      if (r.high_freq_factor < r.low_freq_factor)
        bad(fmt::format("llama3: high_freq_factor ({}) must be >= low_freq_factor ({})", r.high_freq_factor,
                        r.low_freq_factor));
      break;
  }
}

FrequencyTable evaluate_frequency_rule(const FrequencyRule& r, uint32_t rotary_dim, double base_d,
                                       std::optional<uint64_t> seq_len, unsigned bits,
                                       RuleMistake mistake) {
  if (bits < 64 || bits > 100000) bad(fmt::format("bits must be in [64, 100000] (got {})", bits));
  validate_frequency_rule(r, rotary_dim, base_d);
  // Boost 1.74 keeps mpfr_float's default precision in one process-wide static (and its own expression
  // evaluation changes it temporarily), so evaluations are serialized.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  PrecisionGuard guard(bits);

  const uint32_t R = rotary_dim, pairs = R / 2;
  const MpFloat base(base_d);
  FrequencyTable t;
  t.attention_factor = 1;
  t.effective_base = base;
  t.yarn_low = 0;
  t.yarn_high = 0;
  t.theta.reserve(pairs);

  switch (r.type) {
    case FrequencyRuleType::default_:
      t.theta = default_table(base, R);
      break;

    case FrequencyRuleType::linear: {
      // engine: HF divides the float32 table by factor in float32 (vLLM divides the positions instead).
      const MpFloat f(*r.factor);
      const std::vector<MpFloat> th0 = default_table(base, R);
      for (uint32_t i = 0; i < pairs; ++i) t.theta.push_back(th0[i] / f);
      break;
    }

    case FrequencyRuleType::dynamic: {
      // HF: seq = max(seq_len, L) (seq_len None -> L); base' = base * (f*seq/L - (f-1))^(R/(R-2)).
      // engine: HF computes base' in Python double, then the float32 table from it (base' rounded to
      // float32 by torch); vLLM fixes seq = f*L for every call.
      const uint64_t L = r.max_position_embeddings;
      const uint64_t s = seq_len && *seq_len > L ? *seq_len : L;
      const MpFloat f(*r.factor);
      const MpFloat x = f * MpFloat(s) / MpFloat(L) - (f - 1);
      t.effective_base = base * mp::pow(x, MpFloat(R) / MpFloat(R - 2));
      t.theta = default_table(t.effective_base, R);
      break;
    }

    case FrequencyRuleType::ntk: {
      // base' = base * alpha^(R/(R-2)), fixed (no sequence length). engine: double base', float32 table.
      t.effective_base = base * mp::pow(MpFloat(*r.factor), MpFloat(R) / MpFloat(R - 2));
      t.theta = default_table(t.effective_base, R);
      break;
    }

    case FrequencyRuleType::yarn: {
      const MpFloat f(*r.factor);
      const MpFloat L(r.original_max_position_embeddings);
      const MpFloat two_pi = 2 * boost::math::constants::pi<MpFloat>();
      const MpFloat two_ln_base = 2 * mp::log(base);
      // corr(n) = R ln(L / (2 pi n)) / (2 ln base): the pair index whose wavelength fits n turns in L.
      // engine: HF evaluates it in Python double (math.log), ggml in float32 (logf).
      auto corr = [&](double n) -> MpFloat { return MpFloat(R) * mp::log(L / (two_pi * MpFloat(n))) / two_ln_base; };
      MpFloat lo = corr(yarn_beta(r.beta_fast, 32)), hi = corr(yarn_beta(r.beta_slow, 1));
      if (r.truncate) {
        lo = decided(lo, false, bits, "the low correction bound");
        hi = decided(hi, true, bits, "the high correction bound");
      }
      if (lo < 0) lo = 0;
      if (hi > MpFloat(R - 1)) hi = MpFloat(R - 1);  // HF clamps to dim-1, not pairs-1 (harmless)
      if (lo == hi) hi += MpFloat(1) / 1000;            // HF: max += 0.001 (engine: a double 0.001)
      t.yarn_low = lo;
      t.yarn_high = hi;
      const std::vector<MpFloat> theta0 = default_table(base, R);
      for (uint32_t i = 0; i < pairs; ++i) {
        // ramp_i = clamp((i - low)/(high - low), 0, 1); theta_i = theta0_i*(1 - ramp) + theta0_i/f*ramp.
        // engine: HF's ramp is float32 (torch.arange(dim, dtype=float32)), the blend float32.
        MpFloat ramp = (MpFloat(i) - lo) / (hi - lo);
        if (ramp < 0) ramp = 0;
        if (ramp > 1) ramp = 1;
        const MpFloat& th0 = theta0[i];
        t.theta.push_back(mistake == RuleMistake::yarn_ramp_reversed ? MpFloat(th0 * ramp + th0 / f * (1 - ramp))
                                                                     : MpFloat(th0 * (1 - ramp) + th0 / f * ramp));
      }
      // Attention factor (HF): attention_factor if given; else, if mscale and mscale_all_dim are both
      // non-zero, get_mscale(f, mscale) / get_mscale(f, mscale_all_dim); else get_mscale(f).
      if (r.attention_factor) {
        t.attention_factor = MpFloat(*r.attention_factor);
      } else if (r.mscale && r.mscale_all_dim && *r.mscale != 0 && *r.mscale_all_dim != 0) {
        t.attention_factor = yarn_get_mscale(f, MpFloat(*r.mscale)) / yarn_get_mscale(f, MpFloat(*r.mscale_all_dim));
      } else {
        t.attention_factor = yarn_get_mscale(f, MpFloat(1));
      }
      break;
    }

    case FrequencyRuleType::longrope: {
      // HF: factor = rope_parameters.factor, else max_position_embeddings / original; attention_factor if
      // given, else 1 if factor <= 1, else sqrt(1 + ln(factor)/ln(original)); long factors iff
      // seq_len > original (per forward call). engine: the factor lists are cast to float32 first.
      const uint64_t orig = r.original_max_position_embeddings;
      const MpFloat f = r.factor ? MpFloat(*r.factor) : MpFloat(r.max_position_embeddings) / MpFloat(orig);
      t.longrope_long = seq_len && *seq_len > orig;
      const std::vector<double>& lambda = t.longrope_long ? r.long_factor : r.short_factor;
      const std::vector<MpFloat> th0 = default_table(base, R);
      for (uint32_t i = 0; i < pairs; ++i) t.theta.push_back(th0[i] / MpFloat(lambda[i]));
      if (r.attention_factor)
        t.attention_factor = MpFloat(*r.attention_factor);
      else if (f <= 1)
        t.attention_factor = 1;
      else
        t.attention_factor = mp::sqrt(1 + mp::log(f) / mp::log(MpFloat(orig)));
      break;
    }

    case FrequencyRuleType::llama3: {
      // HF: wavelen = 2 pi / theta0; wavelen < L/high: unchanged; wavelen > L/low: theta0/factor;
      // otherwise smooth = (L/wavelen - low)/(high - low), theta = (1-smooth) theta0/factor + smooth theta0.
      // engine: HF's wavelen and smooth factor are float32 tensors; llama.cpp stores the divisor
      // 1/((1-smooth)/factor + smooth) as float32 rope_freqs.
      const MpFloat f(*r.factor), L(r.original_max_position_embeddings);
      const MpFloat low(r.low_freq_factor), high(r.high_freq_factor);
      const MpFloat low_wavelen = L / low, high_wavelen = L / high;
      const MpFloat two_pi = 2 * boost::math::constants::pi<MpFloat>();
      const std::vector<MpFloat> theta0 = default_table(base, R);
      for (uint32_t i = 0; i < pairs; ++i) {
        const MpFloat& th0 = theta0[i];
        const MpFloat wavelen = two_pi / th0;
        if (wavelen < high_wavelen) {
          t.theta.push_back(th0);
        } else if (wavelen > low_wavelen) {
          t.theta.push_back(th0 / f);
        } else {
          if (high == low)  // the band is the single wavelength L/low; unreachable for real inputs
            throw std::runtime_error(fmt::format("llama3: pair {} sits exactly on the band edge", i));
          const MpFloat smooth = mistake == RuleMistake::llama3_ratio_inverted
                                     ? MpFloat((wavelen / L - low) / (high - low))
                                     : MpFloat((L / wavelen - low) / (high - low));
          t.theta.push_back((1 - smooth) * th0 / f + smooth * th0);
        }
      }
      break;
    }
  }
  t.bits = static_cast<unsigned>(mpfr_get_prec(t.theta.front().backend().data()));
  return t;
}

double to_double(const MpFloat& v) { return mpfr_get_d(v.backend().data(), MPFR_RNDN); }
float to_float(const MpFloat& v) { return mpfr_get_flt(v.backend().data(), MPFR_RNDN); }

std::vector<double> theta_as_double(const FrequencyTable& t) {
  std::vector<double> out;
  out.reserve(t.theta.size());
  for (const auto& v : t.theta) out.push_back(to_double(v));
  return out;
}

std::vector<float> theta_as_float(const FrequencyTable& t) {
  std::vector<float> out;
  out.reserve(t.theta.size());
  for (const auto& v : t.theta) out.push_back(to_float(v));
  return out;
}

}  // namespace ropecheck
