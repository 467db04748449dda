// test_ops.cpp — every differentiable op: forward against hand-computed values, and
// gradients against float64 central differences (gradcheck), including broadcast and keepdim
// cases. Expected constants are closed forms (noted beside them) or values from PyTorch.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <tuple>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "devices.h"
#include "tensor/kernels.h"
#include "diagnostics/profile.h"
#include "tensor/random.h"

using namespace ampgrad;

// A float64 leaf on dev, uniform in [lo, hi): drawn on the host, so both devices see the same values.
static Tensor r(Device dev, const Shape& s, double lo = -1, double hi = 1) {
  Tensor t = rand(s, kFloat64) * (hi - lo) + lo;
  return t.to(dev).detach().requires_grad_();
}
static std::vector<double> vec(const Tensor& t) { return to_vector<double>(t); }
// got within tol of want, relative to each value: |got − want| <= tol·|want|; a want of 0, relative
// to the largest |want| (a result that cancels to 0 still carries its terms' rounding), absolute
// where all are 0. (doctest's Approx(want).epsilon(tol) adds a scale of 1: below 1 its bound is an
// absolute tol, which let log(1 + x) pass for log1p(1e-12), and so did 0.)
static void close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  REQUIRE(got.size() == want.size());
  double largest = 0;
  for (double w : want) largest = std::max(largest, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(want[i] != 0 ? 0 : largest > 0 ? largest : 1));
  }
}
using In = const std::vector<Tensor>&;

DEVICE_TEST_CASE("gelu in float32: a contiguous run (vectorised) and runs of three (scalar) give the same bits") {
  Generator gen(3);
  std::vector<float> v = {0.f, -0.f, INFINITY, -INFINITY, 1e30f, -1e30f, 100.f, -120.f, 1e-40f, -1e-40f, 13.f, -13.f};
  for (float r : to_vector<float>(randn({2388}, {}, &gen) * 4)) v.push_back(r);  // 2400 in all
  const Tensor x = from_vector<float>(v, {800, 3}).to(dev);
  const Tensor xt = x.t().contiguous().t();  // the same values, column-major: inner runs of 3, too short for a vector
  auto same_bits = [](const Tensor& a, const Tensor& b) {  // a NaN (gelu(-inf) is one) may change sign
    const std::vector<float> u = to_vector<float>(a), w = to_vector<float>(b);
    int64_t differ = 0;
    for (size_t i = 0; i < u.size(); ++i) differ += !(std::isnan(u[i]) ? std::isnan(w[i]) : std::bit_cast<uint32_t>(u[i]) == std::bit_cast<uint32_t>(w[i]));
    return differ;
  };
  CHECK(same_bits(gelu(x), gelu(xt)) == 0);
  CHECK(same_bits(kernels::binary(kernels::Binary::gelu_backward, x, x), kernels::binary(kernels::Binary::gelu_backward, xt, xt)) == 0);
}

DEVICE_TEST_CASE("elementwise forward values") {
  Tensor x = from_vector<double>({-1, 0, 1, 2}).to(dev);
  close(vec(relu(x)), {0, 0, 1, 2});
  close(vec(sigmoid(x)), {0.2689414213699951, 0.5, 0.7310585786300049, 0.8807970779778823});
  close(vec(gelu(x)), {-0.15865525393145707, 0, 0.8413447460685429, 1.9544997361036416});  // x Φ(x)
  close(vec(tanh(x)), {std::tanh(-1.0), 0, std::tanh(1.0), std::tanh(2.0)});
  close(vec(abs(x)), {1, 0, 1, 2});
  close(vec(clamp(x, -0.5, 1.5)), {-0.5, 0, 1, 1.5});
  close(vec(pow(x, 3)), {-1, 0, 1, 8});
  close(vec(exp(x)), {std::exp(-1.0), 1, std::exp(1.0), std::exp(2.0)});
  // log1p(x) = x − x²/2 + …, within an ulp of float64 (2⁻⁵²) in libm and CUDA: 4 ulps allowed.
  // log(1 + 1e-12) is 8.9e-5 off: 1 + 1e-12 rounds to 1 + 1.0000889e-12 before the log.
  const double tiny = 1e-12;
  close(vec(log1p(from_vector<double>({0, tiny, 1}).to(dev))), {0, tiny - tiny * tiny / 2, std::log(2.0)}, 4 * std::ldexp(1.0, -52));
  close(vec(where(gt(x, scalar_like(0, x)), x, x * 10.0)), {-10, 0, 1, 2});
  close(vec(1.0 / (x + 2.0)), {1, 0.5, 1.0 / 3, 0.25});
  close(vec(2.0 - x), {3, 2, 1, 0});
  CHECK(to_vector<bool>(ge(x, scalar_like(1, x))) == std::vector<bool>{false, false, true, true});
  CHECK(to_vector<bool>(eq(x, from_vector<double>({-1, 5, 1, 0}).to(dev))) == std::vector<bool>{true, false, true, false});
}

DEVICE_TEST_CASE("gradcheck: elementwise, with broadcasting") {
  manual_seed(1);
  CHECK(gradcheck([&](In i) { return i[0] + i[1]; }, {r(dev, {2, 3}), r(dev, {3})}));
  CHECK(gradcheck([&](In i) { return i[0] - i[1]; }, {r(dev, {2, 1}), r(dev, {1, 3})}));
  CHECK(gradcheck([&](In i) { return i[0] * i[1]; }, {r(dev, {2, 3}), r(dev, {2, 1})}));
  CHECK(gradcheck([&](In i) { return i[0] / i[1]; }, {r(dev, {2, 3}), r(dev, {3}, 0.5, 2)}));
  CHECK(gradcheck([&](In i) { return -i[0]; }, {r(dev, {3})}));
  CHECK(gradcheck([&](In i) { return pow(i[0], 3); }, {r(dev, {4})}));
  CHECK(gradcheck([&](In i) { return pow(i[0], 0.5); }, {r(dev, {4}, 0.5, 2)}));
  CHECK(gradcheck([&](In i) { return exp(i[0]); }, {r(dev, {4})}));
  CHECK(gradcheck([&](In i) { return log(i[0]); }, {r(dev, {4}, 0.5, 2)}));
  CHECK(gradcheck([&](In i) { return log1p(i[0]); }, {r(dev, {4}, -0.5, 2)}));
  CHECK(gradcheck([&](In i) { return sqrt(i[0]); }, {r(dev, {4}, 0.5, 2)}));
  CHECK(gradcheck([&](In i) { return abs(i[0]); }, {(r(dev, {4}, 0.1, 1) * from_vector<double>({1, -1, 1, -1}).to(dev)).detach().requires_grad_()}));
  CHECK(gradcheck([&](In i) { return tanh(i[0]); }, {r(dev, {4})}));
  CHECK(gradcheck([&](In i) { return sigmoid(i[0]); }, {r(dev, {4})}));
  CHECK(gradcheck([&](In i) { return relu(i[0]); }, {from_vector<double>({-0.7, 0.3, 1.2, -0.1}).to(dev).requires_grad_()}));
  CHECK(gradcheck([&](In i) { return gelu(i[0]); }, {r(dev, {5}, -3, 3)}));
  CHECK(gradcheck([&](In i) { return clamp(i[0], -0.5, 0.5); }, {from_vector<double>({-0.9, -0.2, 0.3, 0.8}).to(dev).requires_grad_()}));
  Tensor cond = from_vector<bool>({true, false, true}).to(dev);
  CHECK(gradcheck([&](In i) { return where(cond, i[0], i[1]); }, {r(dev, {2, 3}), r(dev, {3})}));
}

DEVICE_TEST_CASE("reductions: values and gradcheck with dims and keepdim") {
  Tensor x = from_vector<double>({1, 5, 3, 4, 2, 6}, {2, 3}).to(dev);
  close(vec(x.sum()), {21});
  close(vec(sum(x, {0})), {5, 7, 9});
  close(vec(sum(x, {1}, true)), {9, 12});
  CHECK(sum(x, {1}, true).shape() == Shape{2, 1});
  close(vec(mean(x, {-1})), {3, 4});
  close(vec(x.max()), {6});
  close(vec(x.min()), {1});
  auto [mv, mi] = max(x, 1);
  close(vec(mv), {5, 6});
  CHECK(to_vector<int64_t>(mi) == std::vector<int64_t>{1, 2});
  CHECK(to_vector<int64_t>(argmax(x, 0)) == std::vector<int64_t>{1, 0, 1});
  CHECK(argmax(x).item<int64_t>() == 5);
  CHECK(to_vector<int64_t>(min(x, 0, true).second) == std::vector<int64_t>{0, 1, 0});
  CHECK(sum(ones({3}, kInt64).to(dev)).dtype() == kInt64);
  manual_seed(2);
  CHECK(gradcheck([&](In i) { return i[0].sum(); }, {r(dev, {2, 3})}));
  CHECK(gradcheck([&](In i) { return sum(i[0], {0, 2}); }, {r(dev, {2, 3, 4})}));
  CHECK(gradcheck([&](In i) { return sum(i[0], {1}, true); }, {r(dev, {2, 3, 4})}));
  CHECK(gradcheck([&](In i) { return mean(i[0], {-1}); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].mean(); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return max(i[0], 1).first; }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return min(i[0], 0, true).first; }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].max(); }, {r(dev, {3, 4})}));
}

