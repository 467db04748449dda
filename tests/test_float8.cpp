// test_float8.cpp — FP8 training from the bits up. The two formats against their closed form
// (every code decoded; rounding checked against a brute-force nearest-even search, on every tie
// and around it), float8 tensors (casts from every dtype, printing, the refusal of compute ops),
// dynamic scaling, scaled_mm and float8_linear against the float8 arithmetic written out in
// float64, and float8_autocast in a training step: its output dtype under autocast, the trace,
// checkpoint's rerun, and a GradScaler skipping an overflowed step.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

#include "amp/autocast.h"
#include "diagnostics/autocast_log.h"
#include "amp/grad_scaler.h"
#include "autograd/checkpoint.h"
#include "autograd/float8.h"
#include "autograd/grad.h"
#include "autograd/ops.h"
#include "devices.h"
#include "nn/linear.h"
#include "optim/sgd.h"
#include "tensor/kernels.h"
#include "test_util.h"

using namespace ampgrad;

namespace {
// A format as its definition gives it, independent of tensor/float8.h.
struct Spec {
  DType dtype;
  int M, bias;
  double max_finite;
  int max_code, overflow_code;  // the largest finite code; what a value past it becomes (NaN, or inf)
};
const Spec kE4M3{kFloat8_e4m3fn, 3, 7, 448, 0x7E, 0x7F};
const Spec kE5M2{kFloat8_e5m2, 2, 15, 57344, 0x7B, 0x7C};

// The value of a non-negative code by the formula; max_code + 1 gives the first value past the largest.
double value_of(const Spec& f, int c) {
  const int e = c >> f.M, m = c & ((1 << f.M) - 1);
  return e == 0 ? std::ldexp(m, 1 - f.bias - f.M) : std::ldexp((1 << f.M) + m, e - f.bias - f.M);
}
uint8_t encode(const Spec& f, float x) { return f.dtype == kFloat8_e4m3fn ? float8_e4m3fn(x).bits : float8_e5m2(x).bits; }
float decode(const Spec& f, uint8_t c) {
  if (f.dtype == kFloat8_e4m3fn) { float8_e4m3fn v; v.bits = c; return float(v); }
  float8_e5m2 v;
  v.bits = c;
  return float(v);
}
float round_trip(const Spec& f, float x) { return decode(f, encode(f, x)); }

// Brute force: the nearest of all finite codes and the first one past them, ties to the even
// code; landing past them is the overflow.
int reference_code(const Spec& f, double x) {
  const double a = std::fabs(x);
  if (a >= value_of(f, f.max_code + 1)) return (std::signbit(x) ? 0x80 : 0) | f.overflow_code;  // beyond, nothing is nearer
  int best = 0;
  for (int c = 1; c <= f.max_code + 1; ++c) {
    const double d = std::fabs(a - value_of(f, c)), d_best = std::fabs(a - value_of(f, best));
    if (d < d_best || (d == d_best && c % 2 == 0)) best = c;
  }
  return (std::signbit(x) ? 0x80 : 0) | (best > f.max_code ? f.overflow_code : best);
}

std::vector<double> vec(const Tensor& t) { return to_vector<double>(t); }
Tensor f32(std::vector<float> v, Device dev, const Shape& s = {}) {
  return from_vector<float>(v, s.empty() ? Shape{(int64_t)v.size()} : s).to(dev);
}
bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }
// A float8 tensor's codes, as stored.
std::vector<uint8_t> codes(const Tensor& t) {
  const Tensor c = t.to(Device::cpu());
  const uint8_t* p = static_cast<const uint8_t*>(c.raw_data());
  return {p, p + c.numel()};
}
}  // namespace

