// flags.h — the checks the examples' command lines put on their numeric flags, so
// that a nonsensical value fails before any work, CLI11 naming the flag:
//   "--epochs: must be a whole number in [1, 1000000], got '0'"
// Each check reads the flag's text itself: CLI11's conversion would wrap "-1" for an unsigned
// seed, and strtod reads "inf" and "nan" as numbers. Checks between flags stay in train().
//
//   app.add_option("--epochs", c.epochs)->check(examples::whole_number(1, 1'000'000));
//   app.add_option("--lr", c.lr)->check(examples::real_number(0, /*above_lo=*/true));
#pragma once
#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

namespace ampgrad::examples {

// A whole number, written in decimal digits (with a leading '-' where lo < 0), in [lo, hi].
inline CLI::Validator whole_number(int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max()) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        const bool ok = !text.empty() && ec == std::errc() && end == text.data() + text.size() && v >= lo && v <= hi;
        return ok ? "" : "must be a whole number in " + range + ", got '" + text + "'";
      },
      range);  // --help shows "INT:[1, 1048576]"
}

// A finite number >= lo (> lo with above_lo), and <= hi when one is given.
inline CLI::Validator real_number(double lo, bool above_lo = false, double hi = INFINITY) {
  std::ostringstream os;
  os << (above_lo ? "> " : ">= ") << lo;
  if (hi < INFINITY) os << " and <= " << hi;
  const std::string bounds = os.str();  // ">= 0", "> 0", ">= 0 and <= 0.99"
  return CLI::Validator(
      [lo, above_lo, hi, bounds](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool ok = !text.empty() && *end == '\0' && std::isfinite(v) && (above_lo ? v > lo : v >= lo) && v <= hi;
        return ok ? "" : "must be a finite number " + bounds + ", got '" + text + "'";
      },
      "finite, " + bounds);  // --help shows "FLOAT:finite, >= 0"
}

}  // namespace ampgrad::examples