DEVICE_TEST_CASE("matmul: every rank combination, values and gradients") {
  Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).to(dev), b = from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2}).to(dev);
  close(vec(matmul(a, b)), {4, 5, 10, 11});
  close(vec(matmul(from_vector<double>({1, 2, 3}).to(dev), from_vector<double>({4, 5, 6}).to(dev))), {32});
  close(vec(matmul(a, from_vector<double>({1, 1, 1}).to(dev))), {6, 15});
  close(vec(matmul(from_vector<double>({1, 1}).to(dev), a)), {5, 7, 9});
  manual_seed(3);
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {3, 4}), r(dev, {4, 2})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {4}), r(dev, {4})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {3, 4}), r(dev, {4})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {4}), r(dev, {4, 2})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {2, 3, 4}), r(dev, {2, 4, 5})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {2, 3, 4}), r(dev, {4, 5})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {3, 4}), r(dev, {2, 4, 5})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0].t(), i[1]); }, {r(dev, {4, 3}), r(dev, {4, 2})}));  // strided operand
  // batch dims broadcast, at any rank, as in PyTorch
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {1, 2, 3}), r(dev, {4, 3, 5})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {2, 1, 3, 4}), r(dev, {3, 4, 2})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {2, 2, 3, 4}), r(dev, {4})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {3}), r(dev, {2, 2, 3, 4})}));
  CHECK(gradcheck([&](In i) { return matmul(i[0], i[1]); }, {r(dev, {2, 2, 3, 4}), r(dev, {4, 2})}));
  Tensor x4 = r(dev, {2, 1, 3, 4}), y3 = r(dev, {3, 4, 2});
  Tensor xy = matmul(x4, y3);  // (2, 3, 3, 2): out[i, j] = x4[i, 0] @ y3[j]
  CHECK(xy.shape() == Shape{2, 3, 3, 2});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) close(vec(xy.select(0, i).select(0, j)), vec(matmul(x4.select(0, i).select(0, 0), y3.select(0, j))));
  CHECK_THROWS_WITH_AS(matmul(ones({2, 3, 4}), ones({3, 4, 5})), doctest::Contains("matmul: shapes [2] and [3] cannot be broadcast"), Error);
  CHECK(gradcheck([&](In i) { return linear(i[0], i[1], i[2]); }, {r(dev, {5, 3}), r(dev, {2, 3}), r(dev, {2})}));
  CHECK(gradcheck([&](In i) { return linear(i[0], i[1]); }, {r(dev, {2, 5, 3}), r(dev, {2, 3})}));
  close(vec(linear(a, from_vector<double>({1, 1, 1}, {1, 3}).to(dev), from_vector<double>({0.5}).to(dev))), {6.5, 15.5});
}

DEVICE_TEST_CASE("views and copies: gradients map back to the input geometry") {
  manual_seed(4);
  CHECK(gradcheck([&](In i) { return i[0].reshape({6, 2}) * from_vector<double>({1, 2}).to(dev); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].view({2, 6}) * arange(0.0, 6.0, 1.0, kFloat64).to(dev); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].min(); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].t().reshape({-1}) * arange(0.0, 12.0, 1.0, kFloat64).to(dev); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].permute({2, 0, 1}).contiguous(); }, {r(dev, {2, 3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].narrow(1, 1, 2) * 3.0; }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].select(0, -1); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].expand({3, 4}) * arange(0.0, 12.0, 1.0, kFloat64).to(dev).reshape({3, 4}); }, {r(dev, {1, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].unsqueeze(1).squeeze(1).flatten(); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return i[0].clone() * i[0]; }, {r(dev, {3})}));
  CHECK(gradcheck([&](In i) { return cat({i[0], i[1] * 2.0}, 1); }, {r(dev, {2, 3}), r(dev, {2, 2})}));
  CHECK(gradcheck([&](In i) { return stack({i[0], i[1]}, 0); }, {r(dev, {2, 3}), r(dev, {2, 3})}));
  CHECK(gradcheck([&](In i) { return i[0].to(kFloat32).to(kFloat64) * 1.0; }, {r(dev, {3})}, 1e-3, 1e-3, 1e-2));
  close(vec(cat({from_vector<double>({1, 2}).to(dev), from_vector<double>({3}).to(dev)})), {1, 2, 3});
  CHECK(cat({ones({2}, kFloat16).to(dev), ones({1}, kFloat32).to(dev)}).dtype() == kFloat32);
}

