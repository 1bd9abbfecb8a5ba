/*
 * dtype_conv - conversions between double and the task element types (dtype_conv.h).
 *
 * The four narrow float formats share one encoder and one decoder parameterised by the
 * format's exponent/mantissa widths, so rounding is written (and tested) once: the value
 * is scaled by its quantum (a power of two, so the division is exact) and rounded with
 * rint(), which rounds to nearest-even in the default floating-point environment.
 */
#include "core/dtype_conv.h"

#include <math.h>
#include <string.h>

struct fmt {
    int ebits, mbits, bias;
    int has_inf;              /* 0 for e4m3: the all-ones exponent still holds numbers */
};

static const struct fmt FMT_F16 = { 5, 10, 15, 1 };
static const struct fmt FMT_BF16 = { 8, 7, 127, 1 };
static const struct fmt FMT_E4M3 = { 4, 3, 7, 0 };
static const struct fmt FMT_E5M2 = { 5, 2, 15, 1 };

static uint32_t fmt_all_ones_exp(const struct fmt *f) { return (1u << f->ebits) - 1; }

/* Bits of the largest finite value, without sign. */
static uint32_t fmt_max_finite(const struct fmt *f)
{
    uint32_t mmask = (1u << f->mbits) - 1;
    if (f->has_inf)
        return ((fmt_all_ones_exp(f) - 1) << f->mbits) | mmask;
    /* e4m3: the top exponent is usable except for the all-ones mantissa (NaN). */
    return (fmt_all_ones_exp(f) << f->mbits) | (mmask - 1);
}

static uint32_t fmt_nan(const struct fmt *f)
{
    if (f->has_inf)
        return (fmt_all_ones_exp(f) << f->mbits) | (1u << (f->mbits - 1));
    return (fmt_all_ones_exp(f) << f->mbits) | ((1u << f->mbits) - 1);
}

static uint32_t encode(double x, const struct fmt *f)
{
    uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0;
    uint32_t inf_bits = fmt_all_ones_exp(f) << f->mbits;
    double a = fabs(x);
    int e2 = 0;

    if (isnan(x))
        return sign | fmt_nan(f);
    if (isinf(a))
        return sign | (f->has_inf ? inf_bits : fmt_max_finite(f));
    if (a == 0.0)
        return sign;
    (void)frexp(a, &e2);              /* a = fr * 2^e2, fr in [0.5, 1) */
    int exp = e2 - 1;                 /* a in [2^exp, 2^(exp+1)) */
    int emin = 1 - f->bias;
    if (exp < emin)
        exp = emin;                   /* subnormal: the quantum stops shrinking */
    double m = rint(ldexp(a, f->mbits - exp));   /* mantissa with its leading bit */
    double top = ldexp(1.0, f->mbits + 1);
    if (m >= top) {                   /* rounded up into the next binade */
        m = ldexp(1.0, f->mbits);
        exp++;
    }
    uint32_t mi = (uint32_t)m;
    uint32_t bits;
    if (mi < (1u << f->mbits)) {
        bits = mi;                    /* subnormal (exp == emin) or zero */
    } else {
        int64_t field = (int64_t)exp + f->bias;
        uint32_t mant = mi - (1u << f->mbits);
        if (field > (int64_t)fmt_all_ones_exp(f) ||
            (f->has_inf && field == (int64_t)fmt_all_ones_exp(f)))
            return sign | (f->has_inf ? inf_bits : fmt_max_finite(f));
        bits = ((uint32_t)field << f->mbits) | mant;
        if (!f->has_inf && bits > fmt_max_finite(f))
            bits = fmt_max_finite(f); /* e4m3: would be the NaN pattern: saturate */
    }
    return sign | bits;
}

static double decode(uint32_t bits, const struct fmt *f)
{
    uint32_t mmask = (1u << f->mbits) - 1;
    uint32_t field = (bits >> f->mbits) & fmt_all_ones_exp(f);
    uint32_t mant = bits & mmask;
    int neg = (bits >> (f->ebits + f->mbits)) & 1;
    double v;

    if (field == fmt_all_ones_exp(f) && f->has_inf) {
        v = mant ? NAN : INFINITY;
    } else if (field == fmt_all_ones_exp(f) && mant == mmask) {
        v = NAN;                      /* e4m3 NaN */
    } else if (field == 0) {
        v = ldexp((double)mant, 1 - f->bias - f->mbits);
    } else {
        v = ldexp((double)(mant | (1u << f->mbits)), (int)field - f->bias - f->mbits);
    }
    return neg ? -v : v;
}

uint16_t kevo_f16_from_double(double x) { return (uint16_t)encode(x, &FMT_F16); }
double kevo_f16_to_double(uint16_t h) { return decode(h, &FMT_F16); }
uint16_t kevo_bf16_from_double(double x) { return (uint16_t)encode(x, &FMT_BF16); }
double kevo_bf16_to_double(uint16_t h) { return decode(h, &FMT_BF16); }
uint8_t kevo_e4m3_from_double(double x) { return (uint8_t)encode(x, &FMT_E4M3); }
double kevo_e4m3_to_double(uint8_t b) { return decode(b, &FMT_E4M3); }
uint8_t kevo_e5m2_from_double(double x) { return (uint8_t)encode(x, &FMT_E5M2); }
double kevo_e5m2_to_double(uint8_t b) { return decode(b, &FMT_E5M2); }

