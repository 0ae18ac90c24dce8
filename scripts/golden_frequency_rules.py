#!/usr/bin/env python3
"""Golden values for tests/test_frequency_rules.cpp, computed independently of the C++ code.

Each rule is written here from its published formula (Hugging Face transformers'
src/transformers/modeling_rope_utils.py, the v5-era text; docs/variants.md) as real-number arithmetic in
mpmath at 320 bits, every config value taken as the exact binary64 number it is in a config.json. Nothing
here shares code with reference/frequency_rules.cpp.

Writes tests/golden_frequency_rules.inc (45 significant digits per value):
    python3 scripts/golden_frequency_rules.py            # regenerate
    python3 scripts/golden_frequency_rules.py --check    # exit 1 if the committed file is stale

Value codes in the .inc: pair index i >= 0 is theta_i; -1 the attention factor; -2 the effective base
(dynamic, ntk); -3 / -4 YaRN's low / high correction bound after floor/ceil, clamping and the +1/1000 guard.
"""
import os
import sys

from mpmath import ceil, floor, log, mp, mpf, nstr, pi, sqrt

mp.prec = 320
DIGITS = 45

ATTN, BASE, LOW, HIGH = -1, -2, -3, -4


def theta0(base, i, R):
    """base^(-2i/R): the default table."""
    return mpf(base) ** (-mpf(2 * i) / R)


# ---- the rules, one function each, from the HF formulas ------------------------------------------------