DEVICE_TEST_CASE("softmax family and losses against closed forms") {
  Tensor x = from_vector<double>({1, 2, 3}, {1, 3}).to(dev);
  close(vec(softmax(x, 1)), {0.09003057317038046, 0.24472847105479764, 0.6652409557748219});
  close(vec(log_softmax(x, -1)), {-2.4076059644443806, -1.4076059644443804, -0.4076059644443804});
  Tensor t = from_vector<int64_t>({2}).to(dev);
  close(vec(cross_entropy(x, t)), {0.4076059644443804});       // −log softmax[2]
  close(vec(cross_entropy(x, t, {.label_smoothing = 0.1})), {0.5076059644443805});  // 0.9·0.4076 + 0.1·mean(−logp)
  close(vec(nll_loss(log_softmax(x, 1), t)), {0.4076059644443804});
  close(vec(mse_loss(from_vector<double>({1, 2}).to(dev), from_vector<double>({0, 4}).to(dev))), {2.5});  // (1 + 4)/2
  // softmax of huge logits stays finite (max subtraction)
  close(vec(softmax(from_vector<double>({1000, 1000}).to(dev), 0)), {0.5, 0.5});
  manual_seed(5);
  Tensor tg = from_vector<int64_t>({0, 3, 1}).to(dev);
  CHECK(gradcheck([&](In i) { return softmax(i[0], 1); }, {r(dev, {2, 4})}));
  CHECK(gradcheck([&](In i) { return softmax(i[0], 0); }, {r(dev, {3, 2})}));
  CHECK(gradcheck([&](In i) { return log_softmax(i[0], -1); }, {r(dev, {2, 4})}));
  CHECK(gradcheck([&](In i) { return cross_entropy(i[0], tg); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return cross_entropy(i[0], tg, {.label_smoothing = 0.2}); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return nll_loss(i[0], tg); }, {r(dev, {3, 4})}));
  CHECK(gradcheck([&](In i) { return mse_loss(i[0], i[1]); }, {r(dev, {2, 3}), r(dev, {2, 3})}));
  if (dev.is_cpu())  // on a GPU a bad target traps in the kernel (a device-side assert, as in PyTorch)
    CHECK_THROWS_WITH_AS(cross_entropy(x, from_vector<int64_t>({3})), doctest::Contains("target 3 is out of bounds for 3 classes"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(x, from_vector<float>({1}).to(dev)), doctest::Contains("target must be int64"), Error);
}

DEVICE_TEST_CASE("losses take PyTorch's weight, ignore_index and reduction") {
  // Expected values from PyTorch 1.13 (torch.nn.functional, float64) on these inputs.
  Tensor x = from_vector<double>({0.1, 0.2, 0.3, 1.0, -1.0, 0.5, 0.3, 0.3, -0.2, 2.0, 0.0, -1.0}, {4, 3}).to(dev);
  Tensor t = from_vector<int64_t>({2, 0, -100, 1}).to(dev);  // the third target is ignored
  Tensor w = from_vector<double>({0.5, 2.0, 1.5}).to(dev);
  using R = Reduction;
  close(vec(cross_entropy(x, t, {.reduction = R::None})), {1.001942848229244, 0.5549569196419907, 0, 2.1698460195562856});
  close(vec(cross_entropy(x, t, {.reduction = R::Sum})), {3.7267457874275207});
  close(vec(cross_entropy(x, t)), {1.2422485958091736});  // the sum over 3 kept targets, not 4
  close(vec(cross_entropy(x, t, {.weight = w, .reduction = R::None})), {1.5029142723438662, 0.27747845982099534, 0, 4.339692039112571});
  close(vec(cross_entropy(x, t, {.weight = w})), {1.5300211928193581});  // divided by w[2] + w[0] + w[1] = 4
  close(vec(cross_entropy(x, t, {.reduction = R::None, .label_smoothing = 0.2})), {1.021942848229244, 0.7216235863086573, 0, 2.103179352889619});
  close(vec(cross_entropy(x, t, {.weight = w, .reduction = R::None, .label_smoothing = 0.2})),
        {1.4895161774028916, 0.6866379464279938, 0, 4.0837125698384});
  close(vec(cross_entropy(x, t, {.weight = w, .reduction = R::Sum, .label_smoothing = 0.2})), {6.259866693669285});
  close(vec(cross_entropy(x, t, {.weight = w, .label_smoothing = 0.2})), {1.5649666734173213});
  close(vec(cross_entropy(x, t, {.label_smoothing = 0.2})), {1.2822485958091736});
  Tensor lp = log_softmax(x, 1);
  close(vec(nll_loss(lp, t, {.weight = w, .reduction = R::None})), {1.5029142723438662, 0.27747845982099534, 0, 4.339692039112571});
  close(vec(nll_loss(lp, t, {.weight = w, .reduction = R::Sum})), {6.1200847712774324});
  close(vec(nll_loss(lp, t, {.weight = w})), {1.5300211928193581});
  // Every target ignored: a mean of nothing is 0/0, as in PyTorch, but the gradient is 0, so a
  // batch of nothing but padding leaves the parameters alone.
  Tensor none_kept = from_vector<int64_t>({1, 1, 1, 1}).to(dev);
  for (double eps : {0.0, 0.1}) {
    Tensor xa = x.detach().requires_grad_();
    Tensor loss = cross_entropy(xa, none_kept, {.ignore_index = 1, .label_smoothing = eps});
    CHECK(std::isnan(loss.item<double>()));
    loss.backward();
    close(vec(xa.grad()), std::vector<double>(12, 0.0));
  }
  Tensor lpa = log_softmax(x, 1).detach().requires_grad_();
  nll_loss(lpa, none_kept, {.ignore_index = 1}).backward();
  close(vec(lpa.grad()), std::vector<double>(12, 0.0));
  // float64 stays float64 throughout: class weights and smoothing that float32 cannot hold exactly
  Tensor w3 = from_vector<double>({0.1, 0.2, 0.7}).to(dev), x3 = x.detach().requires_grad_();
  Tensor l3 = cross_entropy(x3, t, {.weight = w3, .label_smoothing = 0.15});
  close(vec(l3), {1.263038445561914}, 1e-14);
  l3.backward();
  close(vec(x3.grad()), {0.18889319545444413, 0.20428512082900904, -0.39317831628345307, -0.01249690594936124, 0.0004889031850570279,
                         0.012008002764304207, 0, 0, 0, 0.1806348415858947, -0.15487705613538924, -0.025757785450505465},
        1e-14);
  // Targets written in place between forward and backward: PyTorch's error, not a silent answer.
  {
    Tensor tt = t.clone(), xb = x.detach().requires_grad_();
    Tensor loss = cross_entropy(xb, tt);
    tt.fill_(0);
    CHECK_THROWS_WITH_AS(loss.backward(), doctest::Contains("modified by an inplace operation"), Error);
  }
  close(vec(mse_loss(from_vector<double>({1, 2}).to(dev), from_vector<double>({0, 4}).to(dev), R::None)), {1, 4});
  close(vec(mse_loss(from_vector<double>({1, 2}).to(dev), from_vector<double>({0, 4}).to(dev), R::Sum)), {5});

  // The gradient, PyTorch's for the weighted, smoothed mean; then finite differences for each form.
  Tensor xg = x.detach().requires_grad_();
  cross_entropy(xg, t, {.weight = w, .label_smoothing = 0.2}).backward();
  close(vec(xg.grad()), {0.10189018863043338, 0.08848249762889406, -0.19037268625932735, -0.012650501172050915, -0.020384070141904905,
                         0.0330345713139558, 0, 0, 0, 0.38543754275795844, -0.38004224028718925, -0.005395302470769176});
  for (R red : {R::None, R::Sum, R::Mean})
    for (double eps : {0.0, 0.3}) {
      CAPTURE(int(red));
      CAPTURE(eps);
      CHECK(gradcheck([&](In i) { return cross_entropy(i[0], t, {.weight = w, .reduction = red, .label_smoothing = eps}); }, {r(dev, {4, 3})}));
      CHECK(gradcheck([&](In i) { return cross_entropy(i[0], t, {.reduction = red, .label_smoothing = eps}); }, {r(dev, {4, 3})}));
    }
  for (R red : {R::None, R::Sum, R::Mean}) CHECK(gradcheck([&](In i) { return nll_loss(i[0], t, {.weight = w, .reduction = red}); }, {r(dev, {4, 3})}));
  CHECK(gradcheck([&](In i) { return mse_loss(i[0], i[1], R::None); }, {r(dev, {2, 3}), r(dev, {2, 3})}));

  // In a half-precision run the per-sample losses come back in the logits' dtype, the weights
  // in any floating dtype.
  CHECK(cross_entropy(x.to(kFloat16), t, {.weight = w.to(kFloat32), .reduction = R::None}).dtype() == kFloat16);
  CHECK_THROWS_WITH_AS(cross_entropy(x, t, {.weight = from_vector<double>({1, 2}).to(dev)}),
                       doctest::Contains("cross_entropy: weight must be a floating tensor of shape [3] (one per class), got [2] float64"), Error);
  CHECK_THROWS_WITH_AS(nll_loss(x, t, {.weight = from_vector<int64_t>({1, 2, 3}).to(dev)}),
                       doctest::Contains("nll_loss: weight must be a floating tensor of shape [3] (one per class), got [3] int64"), Error);
  if (dev.is_cpu())  // an ignore_index other than the target's is no excuse for an out-of-range class
    CHECK_THROWS_WITH_AS(cross_entropy(x, t, {.ignore_index = 0}), doctest::Contains("target -100 is out of bounds for 3 classes"), Error);
}

DEVICE_TEST_CASE("cross_entropy: the one-pass backward gives the bits of its recorded form, every option and dtype") {
  // A plain backward runs the fused kernel; under create_graph the same formula runs as recorded
  // ops. Each rounds every product and sum alike (on the CPU by -ffp-contract=off, on a GPU by
  // CUDA's _rn intrinsics), so the gradients agree to the bit.
  manual_seed(14);
  const int64_t N = 37, C = 300;
  Tensor target = randint(0, C, {N});
  target.narrow(0, 5, 3).fill_(-100);  // three ignored samples
  target = target.to(dev);
  const Tensor class_weight = (rand({C}) + 0.5).to(dev), upstream = randn({N}).to(dev);
  using R = Reduction;
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16})
    for (R red : {R::None, R::Mean, R::Sum})
      for (double eps : {0.0, 0.1})
        for (bool weighted : {false, true}) {
          CAPTURE(dtype_name(dt));
          CAPTURE(int(red));
          CAPTURE(eps);
          CAPTURE(weighted);
          const Tensor x = (randn({N, C}) * 3.0).to(dt).to(dev);
          const CrossEntropyOptions o{.weight = weighted ? class_weight : Tensor(), .reduction = red, .label_smoothing = eps};
          auto gradient = [&](bool create_graph) {
            Tensor xg = x.detach().requires_grad_();
            Tensor loss = cross_entropy(xg, target, o);
            int64_t kernel_calls = 0;  // which path ran: the kernel once, or the recorded ops
            {
              Profile profile;
              loss.backward(red == R::None ? upstream.to(dt) : Tensor(), std::nullopt, create_graph);
              for (const ProfileRow& row : profile.rows()) kernel_calls += row.kernel == "cross_entropy_backward" ? row.calls : 0;
            }
            REQUIRE(kernel_calls == (create_graph ? 0 : 1));
            const std::vector<double> g = to_vector<double>(xg.grad().detach());
            xg.set_grad(Tensor());  // a recorded .grad refers back to xg: break the cycle
            return g;
          };
          const std::vector<double> fused = gradient(false), recorded = gradient(true);
          CHECK(fused == recorded);
          CHECK(fused[5 * C] == 0);  // an ignored row
        }
}

DEVICE_TEST_CASE("conv2d and max_pool2d: values and gradients") {
  // 1 image, 1 channel, 3x3 ramp; a 2x2 all-ones kernel sums each window
  Tensor x = arange(1.0, 10.0, 1.0, kFloat64).to(dev).reshape({1, 1, 3, 3});
  Tensor w = ones({1, 1, 2, 2}, kFloat64).to(dev);
  close(vec(conv2d(x, w)), {12, 16, 24, 28});
  close(vec(conv2d(x, w, from_vector<double>({1}).to(dev), 1, 1)), {2, 4, 6, 4, 6, 13, 17, 10, 12, 25, 29, 16, 8, 16, 18, 10});
  close(vec(conv2d(x, w, {}, 2, 0)), {12});
  close(vec(max_pool2d(x, 2, 1)), {5, 6, 8, 9});
  close(vec(max_pool2d(arange(0.0, 16.0, 1.0, kFloat64).to(dev).reshape({1, 1, 4, 4}), 2)), {5, 7, 13, 15});
  manual_seed(6);
  CHECK(gradcheck([&](In i) { return conv2d(i[0], i[1], i[2]); }, {r(dev, {2, 2, 4, 4}), r(dev, {3, 2, 3, 3}), r(dev, {3})}));
  CHECK(gradcheck([&](In i) { return conv2d(i[0], i[1], {}, 2, 1); }, {r(dev, {1, 2, 5, 5}), r(dev, {2, 2, 3, 3})}));
  CHECK(gradcheck([&](In i) { return max_pool2d(i[0], 2); }, {r(dev, {2, 2, 4, 4})}));
  // Ties: each window's gradient goes to its first maximum in row-major order, as PyTorch's (torch
  // 1.13: the same values and x.grad), in every dtype, on every device: a kernel that picked the
  // last tie would move the 1s below.
  for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    CAPTURE(dtype_name(dtype));
    Tensor t = from_vector<double>({0, 2, 2, 0, 5, 5, 2, 1, 0, 2, 5, 5, 3, 3, 1, 1, -1, -1, 3, 3, 1, 1, -1, -1}, {1, 1, 4, 6})
                   .to(dtype).to(dev).requires_grad_();
    Tensor y = max_pool2d(t, 2);
    y.backward(ones_like(y));
    CHECK(vec(y) == std::vector<double>{2, 2, 5, 3, 1, -1});
    CHECK(vec(t.grad()) == std::vector<double>{0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0});
  }
}

