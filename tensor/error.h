// error.h — the library's one error type and the check macro every layer uses.
// Messages name the op and the offending shapes/dtypes, e.g.
//   "matmul: cannot multiply shapes [2, 3] and [4, 5]".
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ampgrad {

struct Error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

std::string shape_str(const std::vector<int64_t>& shape);  // "[2, 3]"

}  // namespace ampgrad

// AMPGRAD_CHECK(cond, "op: message " << value): throws ampgrad::Error when cond is false.
// Active in every build type: bad input never reaches a kernel.
#define AMPGRAD_CHECK(cond, msg)                                   \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::ostringstream ampgrad_check_os_;                        \
      ampgrad_check_os_ << msg;                                    \
      throw ::ampgrad::Error(ampgrad_check_os_.str());             \
    }                                                              \
  } while (0)
