// test_autograd.cpp — the engine: accumulation, broadcasting, retain_graph, freed graphs,
// no-grad regions, detach, deep graphs, in-place refusal, when a leaf adopts its gradient, and
// autograd::grad. The cases that compute gradients run on every device (devices.h).
#include <doctest/doctest.h>

#include "amp/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/grad.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "devices.h"
#include "nn/linear.h"

using namespace ampgrad;

static std::vector<double> vec(const Tensor& t) { return to_vector<double>(t); }

DEVICE_TEST_CASE("gradients accumulate across backward calls") {
  Tensor x = from_vector<double>({1, 2, 3}).to(dev).requires_grad_();
  (x * x).sum().backward();
  CHECK(vec(x.grad()) == std::vector<double>{2, 4, 6});
  Tensor first = x.grad();
  (x * 3.0).sum().backward();
  CHECK(vec(x.grad()) == std::vector<double>{5, 7, 9});
  CHECK(x.grad().is_same(first));  // added in place, as in PyTorch: an earlier handle sees the sum
  CHECK(vec(first) == std::vector<double>{5, 7, 9});
}

DEVICE_TEST_CASE("a tensor used twice receives the sum of both paths") {
  Tensor x = scalar_tensor(3.0, kFloat64).to(dev).requires_grad_();
  Tensor y = x * x + x;  // dy/dx = 2x + 1 = 7
  y.backward();
  CHECK(x.grad().item<double>() == 7.0);
}

DEVICE_TEST_CASE("broadcast inputs get gradients summed back to their shape") {
  Tensor a = ones({2, 3}, kFloat64).to(dev).requires_grad_();
  Tensor b = from_vector<double>({1, 2, 3}).to(dev).requires_grad_();
  Tensor c = scalar_tensor(2.0, kFloat64).to(dev).requires_grad_();
  ((a * b) * c).sum().backward();
  CHECK(vec(b.grad()) == std::vector<double>{4, 4, 4});  // 2 rows x c
  CHECK(c.grad().item<double>() == 12.0);                 // sum(a*b) = 2*(1+2+3)
  CHECK(vec(a.grad()) == std::vector<double>{2, 4, 6, 2, 4, 6});
  Tensor k = ones({2, 1}, kFloat64).to(dev).requires_grad_();
  (k * ones({2, 5}, kFloat64).to(dev)).sum().backward();
  CHECK(vec(k.grad()) == std::vector<double>{5, 5});
}

TEST_CASE("backward through a freed graph is an error, retain_graph keeps it") {
  Tensor x = scalar_tensor(2.0).requires_grad_();
  Tensor y = x.exp();
  y.backward();
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("backward through the graph a second time"), Error);
  Tensor z = x.exp();
  z.backward({}, true);
  z.backward();
  CHECK(x.grad().item<float>() == doctest::Approx(3 * std::exp(2.0)));
}

TEST_CASE("backward on a non-scalar needs a gradient") {
  Tensor x = ones({3}).requires_grad_();
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("only for scalar outputs; got shape [3]"), Error);
  y.backward(from_vector<float>({1, 10, 100}));
  CHECK(to_vector<float>(x.grad()) == std::vector<float>{2, 20, 200});
  CHECK_THROWS_WITH_AS(ones({2}).sum().backward(), doctest::Contains("does not require grad"), Error);
}

TEST_CASE("NoGradGuard records nothing and nests") {
  Tensor x = ones({2}).requires_grad_();
  {
    NoGradGuard g;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    {
      EnableGradGuard e;
      CHECK((x * 2.0).requires_grad());
    }
    CHECK_FALSE(is_grad_enabled());
  }
  CHECK(is_grad_enabled());
  CHECK((x * 2.0).requires_grad());
}

TEST_CASE("detach cuts history but shares storage, leaves and non-leaves") {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = x * 2.0;
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  Tensor d = y.detach();
  CHECK(d.is_leaf());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.shares_storage(y));
}