TEST_CASE("CPU im2col, col2im and max_pool2d against plain loops: every width, padding, 16-bit, planes past a SIMD group") {
  // tensor/cpu/image.cpp compiles window widths 3 and 5 (convolutions) and 2 (pooling) as
  // constants, the rest at run time, and pools 16 planes side by side: these cases take each path,
  // padding, strides and a last group of 7 planes, bit for bit against the definitions.
  struct Conv { int64_t kh, kw, s, p; };
  for (DType t : {kFloat32, kFloat16, kBFloat16}) {
    CAPTURE(dtype_name(t));
    manual_seed(7);
    const int64_t N = 2, C = 3, H = 9, W = 8;
    const Tensor x = randn({N, C, H, W}).to(t);
    const std::vector<double> xv = vec(x);
    for (Conv k : {Conv{5, 5, 1, 2}, {3, 3, 2, 1}, {2, 4, 1, 1}, {1, 6, 3, 0}}) {
      INFO("window " << k.kh << "x" << k.kw << ", stride " << k.s << ", padding " << k.p);
      const int64_t Ho = (H + 2 * k.p - k.kh) / k.s + 1, Wo = (W + 2 * k.p - k.kw) / k.s + 1, D = C * k.kh * k.kw;
      // cols[(n, oh, ow), (c, i, j)] = x[n, c, oh·s − p + i, ow·s − p + j], 0 outside
      const std::vector<double> cols = vec(kernels::im2col(x, k.kh, k.kw, k.s, k.p));
      REQUIRE((int64_t)cols.size() == N * Ho * Wo * D);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow)
            for (int64_t e = 0; e < D; ++e) {
              const int64_t c = e / (k.kh * k.kw), h = oh * k.s - k.p + e / k.kw % k.kh, w = ow * k.s - k.p + e % k.kw;
              const bool inside = h >= 0 && h < H && w >= 0 && w < W;
              REQUIRE(cols[((n * Ho + oh) * Wo + ow) * D + e] == (inside ? xv[((n * C + c) * H + h) * W + w] : 0.0));
            }
      // col2im: each pixel the float32 sum of the entries read from it, in (oh, ow) order, rounded once
      const Tensor g = randn({N * Ho * Wo, D}).to(t);
      const std::vector<double> gv = vec(g), back = vec(kernels::col2im(g, x.shape(), k.kh, k.kw, k.s, k.p));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w) {
              float acc = 0;
              for (int64_t oh = 0; oh < Ho; ++oh)
                for (int64_t ow = 0; ow < Wo; ++ow) {
                  const int64_t i = h - (oh * k.s - k.p), j = w - (ow * k.s - k.p);
                  if (i >= 0 && i < k.kh && j >= 0 && j < k.kw) acc += float(gv[((n * Ho + oh) * Wo + ow) * D + (c * k.kh + i) * k.kw + j]);
                }
              REQUIRE(back[((n * C + c) * H + h) * W + w] == vec(full({1}, acc).to(t))[0]);
            }
    }
    // Pooling over 39 planes (two groups of 16 and 7), three values (ties everywhere) and NaNs: the
    // first maximum of each window in row-major order wins, a NaN beating any number.
    Tensor y64 = randint(0, 3, {3, 13, 7, 9}).to(kFloat64);
    double* yp = y64.data_ptr<double>();
    for (int64_t e : {10, 200, 1000, 2456}) yp[e] = NAN;
    const Tensor yt = y64.to(t);
    const std::vector<double> yv = vec(yt);
    for (int64_t pk : {2, 3}) {
      for (int64_t ps : {1, 2, 3}) {
        INFO("pool " << pk << ", stride " << ps);
        auto [out, idx] = kernels::max_pool2d(yt, pk, ps);
        const std::vector<double> ov = vec(out);
        const std::vector<int64_t> iv = to_vector<int64_t>(idx);
        const int64_t Ho = (7 - pk) / ps + 1, Wo = (9 - pk) / ps + 1;
        for (int64_t plane = 0; plane < 39; ++plane)
          for (int64_t oh = 0; oh < Ho; ++oh)
            for (int64_t ow = 0; ow < Wo; ++ow) {
              int64_t best = oh * ps * 9 + ow * ps;
              for (int64_t i = 0; i < pk; ++i)
                for (int64_t j = 0; j < pk; ++j) {
                  const int64_t pos = (oh * ps + i) * 9 + ow * ps + j;
                  const double v = yv[plane * 63 + pos], b = yv[plane * 63 + best];
                  if (v > b || (std::isnan(v) && !std::isnan(b))) best = pos;
                }
              const int64_t o = (plane * Ho + oh) * Wo + ow;
              REQUIRE(iv[o] == best);
              const double want = yv[plane * 63 + best];
              REQUIRE((std::isnan(want) ? std::isnan(ov[o]) : ov[o] == want));
            }
      }
    }
  }
}

// conv2d's input gradient sums each patch's gradient back into the image (col2im) in float32 and
// rounds once: a 16-bit run's dx is, bit for bit, the float32 run's on the same values rounded
// to the dtype. (Summed in 16 bits, overlapping 3x3 windows would round up to 9 times.)
DEVICE_TEST_CASE("conv2d's 16-bit input gradient is float32's rounded once, bit for bit") {
  manual_seed(9);
  for (DType dtype : {kFloat16, kBFloat16}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = randn({2, 3, 7, 6}).to(dtype).to(dev), w = randn({4, 3, 3, 3}).to(dtype).to(dev), v = randn({2, 4, 5, 4}).to(dtype).to(dev);
    auto input_grad = [&](DType t) {
      Tensor xt = x.to(t).detach().requires_grad_();
      conv2d(xt, w.to(t), {}, 1, 0).backward(v.to(t));
      return xt.grad();
    };
    const Tensor once = input_grad(kFloat32).to(dtype), half = input_grad(dtype);
    REQUIRE(half.dtype() == dtype);
    CHECK(vec(half) == vec(once));
  }
}

DEVICE_TEST_CASE("layer_norm and dropout") {
  Tensor x = from_vector<double>({1, 2, 3, 4}, {1, 4}).to(dev);
  // mean 2.5, biased var 1.25 -> (x - 2.5) / sqrt(1.25 + 1e-5)
  double s = std::sqrt(1.25 + 1e-5);
  close(vec(layer_norm(x, {4})), {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s});
  manual_seed(7);
  CHECK(gradcheck([&](In i) { return layer_norm(i[0], {3}, i[1], i[2]); }, {r(dev, {2, 3}), r(dev, {3}), r(dev, {3})}));
  CHECK(gradcheck([&](In i) { return layer_norm(i[0].transpose(0, 2), {3, 4}, i[1]); }, {r(dev, {4, 3, 5}), r(dev, {3, 4})}));  // strided x, weight only
  CHECK_THROWS_WITH_AS(layer_norm(zeros({2, 0}, kFloat64).to(dev), {0}), doctest::Contains("layer_norm: normalized_shape [0] has no elements"), Error);
  Generator g(1);
  Tensor d = dropout(ones({1000}, kFloat64).to(dev), 0.25, true, &g);
  int zeros_n = 0;
  for (double v : vec(d)) {
    REQUIRE((v == 0 || v == doctest::Approx(1 / 0.75)));
    zeros_n += v == 0;
  }
  CHECK(std::abs(zeros_n - 250) < 60);  // binomial(1000, 0.25): sd ≈ 13.7
  CHECK(vec(dropout(ones({3}).to(dev), 0.5, false)) == std::vector<double>{1, 1, 1});
  // a fresh generator per call gives the same mask each time, so finite differences apply
  CHECK(gradcheck([&](In i) { Generator g(3); return dropout(i[0], 0.4, true, &g); }, {r(dev, {2, 5})}));
  // 16-bit inputs draw and compare in float32, so they drop exactly float32's elements (rounded
  // to bfloat16, about 25 of these 100,000 draws would land on the other side of 0.1)
  Generator g32(5), g16(5);
  std::vector<double> d32 = vec(dropout(ones({100000}).to(dev), 0.1, true, &g32));
  std::vector<double> d16 = vec(dropout(ones({100000}, kBFloat16).to(dev), 0.1, true, &g16));
  for (size_t i = 0; i < d32.size(); ++i) REQUIRE((d16[i] == 0) == (d32[i] == 0));
}