TEST_CASE("every float8 code decodes to its closed form, specials and signed zero too") {
  for (const Spec& f : {kE4M3, kE5M2}) {
    CAPTURE(dtype_name(f.dtype));
    for (int c = 0; c < 256; ++c) {
      CAPTURE(c);
      const float v = decode(f, uint8_t(c));
      const int mag = c & 0x7F;
      if (mag <= f.max_code) {
        CHECK(v == (c & 0x80 ? -1 : 1) * value_of(f, mag));
        CHECK(std::signbit(v) == bool(c & 0x80));
        CHECK(encode(f, v) == c);  // every finite code round-trips
      } else if (f.dtype == kFloat8_e5m2 && mag == 0x7C) {
        CHECK(v == (c & 0x80 ? -INFINITY : INFINITY));
      } else {
        CHECK(std::isnan(v));
      }
    }
    CHECK(decode(f, uint8_t(f.max_code)) == f.max_finite);
  }
  CHECK(decode(kE4M3, 0x01) == std::ldexp(1.0, -9));   // smallest subnormals
  CHECK(decode(kE5M2, 0x01) == std::ldexp(1.0, -16));
  CHECK(encode(kE4M3, NAN) == 0x7F);
  CHECK(encode(kE4M3, -NAN) == 0xFF);
  CHECK(encode(kE5M2, NAN) == 0x7F);
  CHECK(encode(kE4M3, INFINITY) == 0x7F);  // no inf in e4m3fn: NaN, as PyTorch's cast
  CHECK(encode(kE5M2, -INFINITY) == 0xFC);
  CHECK(encode(kE4M3, -0.0f) == 0x80);
}

TEST_CASE("float8 rounding is to nearest, ties to even, against a brute-force search") {
  for (const Spec& f : {kE4M3, kE5M2}) {
    CAPTURE(dtype_name(f.dtype));
    // Every tie between neighbours (the midpoints are exact in float32), and a float32 ulp either side.
    for (int c = 0; c <= f.max_code; ++c) {
      CAPTURE(c);
      const float mid = float((value_of(f, c) + value_of(f, c + 1)) / 2);
      const int even = c % 2 == 0 ? c : c + 1;
      CHECK(encode(f, mid) == (even > f.max_code ? f.overflow_code : even));
      CHECK(encode(f, std::nextafter(mid, 0.0f)) == c);
      CHECK(encode(f, std::nextafter(mid, INFINITY)) == (c + 1 > f.max_code ? f.overflow_code : c + 1));
      CHECK(encode(f, -mid) == (0x80 | encode(f, mid)));
    }
    // Random float32 values over every binade from far below the subnormals to far past the top,
    // float32's own subnormals and extremes too.
    std::mt19937 rng(7);
    std::vector<float> xs = {std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), FLT_MAX, -FLT_MAX};
    for (int i = 0; i < 20000; ++i)
      xs.push_back(std::ldexp(1.0f + float(rng() & 0x7FFFFF) / float(1 << 23), int(rng() % 45) - 26) * (rng() & 1 ? -1 : 1));
    for (int i = 0; i < 200; ++i) xs.push_back(std::ldexp(float(rng() & 0x7FFFFF), -149));  // float32 subnormals
    for (float x : xs) {
      CAPTURE(x);
      CHECK(encode(f, x) == reference_code(f, x));
    }
  }
  // The named edges: e4m3fn's 464 is the tie between 448 and the first value past it (even: 448).
  CHECK(round_trip(kE4M3, 464.0f) == 448.0f);
  CHECK(std::isnan(round_trip(kE4M3, 464.00003f)));
  CHECK(round_trip(kE5M2, 61439.996f) == 57344.0f);
  CHECK(round_trip(kE5M2, 61440.0f) == INFINITY);  // the tie goes to the odd side's neighbour: inf
  CHECK(round_trip(kE4M3, std::ldexp(1.0f, -10)) == 0.0f);  // half the smallest subnormal: tie, to 0
  CHECK(round_trip(kE4M3, 1.5f * std::ldexp(1.0f, -10)) == std::ldexp(1.0f, -9));
}

