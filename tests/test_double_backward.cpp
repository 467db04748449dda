// test_double_backward.cpp — create_graph: gradients that are differentiated again. Closed forms
// (derivatives of x³, a least-squares Hessian), gradgradcheck (second derivatives against float64
// central differences of the gradient) where OpInfo's cannot reach (ops tested by hand, options,
// composites: a CNN, the norms' composite forms, checkpoint), the refusal of a
// second backward through a once-differentiable op, .grad under create_graph, and PyTorch's AMP
// recipe for a gradient penalty: scaled gradients, unscaled by hand, the penalty under autocast.
#include <doctest/doctest.h>

#include <cmath>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "autograd/checkpoint.h"
#include "autograd/grad.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "devices.h"
#include "nn/attention.h"
#include "optim/sgd.h"
#include "tensor/kernels.h"

using namespace ampgrad;

static std::vector<double> vec(const Tensor& t) { return to_vector<double>(t); }
static Tensor leaf(Device dev, std::vector<double> v, const Shape& s = {}) {
  return from_vector<double>(v, s.empty() ? Shape{(int64_t)v.size()} : s).to(dev).requires_grad_();
}
// A float64 leaf on dev, uniform in [lo, hi), drawn on the host.
static Tensor r(Device dev, const Shape& s, double lo = -1, double hi = 1) { return (rand(s, kFloat64) * (hi - lo) + lo).to(dev).detach().requires_grad_(); }
static Tensor grad_of(const Tensor& y, const Tensor& x) { return autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0]; }
using In = const std::vector<Tensor>&;

DEVICE_TEST_CASE("derivatives of x³ to the third, through grad and backward") {
  Tensor x = leaf(dev, {-1, 0.5, 2});
  Tensor d1 = grad_of(pow(x, 3).sum(), x);  // 3x²
  Tensor d2 = grad_of(d1.sum(), x);         // 6x
  Tensor d3 = grad_of(d2.sum(), x);         // 6
  CHECK(vec(d1) == std::vector<double>{3, 0.75, 12});
  CHECK(vec(d2) == std::vector<double>{-6, 3, 12});
  CHECK(vec(d3) == std::vector<double>{6, 6, 6});
  CHECK(d1.requires_grad());
  // Without create_graph the gradient is a plain value, as before.
  CHECK_FALSE(autograd::grad({pow(x, 3).sum()}, {x})[0].requires_grad());

  // backward(create_graph): .grad carries a graph, and a second backward differentiates it.
  Tensor y = (x * x * x).sum();
  y.backward({}, std::nullopt, /*create_graph=*/true);
  Tensor g = x.grad();
  CHECK(g.requires_grad());
  CHECK(vec(g) == std::vector<double>{3, 0.75, 12});
  // retain_graph defaulted to create_graph: y's graph runs again (kept again, for g's graph reads it)
  CHECK(vec(autograd::grad({y}, {x}, {}, /*retain_graph=*/true)[0]) == vec(g));
  x.set_grad({});
  g.sum().backward();
  CHECK(vec(x.grad()) == std::vector<double>{-6, 3, 12});
}

DEVICE_TEST_CASE("under create_graph a second gradient is added out of place, with its graph") {
  Tensor x = leaf(dev, {1, 2});
  (x * x).sum().backward();
  Tensor before = x.grad();
  (x * x * x).sum().backward({}, std::nullopt, true);
  CHECK_FALSE(x.grad().is_same(before));  // in place would not be recorded
  CHECK(vec(before) == std::vector<double>{2, 4});
  CHECK(vec(x.grad()) == std::vector<double>{5, 16});  // 2x + 3x²
  Tensor g = x.grad();
  x.set_grad({});
  g.sum().backward();  // only the recorded part has a derivative: 6x
  CHECK(vec(x.grad()) == std::vector<double>{6, 12});
}

DEVICE_TEST_CASE("grad_outputs keep their graph, even cast to the output's dtype, and zero_grad(false) drops a .grad's") {
  Tensor x = leaf(dev, {1, 3});
  Tensor v = from_vector<float>({1, 2}).to(dev).requires_grad_();  // float32 beside a float64 output
  const Tensor g = autograd::grad({x * x}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];  // 2x·v
  CHECK(vec(g) == std::vector<double>{2, 12});
  CHECK(vec(autograd::grad({g.sum()}, {v})[0]) == std::vector<double>{2, 6});  // d(2x·v)/dv = 2x, back in float32
  (x * x * x).sum().backward({}, std::nullopt, true);
  optim::SGD opt({x});
  opt.zero_grad(/*set_to_none=*/false);
  CHECK_FALSE(x.grad().requires_grad());
  CHECK(vec(x.grad()) == std::vector<double>{0, 0});
}

