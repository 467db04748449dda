// test_attention.cpp — scaled_dot_product_attention (nn/attention.h) against closed forms: the
// softmax of two scores is e^a / (e^a + e^b), so small cases are worked by hand; equal scores
// weigh the values equally, so the output is their mean (the running mean under a causal mask).
// Gradients by central differences; float16 scores that would overflow unscaled stay finite; a
// query with every key masked gets zeros, as in PyTorch, not NaN.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "autograd/grad.h"
#include "autograd/gradcheck.h"
#include "devices.h"
#include "amp/autocast.h"
#include "nn/attention.h"
#include "diagnostics/profile.h"
#include "test_util.h"
#include "tolerance.h"

using namespace ampgrad;
namespace F = ampgrad::nn::functional;
using In = const std::vector<Tensor>&;

static std::vector<double> vec(const Tensor& t) { return to_vector<double>(t); }
static double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : vec(t)) m = std::max(m, std::abs(x));
  return m;
}
// |a − b| <= tol for every element; names the first one that is not.
static void check_near(const std::string& what, const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE_MESSAGE(a.size() == b.size(), what);
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= tol)) {
      CHECK_MESSAGE(false, what << ": value " << i << ": " << a[i] << " against " << b[i] << " (tolerance " << tol << ")");
      return;
    }
}

DEVICE_TEST_CASE("attention by hand: two queries, two keys, one feature") {
  // scale 1: query i's scores are q_i · (1, 0) = (q_i, 0), so its weights are (e^q_i, 1) / (e^q_i + 1)
  Tensor q = from_vector<double>({1, 2}, {2, 1}).to(dev), k = from_vector<double>({1, 0}, {2, 1}).to(dev);
  Tensor v = from_vector<double>({10, 20}, {2, 1}).to(dev);
  const double e = std::exp(1.0), e2 = std::exp(2.0);
  std::vector<double> y = vec(F::scaled_dot_product_attention(q, k, v, {.scale = 1.0}));
  CHECK(y[0] == doctest::Approx((10 * e + 20) / (e + 1)).epsilon(1e-12));
  CHECK(y[1] == doctest::Approx((10 * e2 + 20) / (e2 + 1)).epsilon(1e-12));
  // causal: query 0 sees key 0 alone
  y = vec(F::scaled_dot_product_attention(q, k, v, {.is_causal = true, .scale = 1.0}));
  CHECK(y[0] == 10);
  CHECK(y[1] == doctest::Approx((10 * e2 + 20) / (e2 + 1)).epsilon(1e-12));
  // the default scale is 1/√E: with E = 4 and k scaled up by 2 the scores are the same
  Tensor q4 = from_vector<double>({1, 0, 0, 0, 2, 0, 0, 0}, {2, 4}).to(dev), k4 = from_vector<double>({2, 0, 0, 0, 0, 0, 0, 0}, {2, 4}).to(dev);
  y = vec(F::scaled_dot_product_attention(q4, k4, v));
  CHECK(y[0] == doctest::Approx((10 * e + 20) / (e + 1)).epsilon(1e-12));
  CHECK(y[1] == doctest::Approx((10 * e2 + 20) / (e2 + 1)).epsilon(1e-12));
  // causal with fewer queries than keys is top-left aligned, as PyTorch's: query i sees keys 0..i
  Tensor k3 = from_vector<double>({1, 0, 5}, {3, 1}).to(dev), v3 = from_vector<double>({10, 20, 1000}, {3, 1}).to(dev);
  y = vec(F::scaled_dot_product_attention(q, k3, v3, {.is_causal = true, .scale = 1.0}));
  CHECK(y[0] == 10);
  CHECK(y[1] == doctest::Approx((10 * e2 + 20) / (e2 + 1)).epsilon(1e-12));  // key 2 (score 10) unseen
  // a negative scale flips the scores' sign: query 0's become (−1, 0)
  y = vec(F::scaled_dot_product_attention(q, k, v, {.scale = -1.0}));
  CHECK(y[0] == doctest::Approx((10 + 20 * e) / (1 + e)).epsilon(1e-12));
  // a bool mask that hides key 0 from query 1, and the same as an additive float mask
  Tensor hide = from_vector<bool>({true, true, false, true}, {2, 2}).to(dev);
  Tensor add = from_vector<double>({0, 0, -INFINITY, 0}, {2, 2}).to(dev);
  for (const Tensor& mask : {hide, add}) {
    y = vec(F::scaled_dot_product_attention(q, k, v, {.attn_mask = mask, .scale = 1.0}));
    CHECK(y[0] == doctest::Approx((10 * e + 20) / (e + 1)).epsilon(1e-12));
    CHECK(y[1] == 20);
  }
}

