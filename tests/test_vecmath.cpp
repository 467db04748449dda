// test_vecmath.cpp — the accuracy of tensor/scalar_math.h's float32 math as the CPU's vectorised
// kernels run it: exp, log, log1p, tanh, sigmoid, silu (its two kernels), gelu and gelu's
// derivative, each against a float64 reference over the whole float32 range, in ulps of the
// float32 result, with NaN, ±inf and ±0 as PyTorch gives them. By default every 4099th float32
// bit pattern (about a million inputs) and the special values; AMPGRAD_ULP_STRIDE=N takes every
// Nth (1: all of them, about two hours) and prints the table quoted in docs/results.md:
//   AMPGRAD_ULP_STRIDE=61 build/tests/test_vecmath -tc='*max ulp*'
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/scalar_math.h"

using namespace ampgrad;

namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }

struct Functor {
  const char* name;
  std::function<Tensor(const Tensor&)> op;  // as the library runs it on a float32 tensor
  std::function<double(double)> reference;  // in float64
  double bound;                             // max ulps: the every-61st-float32 walk's max, rounded up (docs/results.md)
  // The error is in ulps of |reference| (as float32), or of this where the result cancels to 0:
  // gelu'(x) = Φ(x) + x φ(x) has a root at x = −0.75, where any float32 evaluation of its two
  // terms is off by an ulp of the terms, not of their tiny sum.
  std::function<double(double, double)> magnitude = [](double x, double ref) { return std::fabs(ref); };
};

double subnormal_factor(double x, double ref) { return std::max(std::fabs(ref), std::fabs(x) * FLT_MIN); }

const Functor kFunctors[] = {
    {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, 1},
    {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 1},
    {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, 1.5},
    {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, 1.5},
    {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }, 3},
    // x times σ(x) or Φ(x) rounded to float32: where that is subnormal (x < −87.3, −13.0) its rounding
    // is up to half of 2^−149, |x|/2 ulps of the product, so the error there is in ulps of |x|·FLT_MIN
    {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x / (1 + std::exp(-x)); }, 4, subnormal_factor},
    {"gelu", [](const Tensor& x) { return gelu(x); }, [](double x) { return x * normal_cdf(x); }, 8, subnormal_factor},
    {"gelu_backward", [](const Tensor& x) { return kernels::binary(kernels::Binary::gelu_backward, ones_like(x), x); },
     [](double x) { return normal_cdf(x) + x * normal_pdf(x); }, 8,
     [](double x, double ref) { return std::max({normal_cdf(x), std::fabs(x * normal_pdf(x)), subnormal_factor(x, ref)}); }},
};

float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// The spacing of float32 at |v|: 2^(e − 23) for a normal v, the subnormals' 2^−149 below.
double ulp_at(double v) { return std::ldexp(1.0, std::max(std::ilogb(std::max(std::fabs(v), double(FLT_MIN))), -126) - 23); }

// |y − ref| in ulps; a NaN must meet a NaN, an infinity what rounds to it (then 0), and an
// infinity where a finite value belongs counts as 2^128, the next power of two past FLT_MAX.
double ulps(const Functor& f, float x, float y) {
  const double ref = f.reference(x);
  if (std::isnan(ref) || std::isnan(y)) return std::isnan(ref) && std::isnan(y) ? 0 : INFINITY;
  if (std::isinf(float(ref)) && y == float(ref)) return 0;
  const double yd = std::isinf(y) ? std::copysign(std::ldexp(1.0, 128), y) : double(y);
  if (yd == ref) return 0;  // exact, ±0 included: y's sign is checked below
  return std::fabs(yd - ref) / ulp_at(f.magnitude(x, ref));
}

struct Worst {
  double ulps = 0;
  float at = 0;
  int64_t count = 0;
};

// Runs f on xs as one tensor (the vectorised kernel) and folds its errors into worst.
void measure(const Functor& f, const std::vector<float>& xs, Worst& worst) {
  const std::vector<float> ys = to_vector<float>(f.op(from_vector(xs)));
  for (size_t i = 0; i < xs.size(); ++i) {
    const double e = ulps(f, xs[i], ys[i]);
    if (e > worst.ulps) worst = {e, xs[i], worst.count};
  }
  worst.count += int64_t(xs.size());
}

}  // namespace

TEST_CASE("float32 exp, log, log1p, tanh, sigmoid, silu and gelu: max ulp error against float64 over all of float32, within each bound") {
  const char* env = std::getenv("AMPGRAD_ULP_STRIDE");
  const uint64_t stride = env ? std::strtoull(env, nullptr, 10) : 4099;
  REQUIRE_MESSAGE(stride >= 1, "AMPGRAD_ULP_STRIDE=" << env << ": a positive whole number");
  // 0, ±the smallest subnormal and normal, ±FLT_MAX, ±inf, NaN, and where exp and σ overflow,
  // turn subnormal and reach 0 (ln FLT_MAX, ln FLT_MIN, ln 2^−149, ln 2^−150)
  const std::vector<float> special = {0.f, -0.f, 1.f, -1.f, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                                      INFINITY, -INFINITY, NAN, 88.7228394f, 88.7228469f, -87.3365479f, -103.278931f, -103.972076f,
                                      -88.7228394f, -88.7228469f, 87.3365479f, 103.278931f, 103.972076f, 0.625f, -0.75179f};
  std::printf("%-14s %-16s %12s %10s  %s\n", "functor", "float32s", "count", "max ulp", "at x");
  for (const Functor& f : kFunctors) {
    Worst worst;
    measure(f, special, worst);
    std::vector<float> xs;
    for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += stride) {
      xs.push_back(from_bits(uint32_t(bits)));
      if (xs.size() == (1u << 22)) measure(f, xs, worst), xs.clear();
    }
    measure(f, xs, worst);
    std::printf("%-14s every %-10llu %12lld %10.3f  %.9g\n", f.name, (unsigned long long)stride, (long long)worst.count, worst.ulps, worst.at);
    CHECK_MESSAGE(worst.ulps <= f.bound, f.name << ": " << worst.ulps << " ulps at x = " << worst.at << ", over its bound " << f.bound);
  }
}

TEST_CASE("float32 math: signs of zero, exact values and the tails PyTorch keeps") {
  for (const Functor& f : kFunctors)
    for (float x : {0.f, -0.f}) {
      const float y = to_vector<float>(f.op(from_vector(std::vector<float>{x})))[0], want = float(f.reference(x));
      CHECK_MESSAGE((y == want && std::signbit(y) == std::signbit(want)), f.name << "(" << x << ") = " << y << ", not " << want);
    }
  CHECK(math::normal_cdf(0.0f) == 0.5f);  // PyTorch's gelu'(0) = ½ exactly
  CHECK(math::gelu_grad(0.0f) == 0.5f);
  // Where 1 + erf(x/√2) cancels to 0, Φ keeps its digits: gelu(-6) is -6 Φ(-6), not 0.
  CHECK(math::gelu(-6.0f) == doctest::Approx(-6 * 9.865876450376946e-10).epsilon(1e-6).scale(0));
}