DEVICE_TEST_CASE("a Hessian-vector product of least squares is 2 XᵀX v") {
  Tensor X = from_vector<double>({1, 2, 0, -1, 3, 1}, {3, 2}).to(dev), y = from_vector<double>({1, 0, 2}).to(dev);
  Tensor w = leaf(dev, {0.5, -0.25}), v = from_vector<double>({1, 2}).to(dev);
  Tensor residual = matmul(X, w) - y;
  Tensor gw = grad_of((residual * residual).sum(), w);  // 2 Xᵀ (X w − y)
  Tensor hv = grad_of((gw * v).sum(), w);
  // XᵀX = [[10, 5], [5, 6]]: 2 XᵀX v = 2 (20, 17)
  CHECK(vec(hv) == std::vector<double>{40, 34});
}

// OpInfo (test_opinfo.cpp) runs gradgradcheck on every entry, every sample; these are the ops it
// leaves to hand tests (by_hand() there) and the options an entry cannot say.
DEVICE_TEST_CASE("gradgradcheck: the ops tested by hand (permute, embedding, convolution, pooling, dropout)") {
  manual_seed(13);
  Tensor idx = from_vector<int64_t>({2, 0, 2}).to(dev);
  CHECK(gradgradcheck([](In i) { return pow(i[0].permute({1, 0}).narrow(0, 1, 2).select(1, 1), 3); }, {r(dev, {2, 3})}));
  CHECK(gradgradcheck([&](In i) { return pow(embedding(idx, i[0]), 3); }, {r(dev, {4, 2})}));
  CHECK(gradgradcheck([](In i) { return tanh(conv2d(i[0], i[1], i[2], 2, 1)); }, {r(dev, {1, 2, 4, 4}), r(dev, {2, 2, 3, 3}), r(dev, {2})}));
  CHECK(gradgradcheck([](In i) { return pow(max_pool2d(i[0], 2), 3); }, {r(dev, {1, 2, 4, 4})}));
  CHECK(gradgradcheck([](In i) {
    Generator gen(5);  // the same mask at every evaluation
    return pow(dropout(i[0], 0.4, true, &gen), 3);
  }, {r(dev, {8})}));
}

DEVICE_TEST_CASE("gradgradcheck: the losses' options, and attention composed of ops") {
  manual_seed(14);
  Tensor t = from_vector<int64_t>({1, 3, 0}).to(dev), u = from_vector<double>({0.5, 1, 2, 1.5}).to(dev);
  CHECK(gradgradcheck([&](In i) { return cross_entropy(i[0], t, {.weight = u, .ignore_index = 0, .label_smoothing = 0.1}); }, {r(dev, {3, 4})}));
  CHECK(gradgradcheck([&](In i) { return cross_entropy(i[0], t, {.reduction = Reduction::Sum}); }, {r(dev, {3, 4})}));
  CHECK(gradgradcheck([&](In i) { return nll_loss(log_softmax(i[0], 1), t, {.weight = u}); }, {r(dev, {3, 4})}));
  Tensor weight = from_vector<double>({1, 2, 0.5}).to(dev), pos_weight = from_vector<double>({3, 1, 0.5}).to(dev);
  CHECK(gradgradcheck([&](In i) { return binary_cross_entropy_with_logits(i[0], i[1], {.weight = weight, .pos_weight = pos_weight}); },
                      {r(dev, {2, 3}, -3, 3), r(dev, {2, 3}, 0, 1)}));
  CHECK(gradgradcheck([](In i) { return nn::functional::scaled_dot_product_attention(i[0], i[1], i[2], {.is_causal = true}); },
                      {r(dev, {1, 3, 2}), r(dev, {1, 3, 2}), r(dev, {1, 3, 2})}));
}

// A CNN and its loss, differentiated twice: the input-gradient penalty of a classifier.
DEVICE_TEST_CASE("gradgradcheck: a small CNN classifier, by its input and its weights") {
  manual_seed(15);
  Tensor t = from_vector<int64_t>({2, 0}).to(dev);
  CHECK(gradgradcheck([&](In i) {
    Tensor h = max_pool2d(relu(conv2d(i[0], i[1], {}, 1, 1)), 2).flatten(1);
    return cross_entropy(linear(h, i[2]), t);
  }, {r(dev, {2, 1, 4, 4}), r(dev, {2, 1, 3, 3}), r(dev, {3, 8})}));
}

