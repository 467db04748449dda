// checked_int.h — a number read from a file (a saved state's epoch, an optimizer's step count, a
// scaler's growth_interval) or passed to an int64 tensor (fill_, mul_) turned into an int64 only
// when it is one: a plain cast of 1e300 or NaN is undefined behaviour, and a fractional or
// negative count is a corrupt file.
//
//   int64_t step = checked_int64(value, path + ": 'step'", 1);   // else "...: 'step' must be a whole number in [1, ...], got 1e+300"
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "tensor/error.h"

namespace ampgrad {

// Whether value converts to int64 without overflow (NaN does not), and whether it is whole too.
// -2^63 and 2^63 are exact doubles, so the range test before any cast is exact.
inline bool fits_int64(double value) { return value >= -0x1p63 && value < 0x1p63; }
inline bool is_int64(double value) { return fits_int64(value) && value == std::trunc(value); }

// value as an int64, or an Error "<what> must be a whole number in [lo, hi], got <value>".
inline int64_t checked_int64(double value, const std::string& what, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
  AMPGRAD_CHECK(is_int64(value) && int64_t(value) >= lo && int64_t(value) <= hi,
                what << " must be a whole number in [" << lo << ", " << hi << "], got " << value);
  return int64_t(value);
}

}  // namespace ampgrad