// Expected values from PyTorch 1.13 (torch.nn.functional.batch_norm in float64, the same x, w, b,
// running statistics and loss Σ y·c).
DEVICE_TEST_CASE("batch_norm against PyTorch: training, running statistics, eval, and gradients") {
  auto f64 = [&](std::vector<double> v, Shape s) { return from_vector<double>(v, s).to(dev); };
  Tensor x = f64({-2.5, 1.25, -0.5, 2.5, 0.75, -1.0, 2.0, 0.25, -1.5, 1.5, -0.25, -2.0,
                  1.0, -0.75, 3.0, 0.5, -1.25, 2.5, 0.0, -1.75, 2.0, -0.5, -2.25, 1.5}, {2, 3, 2, 2}).requires_grad_();
  Tensor w = f64({1.5, -0.5, 2.0}, {3}).requires_grad_(), b = f64({0.1, 0.2, -0.3}, {3}).requires_grad_();
  Tensor rm = f64({0.5, -1.0, 0.0}, {3}), rv = f64({2.0, 1.0, 0.5}, {3});
  Tensor c = (arange(0.0, 24.0, 1.0, kFloat64).to(dev) / 10.0 - 1.0).reshape({2, 3, 2, 2});
  Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/true, /*momentum=*/0.1);
  close(vec(y), {-2.63348957278, 0.713640516338, -0.84835352525, 1.82935054604, 0.00247241057024, 0.617002688796, -0.436477788163,
                 0.178052490063, -1.9667157996, 1.84292031377, -0.379367419029, -2.60165515183, 0.490498510397, -1.07149553119,
                 2.27563455793, 0.0442144985147, 0.704792728543, -0.612057867656, 0.26584252981, 0.880372808036, 2.477859666,
                 -0.696837095143, -2.91912482795, 1.84292031377}, 1e-9);
  close(vec(rm), {0.50625, -0.88125, -0.01875}, 1e-12);                     // 0.9 · old + 0.1 · batch mean
  close(vec(rv), {2.12276785714, 1.13169642857, 0.733482142857}, 1e-10);  // ... and the unbiased variance (× 8/7)
  sum(y * c).backward();
  close(vec(x.grad()), {-0.357892486328, -0.650105314354, -0.382829351123, -0.598748253069, 0.24357939865, 0.270034513475,
                        0.129367987764, 0.155823102589, -0.828521361275, -0.984705301273, -0.692533874735, -0.400362448197,
                        0.35715082048, 0.624426783711, 0.332213955685, 0.675783844997, -0.107445785592, -0.274499938756,
                        -0.221657196478, -0.195202081653, 0.364965971892, 0.72793035104, 1.02010177758, 0.79312488497}, 1e-9);
  close(vec(w.grad()), {1.53224177413, -1.14127051671, 0.936535544539}, 1e-9);
  close(vec(b.grad()), {-2, 1.2, 4.4}, 1e-12);

  // eval: the running statistics just updated, which are constants to the gradient
  for (Tensor* t : {&x, &w, &b}) t->set_grad({});
  y = batch_norm(x, rm, rv, w, b, /*training=*/false);
  close(vec(rm), {0.50625, -0.88125, -0.01875}, 1e-12);  // eval leaves them alone
  close(vec(y), {-2.99502440841, 0.865712899377, -0.935964510922, 2.15262533531, -0.566696776978, 0.255813175336, -1.15420388577,
                 -0.33169393346, -3.75908015689, 3.24665180643, -0.840025172173, -4.92670215078, 0.608330412192, -1.19334699811,
                 2.66739030968, 0.0935654378204, 0.373314597095, -1.38920672929, -0.214192511701, 0.608317440613, 4.41427380032,
                 -1.42383616912, -5.51051314772, 3.24665180643}, 1e-9);
  sum(y * c).backward();
  close(vec(x.grad()), {-1.02952994874, -0.926576953868, -0.823623958994, -0.72067096412, 0.282003412222, 0.235002843518,
                        0.188002274814, 0.141001706111, -0.467048797555, -0.233524398777, 0, 0.233524398777, 0.205905989748,
                        0.308858984623, 0.411811979497, 0.514764974371, -0.282003412222, -0.329003980925, -0.376004549629,
                        -0.423005118332, 2.33524398777, 2.56876838655, 2.80229278533, 3.03581718411}, 1e-9);
  close(vec(w.grad()), {1.69014499919, -0.32195389562, 0.855283110522}, 1e-9);
  close(vec(b.grad()), {-2, 1.2, 4.4}, 1e-12);

  // gradcheck: (N, C), a strided (N, C, L), no affine, and eval (no running statistics to update
  // while training, or a gradcheck's many forwards would move them)
  manual_seed(11);
  CHECK(gradcheck([&](In i) { return batch_norm(i[0], {}, {}, i[1], i[2], true); }, {r(dev, {5, 3}), r(dev, {3}), r(dev, {3})}));
  CHECK(gradcheck([&](In i) { return batch_norm(i[0].transpose(1, 2), {}, {}, i[1], {}, true); }, {r(dev, {2, 4, 3}), r(dev, {3})}));
  CHECK(gradcheck([&](In i) { return batch_norm(i[0], {}, {}, {}, {}, true); }, {r(dev, {3, 2, 2, 2})}));
  Tensor erm = f64({0.1, -0.2}, {2}), erv = f64({0.5, 2.0}, {2});
  CHECK(gradcheck([&](In i) { return batch_norm(i[0], erm, erv, i[1], i[2], false); }, {r(dev, {3, 2, 2}), r(dev, {2}), r(dev, {2})}));

  CHECK_THROWS_WITH_AS(batch_norm(ones({4, 3}).to(dev), {}, {}, ones({2}).to(dev)),
                       doctest::Contains("batch_norm: input of shape [4, 3] has 3 channels (dim 1), but weight has shape [2]"), Error);
  CHECK_THROWS_WITH_AS(batch_norm(ones({1, 3}).to(dev), {}, {}, {}, {}, true),
                       doctest::Contains("expected more than 1 value per channel when training, got input of shape [1, 3]"), Error);
  CHECK_THROWS_WITH_AS(batch_norm(ones({4, 3}).to(dev), {}, {}), doctest::Contains("running_mean and running_var are needed when not training"), Error);
  CHECK_THROWS_WITH_AS(batch_norm(ones({4, 3}).to(dev), zeros({3}).to(dev), {}, {}, {}, true), doctest::Contains("give both or neither"), Error);
  CHECK_THROWS_WITH_AS(batch_norm(ones({4}).to(dev), {}, {}, {}, {}, true), doctest::Contains("at least 2 dims, got shape [4]"), Error);
  CHECK_THROWS_WITH_AS(batch_norm(ones({4, 3}, kInt64).to(dev), {}, {}, {}, {}, true), doctest::Contains("batch_norm"), Error);
  // an empty batch gives an empty result, and no statistics to the running ones
  Tensor keep_var = rv.clone();
  CHECK(batch_norm(zeros({0, 3}, kFloat64).to(dev), rm, rv, {}, {}, true).shape() == Shape{0, 3});
  CHECK(vec(rv) == vec(keep_var));
  // a refused batch leaves the running statistics as they were
  Tensor keep = rm.clone();
  CHECK_THROWS(batch_norm(ones({1, 3}, kFloat64).to(dev), rm, rv, {}, {}, true));
  CHECK(vec(rm) == vec(keep));
}

// Expected values from PyTorch 1.13 (torch.nn.functional, float64, loss Σ loss·c for the gradients).
DEVICE_TEST_CASE("binary_cross_entropy and binary_cross_entropy_with_logits against PyTorch") {
  auto f64 = [&](std::vector<double> v, Shape s) { return from_vector<double>(v, s).to(dev); };
  Tensor x = f64({-30, -2, 0, 0.5, 3, 40}, {2, 3}).requires_grad_(), t = f64({0, 1, 0.3, 1, 0, 1}, {2, 3}).requires_grad_();
  Tensor w = f64({0.5, 1, 2}, {3}), pw = f64({3, 1, 0.25}, {3}), c = f64({1, -2, 0.5, 3, 1.5, -1}, {2, 3});
  Tensor l = binary_cross_entropy_with_logits(x, t, {.weight = w, .pos_weight = pw, .reduction = Reduction::None});
  close(vec(l), {4.61852778244e-14, 2.12692801104, 1.07437812987, 0.71111547627, 3.04858735157, 0}, 1e-9);
  CHECK(vec(l)[0] == doctest::Approx(4.61852778244e-14).epsilon(1e-9).scale(0));  // 0.5 · 3 · log1p(e^-30): kept
  sum(l * c).backward();
  CHECK(vec(x.grad())[0] == doctest::Approx(4.67881148442e-14).epsilon(1e-9).scale(0));
  close(vec(x.grad()), {4.67881148442e-14, 1.76159415596, 0.3125, -1.69893300959, 1.42886119023, 0}, 1e-9);  // at x = 0: σ(0)·l − pw·t, exactly
  close(vec(t.grad()), {45, -4, -0.51986038542, 0.67223095254, -4.5, 80}, 1e-9);
  for (Tensor* v : {&x, &t}) v->set_grad({});
  l = binary_cross_entropy_with_logits(x, t);
  close(vec(l), {1.05712325456}, 1e-9);
  l.backward();
  close(vec(x.grad()), {1.55960382814e-14, -0.146799512996, 0.0333333333333, -0.0629234447997, 0.15876235447, 0}, 1e-9);
  close(vec(t.grad()), {5, 0.333333333333, 0, -0.0833333333333, -0.5, -6.66666666667}, 1e-9);
  close(vec(binary_cross_entropy_with_logits(x, t, {.reduction = Reduction::Sum})), {6.34273952736}, 1e-9);
  // float32 logits of ±100: e^100 would overflow float32, and the losses are 100 each, the gradients ∓1
  Tensor x32 = from_vector<float>({-100, 100}).to(dev).requires_grad_();
  Tensor l32 = binary_cross_entropy_with_logits(x32, from_vector<float>({1, 0}).to(dev), {.reduction = Reduction::None});
  CHECK(vec(l32) == std::vector<double>{100, 100});
  sum(l32).backward();
  CHECK(vec(x32.grad()) == std::vector<double>{-1, 1});
  // operands of several float dtypes meet in the widest, which the loss has too (PyTorch's BCE
  // losses refuse or follow the target instead: nn_ops.cpp): float32 logits, float64 targets and weights
  const Tensor mixed = binary_cross_entropy_with_logits(x.detach().to(kFloat32), t.detach(), {.weight = w, .pos_weight = pw, .reduction = Reduction::Sum});
  CHECK(mixed.dtype() == kFloat64);
  close(vec(mixed), {4.61852778244e-14 + 2.12692801104 + 1.07437812987 + 0.71111547627 + 3.04858735157}, 1e-6);
  const Tensor mixed_p = binary_cross_entropy(f64({0.2, 0.5}, {2}).to(kFloat32), f64({0, 0.3}, {2}), {.weight = w.narrow(0, 0, 2)});
  CHECK(mixed_p.dtype() == kFloat64);
  close(vec(mixed_p), {(0.5 * 0.223143551314 + 1.38629436112 / 2) / 2}, 1e-6);
  CHECK(binary_cross_entropy_with_logits(x.detach().to(kFloat16), t.detach().to(kFloat16)).dtype() == kFloat16);  // 16 bits in, 16 bits out

  Tensor p = f64({0, 0.2, 0.5, 0.9, 1, 0.7}, {2, 3}).requires_grad_(), t2 = f64({1, 0, 0.3, 1, 1, 0}, {2, 3}).requires_grad_();
  Tensor b = binary_cross_entropy(p, t2, {.weight = w, .reduction = Reduction::None});
  close(vec(b), {50, 0.223143551314, 1.38629436112, 0.0526802578289, 0, 2.40794560865}, 1e-9);  // log 0 clamped at −100: 0.5 · 100
  sum(b * c).backward();
  close(vec(p.grad()), {-500000001998, -2.5, 0.8, -1.66666666667, 0, -6.66666666667}, 1e-6);  // (p − t) / max(p(1 − p), 1e-12)
  // d/dt = log(1 − p) − log p with the forward's clamped logs, so ±100 where PyTorch's gives ±inf
  close(vec(t2.grad()), {0.5 * 100, -2.77258872224, 0, -3.295836866, -1.5 * 100, 1.69459572077}, 1e-9);
  close(vec(binary_cross_entropy(p, t2)), {17.0376040086}, 1e-9);

  manual_seed(12);
  CHECK(gradcheck([&](In i) { return binary_cross_entropy_with_logits(i[0], i[1], {.weight = w, .pos_weight = pw, .reduction = Reduction::None}); },
                  {r(dev, {4, 3}, -4, 4), r(dev, {4, 3}, 0, 1)}));
  CHECK(gradcheck([&](In i) { return binary_cross_entropy(i[0], i[1], {.weight = w}); }, {r(dev, {4, 3}, 0.05, 0.95), r(dev, {4, 3}, 0, 1)}));
  CHECK_THROWS_WITH_AS(binary_cross_entropy_with_logits(x, t.narrow(0, 0, 1)),
                       doctest::Contains("target of shape [1, 3] must have the input's shape [2, 3]"), Error);
  CHECK_THROWS_WITH_AS(binary_cross_entropy_with_logits(x, t, {.pos_weight = f64({1, 2}, {2})}),
                       doctest::Contains("pos_weight of shape [2] does not broadcast to the input's shape [2, 3]"), Error);
  CHECK_THROWS_WITH_AS(binary_cross_entropy(x, t, {.weight = w.clone().requires_grad_()}), doctest::Contains("weight takes no gradient"), Error);
  if (dev.is_cpu())
    CHECK_THROWS_WITH_AS(binary_cross_entropy(x, t), doctest::Contains("input values must be probabilities in [0, 1], got values from -30 to 40"), Error);
}