DEVICE_TEST_CASE("to(float8) rounds as the scalar rule, from every dtype, contiguous and strided") {
  std::vector<float> v = {0.f, -0.f, 1.f, 17.f, 19.f, 464.f, 500.f, -1e-3f, 3e-6f, 57344.f, 70000.f, INFINITY, -INFINITY, NAN};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 30.f);
  while (v.size() < 40) v.push_back(normal(rng));
  for (const Spec& f : {kE4M3, kE5M2}) {
    CAPTURE(dtype_name(f.dtype));
    // float32, through a transposed view on the device
    const Tensor x = f32(v, dev, {5, 8}).t();
    const Tensor q = x.to(f.dtype);
    CHECK(q.dtype() == f.dtype);
    CHECK(q.element_size() == 1);
    const std::vector<double> got = vec(q.to(kFloat32)), want_src = vec(x);
    for (size_t i = 0; i < got.size(); ++i) {
      CAPTURE(want_src[i]);
      CHECK(same(got[i], round_trip(f, float(want_src[i]))));
    }
    // float64 goes through float32 first (as PyTorch's c10::Float8 constructors take a float)
    const double d = 1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -30);  // just past the e4m3 tie 1 + 2^-4
    CHECK(vec(from_vector<double>({d}).to(dev).to(f.dtype))[0] == round_trip(f, float(d)));
    // float16, bfloat16, int64 and bool convert exactly to float32, then round
    for (DType src : {kFloat16, kBFloat16, kInt64, kBool}) {
      CAPTURE(dtype_name(src));
      const Tensor s = from_vector<float>({0.f, 1.f, 17.f, 3.f, -9.f}).to(src).to(dev);
      const std::vector<double> back = vec(s.to(f.dtype)), exact = vec(s);
      for (size_t i = 0; i < back.size(); ++i) CHECK(back[i] == round_trip(f, float(exact[i])));
    }
    // And back: every code (NaN codes too) into every floating dtype, each value exact there;
    // contiguous (the CPU looks it up in a table) and through a transposed view (converted one
    // by one).
    std::vector<float> all;
    Tensor every = empty({16, 16}, f.dtype);
    for (int c = 0; c < 256; ++c) {
      all.push_back(decode(f, uint8_t(c)));
      static_cast<uint8_t*>(every.raw_data())[c] = uint8_t(c);
    }
    const Tensor on_dev = every.to(dev);
    for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      CAPTURE(dtype_name(t));
      const std::vector<double> flat = vec(on_dev.to(t)), strided = vec(on_dev.t().to(t).t());
      for (int c = 0; c < 256; ++c) CHECK((same(flat[c], all[c]) && same(strided[c], all[c])));
    }
  }
  // float8 to float8: through the value
  const Tensor e5 = f32({1.125f, 300.f, 1e-3f}, dev).to(kFloat8_e5m2);
  CHECK(vec(e5.to(kFloat8_e4m3fn)) == std::vector<double>{round_trip(kE4M3, 1.0f), round_trip(kE4M3, 320.f), round_trip(kE4M3, round_trip(kE5M2, 1e-3f))});
  // fill and zeros
  CHECK(vec(full({3}, 300.0, TensorOptions(kFloat8_e4m3fn).device(dev))) == std::vector<double>{288, 288, 288});
  CHECK(zeros({}, TensorOptions(kFloat8_e5m2).device(dev)).item<double>() == 0);
}

TEST_CASE("float8 tensors print and convert, and compute ops refuse them by name") {
  const Tensor q = from_vector<float>({1.f, -0.09375f, 44.f}).to(kFloat8_e4m3fn);
  CHECK(to_string(q) == "tensor([ 1.0000, -0.0938, 44.0000], dtype=float8_e4m3fn)");  // PyTorch's print, less "torch."
  CHECK(q.select(0, 2).item<float>() == 44.f);
  CHECK(to_string(q.to(kFloat8_e5m2)) == "tensor([ 1.0000, -0.0938, 48.0000], dtype=float8_e5m2)");  // 44: a tie, to 48
  CHECK(error_of([&] { q + q; }) == "add: not defined for dtype float8_e4m3fn");
  CHECK(error_of([&] { q * 2.0; }) == "mul: not defined for dtype float8_e4m3fn");
  CHECK(error_of([&] { q.sum(); }) == "sum: not defined for dtype float8_e4m3fn (float8 tensors hold data for scaled_mm; convert with .to(kFloat32) first)");
  CHECK(error_of([&] { matmul(q.reshape({1, 3}), q.reshape({3, 1})); }) == "gemm: expected a floating dtype, got float8_e4m3fn");
  CHECK(error_of([&] { q + from_vector<float>({1.f}); }).find("promotion of float8_e4m3fn with float32 is not supported") != std::string::npos);
  CHECK(vec(q.t().contiguous().to(kFloat32)) == std::vector<double>{1, -0.09375, 44});  // views and copies work
  // Autocast does not widen a float8 tensor into a GEMM either: its values are scaled data.
  {
    amp::autocast ac(DeviceType::CPU, kBFloat16);
    CHECK(error_of([&] { matmul(q.reshape({1, 3}), q.reshape({3, 1})); }) == "gemm: expected a floating dtype, got float8_e4m3fn");
  }
  // Nor is a cast to float8 differentiable, or a float8 tensor a parameter: a gradient narrowed
  // to 8 bits without a scale would be flushed or NaN.
  const Tensor w = ones({3}).requires_grad_();
  CHECK(!w.to(kFloat8_e5m2).requires_grad());
  CHECK(error_of([&] { Tensor(q).requires_grad_(); }) == "requires_grad_: only floating tensors of a compute dtype can require gradients, got float8_e4m3fn");
  nn::Linear fc(2, 2);
  CHECK(error_of([&] { fc.to(kFloat8_e4m3fn); }) == "Module::to: float8_e4m3fn holds no parameters (float8 tensors hold data for scaled_mm)");
}

