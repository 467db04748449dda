// test_functional.cpp — autograd::functional (torch.autograd.functional): vjp, jvp, jacobian,
// hessian, hvp against closed forms (the Rosenbrock Hessian, softmax's Jacobian diag(p) − ppᵀ) and
// against each other (jvp = J v, vjp = vᵀ J, hvp = H v), create_graph through them, and errors.
#include <doctest/doctest.h>

#include "autograd/functional.h"
#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "devices.h"
#include "test_util.h"

using namespace ampgrad;
namespace F = autograd::functional;
using In = const std::vector<Tensor>&;

static std::vector<double> vec(const Tensor& t) { return to_vector<double>(t); }
static void close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
}

// (1 − x)² + 100 (y − x²)²: H = [[2 − 400 y + 1200 x², −400 x], [−400 x, 200]]
static Tensor rosenbrock(const Tensor& x, const Tensor& y) { return pow(1.0 - x, 2) + pow(y - x * x, 2) * 100.0; }

DEVICE_TEST_CASE("hessian: Rosenbrock's, as one vector and as two scalars") {
  const Tensor p = from_vector<double>({-1.2, 1}).to(dev);
  auto H = F::hessian([](In in) { return rosenbrock(in[0].select(0, 0), in[0].select(0, 1)); }, {p});
  CHECK(H[0][0].shape() == Shape{2, 2});
  close(vec(H[0][0]), {1330, 480, 480, 200});  // 2 − 400 + 1200·1.44, −400·(−1.2), 200
  CHECK_FALSE(H[0][0].requires_grad());
  const Tensor x = scalar_tensor(1.0, kFloat64).to(dev), y = scalar_tensor(1.0, kFloat64).to(dev);
  auto blocks = F::hessian([](In in) { return rosenbrock(in[0], in[1]); }, {x, y});  // at the minimum
  CHECK(blocks[0][1].shape() == Shape{});
  close({vec(blocks[0][0])[0], vec(blocks[0][1])[0], vec(blocks[1][0])[0], vec(blocks[1][1])[0]}, {802, -400, -400, 200});
}

DEVICE_TEST_CASE("jacobian of softmax is diag(p) − ppᵀ") {
  const Tensor x = from_vector<double>({0.5, -1, 2}).to(dev);
  const std::vector<double> p = vec(softmax(x, 0));
  const Tensor J = F::jacobian([](In in) { return softmax(in[0], 0); }, {x})[0];
  CHECK(J.shape() == Shape{3, 3});
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) want.push_back((i == j ? p[i] : 0) - p[i] * p[j]);
  close(vec(J), want);
}

DEVICE_TEST_CASE("jvp is J v and vjp is vᵀ J, for two inputs, without forming J") {
  manual_seed(3);
  const Tensor w = randn({2, 3}, kFloat64).to(dev), x = randn({3}, kFloat64).to(dev);
  const Tensor vw = randn({2, 3}, kFloat64).to(dev), vx = randn({3}, kFloat64).to(dev), u = randn({2}, kFloat64).to(dev);
  auto f = [](In in) { return tanh(matmul(in[0], in[1])); };
  const std::vector<Tensor> J = F::jacobian(f, {w, x});
  CHECK(J[0].shape() == Shape{2, 2, 3});  // output shape + input shape
  CHECK(J[1].shape() == Shape{2, 3});
  const Tensor Jv = matmul(J[0].reshape({2, 6}), vw.reshape({6})) + matmul(J[1], vx);
  auto [y, jv] = F::jvp(f, {w, x}, {vw, vx});
  close(vec(y), vec(tanh(matmul(w, x))));
  close(vec(jv), vec(Jv));
  auto [y2, vj] = F::vjp(f, {w, x}, u);
  close(vec(vj[0]), vec(matmul(u, J[0].reshape({2, 6})).reshape({2, 3})));
  close(vec(vj[1]), vec(matmul(u, J[1])));
}

