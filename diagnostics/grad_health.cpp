// grad_health.cpp — counts float16's fate for each value (on the host, in double).
#include "diagnostics/grad_health.h"

#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace ampgrad::amp {

GradHealth grad_health(const Tensor& grad, double scale) {
  GradHealth h;
  if (!grad.defined()) return h;
  std::vector<double> v = to_vector<double>(grad);
  h.numel = (int64_t)v.size();
  const double min_sub = std::ldexp(1.0, -24), min_normal = std::ldexp(1.0, -14), max_half = 65504.0;
  for (double g : v) {
    double a = std::abs(g * scale);
    if (!std::isfinite(a) || a > max_half) h.overflow++;
    else if (a == 0) h.zero++;
    else if (a <= min_sub / 2) h.flushed++;  // at most half the smallest subnormal: rounds to 0
    else if (a < min_normal) h.subnormal++;
  }
  if (h.numel) for (double* f : {&h.zero, &h.subnormal, &h.flushed, &h.overflow}) *f /= (double)h.numel;
  return h;
}

void print_grad_health(std::ostream& os, const std::string& name, const GradHealth& b, const GradHealth& a) {
  auto pct = [](double f) { std::ostringstream s; s << std::fixed << std::setprecision(1) << 100 * f << "%"; return s.str(); };
  os << std::left << std::setw(14) << name << " zero " << std::setw(7) << pct(b.zero) << "| unscaled: flushed "
     << std::setw(7) << pct(b.flushed) << "subnormal " << std::setw(7) << pct(b.subnormal) << "| scaled: flushed "
     << std::setw(7) << pct(a.flushed) << "subnormal " << std::setw(7) << pct(a.subnormal) << "overflow " << pct(a.overflow) << "\n";
}

}  // namespace ampgrad::amp