TEST_CASE("a 100,000-op chain runs backward and frees without recursion") {
  Tensor x = scalar_tensor(1.0, kFloat64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = i % 2 ? y * 1.0 : y + 0.0;
  y.backward();
  CHECK(x.grad().item<double>() == 1.0);
  y = Tensor();  // destroys the whole chain
  Tensor z = x;
  for (int i = 0; i < 100000; ++i) z = z.tanh() * 1.0;
  z = Tensor();  // never backpropagated: freeing must not recurse either
  CHECK(x.grad().item<double>() == 1.0);
}

TEST_CASE("in-place updates are refused where the graph could see them") {
  Tensor w = ones({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(w.add_(ones({2})), doctest::Contains("cannot be modified in place while grad mode is on"), Error);
  NoGradGuard g;
  w.add_(ones({2}), -0.5);
  CHECK(to_vector<float>(w) == std::vector<float>{0.5f, 0.5f});
}

DEVICE_TEST_CASE("a backward refuses a saved tensor written in place since, and only a saved one") {
  // PyTorch's version counters: each in-place write bumps the storage's version, which views
  // share; a backward that saved the tensor compares. Without them these gradients came out
  // silently wrong ([2, 2, 2] and [6, 6, 6] instead of [1, 1, 1] and [2, 2, 2]).
  auto w = [&] { return ones({3}).to(dev).requires_grad_(); };
  const std::string modified = "has been modified by an inplace operation";
  {
    Tensor wa = w(), x = ones({3}).to(dev);
    Tensor y = (wa * x).sum();
    x.mul_(2);
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains(("backward of 'mul': one of the variables needed for gradient computation " + modified).c_str()), Error);
  }
  {
    Tensor wb = w();
    Tensor y = (wb * wb).sum();
    const uint64_t saved_at = wb.version();
    {
      NoGradGuard g;
      wb.mul_(3);  // an optimizer step between forward and backward
    }
    CHECK(wb.version() == saved_at + 1);
    const std::string versions = "is at version " + std::to_string(saved_at + 1) + "; expected version " + std::to_string(saved_at) + " instead";
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains(versions.c_str()), Error);
  }
  {
    Tensor wc = w(), x = ones({2, 3}).to(dev);
    Tensor y = (wc * x).sum();
    x.narrow(0, 1, 1).fill_(0);  // through a view: the storage is one
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains(modified.c_str()), Error);
  }
  {
    Tensor wd = w(), x = ones({3}).to(dev);
    Tensor y = (wd + x).sum();  // add saves nothing: writing x is harmless, as in PyTorch
    x.add_(x);
    y.backward();
    CHECK(vec(wd.grad()) == std::vector<double>{1, 1, 1});
  }
  {
    // re-initialising a layer writes through the kernels too, not a Tensor method
    auto fc = std::make_shared<nn::Linear>(3, 2);
    fc->to(dev);
    Tensor x = ones({1, 3}).to(dev).requires_grad_();  // so that dx reads the weight
    Tensor y = fc->forward(x).sum();
    fc->reset_parameters();
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("backward of 'linear'"), Error);
  }
}

DEVICE_TEST_CASE("a .grad set to a view that cannot take the sum in place is replaced by the sum") {
  Tensor p = zeros({3}).to(dev).requires_grad_();
  Tensor expanded = zeros({1}).to(dev).expand({3});  // one element seen three times
  p.set_grad(expanded);
  (p * 2.0).sum().backward();
  CHECK(vec(p.grad()) == std::vector<double>{2, 2, 2});
  CHECK(vec(expanded) == std::vector<double>{0, 0, 0});  // the user's tensor is left alone
  Tensor q = zeros({3}).to(dev).requires_grad_();
  (q * 2.0).sum().backward();
  Tensor held = q.grad();
  (q * 3.0).sum().backward();
  CHECK(vec(held) == std::vector<double>{5, 5, 5});  // a contiguous .grad of its own: added in place
}

