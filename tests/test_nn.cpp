// test_nn.cpp — nn/: Module registration and dotted names, train/eval, to(), the strict
// state_dict; each layer's forward against hand-computed values and its gradients against
// float64 central differences (gradcheck), on every device (devices.h); PyTorch's default init
// bounds; Dropout's modes.
#include <doctest/doctest.h>

#include "test_util.h"

#include "skip.h"

#include <algorithm>
#include <cmath>

#include "amp/autocast.h"
#include "autograd/gradcheck.h"
#include "devices.h"
#include "nn/nn.h"
#include "optim/sgd.h"

using namespace ampgrad;
using In = const std::vector<Tensor>&;

static std::vector<double> vec(const Tensor& t) { return to_vector<double>(t); }
static void close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
}
// Overwrites a parameter's values (an initialisation, so outside the graph).
static void set(Tensor p, const std::vector<double>& values) {
  NoGradGuard no_grad;
  p.copy_(from_vector(values, p.shape()));
}
static double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}
static double rms(const std::vector<double>& v) {
  double sq = 0;
  for (double x : v) sq += x * x;
  return std::sqrt(sq / v.size());
}
static std::vector<std::string> names(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

// fc1 -> body (Linear, ReLU, Linear), plus an int64 buffer on the top module.
struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(3, 2));
  std::shared_ptr<nn::Sequential> body = register_module(
      "body", std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 4), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(4, 1)));
  Tensor seen = register_buffer("seen", zeros({1}, kInt64));
  Tensor forward(const Tensor& x) override { return body->forward(fc1->forward(x)); }
};