DEVICE_TEST_CASE("to_float8: the largest magnitude lands on the largest finite, a scale per tensor") {
  const std::vector<float> v = {1.f, -3.f, 0.5f, 2.f, 1e-4f, -2.9f};
  for (const Spec& f : {kE4M3, kE5M2}) {
    CAPTURE(dtype_name(f.dtype));
    const Float8Tensor q = to_float8(f32(v, dev, {2, 3}), f.dtype);
    CHECK(q.data.dtype() == f.dtype);
    CHECK(q.data.shape() == Shape{2, 3});
    const float scale = float(f.max_finite) / 3.0f;  // max / amax, in float32
    CHECK(q.inv_scale.dtype() == kFloat32);
    CHECK(q.inv_scale.item<float>() == 1.0f / scale);
    const std::vector<double> got = vec(q.data.to(kFloat32));
    for (size_t i = 0; i < v.size(); ++i) {
      CAPTURE(v[i]);
      CHECK(got[i] == round_trip(f, std::clamp(v[i] * scale, float(-f.max_finite), float(f.max_finite))));
    }
    CHECK(got[1] == -f.max_finite);  // amax itself: saturated, never NaN or inf
  }
  // All zeros: a finite scale (amax taken as 1e-12), zeros out.
  const Float8Tensor z = to_float8(zeros({4}, TensorOptions().device(dev)), kFloat8_e4m3fn);
  CHECK(vec(z.data.to(kFloat32)) == std::vector<double>{0, 0, 0, 0});
  CHECK(std::isfinite(z.inv_scale.item<float>()));
  // A non-finite value leaves NaN for a GradScaler to find: inf makes the scale 0 (inf · 0 is NaN),
  // NaN makes it NaN.
  const std::vector<double> with_inf = vec(to_float8(f32({1.f, INFINITY, -2.f}, dev), kFloat8_e5m2).data.to(kFloat32));
  CHECK((with_inf[0] == 0 && std::isnan(with_inf[1]) && with_inf[2] == 0));
  for (double x : vec(to_float8(f32({1.f, NAN, -2.f}, dev), kFloat8_e5m2).data.to(kFloat32))) CHECK(std::isnan(x));
  // float16 and bfloat16 inputs take the same path (widened exactly first).
  CHECK(vec(to_float8(f32(v, dev).to(kBFloat16), kFloat8_e4m3fn).data.to(kFloat32)) ==
        vec(to_float8(f32(v, dev).to(kBFloat16).to(kFloat32), kFloat8_e4m3fn).data.to(kFloat32)));
  CHECK(error_of([&] { to_float8(f32(v, dev), kFloat16); }) == "to_float8: the target must be a float8 dtype, got float16");
}