DEVICE_TEST_CASE("index_select: whole slices by index along any dim, and gradients added back") {
  Tensor x = arange(0.0, 24.0, 1.0, kFloat64).to(dev).reshape({2, 3, 4}).requires_grad_();  // x[a, b, c] = 12a + 4b + c
  Tensor idx = from_vector<int64_t>({3, 0, 3}).to(dev);
  Tensor y = index_select(x, 2, idx);
  CHECK(y.shape() == Shape{2, 3, 3});
  close(vec(y), {3, 0, 3, 7, 4, 7, 11, 8, 11, 15, 12, 15, 19, 16, 19, 23, 20, 23});
  close(vec(x.index_select(1, from_vector<int64_t>({2}).to(dev))), {8, 9, 10, 11, 20, 21, 22, 23});
  close(vec(index_select(x, 0, from_vector<int64_t>({1}, {}).to(dev))), vec(x.narrow(0, 1, 1)));  // a 0-d index: one slice
  CHECK(index_select(x, -1, from_vector<int64_t>({}).to(dev)).shape() == Shape{2, 3, 0});
  CHECK(vec(index_select(from_vector<int64_t>({5, 6, 7}).to(dev), 0, from_vector<int64_t>({2, 2}).to(dev))) == std::vector<double>{7, 7});
  // Σ y·g: column 3 gets its two slices' weights 1 + 3, column 0 weight 2, columns 1 and 2 none
  (y * from_vector<double>({1, 2, 3}).to(dev)).sum().backward();
  close(vec(x.grad()), {2, 0, 0, 4, 2, 0, 0, 4, 2, 0, 0, 4, 2, 0, 0, 4, 2, 0, 0, 4, 2, 0, 0, 4});
  manual_seed(13);
  CHECK(gradcheck([&](In i) { return index_select(i[0], 1, from_vector<int64_t>({2, 0, 2, 1}).to(dev)); }, {r(dev, {2, 3, 2})}));
  CHECK_THROWS_WITH_AS(index_select(x, 0, idx.to(kFloat32)), doctest::Contains("index_select: index must be int64, got float32"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, idx.reshape({3, 1})), doctest::Contains("index_select: index must be 1-D, got [3, 1]"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 3, idx), doctest::Contains("index_select: dim 3 out of range for 3-d tensor"), Error);
  CHECK_THROWS_WITH_AS(kernels::index_add({2, 3, 4}, 1, idx, zeros({2, 2, 4}).to(dev)),
                       doctest::Contains("index_add: src [2, 2, 4] must be [2, 3, 4] (3 slices of [2, 3, 4] along dim 1)"), Error);
  CHECK_THROWS_WITH_AS(kernels::index_add({4}, 0, idx, zeros({3}, kBool).to(dev)), doctest::Contains("index_add: not defined for dtype bool"), Error);
  // a negative dim, a transposed input and a strided index ({2, 0} every other element)
  Tensor strided = from_vector<int64_t>({2, 7, 0, 7}, {2, 2}).to(dev).select(1, 0);
  REQUIRE(!strided.is_contiguous());
  CHECK(gradcheck([&](In i) { return index_select(i[0].transpose(0, 1), -2, strided); }, {r(dev, {2, 3})}));
  close(vec(index_select(x.detach().transpose(1, 2), -1, strided)), {8, 0, 9, 1, 10, 2, 11, 3, 20, 12, 21, 13, 22, 14, 23, 15});
  // 16-bit: index_select copies exactly; index_add adds in the dtype, one rounding per add, as
  // PyTorch's CPU index_add_ (2048 + 1 rounds to even in float16, twice: 2048, where one
  // rounding of the float32 sum would give 2050)
  Tensor h = from_vector<float>({1.5f, 2048, 7}).to(dev).to(kFloat16);
  close(vec(index_select(h, 0, from_vector<int64_t>({1, 0}).to(dev))), {2048, 1.5});
  if (dev.is_cpu())  // a GPU's atomic adds come in any order
    close(vec(kernels::index_add({2}, 0, from_vector<int64_t>({0, 0, 0}), from_vector<float>({2048, 1, 1}).to(kFloat16))), {2048, 0});
  if (dev.is_cpu()) {  // on a GPU the kernel checks each index where it reads it
    CHECK_THROWS_WITH_AS(index_select(x, 1, idx), doctest::Contains("index_select: index 3 is out of bounds for dim 1 of size 3"), Error);
  } else {
    CHECK_THROWS_WITH_AS(index_select(x, 2, from_vector<int64_t>({0})), doctest::Contains("index_select: index on cpu, input on cuda"), Error);
  }
}

DEVICE_TEST_CASE("embedding: rows by index, and gradients summed into the rows they came from") {
  Tensor w = arange(0.0, 12.0, 1.0, kFloat64).to(dev).reshape({4, 3}).requires_grad_();  // row r = 3r, 3r+1, 3r+2
  Tensor idx = from_vector<int64_t>({3, 0, 3, 1}, {2, 2}).to(dev);
  Tensor y = embedding(idx, w);
  CHECK(y.shape() == Shape{2, 2, 3});
  close(vec(y), {9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5});
  // d/dw of Σ y·g: row 3 gets g[0,0] + g[1,0], rows 0 and 1 one each, row 2 nothing
  Tensor g = arange(1.0, 13.0, 1.0, kFloat64).to(dev).reshape({2, 2, 3});
  (y * g).sum().backward();
  close(vec(w.grad()), {4, 5, 6, 10, 11, 12, 0, 0, 0, 1 + 7, 2 + 8, 3 + 9});
  manual_seed(12);
  CHECK(gradcheck([&](In i) { return embedding(idx, i[0]); }, {r(dev, {4, 3})}));
  CHECK(embedding(from_vector<int64_t>({2}, {}).to(dev), w).shape() == Shape{3});  // a 0-d index gives one row
  CHECK_THROWS_WITH_AS(embedding(idx.to(kFloat32), w), doctest::Contains("embedding: indices must be int64, got float32"), Error);
  CHECK_THROWS_WITH_AS(embedding(idx, w.reshape({12})), doctest::Contains("embedding: weight must be 2-D (num_embeddings, embedding_dim), got [12]"), Error);
  if (dev.is_cpu())  // on a GPU the kernel checks each index where it reads it
    CHECK_THROWS_WITH_AS(embedding(from_vector<int64_t>({4}), w), doctest::Contains("embedding: index_select: index 4 is out of bounds for dim 0 of size 4"), Error);
}