TEST_CASE("registration: dotted names in registration order, recursive listings") {
  Net net;
  CHECK(names(net.named_parameters()) == std::vector<std::string>{"fc1.weight", "fc1.bias", "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias"});
  CHECK(names(net.named_buffers()) == std::vector<std::string>{"seen"});
  // state_dict: a module's own parameters and buffers, then its children (PyTorch's order)
  CHECK(names(net.state_dict()) == std::vector<std::string>{"seen", "fc1.weight", "fc1.bias", "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias"});
  auto params = net.parameters();
  REQUIRE(params.size() == 6);
  CHECK(params[0].is_same(net.fc1->weight));  // the registry holds the layer's own tensor
  CHECK(params[2].shape() == Shape{4, 2});
  for (const Tensor& p : params) CHECK(p.requires_grad());
  CHECK(net.children().size() == 2);
  CHECK(net.body->size() == 3);

  CHECK(error_of([&] { net.register_parameter("fc1", zeros({1})); }).find("'fc1' is already registered") != std::string::npos);
  CHECK(error_of([&] { net.register_buffer("a.b", zeros({1})); }).find("'a.b'") != std::string::npos);
  auto no_bias = std::make_shared<nn::Linear>(3, 2, false);
  CHECK(names(no_bias->named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(!no_bias->bias.defined());
  CHECK(nn::LayerNorm(Shape{4}, 1e-5, false).parameters().empty());
  CHECK(nn::GroupNorm(2, 4, 1e-5, false).parameters().empty());
}

TEST_CASE("a layer used twice is listed once among the parameters, and steps once") {
  // the same Linear(2, 2) applied twice, y = W(Wx + b) + b: as PyTorch's parameters(), W and b
  // once each, under their first names; state_dict keeps both names
  auto shared = std::make_shared<nn::Linear>(2, 2);
  nn::Sequential twice(shared, shared);
  CHECK(names(twice.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
  CHECK(names(twice.state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
  REQUIRE(twice.parameters().size() == 2);
  // one SGD step over them moves b by lr·dL/db, once: L = Σ y, dL/db = Wᵀ·1 + 1 per element
  {
    NoGradGuard no_grad;
    shared->weight.copy_(from_vector<float>({1, 2, 3, 4}, {2, 2}));
    shared->bias.zero_();
  }
  optim::SGD opt(twice.parameters(), {.lr = 0.5});
  twice.forward(from_vector<float>({1, 1}, {1, 2})).sum().backward();
  opt.step();
  // Wᵀ·1 = (1 + 3, 2 + 4) = (4, 6); plus 1: (5, 7); b = −0.5·(5, 7)
  CHECK(to_vector<float>(shared->bias) == std::vector<float>{-2.5f, -3.5f});
}

TEST_CASE("train/eval reach every submodule, zero_grad clears grads") {
  Net net;
  CHECK(net.is_training());
  net.eval();
  CHECK(!net.is_training());
  CHECK(!net.fc1->is_training());
  CHECK(!(*net.body)[1]->is_training());
  net.train();
  CHECK((*net.body)[2]->is_training());

  net.forward(ones({5, 3})).sum().backward();
  for (const Tensor& p : net.parameters()) CHECK(p.grad().defined());
  net.zero_grad();
  for (const Tensor& p : net.parameters()) CHECK(!p.grad().defined());
}

TEST_CASE("to(dtype) converts floating parameters in place: every handle sees it") {
  Net net;
  Tensor held = net.parameters()[0];  // as an optimizer would hold it
  std::vector<double> before = vec(held);
  net.forward(ones({1, 3})).sum().backward();
  net.to(kFloat64);
  CHECK(held.dtype() == kFloat64);
  CHECK(net.fc1->weight.dtype() == kFloat64);
  CHECK(held.requires_grad());
  CHECK(held.is_leaf());
  CHECK(held.grad().dtype() == kFloat64);  // grads follow their parameters
  CHECK(net.seen.dtype() == kInt64);       // integer buffers are not floating: untouched
  close(vec(held), before, 1e-7);          // float32 -> float64 is exact
  CHECK(net.forward(ones({2, 3}, kFloat64)).dtype() == kFloat64);
  net.to(Device::cpu());  // already there: no copy, the handle still shares the parameter
  CHECK(held.shares_storage(net.fc1->weight));
}

TEST_CASE("to(Device::cuda()) and back keeps values") {
  SKIP_WITHOUT_GPU();
  manual_seed(0);
  auto fc = std::make_shared<nn::Linear>(3, 2);
  Tensor x = randn({4, 3});
  std::vector<double> want = vec(fc->forward(x));
  fc->to(Device::cuda());
  CHECK(fc->weight.device() == Device::cuda());
  std::vector<double> got = vec(fc->forward(x.to(Device::cuda())));
  fc->to(Device::cpu());
  close(got, want, 1e-5);
}

TEST_CASE("state_dict round trip, and each strict-load error names its key") {
  manual_seed(1);
  Net a;
  manual_seed(2);
  Net b;
  CHECK(vec(a.fc1->weight) != vec(b.fc1->weight));
  nn::StateDict sd = a.state_dict();
  CHECK(sd[1].second.shares_storage(a.fc1->weight));  // detached views, not copies
  CHECK(!sd[1].second.requires_grad());
  b.load_state_dict(sd);
  for (size_t i = 0; i < sd.size(); ++i) CHECK(vec(b.state_dict()[i].second) == vec(sd[i].second));
  CHECK(b.fc1->weight.requires_grad());
  CHECK(!b.fc1->weight.shares_storage(a.fc1->weight));  // values copied into b's own tensors

  nn::StateDict missing(sd.begin(), sd.end() - 1);
  CHECK(error_of([&] { b.load_state_dict(missing); }).find("missing key 'body.2.bias'") != std::string::npos);
  nn::StateDict extra = sd;
  extra.emplace_back("body.3.weight", zeros({1}));
  CHECK(error_of([&] { b.load_state_dict(extra); }).find("unexpected key 'body.3.weight'") != std::string::npos);
  nn::StateDict wrong = sd;
  wrong[1].second = zeros({3, 2});
  std::string msg = error_of([&] { b.load_state_dict(wrong); });
  CHECK(msg.find("size mismatch for 'fc1.weight': the state_dict has [3, 2], the model [2, 3]") != std::string::npos);

  // A failed load copies nothing.
  Net c;
  std::vector<double> c_bias = vec(c.body->named_parameters()[1].second);
  nn::StateDict partial = sd;
  partial.back().second = zeros({7});
  CHECK_THROWS_AS(c.load_state_dict(partial), Error);
  CHECK(vec(c.body->named_parameters()[1].second) == c_bias);
}

DEVICE_TEST_CASE("Linear forward by hand, and gradients by central differences") {
  nn::Linear fc(2, 3);
  fc.to(dev);
  set(fc.weight, {1, 2, 0, 1, -1, 1});  // rows (1, 2), (0, 1), (-1, 1)
  set(fc.bias, {0.5, 0, -1});
  // x = (1, -1): 1 − 2 + 0.5, 0 − 1 + 0, −1 − 1 − 1
  close(vec(fc.forward(from_vector<float>({1, -1}, {1, 2}).to(dev))), {-0.5, -1, -3});

  manual_seed(3);
  fc.to(kFloat64);
  Tensor x = randn({4, 2}, kFloat64).to(dev).requires_grad_();
  CHECK(gradcheck([&](In) { return fc.forward(x); }, {x, fc.weight, fc.bias}));
}

DEVICE_TEST_CASE("Conv2d forward by hand, and gradients by central differences") {
  nn::Conv2d conv(1, 1, 2);
  conv.to(dev);
  set(conv.weight, {1, 2, 3, 4});
  set(conv.bias, {0.5});
  Tensor x = arange(1, 10, 1).to(dev).reshape({1, 1, 3, 3});  // 1 2 3 / 4 5 6 / 7 8 9
  // each output: the 2x2 window dotted with (1, 2, 3, 4), plus 0.5; e.g. 1+4+12+20 + 0.5
  close(vec(conv.forward(x)), {37.5, 47.5, 67.5, 77.5});
  // padding 1, stride 2: windows start at (−1, −1), (−1, 1), (1, −1), (1, 1); zeros outside
  nn::Conv2d padded(1, 1, 2, /*stride=*/2, /*padding=*/1);
  padded.to(dev);
  set(padded.weight, {1, 2, 3, 4});
  set(padded.bias, {0.5});
  Tensor y = padded.forward(x);
  CHECK(y.shape() == Shape{1, 1, 2, 2});
  close(vec(y), {4 * 1 + 0.5, 3 * 2 + 4 * 3 + 0.5, 2 * 4 + 4 * 7 + 0.5, 77.5});

  manual_seed(4);
  nn::Conv2d c(2, 3, 2, 2, 1);
  c.to(dev);
  c.to(kFloat64);
  Tensor xs = randn({2, 2, 3, 3}, kFloat64).to(dev).requires_grad_();
  CHECK(gradcheck([&](In) { return c.forward(xs); }, {xs, c.weight, c.bias}));
}

DEVICE_TEST_CASE("MaxPool2d forward by hand, and gradients by central differences") {
  Tensor x = arange(0, 16, 1).to(dev).reshape({1, 1, 4, 4});
  close(vec(nn::MaxPool2d(2).forward(x)), {5, 7, 13, 15});  // the bottom-right of each 2x2 block
  close(vec(nn::MaxPool2d(2, 1).forward(arange(1, 10, 1).to(dev).reshape({1, 1, 3, 3}))), {5, 6, 8, 9});

  // distinct values (a permutation), so no window has a tie for the max
  Tensor xs = (randperm(32).to(dev).to(kFloat64) * 0.1).reshape({1, 2, 4, 4}).detach().requires_grad_();
  nn::MaxPool2d pool(2);
  CHECK(gradcheck([&](In) { return pool.forward(xs); }, {xs}));
}

DEVICE_TEST_CASE("LayerNorm forward by hand, and gradients by central differences") {
  nn::LayerNorm ln(Shape{3});
  ln.to(dev);
  close(vec(ln.weight), {1, 1, 1});
  close(vec(ln.bias), {0, 0, 0});
  // x = (1, 2, 3): mean 2, biased variance 2/3, so y = (x − 2) / √(2/3 + eps)
  const double s = 1 / std::sqrt(2.0 / 3 + 1e-5);
  Tensor x = from_vector<float>({1, 2, 3}, {1, 3}).to(dev);
  close(vec(ln.forward(x)), {-s, 0, s}, 1e-5);
  set(ln.weight, {1, 2, 3});
  set(ln.bias, {0, 0, 1});
  close(vec(ln.forward(x)), {-s, 0, 3 * s + 1}, 1e-5);

  manual_seed(5);
  nn::LayerNorm ln2(Shape{2, 3});
  ln2.to(dev);
  ln2.to(kFloat64);
  set(ln2.weight, {0.5, -1, 2, 1.5, 0.3, -0.7});
  Tensor xs = randn({2, 2, 3}, kFloat64).to(dev).requires_grad_();
  CHECK(gradcheck([&](In) { return ln2.forward(xs); }, {xs, ln2.weight, ln2.bias}));
}

DEVICE_TEST_CASE("GroupNorm: each sample's groups by hand, the same in training and eval") {
  nn::GroupNorm gn(2, 4);
  gn.to(dev);
  CHECK(names(gn.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  close(vec(gn.weight), {1, 1, 1, 1});
  close(vec(gn.bias), {0, 0, 0, 0});
  // One sample, channels (1, 3 | 5, 9) at one position: groups {1, 3} (mean 2, variance 1) and
  // {5, 9} (mean 7, variance 4), so y = (−1, 1, −1, 1) · (1/√(1 + eps), 1/√(1 + eps), 2/√(4 + eps), ...)
  Tensor x = from_vector<float>({1, 3, 5, 9}, {1, 4, 1}).to(dev);
  const double a = 1 / std::sqrt(1 + 1e-5), b = 2 / std::sqrt(4 + 1e-5);
  close(vec(gn.forward(x)), {-a, a, -b, b}, 1e-6);
  set(gn.weight, {1, 2, 3, 4});
  set(gn.bias, {0, 0, 0, 1});
  gn.eval();  // no running statistics: eval changes nothing
  close(vec(gn.forward(x)), {-a, 2 * a, -3 * b, 4 * b + 1}, 1e-6);
  CHECK(error_of([] { nn::GroupNorm(3, 4); }) == "GroupNorm: num_channels = 4 does not split into num_groups = 3 equal groups");
}

DEVICE_TEST_CASE("BatchNorm: batch statistics in train mode, running estimates in eval mode, PyTorch's buffers") {
  nn::BatchNorm2d bn(2);
  bn.to(dev);
  std::vector<std::string> keys;
  for (auto& [k, t] : bn.state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  CHECK(bn.named_parameters().size() == 2);
  // channel 0 holds 1, 3, 5, 7 (mean 4, variance 5 biased, 20/3 unbiased); channel 1 holds 0, 0, 2, 2
  // (mean 1, variance 1 biased, 4/3 unbiased)
  Tensor x = from_vector<float>({1, 3, 0, 0, 5, 7, 2, 2}, {2, 2, 1, 2}).to(dev);
  const double s0 = 1 / std::sqrt(5 + 1e-5), s1 = 1 / std::sqrt(1 + 1e-5);
  close(vec(bn.forward(x)), {-3 * s0, -s0, -s1, -s1, s0, 3 * s0, s1, s1}, 1e-5);
  close(vec(bn.running_mean), {0.4, 0.1});                             // 0.9 · 0 + 0.1 · mean
  close(vec(bn.running_var), {0.9 + 0.1 * 20 / 3.0, 0.9 + 0.1 * 4 / 3.0});  // 0.9 · 1 + 0.1 · unbiased
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);
  bn.eval();
  set(bn.weight, {2, 1});
  set(bn.bias, {0, -1});
  const double r0 = 1 / std::sqrt(0.9 + 2 / 3.0 + 1e-5), r1 = 1 / std::sqrt(0.9 + 0.4 / 3 + 1e-5);
  close(vec(bn.forward(x)), {2 * 0.6 * r0, 2 * 2.6 * r0, -0.1 * r1 - 1, -0.1 * r1 - 1, 2 * 4.6 * r0, 2 * 6.6 * r0, 1.9 * r1 - 1, 1.9 * r1 - 1}, 1e-5);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);  // eval counts nothing
  // one value per channel: refused in train mode (nothing counted), fine in eval mode
  CHECK(bn.forward(x.narrow(0, 0, 1).narrow(3, 0, 1)).shape() == Shape{1, 2, 1, 1});
  bn.train();
  CHECK_THROWS_WITH_AS(bn.forward(x.narrow(0, 0, 1).narrow(3, 0, 1)), doctest::Contains("more than 1 value per channel"), Error);
  CHECK_THROWS_WITH_AS(bn.forward(ones({2, 3, 1, 2}).to(dev)), doctest::Contains("input of shape [2, 3, 1, 2] has 3 channels (dim 1), but weight has shape [2]"), Error);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);
  CHECK_THROWS_WITH_AS(bn.forward(ones({2, 2, 2}).to(dev)), doctest::Contains("BatchNorm2d: expected 4D input (got 3D input of shape [2, 2, 2])"), Error);
  CHECK_THROWS_WITH_AS(nn::BatchNorm1d(2).forward(ones({2, 2, 1, 1})), doctest::Contains("BatchNorm1d: expected 2D or 3D input (got 4D input"), Error);
  bn.reset_running_stats();
  close(vec(bn.running_mean), {0, 0});
  close(vec(bn.running_var), {1, 1});

  // momentum none: a plain average of the batches so far (the second's means are 10 higher)
  nn::BatchNorm1d avg(2, {.momentum = std::nullopt});
  avg.to(dev);
  Tensor x3 = x.reshape({2, 2, 2});
  avg.forward(x3);
  avg.forward(x3 + 10.0);
  close(vec(avg.running_mean), {9, 6});
  close(vec(avg.running_var), {20 / 3.0, 4 / 3.0});
  CHECK(avg.num_batches_tracked.item<int64_t>() == 2);

  // no running statistics: no buffers, and eval mode normalises with the batch's own
  nn::BatchNorm1d batch_only(2, {.affine = false, .track_running_stats = false});
  CHECK(batch_only.state_dict().empty());
  batch_only.eval();
  close(vec(batch_only.forward(x3.to(dev))), {-3 * s0, -s0, -s1, -s1, s0, 3 * s0, s1, s1}, 1e-5);

  // to(dtype) converts the statistics, not the count; gradients through the module in float64
  nn::BatchNorm1d bn64(3);
  bn64.to(dev);
  bn64.to(kFloat64);
  CHECK(bn64.running_var.dtype() == kFloat64);
  CHECK(bn64.num_batches_tracked.dtype() == kInt64);
  set(bn64.weight, {0.5, -1, 2});
  manual_seed(8);
  Tensor xs = randn({4, 3, 2}, kFloat64).to(dev).requires_grad_();
  CHECK(gradcheck([&](In) { return bn64.forward(xs); }, {xs, bn64.weight, bn64.bias}));
}

DEVICE_TEST_CASE("BatchNorm under autocast: a 16-bit activation, float32 statistics and parameters") {
  manual_seed(4);
  nn::Conv2d conv(1, 2, 3);
  nn::BatchNorm2d bn(2);
  conv.to(dev);
  bn.to(dev);
  Tensor x = randn({4, 1, 5, 5}).to(dev), y;
  {
    amp::autocast ac(dev.type, kFloat16);
    y = bn.forward(conv.forward(x));
  }
  CHECK(y.dtype() == kFloat16);                  // input_dtype: the conv's float16 output stays float16
  CHECK(bn.running_mean.dtype() == kFloat32);   // the buffers keep their dtype
  nn::BatchNorm2d ref(2);                          // the same step in float32, for the statistics
  ref.to(dev);
  Tensor y32 = ref.forward(conv.forward(x));
  std::vector<double> a = vec(bn.running_var), b = vec(ref.running_var);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(2e-3));  // the conv's float16 rounding
  sum(y * y.detach()).backward();
  CHECK(bn.weight.grad().dtype() == kFloat32);
  CHECK(conv.weight.grad().dtype() == kFloat32);
}

DEVICE_TEST_CASE("Embedding: PyTorch's N(0, 1) init, lookups, and a gradient per row") {
  manual_seed(9);
  nn::Embedding big(100, 100);
  std::vector<double> w = vec(big.weight);
  double m = 0, sq = 0;
  for (double v : w) m += v / double(w.size());
  for (double v : w) sq += (v - m) * (v - m) / double(w.size());
  CHECK(std::abs(m) < 0.04);                // 10,000 draws: the mean's sd is 0.01
  CHECK(std::abs(std::sqrt(sq) - 1) < 0.03);  // and the sd's about 0.007
  nn::Embedding emb(5, 2);
  emb.to(dev);
  set(emb.weight, {0, 1, 10, 11, 20, 21, 30, 31, 40, 41});
  Tensor ids = from_vector<int64_t>({4, 4, 1}, {1, 3}).to(dev);
  Tensor y = emb.forward(ids);
  CHECK(y.shape() == Shape{1, 3, 2});
  close(vec(y), {40, 41, 40, 41, 10, 11});
  y.sum().backward();
  close(vec(emb.weight.grad()), {0, 0, 1, 1, 0, 0, 0, 0, 2, 2});  // token 4 twice
  CHECK(emb.named_parameters().size() == 1);
  CHECK_THROWS_WITH_AS(nn::Embedding(0, 3), doctest::Contains("Embedding: sizes must be positive, got (0, 3)"), Error);
}

DEVICE_TEST_CASE("ReLU, GELU, Flatten, Sequential") {
  Tensor x = from_vector<double>({-1, 0, 2}).to(dev);
  close(vec(nn::ReLU().forward(x)), {0, 0, 2});
  close(vec(nn::GELU().forward(x)), {-0.15865525393145707, 0, 1.9544997361036416});  // x Φ(x)
  CHECK(nn::Flatten().forward(zeros({2, 3, 4, 5}).to(dev)).shape() == Shape{2, 60});
  CHECK(nn::Flatten(0).forward(zeros({2, 3, 4}).to(dev)).shape() == Shape{24});

  auto fc = std::make_shared<nn::Linear>(2, 2);
  fc->to(dev);
  set(fc->weight, {1, -1, 2, 0});
  set(fc->bias, {0, -5});
  nn::Sequential seq(fc, std::make_shared<nn::ReLU>());
  // fc((3, 1)) = (3 − 1, 6 − 5) = (2, 1); relu keeps both. fc((1, 3)) = (−2, −3) -> 0, 0
  close(vec(seq.forward(from_vector<float>({3, 1, 1, 3}, {2, 2}).to(dev))), {2, 1, 0, 0});
  CHECK(names(seq.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
}

TEST_CASE("default init: PyTorch's bounds, draw order and reproducibility") {
  // Linear(400, 300): weight and bias ~ U(−b, b), b = 1/√400 = 0.05. A uniform's std is b/√3;
  // the sample std of n = 120000 draws has relative error ≈ √(0.8 / 4n) ≈ 0.13%, so 1% is
  // several standard errors.
  manual_seed(0);
  nn::Linear fc(400, 300);
  const double b = 0.05;
  CHECK(max_abs(vec(fc.weight)) <= b);
  CHECK(max_abs(vec(fc.weight)) > 0.99 * b);  // the whole range is used, not a narrower one
  CHECK(rms(vec(fc.weight)) == doctest::Approx(b / std::sqrt(3.0)).epsilon(0.01).scale(0));  // relative: a scale of 1 allowed 36%
  CHECK(max_abs(vec(fc.bias)) <= b);

  // Conv2d(3, 16, 5): fan_in = 3·5·5 = 75; 1200 draws: relative error of the std ≈ 1.3%, so 6%
  nn::Conv2d conv(3, 16, 5);
  const double bc = 1 / std::sqrt(75.0);
  CHECK(max_abs(vec(conv.weight)) <= bc);
  CHECK(rms(vec(conv.weight)) == doctest::Approx(bc / std::sqrt(3.0)).epsilon(0.06).scale(0));  // relative, as derived
  CHECK(max_abs(vec(conv.bias)) <= bc);

  // Weight first, then bias, from the default generator: the same draws as uniform_ by hand.
  manual_seed(42);
  nn::Linear small(4, 3);  // b = 1/√4 = 0.5
  manual_seed(42);
  Tensor w_ref = empty({3, 4}), b_ref = empty({3});
  uniform_(w_ref, -0.5, 0.5);
  uniform_(b_ref, -0.5, 0.5);
  close(vec(small.weight), vec(w_ref), 1e-6);
  close(vec(small.bias), vec(b_ref), 1e-6);
  manual_seed(42);
  CHECK(vec(nn::Linear(4, 3).weight) == vec(small.weight));

  // xavier_uniform_ on (30, 20): b = √(6 / 50)
  CHECK(max_abs(vec(nn::init::xavier_uniform_(empty({30, 20})))) <= std::sqrt(6.0 / 50));
  CHECK(nn::init::fan_in_and_fan_out(empty({16, 3, 5, 5})) == std::pair<int64_t, int64_t>{75, 400});
  close(vec(nn::init::ones_(fc.bias)), std::vector<double>(300, 1.0));  // works on a parameter (no grad mode clash)

  // normal_(mean 3, std 0.02) on a parameter, 120000 draws: the mean's standard error is
  // 0.02/√n = 6e-5 and the std's relative one 1/√(2n) = 0.2%, so 3e-4 and 1% are several of each
  std::vector<double> n = vec(nn::init::normal_(fc.weight, 3.0, 0.02));
  double m = 0, sq = 0;
  for (double v : n) m += v / double(n.size());
  for (double v : n) sq += (v - m) * (v - m) / double(n.size());
  CHECK(std::abs(m - 3) < 3e-4);
  CHECK(std::sqrt(sq) == doctest::Approx(0.02).epsilon(0.01).scale(0));  // relative (a scale of 1 would allow 0.0102 either side)
}

TEST_CASE("Dropout: masks in train mode, identity in eval mode, seeded by a Generator") {
  Generator g1(123), g2(123);
  nn::Dropout drop(0.5, &g1);
  Tensor x = ones({4000});
  auto y = vec(drop.forward(x));
  int zeros_seen = 0, twos_seen = 0;  // kept values are scaled by 1/(1 − p)
  for (double v : y) {
    zeros_seen += v == 0;
    twos_seen += v == 2;
  }
  CHECK(zeros_seen + twos_seen == 4000);
  // Binomial(4000, 0.5): std 31.6; ±160 is 5 std
  CHECK(std::abs(zeros_seen - 2000) < 160);
  nn::Dropout same(0.5, &g2);
  CHECK(vec(same.forward(x)) == y);  // one seed, one mask

  drop.eval();
  CHECK(vec(drop.forward(x)) == vec(x));
  CHECK(error_of([] { nn::Dropout(1.5); }).find("[0, 1]") != std::string::npos);
}

TEST_CASE("nn::functional names the autograd ops") {
  namespace F = nn::functional;
  Tensor logits = zeros({2, 3});
  Tensor y = from_vector<int64_t>({0, 2});
  // uniform logits: −log(1/3) per row, with or without label smoothing
  CHECK(F::cross_entropy(logits, y).item<double>() == doctest::Approx(std::log(3.0)));
  CHECK(F::cross_entropy(logits, y, {.label_smoothing = 0.1}).item<double>() == doctest::Approx(std::log(3.0)));
  close(vec(F::softmax(logits, 1)), std::vector<double>(6, 1.0 / 3));
  CHECK(F::mse_loss(from_vector<float>({1, 3}), from_vector<float>({0, 0})).item<double>() == doctest::Approx(5.0));
  // the options by their functional names: per-sample losses, the second target ignored
  const F::CrossEntropyOptions per_sample{.ignore_index = 2, .reduction = F::Reduction::None};
  CHECK(to_vector<float>(F::cross_entropy(logits, y, per_sample)) == std::vector<float>{float(std::log(3.0)), 0});
}