// layer_norm, batch_norm and group_norm backpropagate through fused kernels (closed forms for the
// last two); under create_graph they differentiate a composite of the library's ops instead.
DEVICE_TEST_CASE("gradgradcheck: layer_norm, batch_norm and group_norm, through their composite forms") {
  manual_seed(16);
  CHECK(gradgradcheck([](In i) { return layer_norm(i[0], {3}, i[1], i[2]); }, {r(dev, {2, 3}), r(dev, {3}), r(dev, {3})}));
  CHECK(gradgradcheck([](In i) { return pow(layer_norm(i[0], {2, 2}), 2); }, {r(dev, {3, 2, 2})}));
  CHECK(gradgradcheck([](In i) { return batch_norm(i[0], {}, {}, i[1], i[2], true); }, {r(dev, {3, 2, 2}), r(dev, {2}), r(dev, {2})}));
  Tensor running_mean = from_vector<double>({0.1, -0.2}).to(dev), running_var = from_vector<double>({0.5, 2}).to(dev);
  CHECK(gradgradcheck([&](In i) { return pow(batch_norm(i[0], running_mean, running_var, i[1], {}, false), 2); }, {r(dev, {3, 2}), r(dev, {2})}));
  CHECK(gradgradcheck([](In i) { return group_norm(i[0], 2, i[1], i[2]); }, {r(dev, {2, 4, 2}), r(dev, {4}), r(dev, {4})}));
  // the fast path and the composite give the same first derivative
  auto same_first_derivative = [&](const std::function<Tensor(In)>& f, const std::vector<Tensor>& in) {
    const Tensor c = r(dev, f(in).shape()).detach();
    const std::vector<Tensor> plain = autograd::grad({(f(in) * c).sum()}, in);
    const std::vector<Tensor> composite = autograd::grad({(f(in) * c).sum()}, in, {}, std::nullopt, true);
    for (size_t k = 0; k < in.size(); ++k) {
      const std::vector<double> p = vec(plain[k]), q = vec(composite[k]);
      for (size_t e = 0; e < p.size(); ++e) CHECK(q[e] == doctest::Approx(p[e]).epsilon(1e-12));
    }
  };
  same_first_derivative([](In i) { return batch_norm(i[0], {}, {}, i[1], {}, true); }, {r(dev, {4, 3}), r(dev, {3})});
  same_first_derivative([](In i) { return group_norm(i[0], 2, i[1], i[2]); }, {r(dev, {3, 4, 3}), r(dev, {4}), r(dev, {4})});
}

// checkpoint's backward reruns its region: under create_graph the rerun reads the inputs linked
// to the graph outside, and its backward is recorded like any other.
DEVICE_TEST_CASE("checkpoint is twice differentiable: through its inputs and the weights its region reads") {
  manual_seed(17);
  const Tensor w = r(dev, {3, 3});
  auto region = [w](In in) { return tanh(matmul(in[0], w)) * in[1]; };
  CHECK(gradgradcheck([&](In i) { return checkpoint(region, {i[0], i[1]}); }, {r(dev, {2, 3}), r(dev, {2, 3})}));
  CHECK(gradgradcheck([](In i) {  // the weight as a capture, not an input
    return checkpoint([w = i[1]](In in) { return tanh(matmul(in[0], w)); }, {i[0]});
  }, {r(dev, {2, 3}), r(dev, {3, 3})}));
  // the same second derivative as without the checkpoint, to rounding (x's several paths are
  // summed in another order)
  Tensor x = r(dev, {2, 3}), y = r(dev, {2, 3});
  auto second = [&](bool checkpointed) {
    const Tensor out = checkpointed ? checkpoint(region, {x, y}) : region({x, y});
    const Tensor gx = grad_of(pow(out, 2).sum(), x);
    return vec(autograd::grad({(gx * gx).sum()}, {x, w})[0]);
  };
  const std::vector<double> a = second(true), b = second(false);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-13));
  // an input frozen between forward and backward is a constant to the rerun, not a changed graph
  Tensor frozen = r(dev, {2, 3});
  const Tensor out = checkpoint(region, {frozen, y});
  frozen.requires_grad_(false);
  CHECK(vec(grad_of(out.sum(), y)) == vec(tanh(matmul(frozen, w))));
}