DEVICE_TEST_CASE("half inputs run every op family in float32 and round once") {
  manual_seed(8);
  Tensor x = randn({4, 8}).to(dev).to(kFloat16), w = randn({3, 8}).to(dev).to(kFloat16);
  const Tensor x32 = x.to(kFloat32), w32 = w.to(kFloat32);
  // Each op's half result is the float32 op on the same (widened) inputs, rounded once: on the CPU
  // bit for bit (the same float32 code runs). On CUDA a float32 sum in another order may cross a
  // rounding boundary: within one half ulp (2⁻¹⁰ relative). x·x + x is two ops, two roundings.
  const std::tuple<const char*, Tensor, Tensor> half_and_single[] = {
      {"relu", relu(x), relu(x32)}, {"gelu", gelu(x), gelu(x32)}, {"softmax", softmax(x, 1), softmax(x32, 1)},
      {"log_softmax", log_softmax(x, 1), log_softmax(x32, 1)}, {"linear", linear(x, w), linear(x32, w32)},
      {"sum", sum(x, {1}), sum(x32, {1})}, {"x * x + x", x * x + x, (x32 * x32).to(kFloat16).to(kFloat32) + x32}};
  for (const auto& [name, half, single] : half_and_single) {
    const char* op = name;  // a plain variable: clang 14's CAPTURE cannot name a structured binding
    CAPTURE(op);
    CHECK(half.dtype() == kFloat16);
    const std::vector<float> got = to_vector<float>(half), want = to_vector<float>(single.to(kFloat16));
    int64_t other_bits = 0, past_one_ulp = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      other_bits += got[i] != want[i];
      past_one_ulp += std::abs(got[i] - want[i]) > std::ldexp(std::abs(want[i]), -10);
    }
    if (dev.is_cpu()) CHECK(other_bits == 0);
    CHECK(past_one_ulp == 0);
  }
  CHECK(cross_entropy(x, from_vector<int64_t>({0, 1, 2, 3}).to(dev)).dtype() == kFloat16);  // no autocast: stays half
}

TEST_CASE("edge cases found in review: half mean of many elements, ties, pow 0, bad arguments") {
  // 1/70000 rounds to 0 in float16; the gradient must use the exact factor
  Tensor h = ones({70000}, kFloat16).requires_grad_();
  h.mean().backward();
  // relative (an absolute 1e-3 would pass 0), to half a float16 subnormal step: 2^-25 / 1.4e-5 = 0.2%
  CHECK(to_vector<float>(h.grad())[0] == doctest::Approx(1.0 / 70000).epsilon(2.1e-3).scale(0));
  // tied maxima share the gradient, as in PyTorch
  Tensor t = from_vector<double>({0, 1, 1}).requires_grad_();
  t.max().backward();
  CHECK(vec(t.grad()) == std::vector<double>{0, 0.5, 0.5});
  Tensor z = from_vector<double>({0, 2}).requires_grad_();
  pow(z, 0).sum().backward();
  CHECK(vec(z.grad()) == std::vector<double>{0, 0});
  CHECK_THROWS_WITH_AS(max_pool2d(ones({1, 1, 4, 4}), 2, 0), doctest::Contains("stride must be >= 1"), Error);
  CHECK_THROWS_WITH_AS(flatten(ones({2, 3, 4}), 2, 0), doctest::Contains("start_dim 2 comes after end_dim 0"), Error);
  CHECK_THROWS_WITH_AS(scalar_tensor(1).size(0), doctest::Contains("out of range for a tensor of 0 dims"), Error);
  CHECK_THROWS_WITH_AS(mean(ones({2, 3}), {1, -1}), doctest::Contains("appears more than once"), Error);
  CHECK_THROWS_WITH_AS(zeros({3}).copy_(ones({1, 3})), doctest::Contains("cannot broadcast shape [1, 3] to [3]"), Error);
  CHECK_THROWS_WITH_AS(conv2d(ones({1, 1, 3, 3}), ones({2, 1, 2, 2}), ones({1})), doctest::Contains("bias of shape [1]"), Error);
  CHECK_THROWS_WITH_AS(expand(ones({1}), {-2}), doctest::Contains("invalid size -2"), Error);
  CHECK((ones({2}, kInt64) * 2.0).dtype() == kFloat32);
}

// Expected values from PyTorch 1.13 (torch.nn.functional.group_norm in float64, 3 groups of 2
// channels, the same x, w, b and loss Σ y·c).
DEVICE_TEST_CASE("group_norm against PyTorch: forward and gradients, and its special cases") {
  auto f64 = [&](std::vector<double> v, Shape s) { return from_vector<double>(v, s).to(dev); };
  Tensor x = f64({-2.5, 1.25, -0.5, 2.5,  0.75, -1.0, 2.0,  0.25, -1.5, 1.5,  -0.25, -2.0, 1.0, -0.75, 3.0, 0.5,
                  -1.25, 2.5, 0.0, -1.75, 2.0, -0.5, -2.25, 1.5, 0.5, 1.75,  -3.0,  0.25, 1.25, -0.25, 2.25, -1.0,
                  0.75, -2.75, 1.0, 0.0,  -0.5, 2.75, -1.5, 1.25, 0.25, -2.0, 3.0,  -0.75, 1.5, 0.5,   -1.25, 2.0}, {2, 6, 2, 2}).requires_grad_();
  Tensor w = f64({1.5, -0.5, 2.0, 0.75, 1.0, -1.25}, {6}).requires_grad_(), b = f64({0.1, 0.2, -0.3, 0.0, 0.5, -0.1}, {6}).requires_grad_();
  Tensor c = (arange(0.0, 48.0, 1.0, kFloat64).to(dev) / 20.0 - 1.0).reshape({2, 6, 2, 2});
  Tensor y = group_norm(x, 3, w, b);
  close(vec(y), {-2.66846640186, 0.982258523669, -0.721413108243, 2.19916683218, 0.0681682665782, 0.636058810549, -0.337467836258,
                 0.230422707713, -2.48460158739, 1.39913456797, -0.866378189325, -3.13189094662, 0.39444195328, -0.455125330707,
                 1.36537599212, 0.151708443569, -0.265185067048, 1.97438098285, 0.481336949584, -0.5637938737, -1.56971522024,
                 0.296589821336, 1.60300335044, -1.19645421193, 0.368979264692, 1.56444266332, -2.97831825148, 0.129886584966,
                 -0.128752434624, 0.349432924829, -0.447542674259, 0.588525604555, 0.47849743435, -3.88108819801, 0.78989640809,
                 -0.45569948687, -0.291936537881, 1.2261334591, -0.759034998491, 0.525485768186, 0.402073860053, -1.00806255519,
                 2.12557392313, -0.224653435611, -0.95685372454, -0.173444604961, 1.1975213543, -1.34855828433}, 1e-9);
  sum(y * c).backward();
  close(vec(x.grad()), {-0.488152240131, -0.640908174626, -0.498230117763, -0.610699598891, 0.570406881234, 0.648183161644,
                        0.470811904062, 0.548588184472, -0.226545205431, -0.395570440872, -0.194484904987, 0.00660063089782,
                        0.161220075071, 0.321850026004, 0.0539306627712, 0.272999156545, -0.0534032389915, -0.0256485257827,
                        0.00561646652021, 0.0364602253318, 0.0642149385406, 0.0282929493467, -0.00805027333854, -0.0474825416266,
                        0.145024842172, 0.235238890681, 0.121954478884, 0.280001347495, -0.148328089925, -0.215142216983,
                        -0.146290703838, -0.272458548485, 0.140483331339, 0.102691207684, 0.272190915007, 0.305878733068,
                        -0.268935408007, -0.152656560745, -0.250817538633, -0.148834679714, 0.775127335781, 0.602597828942,
                        1.086969464, 0.778529376076, -0.678432085811, -0.808209595844, -1.00594239642, -0.750639926721}, 1e-9);
  close(vec(w.grad()), {0.261448095003, 0.0789288162147, 0.359660481554, 0.238295155963, -0.739676093701, 0.874515563662}, 1e-9);
  close(vec(b.grad()), {-2.6, -1, 0.6, 2.2, 3.8, 5.4}, 1e-12);

  // One group is layer norm over (C, H, W) with a per-channel affine; C groups normalise each
  // channel of each sample on its own (instance norm). A sample's statistics are its own: a batch
  // of one gives the same rows as the whole batch.
  const Tensor xd = x.detach();
  close(vec(group_norm(xd, 1)), vec(layer_norm(xd, {6, 2, 2})), 1e-12);
  close(vec(group_norm(xd, 6)), vec(layer_norm(xd, {2, 2})), 1e-12);
  const std::vector<double> yv = vec(y);
  close(vec(group_norm(xd.narrow(0, 1, 1), 3, w, b)), std::vector<double>(yv.begin() + 24, yv.end()), 1e-12);

  manual_seed(12);
  CHECK(gradcheck([&](In i) { return group_norm(i[0], 2, i[1], i[2]); }, {r(dev, {3, 4, 3}), r(dev, {4}), r(dev, {4})}));
  CHECK(gradcheck([&](In i) { return group_norm(i[0].transpose(1, 2), 3, {}, i[1]); }, {r(dev, {2, 2, 6}), r(dev, {6})}));  // strided (N, C, L)
  CHECK(gradcheck([&](In i) { return group_norm(i[0], 1, i[1]); }, {r(dev, {2, 3}), r(dev, {3})}));                         // (N, C)

  CHECK_THROWS_WITH_AS(group_norm(ones({2, 6, 4}).to(dev), 4),
                       doctest::Contains("group_norm: the 6 channels (dim 1) of input [2, 6, 4] do not split into num_groups = 4 equal groups"), Error);
  CHECK_THROWS_WITH_AS(group_norm(ones({2, 6}).to(dev), 0), doctest::Contains("do not split into num_groups = 0 equal groups"), Error);
  CHECK_THROWS_WITH_AS(group_norm(ones({2, 6}).to(dev), 3, ones({3}).to(dev)),
                       doctest::Contains("group_norm: input of shape [2, 6] has 6 channels (dim 1), but weight has shape [3]"), Error);
  CHECK_THROWS_WITH_AS(group_norm(ones({6}).to(dev), 3), doctest::Contains("at least 2 dims, got shape [6]"), Error);
  CHECK(group_norm(zeros({0, 6, 2}).to(dev), 3).shape() == Shape{0, 6, 2});
}

