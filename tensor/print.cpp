// print.cpp — a tensor printed as PyTorch prints it: tensor([[1.0000, 2.0000]], dtype=float16),
// torch/_tensor_str.py's widths, scientific notation, summaries of large tensors and suffixes.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "tensor/tensor.h"

namespace ampgrad {

// ---- printing, in PyTorch's style: tensor([[1.0000, 2.0000]], dtype=float16) ----
namespace {
struct Formatter {
  bool is_float, integral = true, sci = false;
  int width = 1;
  explicit Formatter(const std::vector<double>& v, bool fp) : is_float(fp) {
    double amax = 0, amin_nz = INFINITY;
    for (double x : v) {
      if (!std::isfinite(x)) continue;
      if (x != std::round(x)) integral = false;
      amax = std::max(amax, std::abs(x));
      if (x != 0) amin_nz = std::min(amin_nz, std::abs(x));
    }
    // torch/_tensor_str.py's rule, over the finite nonzero values
    sci = is_float && amin_nz < INFINITY && (amax / amin_nz > 1000 || amax > 1e8 || (!integral && amin_nz < 1e-4));
    for (double x : v)  // as PyTorch: a float column is as wide as its finite nonzero values
      if (!is_float || (std::isfinite(x) && x != 0)) width = std::max<int>(width, (int)str(x).size());
  }
  std::string str(double x) const {
    std::ostringstream os;
    if (!is_float) os << (int64_t)x;
    else if (std::isnan(x)) os << "nan";
    else if (std::isinf(x)) os << (x > 0 ? "inf" : "-inf");
    else if (sci) os << std::scientific << std::setprecision(4) << x;
    else if (integral) os << (int64_t)x << ".";
    else os << std::fixed << std::setprecision(4) << x;
    return os.str();
  }
};
// What a summarised print shows (the first and last 3 along every dim longer than 6): all that
// PyTorch's formatter measures widths and picks scientific notation from.
std::vector<double> shown(const std::vector<double>& v, const Shape& shape) {
  std::vector<double> out;
  Shape idx(shape.size(), 0);
  for (double x : v) {
    bool keep = true;
    for (size_t d = 0; d < shape.size() && keep; ++d) keep = shape[d] <= 6 || idx[d] < 3 || idx[d] >= shape[d] - 3;
    if (keep) out.push_back(x);
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0 && ++idx[d] == shape[d]; --d) idx[d] = 0;
  }
  return out;
}
constexpr int kLineWidth = 80;  // torch's PRINT_OPTS.linewidth

// One tensor (or, below the first dim, one slice of it) at column `indent`, as
// torch/_tensor_str.py writes it: rows of the last dim wrap at the line width, and slices are
// separated by as many newlines as they have dims.
void print_rec(std::ostream& os, const std::vector<double>& v, const Shape& shape, size_t d, int64_t off,
               const Formatter& f, int indent, bool summarize, bool is_bool) {
  if (shape.empty()) { os << f.str(v[0]); return; }
  const int64_t n = shape[d];
  const bool elided = summarize && n > 6;  // the first and last 3, and "..." between
  if (d + 1 == shape.size()) {
    std::vector<std::string> items;
    for (int64_t i = 0; i < n; ++i) {
      if (elided && i == 3) {
        items.push_back(" ...");
        i = n - 3;
      }
      const double x = v[off + i];
      const std::string s = is_bool ? (x != 0 ? "True" : "False") : f.str(x);
      items.push_back(std::string(std::max<int>(0, f.width - (int)s.size()), ' ') + s);
    }
    const size_t per_line = std::max(1, (kLineWidth - indent) / (f.width + 2));  // ", " after each
    os << "[";
    for (size_t i = 0; i < items.size(); ++i)
      os << (i == 0 ? "" : i % per_line ? ", " : ",\n" + std::string(indent + 1, ' ')) << items[i];
    os << "]";
    return;
  }
  int64_t inner = 1;
  for (size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
  const std::string between = "," + std::string(shape.size() - d - 1, '\n') + std::string(indent + 1, ' ');
  os << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (elided && i == 3) {
      os << "..." << between;
      i = n - 3;
    }
    print_rec(os, v, shape, d + 1, off + i * inner, f, indent + 1, summarize, is_bool);
    if (i + 1 < n) os << between;
  }
  os << "]";
}

// "tensor(" + body, then ", device=...", ", dtype=..." and the like, each on a line of its own
// (at `indent`) where it would pass the line width: torch/_tensor_str.py's _add_suffixes, its
// line-length arithmetic included.
std::string with_suffixes(const std::string& body, const std::vector<std::string>& suffixes, int indent) {
  std::string out = body;
  const size_t newline = body.rfind('\n');
  int64_t last_line = newline == std::string::npos ? int64_t(body.size()) + 2 : int64_t(body.size() - newline) + 1;
  for (const std::string& s : suffixes) {
    if (last_line + int64_t(s.size()) + 2 > kLineWidth) {
      out += ",\n" + std::string(indent, ' ') + s;
      last_line = indent + int64_t(s.size());
    } else {
      out += ", " + s;
      last_line += int64_t(s.size()) + 2;
    }
  }
  return out + ")";
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  std::vector<double> v = to_vector<double>(t);
  bool is_bool = t.dtype() == kBool;
  const bool summarize = t.numel() > 1000;
  const std::vector<double> measured = summarize ? shown(v, t.shape()) : v;
  Formatter f(measured, t.is_floating_point());
  if (is_bool) f.width = std::any_of(measured.begin(), measured.end(), [](double x) { return x == 0; }) ? 5 : 4;
  const std::string prefix = "tensor(";
  std::ostringstream body;
  body << prefix;
  std::vector<std::string> suffixes;  // in PyTorch's order
  if (!t.device().is_cpu()) suffixes.push_back("device='" + t.device().str() + "'");
  if (t.numel() == 0) {  // no elements to show the shape or the dtype by, so both are named
    body << "[]";
    if (t.dim() != 1) {
      std::ostringstream size;
      size << "size=(";
      for (int64_t d = 0; d < t.dim(); ++d) size << (d ? ", " : "") << t.size(d);
      suffixes.push_back(size.str() + ")");
    }
    if (t.dtype() != kFloat32) suffixes.push_back(std::string("dtype=") + dtype_name(t.dtype()));
  } else {
    print_rec(body, v, t.shape(), 0, 0, f, int(prefix.size()), summarize, is_bool);
    if (t.dtype() != kFloat32 && t.dtype() != kInt64 && t.dtype() != kBool) suffixes.push_back(std::string("dtype=") + dtype_name(t.dtype()));
  }
  if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  return os << with_suffixes(body.str(), suffixes, int(prefix.size()));
}
std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

}  // namespace ampgrad