DEVICE_TEST_CASE("a query a mask hides every key from gets zero output and passes no NaN back") {
  // query 1 sees no key: its output is 0 (PyTorch's _safe_softmax), and the gradients of q, k
  // and v stay finite; the other queries are untouched
  Tensor q = from_vector<double>({1, 2, 3}, {3, 1}).to(dev).requires_grad_(), k = from_vector<double>({1, 0}, {2, 1}).to(dev).requires_grad_();
  Tensor v = from_vector<double>({10, 20}, {2, 1}).to(dev).requires_grad_();
  Tensor hide = from_vector<bool>({true, true, false, false, true, false}, {3, 2}).to(dev);
  Tensor add = from_vector<double>({0, 0, -INFINITY, -INFINITY, 0, -INFINITY}, {3, 2}).to(dev);
  const double e = std::exp(1.0);
  for (const Tensor& mask : {hide, add}) {
    Tensor y = F::scaled_dot_product_attention(q, k, v, {.attn_mask = mask, .scale = 1.0});
    std::vector<double> out = vec(y);
    CHECK(out[0] == doctest::Approx((10 * e + 20) / (e + 1)).epsilon(1e-12));
    CHECK(out[1] == 0);
    CHECK(out[2] == 10);  // query 2 sees key 0 alone
    y.sum().backward();
    for (const Tensor& t : {q, k, v})
      for (double g : vec(t.grad())) CHECK(std::isfinite(g));
    CHECK(vec(q.grad())[1] == 0);
    for (Tensor t : {q, k, v}) t.set_grad(Tensor());
  }
  // heads: one (L, S) mask for scores (B, H, L, S), the hidden query zero in every head; a
  // float32 mask beside float16 q, k, v leaves the output float16
  Tensor qh = randn({2, 3, 3, 4}).to(dev).to(kFloat16), kh = randn({2, 3, 2, 4}).to(dev).to(kFloat16);
  Tensor vh = randn({2, 3, 2, 5}).to(dev).to(kFloat16);
  for (const Tensor& mask : {hide, add.to(kFloat32)}) {
    Tensor y = F::scaled_dot_product_attention(qh, kh, vh, {.attn_mask = mask});
    CHECK(y.dtype() == kFloat16);
    std::vector<double> out = vec(y);
    for (int64_t bh = 0; bh < 6; ++bh)
      for (int64_t c = 0; c < 5; ++c) CHECK(out[size_t((bh * 3 + 1) * 5 + c)] == 0);  // query 1 of each (b, h)
    for (double x : out) CHECK(std::isfinite(x));
  }
  manual_seed(22);
  CHECK(gradcheck([&](In i) { return F::scaled_dot_product_attention(i[0], i[1], i[2], {.attn_mask = hide}); },
                  {randn({3, 4}, kFloat64).to(dev).requires_grad_(), randn({2, 4}, kFloat64).to(dev).requires_grad_(),
                   randn({2, 3}, kFloat64).to(dev).requires_grad_()}));
}

DEVICE_TEST_CASE("attention with equal scores averages the values, and causally a running mean") {
  // q = 0: every score is 0. v (B=2, S=3, Ev=2), batch b row s = (b·100 + s, −s)
  Tensor v = from_vector<float>({0, 0, 1, -1, 2, -2, 100, 0, 101, -1, 102, -2}, {2, 3, 2}).to(dev);
  Tensor q = zeros({2, 3, 4}, TensorOptions().device(dev)), k = randn({2, 3, 4}).to(dev);
  std::vector<double> y = vec(F::scaled_dot_product_attention(q, k, v));
  for (int i = 0; i < 3; ++i) {
    CHECK(y[i * 2] == doctest::Approx(1));
    CHECK(y[i * 2 + 1] == doctest::Approx(-1));
    CHECK(y[6 + i * 2] == doctest::Approx(101));
  }
  y = vec(F::scaled_dot_product_attention(q, k, v, {.is_causal = true}));
  const std::vector<double> running = {0, 0, 0.5, -0.5, 1, -1, 100, 0, 100.5, -0.5, 101, -1};  // mean of rows 0..i
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(running[i]));
}