DEVICE_TEST_CASE("to_float8's two fused passes give the values of the five ops they replaced, NaN and inf too") {
  Generator gen(21);
  // The narrowing as ops: widen, abs, a max, a scaled and clamped copy, the cast.
  const auto composed = [](const Tensor& x, const Tensor& scale, DType f8) {
    const double max = f8 == kFloat8_e4m3fn ? 448 : 57344;
    const Tensor xf = x.to(kFloat32), out = empty(x.shape(), TensorOptions(f8).device(x.device()));
    kernels::copy_(out, kernels::unary(kernels::Unary::clamp, kernels::binary(kernels::Binary::mul, xf, scale), {-max, max}));
    return std::make_pair(kernels::max_dim(kernels::unary(kernels::Unary::abs, xf, {}).reshape({-1}), 0, false, false).first, out);
  };
  const auto same_values = [](const Tensor& a, const Tensor& b) {
    const std::vector<double> u = vec(a.to(kFloat32)), v = vec(b.to(kFloat32));
    return u.size() == v.size() && std::equal(u.begin(), u.end(), v.begin(), same);
  };
  // 120,000 elements: the CPU's blocks on both threads; and a transposed view, read through a copy
  const Tensor big = randn({300, 400}, {}, &gen) * 3;
  Tensor planted = big.clone();
  planted.narrow(0, 7, 1).narrow(1, 9, 1).fill_(INFINITY);
  Tensor with_nan = big.clone();
  with_nan.narrow(0, 299, 1).narrow(1, 399, 1).fill_(NAN);
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16})
    for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2})
      for (const Tensor& src : {big, big.t(), planted, with_nan}) {
        CAPTURE(dtype_name(t));
        CAPTURE(dtype_name(f8));
        const Tensor x = src.to(t).to(dev);
        const Tensor amax = kernels::abs_max(x);
        // Scales that saturate a few values, that leave them all, and what to_float8 picks.
        for (const double s : {1.0, 0.01, (f8 == kFloat8_e4m3fn ? 448.0 : 57344.0) / 11}) {
          const Tensor scale = full({}, s, TensorOptions(kFloat32).device(dev));
          const auto [want_amax, want] = composed(x, scale, f8);
          CHECK(same_values(amax, want_amax));
          CHECK(same_values(kernels::scaled_cast(x, scale, f8), want));
        }
      }
  // A NaN keeps its sign, and -0 stays -0, whatever the scale: the codes themselves.
  const Tensor specials = f32({NAN, -NAN, -0.0f, 0.0f}, dev), three = full({}, 3.0, TensorOptions(kFloat32).device(dev));
  for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) CHECK(codes(kernels::scaled_cast(specials, three, f8)) == std::vector<uint8_t>{0x7F, 0xFF, 0x80, 0x00});
  CHECK(kernels::abs_max(zeros({0, 3}).to(dev)).item<float>() == 0);
  CHECK(kernels::abs_max(full({5}, -2.5).to(dev)).item<float>() == 2.5f);
  CHECK(error_of([&] { kernels::scaled_cast(big.to(dev), full({1}, 1.0).to(dev), kFloat8_e4m3fn); }) ==
        "scaled_cast: the scale must be a 0-d float32 tensor, got float32 [1]");
  CHECK(error_of([&] { kernels::abs_max(full({2}, 1.0, kInt64).to(dev)); }) == "abs_max: expected a floating dtype, got int64");
}

DEVICE_TEST_CASE("why gradients need a scale: tiny gradients flush to zero in e5m2, and survive scaled") {
  Generator gen(11);
  const Tensor g = (randn({256}, {}, &gen) * 1e-6).to(dev);  // |g| ≲ 4e-6: under half e5m2's smallest subnormal, 2^-16 ≈ 1.5e-5
  CHECK(vec(g.to(kFloat8_e5m2).to(kFloat32)) == std::vector<double>(256, 0.0));  // a plain cast loses them all
  const Float8Tensor q = to_float8(g, kFloat8_e5m2);
  const std::vector<double> back = vec(q.data.to(kFloat32) * q.inv_scale), exact = vec(g);
  for (size_t i = 0; i < exact.size(); ++i) CHECK(std::fabs(back[i] - exact[i]) <= 0.125 * std::fabs(exact[i]) + 1e-30);  // e5m2: half an ulp is 2^-3
}

DEVICE_TEST_CASE("a float16 gradient underflows before a float8 linear can scale it: fp16 still needs the GradScaler, bf16 does not") {
  // The loss is float32 (autocast's policy), the linear's output float16: the gradient comes back
  // through a cast to float16, 2·y/512 ≈ 4e-9, under half float16's smallest subnormal.
  Generator gen(8);
  const Tensor x = randn({64, 16}, {}, &gen).to(dev);
  auto weight_grad = [&](DType autocast_dtype, double loss_scale) {
    const Tensor w = (randn({8, 16}, {}, &gen) * 1e-7).to(dev).requires_grad_();
    Tensor loss;
    {
      amp::autocast ac(dev.type, autocast_dtype);
      float8_autocast f8(dev.type);
      loss = mse_loss(linear(x, w), zeros({64, 8}, TensorOptions().device(dev)));
    }
    (loss * loss_scale).backward();
    return vec(w.grad());
  };
  auto zero_share = [](const std::vector<double>& g) { return double(std::count(g.begin(), g.end(), 0.0)) / double(g.size()); };
  CHECK(zero_share(weight_grad(kFloat16, 1)) == 1.0);       // flushed in float16, before any scale
  CHECK(zero_share(weight_grad(kFloat16, 65536)) == 0.0);   // a loss scale keeps it
  CHECK(zero_share(weight_grad(kBFloat16, 1)) == 0.0);      // bfloat16's range keeps it
}