DEVICE_TEST_CASE("hvp is H v, and an input fn does not use gets zeros") {
  manual_seed(4);
  const Tensor x = randn({3}, kFloat64).to(dev), y = randn({2}, kFloat64).to(dev), unused = randn({2}, kFloat64).to(dev);
  const Tensor vx = randn({3}, kFloat64).to(dev), vy = randn({2}, kFloat64).to(dev), vu = randn({2}, kFloat64).to(dev);
  auto f = [](In in) { return pow(in[0], 3).sum() + in[0].sum() * (in[1] * in[1]).sum(); };
  const auto H = F::hessian(f, {x, y, unused});
  auto [value, hv] = F::hvp(f, {x, y, unused}, {vx, vy, vu});
  close(vec(value), vec(f({x, y})));
  close(vec(hv[0]), vec(matmul(H[0][0], vx) + matmul(H[0][1], vy)));
  close(vec(hv[1]), vec(matmul(H[1][0], vx) + matmul(H[1][1], vy)));
  CHECK(vec(hv[2]) == std::vector<double>{0, 0});
  for (auto [i, j] : {std::pair{2, 2}, {0, 2}, {2, 0}}) CHECK(vec(H[i][j]) == std::vector<double>(H[i][j].numel(), 0.0));
  CHECK(H[0][2].shape() == Shape{3, 2});
  // the closed form of one block: ∂²/∂y² = 2 Σx · I
  const double sx = vec(x.sum())[0];
  close(vec(H[1][1]), {2 * sx, 0, 0, 2 * sx});
}

DEVICE_TEST_CASE("create_graph: the results differentiate again, back to inputs that require grad") {
  const Tensor x = from_vector<double>({1, 2}).to(dev).requires_grad_(), v = from_vector<double>({3, -1}).to(dev);
  auto quartic = [](In in) { return pow(in[0], 4).sum(); };  // H = diag(12x²), H v = 12 x² v
  auto [value, hv] = F::hvp(quartic, {x}, {v}, /*create_graph=*/true);
  close(vec(hv[0]), {36, -48});
  CHECK(hv[0].requires_grad());
  close(vec(autograd::grad({hv[0].sum()}, {x})[0]), {72, -48});  // d/dx Σ 12x²v = 24 x v
  auto [plain_value, plain] = F::hvp(quartic, {x}, {v});
  CHECK_FALSE(plain[0].requires_grad());
  CHECK_FALSE(plain_value.requires_grad());
  {
    NoGradGuard caller_without_grad;  // the derivatives do not depend on the caller's mode
    close(vec(F::hvp(quartic, {x}, {v}).second[0]), {36, -48});
  }
}

DEVICE_TEST_CASE("jacobian with create_graph, and each block in its input's dtype") {
  const Tensor x = from_vector<double>({1, 2}).to(dev).requires_grad_();
  const Tensor J = F::jacobian([](In in) { return in[0] * in[0]; }, {x}, /*create_graph=*/true)[0];  // diag(2x)
  close(vec(J), {2, 0, 0, 4});
  close(vec(autograd::grad({J.sum()}, {x})[0]), {2, 2});
  const Tensor a = from_vector<float>({1, 2}).to(dev), b = from_vector<double>({3}).to(dev);
  const auto H = F::hessian([](In in) { return (in[0] * in[0]).sum() * in[1].sum(); }, {a, b});
  CHECK(H[0][0].dtype() == kFloat32);
  CHECK(H[0][1].dtype() == kFloat64);
  CHECK(H[1][0].dtype() == kFloat32);
  close(vec(H[0][1]), {2, 4});  // ∂²/∂a∂b = 2a
}

TEST_CASE("functional: bad arguments are named") {
  const Tensor x = ones({2}, kFloat64), two = ones({2, 2}, kFloat64);
  auto sum_of = [](In in) { return in[0].sum(); };
  CHECK(error_of([&] { F::hessian([](In in) { return in[0] * 2.0; }, {x}); }) == "hessian: fn must return one value, got shape [2]");
  CHECK(error_of([&] { F::hvp(sum_of, {x}, {x, x}); }) == "hvp: got 2 vectors v for 1 inputs");
  CHECK(error_of([&] { F::jvp(sum_of, {x}, {two}); }) == "jvp: v[0] of shape [2, 2] must match input 0 of shape [2]");
  CHECK(error_of([&] { F::vjp([](In in) { return in[0] * 2.0; }, {x}); }) == "vjp: v (left out) does not fit fn's output of shape [2]");
  CHECK(error_of([&] { F::jacobian(sum_of, {ones({2}, kInt64)}); }) == "jacobian: input 0 must be a floating tensor, got int64");
  CHECK(error_of([&] { F::jvp([](In in) { return argmax(in[0]); }, {x}, {x}); }) == "jvp: fn's output must be floating, got int64");
}