DEVICE_TEST_CASE("attention gradients by central differences, with heads, masks and fewer queries than keys") {
  manual_seed(21);
  auto r = [&](const Shape& s) { return randn(s, kFloat64).to(dev).requires_grad_(); };
  CHECK(gradcheck([](In i) { return F::scaled_dot_product_attention(i[0], i[1], i[2], {.is_causal = true}); },
                  {r({2, 2, 3, 4}), r({2, 2, 3, 4}), r({2, 2, 3, 5})}));
  Tensor bias = randn({2, 3}, kFloat64).to(dev);
  CHECK(gradcheck([&](In i) { return F::scaled_dot_product_attention(i[0], i[1], i[2], {.attn_mask = bias, .scale = 0.7}); },
                  {r({1, 2, 4}), r({1, 3, 4}), r({1, 3, 2})}));
  // a fresh generator per call draws the same dropout mask each time, so differences apply
  CHECK(gradcheck([&](In i) { Generator g(4); return F::scaled_dot_product_attention(i[0], i[1], i[2], {.dropout_p = 0.3, .generator = &g}); },
                  {r({3, 4}), r({3, 4}), r({3, 2})}));
}

DEVICE_TEST_CASE("float16 attention: q and k scaled before their product, which would overflow") {
  // q = k = 150 in each of 4 features: q·k = 90,000, past float16's 65,504; scaled by 1/√4
  // it is 45,000. Equal scores weigh the values equally: the output is v's mean.
  Tensor q = full({1, 2, 4}, 150, TensorOptions(kFloat16).device(dev));
  Tensor v = from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 4}).to(dev).to(kFloat16);
  CHECK(std::isinf(vec(matmul(q, q.transpose(-2, -1)))[0]));
  Tensor y = F::scaled_dot_product_attention(q, q, v);
  CHECK(y.dtype() == kFloat16);
  CHECK(vec(y) == std::vector<double>{3, 4, 5, 6, 3, 4, 5, 6});
}

// The fused op (autograd/attention.cpp) against the composite, its reference: the same causal
// attention given as a bool mask, tril(ones(L, S)), takes the composed path of matmul, where and
// softmax. Values and gradients, with heads, L < S and L > S. In float64 and float32 the two differ
// by their sums' order and the composite's split of the scale (√scale on q and on k), a few
// roundings: tolerance(dtype, 8, E, scale). In 16 bits the composite also rounds q·√scale,
// k·√scale and the scores s to the dtype, moving each score by up to 3·eps·|s|, and the output by
// twice that times |v| (softmax's Jacobian has row sums ≤ 2); with P and O rounded on both
// sides, |Δy| <= (6·max|s| + 4)·eps·max|v|.
DEVICE_TEST_CASE("the fused causal attention against the composite, values and gradients, in every dtype") {
  manual_seed(23);
  for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16})
    for (const std::pair<int64_t, int64_t>& lengths : std::vector<std::pair<int64_t, int64_t>>{{5, 7}, {6, 3}}) {
      const int64_t L = lengths.first, S = lengths.second;
      const std::string what = std::string(dtype_name(dtype)) + ", L " + std::to_string(L) + ", S " + std::to_string(S);
      auto r = [&](const Shape& shape) { return randn(shape).to(dtype).to(dev).requires_grad_(); };
      Tensor q = r({2, 3, L, 8}), k = r({2, 3, S, 8}), v = r({2, 3, S, 5});
      const Tensor tril = ge(arange(L).unsqueeze(1), arange(S).unsqueeze(0)).to(dev);
      const Tensor fused = scaled_dot_product_attention(q, k, v), composite = F::scaled_dot_product_attention(q, k, v, {.attn_mask = tril});
      CHECK_MESSAGE(fused.dtype() == dtype, what);
      const double s_max = max_abs(matmul(q.to(kFloat64), k.to(kFloat64).transpose(-2, -1))) / std::sqrt(8.0);
      const double v_max = max_abs(v), y_max = max_abs(composite);
      const double tol = is_half(dtype) ? (6 * s_max + 4) * eps(dtype) * v_max : tolerance(dtype, 8, 8, std::max({s_max, v_max, y_max}));
      check_near(what + ", output", vec(fused), vec(composite), tol);
      if (is_half(dtype)) continue;  // 16-bit gradients: test_opinfo.cpp's CPU-against-CUDA check and the dtype below
      const Tensor g = randn(fused.shape()).to(dtype).to(dev);
      const std::vector<Tensor> d_fused = autograd::grad({fused}, {q, k, v}, {g}), d_composite = autograd::grad({composite}, {q, k, v}, {g});
      for (size_t i = 0; i < 3; ++i) {
        const double scale = std::max(max_abs(d_composite[i]), s_max * v_max);
        check_near(what + ", gradient of input " + std::to_string(i), vec(d_fused[i]), vec(d_composite[i]), tolerance(dtype, 8, 8, scale));
      }
      // keys past the last query are seen by none: their weights are exact zeros, and so are their gradients
      for (int64_t j = L; j < S; ++j) CHECK_MESSAGE(max_abs(d_fused[1].narrow(2, j, 1)) + max_abs(d_fused[2].narrow(2, j, 1)) == 0, what << ", key " << j);
    }
}