DEVICE_TEST_CASE("scaled_mm: float8 products summed in float32, both scales applied once") {
  Generator gen(5);
  const Float8Tensor a = to_float8(randn({5, 64}, {}, &gen).to(dev), kFloat8_e4m3fn), b = to_float8(randn({64, 7}, {}, &gen).to(dev), kFloat8_e5m2);
  const Tensor out = scaled_mm(a.data, b.data, a.inv_scale, b.inv_scale, kFloat32);
  CHECK(out.shape() == Shape{5, 7});
  const std::vector<double> av = vec(a.data.to(kFloat32)), bv = vec(b.data.to(kFloat32)), got = vec(out);
  const double s = double(a.inv_scale.item<float>()) * double(b.inv_scale.item<float>());
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < 64; ++k) ref += av[i * 64 + k] * bv[k * 7 + j], mag += std::fabs(av[i * 64 + k] * bv[k * 7 + j]);
      CHECK(std::fabs(got[i * 7 + j] - ref * s) <= 1e-6 * mag * s);  // float32 sums of exact products
    }
  // Rounded once to the output dtype, as the host rounds the float32 result.
  CHECK(vec(scaled_mm(a.data, b.data, a.inv_scale, b.inv_scale, kBFloat16)) == vec(from_vector<double>(got).to(kFloat32).to(kBFloat16)));
  // A tiny exact case: [1 2] @ [3 4]ᵀ = 11, times 0.5 · 0.25.
  const Tensor x = f32({1, 2}, dev, {1, 2}).to(kFloat8_e4m3fn), y = f32({3, 4}, dev, {2, 1}).to(kFloat8_e4m3fn);
  CHECK(vec(scaled_mm(x, y, f32({0.5f}, dev).reshape({}), f32({0.25f}, dev), kFloat32)) == std::vector<double>{11 * 0.125});
  CHECK(error_of([&] { scaled_mm(b.data.t(), b.data, b.inv_scale, b.inv_scale, kFloat32); }) ==
        "scaled_mm: float8_e5m2 × float8_e5m2 is not supported (as cuBLASLt's FP8 GEMM)");
  CHECK(error_of([&] { scaled_mm(a.data, a.data, a.inv_scale, a.inv_scale, kFloat32); }) == "scaled_mm: cannot multiply shapes [5, 64] and [5, 64]");
  CHECK(error_of([&] { scaled_mm(x, y, f32({1, 2}, dev), f32({1}, dev), kFloat32); }) ==
        "scaled_mm: scales must be float32 tensors of one element, got float32 [2]");
  CHECK(error_of([&] { scaled_mm(x.to(kFloat32), y, f32({1}, dev), f32({1}, dev), kFloat32); }) == "scaled_mm: expected float8 operands, got float32 and float8_e4m3fn");
}

namespace {
// to_float8 written out on the host in float64, from the scalar rule: the dequantized values.
std::vector<double> dequantized(const std::vector<double>& x, const Spec& f, double* inv_scale) {
  double amax = 0;
  for (double v : x) amax = std::max(amax, std::fabs(v));
  const float scale = float(f.max_finite) / std::max(float(amax), 1e-12f);
  *inv_scale = 1.0f / scale;
  std::vector<double> q;
  for (double v : x) q.push_back(round_trip(f, std::clamp(float(v) * scale, float(-f.max_finite), float(f.max_finite))));
  return q;
}
}  // namespace