DEVICE_TEST_CASE("casts carry gradients back to the source dtype") {
  Tensor w = from_vector<float>({1.5f, -2.f}).to(dev).requires_grad_();
  Tensor y = (w.to(kFloat16) * 4.0).sum();
  CHECK(y.dtype() == kFloat16);
  y.backward();
  CHECK(w.grad().dtype() == kFloat32);
  CHECK(to_vector<float>(w.grad()) == std::vector<float>{4, 4});
}

DEVICE_TEST_CASE("inputs that need no gradient are skipped") {
  Tensor x = ones({2, 2}).to(dev).requires_grad_(), c = ones({2, 2}).to(dev);
  matmul(x, c).sum().backward();
  CHECK_FALSE(c.grad().defined());
  CHECK(to_vector<float>(x.grad()) == std::vector<float>{2, 2, 2, 2});
}

DEVICE_TEST_CASE("a leaf adopts a gradient nothing else sees, and copies one that is shared") {
  // An op whose backward returns the tensor given here; the test decides whether it keeps a handle.
  auto through = [](const Tensor& x, Tensor grad_to_return) {
    Tensor out = x.detach().clone();
    autograd::record("through", out, {x}, [g = std::move(grad_to_return)](const Tensor&, const autograd::Needs&) mutable {
      return autograd::Grads{std::move(g)};
    });
    return out;
  };
  Tensor x = zeros({3}).to(dev).requires_grad_();
  {
    Tensor fresh = from_vector<float>({1, 2, 3}).to(dev);
    const void* where = fresh.raw_data();
    Tensor y = through(x, std::move(fresh));
    y.backward(ones({3}).to(dev));
    CHECK(x.grad().raw_data() == where);  // adopted: no copy
  }
  Tensor held = from_vector<float>({4, 5, 6}).to(dev);
  Tensor z = zeros({3}).to(dev).requires_grad_();
  through(z, held).backward(ones({3}).to(dev));
  CHECK(z.grad().raw_data() != held.raw_data());  // we still hold it: copied
  held.fill_(0);
  CHECK(to_vector<float>(z.grad()) == std::vector<float>{4, 5, 6});

  // add's backward hands one gradient to both inputs: each .grad must be its own
  Tensor a = zeros({2}).to(dev).requires_grad_(), b = zeros({2}).to(dev).requires_grad_();
  (a + b).backward(from_vector<float>({1, 2}).to(dev));
  CHECK_FALSE(a.grad().shares_storage(b.grad()));
  a.grad().fill_(7);
  CHECK(to_vector<float>(b.grad()) == std::vector<float>{1, 2});
}

DEVICE_TEST_CASE("autograd::grad: gradients of leaves and intermediates, returned and not accumulated") {
  // x = 3w, y = Σ x²: dy/dx = 2x = 6w, dy/dw = 18w; w = (1, 2)
  Tensor w = from_vector<double>({1, 2}).to(dev).requires_grad_();
  Tensor other = from_vector<double>({5}).to(dev).requires_grad_();
  Tensor x = w * 3.0;
  Tensor y = (x * x).sum() + other.sum();
  std::vector<Tensor> g = autograd::grad({y}, {x, w}, {}, /*retain_graph=*/true);
  REQUIRE(g.size() == 2);
  CHECK(vec(g[0]) == std::vector<double>{6, 12});
  CHECK(vec(g[1]) == std::vector<double>{18, 36});  // the walk went on below x to reach w
  CHECK(!w.grad().defined());
  CHECK(!other.grad().defined());  // a leaf that is not an input gets nothing either
  // grad_outputs weigh the output, and backward() afterwards sees the retained graph unchanged
  CHECK(vec(autograd::grad({y}, {w}, {scalar_tensor(0.5, kFloat64).to(dev)}, true)[0]) == std::vector<double>{9, 18});
  y.backward();
  CHECK(vec(w.grad()) == std::vector<double>{18, 36});
  CHECK(vec(other.grad()) == std::vector<double>{1});
  // the graph is freed after a grad() without retain_graph, as after backward()
  Tensor z = (w * w).sum();
  CHECK(vec(autograd::grad({z}, {w})[0]) == std::vector<double>{2, 4});
  CHECK_THROWS_WITH_AS(autograd::grad({z}, {w}), doctest::Contains("backward through the graph a second time"), Error);
}