DEVICE_TEST_CASE("half means, losses, the norms and number factors compute in float32 and round once") {
  // Each would overflow float16 on the way (a sum of 100,000, 600², 70000) or lose its factor
  // (1e-8 is 0 in float16) if computed in the input's dtype; PyTorch gives these values.
  CHECK(vec(mean(full({10000}, 10, TensorOptions(kFloat16).device(dev))))[0] == 10);
  const double log10_h = 2.302734375;  // -log_softmax of 10 equal logits, log 10, rounded to float16
  Tensor labels = zeros({40000}, TensorOptions(kInt64).device(dev));
  CHECK(vec(cross_entropy(zeros({40000, 10}, TensorOptions(kFloat16).device(dev)), labels))[0] == log10_h);
  Tensor smooth = cross_entropy(zeros({3000, 10}, TensorOptions(kFloat16).device(dev)), zeros({3000}, TensorOptions(kInt64).device(dev)), {.label_smoothing = 0.1});
  CHECK(vec(smooth)[0] == doctest::Approx(log10_h).epsilon(1e-3));  // Σ log p over 30,000 terms is -69,000
  CHECK(vec(nll_loss(full({40000, 10}, -2.3, TensorOptions(kFloat16).device(dev)), labels))[0] == 2.30078125);  // float16(2.3)
  Tensor ln = layer_norm(from_vector<float>({0, 600}, {1, 2}).to(dev).to(kFloat16), {2});
  CHECK(ln.dtype() == kFloat16);
  CHECK(vec(ln) == std::vector<double>{-1, 1});
  // batch norm of float16 values about 1000: their squares (10⁶) overflow float16, and Σx²/n − mean²
  // would cancel to nothing in float32; two float32 passes give the variance 0.625 exactly
  Tensor rm = zeros({1}).to(dev), rv = ones({1}).to(dev);
  Tensor bn = batch_norm(from_vector<float>({999, 999.5, 1000.5, 1001}, {4, 1}).to(dev).to(kFloat16), rm, rv, {}, {}, true);
  CHECK(bn.dtype() == kFloat16);
  const double s = 1 / std::sqrt(0.625 + 1e-5);
  close(vec(bn), {-s, -0.5 * s, 0.5 * s, s}, 1e-3);  // float16 keeps 11 bits
  CHECK(rm.dtype() == kFloat32);
  close(vec(rm), {100}, 1e-7);                       // 0.1 · 1000
  Tensor gn = group_norm(from_vector<float>({999, 999.5, 1000.5, 1001}, {1, 1, 4}).to(dev).to(kFloat16), 1);  // the same values as one group
  CHECK(gn.dtype() == kFloat16);
  close(vec(gn), {-s, -0.5 * s, 0.5 * s, s}, 1e-3);
  // two groups and a float32 affine: normalised and scaled in float32, rounded to float16 once,
  // so each value is the float64 result's nearest float16
  manual_seed(13);
  Tensor x16 = (randn({2, 4, 3}) * 3 + 100).to(dev).to(kFloat16), gw = randn({4}).to(dev), gb = randn({4}).to(dev);
  Tensor gn2 = group_norm(x16, 2, gw, gb);
  CHECK(gn2.dtype() == kFloat16);
  CHECK(vec(gn2) == vec(group_norm(x16.to(kFloat64), 2, gw.to(kFloat64), gb.to(kFloat64)).to(kFloat16)));
  close(vec(rv), {0.9 + 0.1 * 0.625 * 4 / 3}, 1e-6);  // the unbiased variance, in float32
  Tensor thousand = full({1}, 1000, TensorOptions(kFloat16).device(dev));
  CHECK(vec(thousand / 70000.0)[0] == doctest::Approx(1.0 / 70).epsilon(5e-4).scale(0));  // float16: 2^-11 relative
  CHECK(vec(thousand * 1e-8)[0] == doctest::Approx(1e-5).epsilon(1e-2).scale(0));  // a float16 subnormal
  CHECK(vec(1e-8 * thousand)[0] == doctest::Approx(1e-5).epsilon(1e-2).scale(0));
  CHECK(vec(full({1}, 3, TensorOptions(kBFloat16).device(dev)) * 1.003)[0] == 3.015625);  // 3.009 to bfloat16; 1.003 rounds to 1
  CHECK((thousand * 2.0).dtype() == kFloat16);
}

DEVICE_TEST_CASE("0-d tensors reduce along dim 0 or -1, and the maximum NaN takes the whole gradient") {
  Tensor s = scalar_tensor(2.0, TensorOptions(kFloat64).device(dev)).requires_grad_();
  auto [value, index] = max(s, 0);
  CHECK(vec(value) == std::vector<double>{2});
  CHECK(to_vector<int64_t>(index) == std::vector<int64_t>{0});
  CHECK(value.dim() == 0);
  value.backward();
  CHECK(vec(s.grad()) == std::vector<double>{1});
  CHECK(to_vector<int64_t>(argmax(s, -1)) == std::vector<int64_t>{0});
  CHECK_THROWS_WITH_AS(min(s, 1), doctest::Contains("min: dim 1 out of range for 0-d tensor"), Error);
  s.set_grad(Tensor());
  sum(s, {0}).backward();
  CHECK(vec(s.grad()) == std::vector<double>{1});
  CHECK(vec(mean(s, {-1})) == std::vector<double>{2});
  // PyTorch's evenly_distribute_backward: a NaN maximum is the NaNs', not every element's
  Tensor x = from_vector<double>({1, NAN, 3}).to(dev).requires_grad_();
  max(x).backward();
  CHECK(vec(x.grad()) == std::vector<double>{0, 1, 0});
}

DEVICE_TEST_CASE("a 0-d tensor beside a dimensioned one promotes only across categories (result_type)") {
  auto t = [&](const Shape& shape, DType dtype) { return ones(shape, TensorOptions(dtype).device(dev)); };
  CHECK((t({2}, kFloat16) + t({}, kFloat32)).dtype() == kFloat16);
  CHECK((t({2}, kFloat32) * t({}, kFloat64)).dtype() == kFloat32);
  CHECK((t({}, kFloat64) - t({2}, kBFloat16)).dtype() == kBFloat16);
  CHECK((t({2}, kInt64) + t({}, kFloat64)).dtype() == kFloat64);  // integer beside floating: promoted
  CHECK((t({2}, kInt64) + t({}, kFloat16)).dtype() == kFloat16);
  CHECK(lt(t({2}, kFloat16), t({}, kFloat64)).dtype() == kBool);
  CHECK((t({}, kFloat16) + t({}, kFloat32)).dtype() == kFloat32);  // both 0-d, or both not: promote_types
  CHECK((t({2}, kFloat16) + t({1}, kFloat32)).dtype() == kFloat32);
  CHECK(vec(t({2}, kFloat16) + scalar_tensor(0.5, TensorOptions(kFloat64).device(dev))) == std::vector<double>{1.5, 1.5});
}

DEVICE_TEST_CASE("integer inputs of float-valued ops compute in float32, as in PyTorch") {
  Tensor i = from_vector<int64_t>({0, 1, 4}).to(dev);
  for (Tensor y : {exp(i), log(i), sqrt(i), tanh(i), sigmoid(i)}) CHECK(y.dtype() == kFloat32);
  CHECK(vec(sqrt(i)) == std::vector<double>{0, 1, 2});
  CHECK(vec(exp(from_vector<bool>({false}).to(dev))) == std::vector<double>{1});
  CHECK(abs(i).dtype() == kInt64);  // sign-safe ops keep int64
  CHECK_THROWS_WITH_AS(gelu(i), doctest::Contains("gelu: not defined for dtype int64"), Error);  // PyTorch refuses it too
  // a bound written as a float makes the result float32; integer bounds keep int64
  Tensor c = clamp(i, 0.5, std::nullopt);
  CHECK(c.dtype() == kFloat32);
  CHECK(vec(c) == std::vector<double>{0.5, 1, 4});
  CHECK(clamp(i, 1.0, 3.0).dtype() == kFloat32);
  CHECK(clamp(i, 1, 3).dtype() == kInt64);
  CHECK(vec(clamp(i, 1, 3)) == std::vector<double>{1, 1, 3});
}

TEST_CASE("dims of 0-d tensors, and empty tensors' layout") {
  Tensor s = scalar_tensor(3.0);
  CHECK(vec(softmax(s, -1)) == std::vector<double>{1});
  CHECK_THROWS_WITH_AS(softmax(s, 5), doctest::Contains("softmax: dim 5 out of range for shape []"), Error);
  CHECK(transpose(s, 0, -1).item<double>() == 3);
  CHECK_THROWS_WITH_AS(transpose(s, 3, 4), doctest::Contains("transpose: dim 3 out of range for a 0-d tensor"), Error);
  CHECK(zeros({4, 3}).t().narrow(1, 0, 0).is_contiguous());  // an empty tensor is contiguous whatever its strides
}