DEVICE_TEST_CASE("float8_linear: forward and gradients against the float8 arithmetic written out") {
  const int64_t N = 6, I = 8, O = 5;
  Generator gen(9);
  const Tensor x = randn({N, I}, {}, &gen).to(dev).requires_grad_(), w = (randn({O, I}, {}, &gen) * 0.3).to(dev).requires_grad_();
  const Tensor b = randn({O}, {}, &gen).to(dev).requires_grad_(), R = randn({N, O}, {}, &gen).to(dev);
  const Tensor y = float8_linear(x, w, b);
  CHECK(y.dtype() == kFloat32);
  (y * R).sum().backward();

  double sx, sw, sg;
  const std::vector<double> qx = dequantized(vec(x), kE4M3, &sx), qw = dequantized(vec(w), kE4M3, &sw), qg = dequantized(vec(R), kE5M2, &sg);
  const std::vector<double> yv = vec(y), bv = vec(b), dx = vec(x.grad()), dw = vec(w.grad()), db = vec(b.grad()), rv = vec(R), exact = vec(linear(x, w, b));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < I; ++i) ref += qx[n * I + i] * qw[o * I + i], mag += std::fabs(qx[n * I + i] * qw[o * I + i]);
      CHECK(std::fabs(yv[n * O + o] - (ref * sx * sw + bv[o])) <= 1e-6 * (mag * sx * sw + std::fabs(bv[o])));
      CHECK(std::fabs(yv[n * O + o] - exact[n * O + o]) <= 0.15 * (mag * sx * sw) + 1e-6);  // and near the float32 linear
    }
  for (int64_t n = 0; n < N; ++n)  // dx = q(G) q(W), scaled
    for (int64_t i = 0; i < I; ++i) {
      double ref = 0, mag = 0;
      for (int64_t o = 0; o < O; ++o) ref += qg[n * O + o] * qw[o * I + i], mag += std::fabs(qg[n * O + o] * qw[o * I + i]);
      CHECK(std::fabs(dx[n * I + i] - ref * sg * sw) <= 1e-6 * mag * sg * sw);
    }
  for (int64_t o = 0; o < O; ++o)  // dW = q(G)ᵀ q(x), scaled
    for (int64_t i = 0; i < I; ++i) {
      double ref = 0, mag = 0;
      for (int64_t n = 0; n < N; ++n) ref += qg[n * O + o] * qx[n * I + i], mag += std::fabs(qg[n * O + o] * qx[n * I + i]);
      CHECK(std::fabs(dw[o * I + i] - ref * sg * sx) <= 1e-6 * mag * sg * sx);
    }
  for (int64_t o = 0; o < O; ++o) {  // db = Σ_n G, unquantized
    double ref = 0;
    for (int64_t n = 0; n < N; ++n) ref += rv[n * O + o];
    CHECK(db[o] == doctest::Approx(ref).epsilon(1e-6));
  }
  // Leading dims fold into rows, as linear's.
  CHECK(vec(float8_linear(x.detach().reshape({2, 3, I}), w, b)) == vec(y));
  // A frozen weight, or an input that wants no gradient: the other gradient is the same.
  const Tensor x2 = x.detach().requires_grad_();
  (float8_linear(x2, w.detach(), b) * R).sum().backward();
  CHECK(vec(x2.grad()) == dx);
  const Tensor w2 = w.detach().requires_grad_();
  (float8_linear(x.detach(), w2, b) * R).sum().backward();
  CHECK(vec(w2.grad()) == dw);
  // float64 stays float64, under autocast too (as autocast leaves a float64 linear alone).
  {
    amp::autocast ac(dev.type, kBFloat16);
    CHECK(float8_linear(x.detach().to(kFloat64), w.detach().to(kFloat64)).dtype() == kFloat64);
  }
  // The backward calls kernels: a second derivative is refused, by name.
  const Tensor gx = autograd::grad({(float8_linear(x, w, b) * R).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  CHECK(error_of([&] { gx.sum().backward(); }).find("float8_linear") != std::string::npos);
}

DEVICE_TEST_CASE("float8_autocast: linear runs in float8, autocast picks the output dtype, the trace says so") {
  Generator gen(2);
  const Tensor x = randn({4, 6}, {}, &gen).to(dev), w = randn({3, 6}, {}, &gen).to(dev).requires_grad_(), b = randn({3}, {}, &gen).to(dev).requires_grad_();
  const Tensor plain = linear(x, w, b);
  {
    float8_autocast f8(dev.type);
    CHECK(vec(linear(x, w, b)) == vec(float8_linear(x, w, b)));
    CHECK(vec(linear(x, w, b)) != vec(plain));
    {
      float8_autocast off(dev.type, {}, /*enabled=*/false);
      CHECK(vec(linear(x, w, b)) == vec(plain));
    }
    amp::autocast ac(dev.type, kBFloat16);
    amp::AutocastLog trace;
    const Tensor y = linear(x, w, b);
    CHECK(y.dtype() == kBFloat16);
    REQUIRE(trace.calls().size() == 1);
    CHECK(std::string(trace.calls()[0].op) == "linear");
    CHECK(trace.calls()[0].run_dtype == kFloat8_e4m3fn);
    y.to(kFloat32).sum().backward();
    CHECK(w.grad().dtype() == kFloat32);
    CHECK(b.grad().dtype() == kFloat32);
  }
  CHECK(vec(linear(x, w, b)) == vec(plain));  // off again once the guard is gone
  // The E4M3 recipe narrows the gradient to e4m3 too: more precision, less range, other gradients.
  auto grad_w = [&](Float8Recipe recipe) {
    Tensor wl = w.detach().requires_grad_();
    float8_autocast f8(dev.type, recipe);
    (linear(x, wl, b) * from_vector<float>({0.3f, -1.7f, 2.2f}).to(dev)).sum().backward();
    return vec(wl.grad());
  };
  CHECK(grad_w({}) != grad_w({kFloat8_e4m3fn, kFloat8_e4m3fn}));
  CHECK(error_of([&] { float8_autocast bad(dev.type, {kFloat8_e5m2, kFloat8_e5m2}); }) ==
        "float8_autocast: the recipe must be {float8_e4m3fn, float8_e4m3fn or float8_e5m2}, got {float8_e5m2, float8_e5m2}");
  CHECK(error_of([&] { float8_autocast bad(dev.type, {kFloat8_e4m3fn, kFloat16}); }) != "");
  CHECK(error_of([&] { float8_autocast off(dev.type, {kFloat16, kFloat16}, /*enabled=*/false); }) == "");
}

DEVICE_TEST_CASE("checkpoint reruns a float8 region in float8: gradients bit for bit, backward called outside the guard") {
  Generator gen(4);
  auto l1 = std::make_shared<nn::Linear>(8, 16), l2 = std::make_shared<nn::Linear>(16, 4);
  l1->to(dev);
  l2->to(dev);
  const Tensor x = randn({5, 8}, {}, &gen).to(dev);
  auto region = [&](const std::vector<Tensor>& in) { return l2->forward(relu(l1->forward(in[0]))); };
  auto grads_of = [&](bool checkpointed) {
    for (auto* l : {l1.get(), l2.get()}) l->zero_grad();
    Tensor loss;
    {
      float8_autocast f8(dev.type);
      loss = (checkpointed ? checkpoint(region, {x}) : region({x})).pow(2).sum();
    }
    loss.backward();  // the rerun happens here, after the guard has gone
    return std::vector<std::vector<double>>{vec(l1->weight.grad()), vec(l2->weight.grad()), vec(l1->bias.grad())};
  };
  CHECK(grads_of(true) == grads_of(false));
}

DEVICE_TEST_CASE("a float8 step under fp16 autocast and a GradScaler: an overflow is found and the step skipped") {
  Generator gen(6);
  auto fc = std::make_shared<nn::Linear>(8, 4, /*bias=*/false);  // a bias gradient is not narrowed: only W's tells
  fc->to(dev);
  optim::SGD opt(fc->parameters(), {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 65536.0});
  const Tensor x = randn({16, 8}, {}, &gen).to(dev);
  auto step = [&](double loss_factor) {
    opt.zero_grad();
    Tensor loss;
    {
      amp::autocast ac(dev.type, kFloat16);
      float8_autocast f8(dev.type);
      loss = fc->forward(x).to(kFloat32).pow(2).mean() * loss_factor;
    }
    scaler.scale(loss).backward();
    bool finite = true;
    for (double g : vec(fc->weight.grad())) finite = finite && std::isfinite(g);
    CHECK(finite == (loss_factor == 1.0));  // the overflow reached W's gradient through its float8 narrowing
    const bool stepped = bool(scaler.step(opt));
    scaler.update();
    return stepped;
  };
  const std::vector<double> w0 = vec(fc->weight);
  CHECK(step(1e6) == false);  // 65536 · 1e6 overflows float16 in backward: inf, then NaN in float8
  CHECK(vec(fc->weight) == w0);
  CHECK(scaler.get_scale() == 32768.0);
  CHECK(step(1.0) == true);
  CHECK(vec(fc->weight) != w0);
}