DEVICE_TEST_CASE("autograd::grad: several outputs sum, an output may be an input, unused inputs") {
  Tensor a = from_vector<double>({1, 2}).to(dev).requires_grad_();
  Tensor b = from_vector<double>({3}).to(dev).requires_grad_();
  Tensor u = a * b;               // du/da = b, du/db = a
  Tensor v = (a * a).sum();       // dv/da = 2a
  // u weighted by (1, 10) and v by 2: d/da = (3, 30) + (4, 8) = (7, 38); d/db = 1·1 + 10·2 = 21
  Tensor ones2 = from_vector<double>({1, 10}).to(dev), two = scalar_tensor(2.0, kFloat64).to(dev);
  std::vector<Tensor> g = autograd::grad({u, v}, {a, b, u}, {ones2, two});
  CHECK(vec(g[0]) == std::vector<double>{7, 38});
  CHECK(vec(g[1]) == std::vector<double>{21});
  CHECK(vec(g[2]) == std::vector<double>{1, 10});  // an output's own gradient is its grad_output
  // an output that another output consumes waits for it, in either order of the roots: w = Σ u,
  // roots u and w; u's own gradient (1, 10) + 2 = (3, 12), times b = 3 for a
  for (bool reversed : {false, true}) {
    CAPTURE(reversed);
    Tensor u2 = a * b, w2 = u2.sum();
    std::vector<Tensor> g2 = reversed ? autograd::grad({w2, u2}, {a, u2}, {two, ones2}) : autograd::grad({u2, w2}, {a, u2}, {ones2, two});
    CHECK(vec(g2[0]) == std::vector<double>{9, 36});
    CHECK(vec(g2[1]) == std::vector<double>{3, 12});
  }
  // a root twice sums, a leaf root that is an input gets its grad_output, an input twice gets
  // its gradient twice
  Tensor s2 = (a * 2.0).sum();
  CHECK(vec(autograd::grad({s2, s2}, {a})[0]) == std::vector<double>{4, 4});
  CHECK(vec(autograd::grad({a}, {a}, {ones2})[0]) == std::vector<double>{1, 10});
  std::vector<Tensor> twice = autograd::grad({(a * 3.0).sum()}, {a, a});
  CHECK((vec(twice[0]) == std::vector<double>{3, 3} && vec(twice[1]) == std::vector<double>{3, 3}));

  Tensor c = from_vector<double>({4}).to(dev).requires_grad_();
  Tensor s = (a * 2.0).sum();
  CHECK_THROWS_WITH_AS(autograd::grad({s}, {c}, {}, true), doctest::Contains("grad: input 0 is not used in the graph of the outputs"), Error);
  CHECK_THROWS_WITH_AS(autograd::grad({s}, {c * 3.0}, {}, true), doctest::Contains("grad: input 0 is not used"), Error);  // an intermediate
  std::vector<Tensor> unused = autograd::grad({s}, {a, c}, {}, true, false, /*allow_unused=*/true);
  CHECK(vec(unused[0]) == std::vector<double>{2, 2});
  CHECK(!unused[1].defined());
  CHECK_THROWS_WITH_AS(autograd::grad({s}, {from_vector<double>({1}).to(dev)}), doctest::Contains("grad: input 0 does not require grad"), Error);
  CHECK_THROWS_WITH_AS(autograd::grad({a * 2.0}, {a}), doctest::Contains("grad: grad can be implicitly created only for scalar outputs"), Error);
  CHECK_THROWS_WITH_AS(autograd::grad({s}, {a}, {two, two}), doctest::Contains("grad: got 2 grad_outputs for 1 outputs"), Error);
  CHECK_THROWS_WITH_AS(autograd::grad({s.detach()}, {a}), doctest::Contains("grad: output 0 does not require grad"), Error);
}