// An op written outside the library whose backward calls kernels directly, recorded as the
// docs/double-backward.md says such a one must be: once_differentiable.
static Tensor cube_by_kernels(const Tensor& x) {
  Tensor out = kernels::unary(kernels::Unary::pow, x, {3});
  autograd::record("cube_by_kernels", out, {x}, [x = autograd::Saved(x)](const Tensor& g, const autograd::Needs&) {
    Tensor d = kernels::binary(kernels::Binary::mul, g, kernels::unary(kernels::Unary::pow, x, {2}));
    kernels::mul_(d, 3.0);  // 3x² g
    return autograd::grads(d);
  }, autograd::once_differentiable);
  return out;
}

DEVICE_TEST_CASE("a new op's once-differentiable backward: the first derivative, then a refusal") {
  Tensor x = leaf(dev, {1, -2});
  const Tensor g = grad_of(cube_by_kernels(x).sum(), x);
  CHECK(vec(g) == std::vector<double>{3, 12});
  CHECK_THROWS_WITH_AS(grad_of(g.sum(), x), doctest::Contains("backward of 'cube_by_kernels' is not differentiable twice"), Error);
  CHECK(vec(autograd::grad({cube_by_kernels(x).sum()}, {x})[0]) == std::vector<double>{3, 12});  // a plain backward as ever
}

// PyTorch's AMP recipe for a gradient penalty (the AMP examples, "Gradient penalty"): the
// gradients are taken of the scaled loss, so they are unscaled by hand before the penalty, which
// is computed under autocast; the scaled total then goes through the usual scaler steps.
// Without the unscaling the penalty is the scale (here 1024) times too large, as the last check
// shows. (At the default 65536 this small model's float16 weight gradients overflow: a normal
// AMP step would skip and back off, so the test starts lower.)
TEST_CASE("a gradient penalty under fp16 autocast and the GradScaler matches float32") {
  manual_seed(21);
  const Tensor x = randn({16, 4}), target = randn({16, 1});
  const Tensor w1_0 = randn({8, 4}) * 0.5, b1_0 = randn({8}) * 0.1, w2_0 = randn({1, 8}) * 0.5;
  struct Run { std::vector<double> grads; double penalty; };
  auto run = [&](bool amp, bool unscale_first) {
    std::vector<Tensor> params = {w1_0.clone().requires_grad_(), b1_0.clone().requires_grad_(), w2_0.clone().requires_grad_()};
    optim::SGD opt(params, {.lr = 0.1});
    amp::GradScaler scaler({.init_scale = 1024, .enabled = amp});
    auto forward = [&] { return mse_loss(linear(tanh(linear(x, params[0], params[1])), params[2]), target); };
    Tensor loss;
    {
      amp::autocast ac(DeviceType::CPU, kFloat16, amp);
      loss = forward();
    }
    std::vector<Tensor> g = autograd::grad({scaler.scale(loss)}, params, {}, std::nullopt, /*create_graph=*/true);
    const double inv = unscale_first ? 1.0 / scaler.get_scale() : 1.0;
    Tensor total, penalty;
    {
      amp::autocast ac(DeviceType::CPU, kFloat16, amp);
      Tensor squares = zeros({});
      for (const Tensor& gi : g) squares = squares + pow(gi * inv, 2).sum();
      penalty = sqrt(squares);
      total = loss + penalty;
    }
    scaler.scale(total).backward();
    scaler.unscale_(opt);
    Run out{{}, penalty.item<double>()};
    for (const Tensor& p : params)
      for (double v : vec(p.grad())) out.grads.push_back(v);
    return out;
  };
  const Run fp32 = run(false, true), fp16 = run(true, true);
  REQUIRE(fp32.grads.size() == fp16.grads.size());
  CHECK(fp16.penalty == doctest::Approx(fp32.penalty).epsilon(2e-3));
  double scale = 0;
  for (double v : fp32.grads) scale = std::max(scale, std::abs(v));
  for (size_t k = 0; k < fp32.grads.size(); ++k) CHECK(std::abs(fp16.grads[k] - fp32.grads[k]) <= 5e-3 * scale);
  CHECK(run(true, false).penalty == doctest::Approx(fp32.penalty * 1024).epsilon(2e-3));
}