/* ---- integers ---- */

/* Round to nearest and clamp to [lo, hi]; NaN becomes 0 (an integer has no NaN). */
static int64_t round_clamp(double x, double lo, double hi)
{
    if (isnan(x))
        return 0;
    if (x <= lo)
        return (int64_t)lo;
    if (x >= hi)
        return x >= 9.2233720368547758e18 ? INT64_MAX : (int64_t)hi;
    return llround(x);
}

#define PUT(type, v) do { type t_ = (type)(v); memcpy((char *)base + i * (int64_t)sizeof t_, \
                                                       &t_, sizeof t_); } while (0)

void kevo_dt_store(enum kevo_dtype dt, void *base, int64_t i, double x)
{
    switch (dt) {
    case KEVO_F64:     PUT(double, x); break;
    case KEVO_F32:     PUT(float, x); break;
    case KEVO_F16:     PUT(uint16_t, kevo_f16_from_double(x)); break;
    case KEVO_BF16:    PUT(uint16_t, kevo_bf16_from_double(x)); break;
    case KEVO_FP8E4M3: PUT(uint8_t, kevo_e4m3_from_double(x)); break;
    case KEVO_FP8E5M2: PUT(uint8_t, kevo_e5m2_from_double(x)); break;
    case KEVO_I64:     PUT(int64_t, round_clamp(x, -9.2233720368547758e18, 9.2233720368547758e18));
                       break;
    case KEVO_I32:     PUT(int32_t, round_clamp(x, INT32_MIN, INT32_MAX)); break;
    case KEVO_I16:     PUT(int16_t, round_clamp(x, INT16_MIN, INT16_MAX)); break;
    case KEVO_I8:      PUT(int8_t, round_clamp(x, INT8_MIN, INT8_MAX)); break;
    case KEVO_U8:      PUT(uint8_t, round_clamp(x, 0, UINT8_MAX)); break;
    case KEVO_BOOL:    PUT(uint8_t, round_clamp(x, -1, 1) != 0); break;
    default:           break;
    }
}

static int64_t clamp_i(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

void kevo_dt_store_int(enum kevo_dtype dt, void *base, int64_t i, int64_t v)
{
    switch (dt) {
    case KEVO_I64:  PUT(int64_t, v); break;
    case KEVO_I32:  PUT(int32_t, clamp_i(v, INT32_MIN, INT32_MAX)); break;
    case KEVO_I16:  PUT(int16_t, clamp_i(v, INT16_MIN, INT16_MAX)); break;
    case KEVO_I8:   PUT(int8_t, clamp_i(v, INT8_MIN, INT8_MAX)); break;
    case KEVO_U8:   PUT(uint8_t, clamp_i(v, 0, UINT8_MAX)); break;
    case KEVO_BOOL: PUT(uint8_t, v != 0); break;
    default:        kevo_dt_store(dt, base, i, (double)v); break;
    }
}

#define GET(type) do { type t_; memcpy(&t_, (const char *)base + i * (int64_t)sizeof t_, \
                                       sizeof t_); return t_; } while (0)
#define GET_AS(type, conv) do { type t_; memcpy(&t_, (const char *)base + i * \
                                (int64_t)sizeof t_, sizeof t_); return conv(t_); } while (0)

double kevo_dt_load(enum kevo_dtype dt, const void *base, int64_t i)
{
    switch (dt) {
    case KEVO_F64:     GET(double);
    case KEVO_F32:     GET(float);
    case KEVO_F16:     GET_AS(uint16_t, kevo_f16_to_double);
    case KEVO_BF16:    GET_AS(uint16_t, kevo_bf16_to_double);
    case KEVO_FP8E4M3: GET_AS(uint8_t, kevo_e4m3_to_double);
    case KEVO_FP8E5M2: GET_AS(uint8_t, kevo_e5m2_to_double);
    default:           return (double)kevo_dt_load_int(dt, base, i);
    }
}

int64_t kevo_dt_load_int(enum kevo_dtype dt, const void *base, int64_t i)
{
    switch (dt) {
    case KEVO_I64:  GET(int64_t);
    case KEVO_I32:  GET(int32_t);
    case KEVO_I16:  GET(int16_t);
    case KEVO_I8:   GET(int8_t);
    case KEVO_U8:   GET(uint8_t);
    case KEVO_BOOL: GET(uint8_t);
    case KEVO_F64: case KEVO_F32: case KEVO_F16: case KEVO_BF16:
    case KEVO_FP8E4M3: case KEVO_FP8E5M2: {
        double d = kevo_dt_load(dt, base, i);
        return isfinite(d) && fabs(d) < 9.2e18 ? (int64_t)d : 0;
    }
    default:
        return 0;
    }
}

uint64_t kevo_dt_bits(enum kevo_dtype dt, const void *base, int64_t i)
{
    switch (dt) {
    case KEVO_F64: case KEVO_I64:
        GET(uint64_t);
    case KEVO_F32: case KEVO_I32:
        GET(uint32_t);
    case KEVO_F16: case KEVO_BF16: case KEVO_I16:
        GET(uint16_t);
    default:
        GET(uint8_t);
    }
}