DEVICE_TEST_CASE("autograd::grad of a network's loss equals what backward() accumulates, and a hidden layer's gradient is its closed form") {
  manual_seed(3);
  nn::Linear fc1(4, 5), fc2(5, 2);
  fc1.to(dev);
  fc2.to(dev);
  Tensor x = randn({3, 4}).to(dev), y = randn({3, 2}).to(dev);
  Tensor h = relu(fc1.forward(x));
  Tensor loss = mse_loss(fc2.forward(h), y);
  std::vector<Tensor> params = {fc1.weight, fc1.bias, fc2.weight, fc2.bias};
  std::vector<Tensor> inputs = params;
  inputs.push_back(h);
  std::vector<Tensor> g = autograd::grad({loss}, inputs, {}, /*retain_graph=*/true);
  loss.backward();
  for (size_t i = 0; i < params.size(); ++i) CHECK(vec(g[i]) == vec(params[i].grad()));
  // d loss / d h = (2 / numel) (out − y) · W2, out = h W2ᵀ + b2: the same float32 products in
  // another order (a sum of 2 terms), a few ulps apart at most, far under 1e-6 relative
  Tensor out = fc2.forward(h.detach()).detach();
  std::vector<double> want = vec(matmul((out - y) * (2.0 / 6), fc2.weight.detach()));
  std::vector<double> got = vec(g[4]);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6).scale(0));
}

DEVICE_TEST_CASE("autograd::grad runs only what leads to an input: the rest of the graph stays for a later backward") {
  // two losses on one hidden h: the gradient at h runs neither fc1's node nor anything below,
  // so the second loss's backward still finds them (without retain_graph), as in PyTorch
  manual_seed(4);
  nn::Linear fc1(3, 4);
  fc1.to(dev);
  Tensor x = randn({2, 3}).to(dev);
  Tensor h = fc1.forward(x);
  Tensor loss1 = (h * h).sum(), loss2 = h.sum();
  CHECK(vec(autograd::grad({loss1}, {h})[0]) == vec(h.detach() * 2.0));
  loss2.backward();
  CHECK(vec(fc1.bias.grad()) == std::vector<double>{2, 2, 2, 2});  // Σ over the batch of 2
  // under fp16 autocast: the weight's gradient comes back float32 through the cast, and the
  // cached cast node (reusable) still serves a backward after a grad() without retain_graph
  amp::autocast ac(dev.type, kFloat16);
  Tensor w = randn({4, 3}).to(dev).requires_grad_();
  Tensor z1 = matmul(x, w.t()).sum(), z2 = matmul(x, w.t()).sum();
  const Tensor dw = autograd::grad({z1}, {w})[0];
  CHECK(dw.dtype() == kFloat32);
  z2.backward();
  CHECK(vec(w.grad()) == vec(dw));
}

TEST_CASE("autograd::grad through a checkpointed region: the region's weights get their gradients, and no .grad") {
  manual_seed(5);
  Tensor w = randn({3, 3}).requires_grad_(), x = randn({2, 3}).requires_grad_();
  auto region = [&](const std::vector<Tensor>& in) { return relu(matmul(in[0], w)); };
  const std::vector<Tensor> plain = autograd::grad({region({x}).sum()}, {w, x});
  const std::vector<Tensor> checkpointed = autograd::grad({checkpoint(region, {x}).sum()}, {w, x});
  CHECK(vec(checkpointed[0]) == vec(plain[0]));
  CHECK(vec(checkpointed[1]) == vec(plain[1]));
  CHECK(!w.grad().defined());
  CHECK(!x.grad().defined());
}