def rule_default(base, R):
    return [theta0(base, i, R) for i in range(R // 2)], mpf(1), {}


def rule_linear(base, R, factor):
    return [theta0(base, i, R) / mpf(factor) for i in range(R // 2)], mpf(1), {}


def rule_dynamic(base, R, factor, max_pos, seq_len):
    # HF _compute_dynamic_ntk_parameters: seq_len = max(seq_len, max_position_embeddings);
    # base = base * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    s = max(seq_len, max_pos) if seq_len is not None else max_pos
    f = mpf(factor)
    b = mpf(base) * (f * s / max_pos - (f - 1)) ** (mpf(R) / (R - 2))
    return [theta0(b, i, R) for i in range(R // 2)], mpf(1), {BASE: b}


def rule_ntk(base, R, alpha):
    # fixed NTK-alpha (HF's former "ntk" type with alpha = factor; Hunyuan "dynamic" + "alpha"):
    # base * alpha ** (dim / (dim - 2))
    b = mpf(base) * mpf(alpha) ** (mpf(R) / (R - 2))
    return [theta0(b, i, R) for i in range(R // 2)], mpf(1), {BASE: b}


def get_mscale(scale, m=1.0):
    scale = mpf(scale)
    if scale <= 1:
        return mpf(1)
    return mpf(1) / 10 * mpf(m) * log(scale) + 1


def rule_yarn(base, R, factor, original, beta_fast=32.0, beta_slow=1.0, truncate=True, mscale=None,
              mscale_all_dim=None, attention_factor=None):
    # HF _compute_yarn_parameters (v5): the correction range over original_max_position_embeddings.
    def corr(n):
        return R * log(mpf(original) / (n * 2 * pi)) / (2 * log(mpf(base)))

    low, high = corr(mpf(beta_fast)), corr(mpf(beta_slow))
    if truncate:
        low, high = floor(low), ceil(high)
    low, high = max(low, mpf(0)), min(high, mpf(R - 1))
    if low == high:
        high += mpf(1) / 1000
    f = mpf(factor)
    thetas = []
    for i in range(R // 2):
        ramp = min(max((i - low) / (high - low), mpf(0)), mpf(1))
        extrapolation = 1 - ramp  # HF: inv_freq_extrapolation_factor
        t0 = theta0(base, i, R)
        thetas.append(t0 / f * (1 - extrapolation) + t0 * extrapolation)
    if attention_factor is not None:
        attn = mpf(attention_factor)
    elif mscale and mscale_all_dim:
        attn = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
    else:
        attn = get_mscale(factor)
    return thetas, attn, {LOW: low, HIGH: high}


def rule_longrope(base, R, short_factor, long_factor, original, max_pos, seq_len=None, factor=None):
    # HF _compute_longrope_parameters: factor = max_pos / original when absent; attention factor
    # sqrt(1 + ln(factor) / ln(original)); long factors iff seq_len > original.
    f = mpf(factor) if factor is not None else mpf(max_pos) / original
    attn = mpf(1) if f <= 1 else sqrt(1 + log(f) / log(mpf(original)))
    lam = long_factor if (seq_len is not None and seq_len > original) else short_factor
    return [theta0(base, i, R) / mpf(lam[i]) for i in range(R // 2)], attn, {}


def rule_llama3(base, R, factor, low_freq_factor, high_freq_factor, original):
    # HF _compute_llama3_parameters
    L, lo, hi, f = mpf(original), mpf(low_freq_factor), mpf(high_freq_factor), mpf(factor)
    low_wavelen, high_wavelen = L / lo, L / hi
    thetas = []
    for i in range(R // 2):
        t0 = theta0(base, i, R)
        wavelen = 2 * pi / t0
        if wavelen < high_wavelen:
            thetas.append(t0)
        elif wavelen > low_wavelen:
            thetas.append(t0 / f)
        else:
            smooth = (L / wavelen - lo) / (hi - lo)
            thetas.append((1 - smooth) * t0 / f + smooth * t0)
    return thetas, mpf(1), {}


# ---- the representative configs (the same names and parameters as the C++ test) ------------------------

PHI3_LONG = [
    1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0799999237060547, 1.2299998998641968,
    1.2299998998641968, 1.2999999523162842, 1.4499999284744263, 1.5999999046325684, 1.6499998569488525,
    1.8999998569488525, 2.859999895095825, 3.68999981880188, 5.419999599456787, 5.489999771118164,
    5.489999771118164, 9.09000015258789, 11.579999923706055, 15.65999984741211, 15.769999504089355,
    15.789999961853027, 18.360000610351562, 21.989999771118164, 23.079999923706055, 30.009998321533203,
    32.35000228881836, 32.590003967285156, 35.56000518798828, 39.95000457763672, 53.840003967285156,
    56.20000457763672, 57.95000457763672, 59.29000473022461, 59.77000427246094, 59.920005798339844,
    61.190006256103516, 61.96000671386719, 62.50000762939453, 63.3700065612793, 63.48000717163086,
    63.48000717163086, 63.66000747680664, 63.850006103515625, 64.08000946044922, 64.760009765625,
    64.80001068115234, 64.81001281738281, 64.81001281738281]
PHI3_SHORT = ([1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.2500000000000002, 1.2500000000000002, 1.4000000000000004,
               1.4500000000000004, 1.5500000000000005, 1.8500000000000008, 1.9000000000000008]
              + [2.000000000000001] * 19
              + [2.1000000000000005, 2.1000000000000005, 2.2, 2.3499999999999996, 2.3499999999999996,
                 2.3499999999999996, 2.3499999999999996, 2.3999999999999995, 2.3999999999999995,
                 2.6499999999999986, 2.6999999999999984, 2.8999999999999977, 2.9499999999999975,
                 3.049999999999997, 3.049999999999997, 3.049999999999997])
assert len(PHI3_LONG) == 48 and len(PHI3_SHORT) == 48

# name -> (description, (thetas, attn, extra), pairs to record, extra codes to record)
CASES = [
    ("default/llama3-unscaled", "Llama-3 base 500000, R 128, no scaling",
     rule_default(500000, 128), [0, 1, 32, 63], [ATTN]),
    ("default/gpt-neox-20b", "GPT-NeoX-20B: head 96, rotary_pct 0.25 -> R 24, base 10000",
     rule_default(10000, 24), [0, 1, 6, 11], []),
    ("default/qwen3-vl", "Qwen3-VL text: base 5e6, R 128",
     rule_default(5000000, 128), [0, 61, 63], []),
    ("linear/gemma3-global", "Gemma-3 global layer: base 1e6, R 256, linear factor 8",
     rule_linear(1000000, 256, 8.0), [0, 64, 127], [ATTN]),
    ("dynamic/seq4096", "dynamic NTK: base 10000, R 128, max_position_embeddings 4096, factor 2, seq_len 4096",
     rule_dynamic(10000, 128, 2.0, 4096, 4096), [1, 63], [ATTN, BASE]),
    ("dynamic/seq6000", "dynamic NTK: base 10000, R 128, max_position_embeddings 4096, factor 2, seq_len 6000",
     rule_dynamic(10000, 128, 2.0, 4096, 6000), [0, 1, 63], [BASE]),
    ("dynamic/seq8192", "dynamic NTK: base 10000, R 128, max_position_embeddings 4096, factor 2, seq_len 8192",
     rule_dynamic(10000, 128, 2.0, 4096, 8192), [1, 63], [BASE]),
    ("ntk/alpha1000", "NTK-alpha (Hunyuan): base 10000, R 128, alpha 1000",
     rule_ntk(10000, 128, 1000.0), [0, 1, 63], [ATTN, BASE]),
    ("yarn/qwen2.5-f4", "Qwen2.5-7B + YaRN: base 1e6, R 128, factor 4, original 32768, beta 32/1",
     rule_yarn(1000000, 128, 4.0, 32768), [0, 22, 23, 24, 30, 31, 39, 40, 45, 63], [ATTN, LOW, HIGH]),
    ("yarn/gpt-oss-f32", "gpt-oss: base 150000, R 64, factor 32, original 4096, beta 32/1, truncate false",
     rule_yarn(150000, 64, 32.0, 4096, truncate=False), [0, 8, 9, 10, 12, 16, 17, 18, 31], [ATTN, LOW, HIGH]),
    ("yarn/gpt-oss-f32-truncated", "as gpt-oss with truncate true",
     rule_yarn(150000, 64, 32.0, 4096, truncate=True), [8, 10, 12, 16, 31], [ATTN, LOW, HIGH]),
    ("yarn/deepseek-v3", "DeepSeek-V3: base 10000, R 64, factor 40, original 4096, beta 32/1, mscale 1, mscale_all_dim 1",
     rule_yarn(10000, 64, 40.0, 4096, mscale=1.0, mscale_all_dim=1.0), [0, 10, 11, 16, 22, 23, 31],
     [ATTN, LOW, HIGH]),
    ("yarn/mscale-only", "DeepSeek-V3 geometry with only mscale 0.707 (HF: get_mscale(factor))",
     rule_yarn(10000, 64, 40.0, 4096, mscale=0.707), [], [ATTN]),
    ("yarn/mscale-pair", "DeepSeek-V3 geometry with mscale 0.707, mscale_all_dim 1.0",
     rule_yarn(10000, 64, 40.0, 4096, mscale=0.707, mscale_all_dim=1.0), [], [ATTN]),
    ("yarn/kimi-k2", "Kimi-K2 (reported): base 50000, R 64, factor 32, original 4096, beta 1/1",
     rule_yarn(50000, 64, 32.0, 4096, beta_fast=1.0, beta_slow=1.0), [0, 19, 20, 21, 31], [ATTN, LOW, HIGH]),
    ("longrope/phi3-short", "Phi-3-vision-128k: base 10000, R 96, original 4096, max 131072, no seq_len (short)",
     rule_longrope(10000, 96, PHI3_SHORT, PHI3_LONG, 4096, 131072), [0, 1, 24, 47], [ATTN]),
    ("longrope/phi3-long", "Phi-3-vision-128k at seq_len 4097 (long factors)",
     rule_longrope(10000, 96, PHI3_SHORT, PHI3_LONG, 4096, 131072, seq_len=4097), [0, 1, 24, 47], [ATTN]),
    ("llama3/llama-3.1-8b", "Llama-3.1-8B: base 500000, R 128, factor 8, low 1, high 4, original 8192",
     rule_llama3(500000, 128, 8.0, 1.0, 4.0, 8192), [0, 28, 29, 30, 31, 32, 33, 34, 35, 63], [ATTN]),
    ("llama3/llama-3.2-f32", "Llama-3.2-1B/3B: base 500000, R 128, factor 32, low 1, high 4, original 8192",
     rule_llama3(500000, 128, 32.0, 1.0, 4.0, 8192), [30, 63], []),
    ("llama3/llama4-scout", "Llama-4-Scout: base 500000, R 128, factor 16, low 1, high 1, original 8192",
     rule_llama3(500000, 128, 16.0, 1.0, 1.0, 8192), [0, 34, 35, 63], []),
]


def render():
    lines = [
        "// Generated by scripts/golden_frequency_rules.py (mpmath, 320 bits): do not edit.",
        "// {case name, value code (pair index, or -1 attention factor, -2 effective base, -3/-4 YaRN low/high),",
        "//  value to %d significant digits}" % DIGITS,
    ]
    for name, desc, (thetas, attn, extra), pairs, codes in CASES:
        lines.append("// %s: %s" % (name, desc))
        for i in pairs:
            lines.append('{"%s", %d, "%s"},' % (name, i, nstr(thetas[i], DIGITS, strip_zeros=False)))
        for c in codes:
            v = attn if c == ATTN else extra[c]
            lines.append('{"%s", %d, "%s"},' % (name, c, nstr(v, DIGITS, strip_zeros=False)))
    return "\n".join(lines) + "\n"


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden_frequency_rules.inc")
    text = render()
    if "--check" in sys.argv[1:]:
        with open(out) as f:
            if f.read() != text:
                print("tests/golden_frequency_rules.inc is stale: run scripts/golden_frequency_rules.py")
                return 1
        return 0
    with open(out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