// The mask is applied inside the softmax: the forward is two GEMMs and one masked softmax, with no
// arange, ge or where pass and no -inf tensor; the backward four GEMMs (dP, dQ, dK, dV) and the
// softmax's backward.
TEST_CASE("the fused causal attention runs two GEMMs and one masked softmax forward, four and one backward") {
  Tensor q = randn({6, 16, 8}).requires_grad_(), k = randn({6, 16, 8}).requires_grad_(), v = randn({6, 16, 8}).requires_grad_();
  const Tensor g = ones({6, 16, 8});
  std::map<std::string, int64_t> calls;  // per kernel, the backward's marked
  {
    Profile prof;
    F::scaled_dot_product_attention(q, k, v, {.is_causal = true}).backward(g);
    for (const ProfileRow& row : prof.rows()) calls[row.kernel + (row.backward ? " (backward)" : "")] = row.calls;
  }
  calls.erase("copy_ (backward)");  // the leaves' .grad, each gradient cloned there (accumulate_grad.cpp)
  const std::map<std::string, int64_t> expected = {{"gemm", 2}, {"attention_softmax", 1}, {"gemm (backward)", 4}, {"attention_softmax_backward (backward)", 1}};
  std::string seen;
  for (const auto& call : calls) seen += call.first + " " + std::to_string(call.second) + "; ";
  CHECK_MESSAGE(calls == expected, seen);
}

TEST_CASE("attention names what is wrong with its arguments") {
  Tensor q = zeros({2, 4}), k = zeros({3, 4}), v = zeros({3, 2});
  CHECK(error_of([&] { F::scaled_dot_product_attention(q, zeros({3, 5}), v); })
        == "scaled_dot_product_attention: expected q (..., L, E), k (..., S, E), v (..., S, Ev), got q [2, 4], k [3, 5], v [3, 2]");
  CHECK(error_of([&] { F::scaled_dot_product_attention(q, k, zeros({2, 2})); }).find("v [2, 2]") != std::string::npos);
  CHECK(error_of([&] { F::scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({2, 3}), .is_causal = true}); })
        == "scaled_dot_product_attention: give attn_mask or is_causal, not both");
  CHECK(error_of([&] { F::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.5}); })
        == "scaled_dot_product_attention: dropout_p must be in [0, 1], got 1.5");
  CHECK(error_of([&] { F::scaled_dot_product_attention(q, k, v.to(kFloat64)); })
        == "scaled_dot_product_attention: q, k and v must share a dtype, got float32, float32, float64");
  CHECK(error_of([&] { F::scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({2, 3}, kInt64)}); })
        == "scaled_dot_product_attention: attn_mask must be bool, float32 or q's dtype (float32), got int64");
  CHECK(error_of([&] { F::scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({2, 3}, kFloat64)}); })
        .find("got float64") != std::string::npos);
  {  // under autocast the GEMMs cast q, k and v to one dtype, so mixed ones are fine
    amp::autocast ac(DeviceType::CPU, kBFloat16);
    CHECK(F::scaled_dot_product_attention(q, k, v.to(kFloat64)).dtype() == kFloat64);  // float64 is never cast
    CHECK(F::scaled_dot_product_attention(q, k.to(kFloat16), v).dtype() == kBFloat16);
  }
}
