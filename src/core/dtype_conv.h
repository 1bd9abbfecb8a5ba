/*
 * dtype_conv - host-side conversions between double and every element type of a task
 * (enum kevo_dtype), used by verify to write generated inputs and read outputs.
 *
 * The narrow float formats are encoded from double directly with round-to-nearest-even
 * (one rounding, never double->float->half, which can round twice):
 *   f16      IEEE binary16    (5 exponent bits, 10 mantissa bits, bias 15)
 *   bf16     bfloat16         (8, 7, bias 127)
 *   fp8e4m3  OCP E4M3 "fn"    (4, 3, bias 7; no infinities; S.1111.111 is NaN; max 448)
 *   fp8e5m2  OCP E5M2         (5, 2, bias 15; IEEE-like with infinities)
 * A finite value beyond a format's largest finite value becomes +-Inf for f16/bf16/e5m2
 * (IEEE behaviour) and saturates to +-448 for e4m3, which has no infinity (the
 * __nv_cvt_*_satfinite convention). NaN stays NaN (a quiet NaN with the sign kept).
 * Integer types round to nearest (ties away from zero, llround) and clamp to the type's
 * range; bool stores 1 for a nonzero value after rounding, else 0.
 *
 * Pure functions; thread-safe.
 */
#ifndef KEVO_DTYPE_CONV_H
#define KEVO_DTYPE_CONV_H

#include "core/task.h"
#include <stdint.h>

/* Narrow float formats: double -> bits (RNE) and bits -> double (exact). */
uint16_t kevo_f16_from_double(double x);
double kevo_f16_to_double(uint16_t h);
uint16_t kevo_bf16_from_double(double x);
double kevo_bf16_to_double(uint16_t h);
uint8_t kevo_e4m3_from_double(double x);
double kevo_e4m3_to_double(uint8_t b);
uint8_t kevo_e5m2_from_double(double x);
double kevo_e5m2_to_double(uint8_t b);

/* Store x as element i of an array of type dt (rounded/clamped as described above). */
void kevo_dt_store(enum kevo_dtype dt, void *base, int64_t i, double x);
/* Store an exact integer (randint): floats get the nearest representable value. */
void kevo_dt_store_int(enum kevo_dtype dt, void *base, int64_t i, int64_t v);
/* Element i of an array of type dt as a double (integers converted; exact up to 2^53). */
double kevo_dt_load(enum kevo_dtype dt, const void *base, int64_t i);
/* Element i of an integer/bool array as int64 (floats: truncated; for integer use only). */
int64_t kevo_dt_load_int(enum kevo_dtype dt, const void *base, int64_t i);
/* The raw bits of element i, zero-extended (the element is kevo_dtype_size(dt) bytes). */
uint64_t kevo_dt_bits(enum kevo_dtype dt, const void *base, int64_t i);

#endif
