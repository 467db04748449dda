// test_optim.cpp — optim/: the first steps of SGD (plain, momentum, dampening, Nesterov, weight
// decay), Adam and AdamW against values worked out by hand in the comments; zero_grad; the
// strict state_dict; parameter groups, each with its options, in steps and state_dicts;
// clip_grad_norm_ on known gradients; StepLR, cosine and LambdaLR sequences, per group.
// Updates run in float32: values are compared to 1e-6 relative, a few float32 ulps. The update
// rules run on every device (devices.h): on CUDA they are the fused multi-tensor kernels.
#include <doctest/doctest.h>

#include "test_util.h"

#include <cmath>
#include <map>
#include <tuple>

#include "autograd/ops.h"
#include "devices.h"
#include "nn/linear.h"
#include "optim/optim.h"

using namespace ampgrad;

static std::vector<double> vec(const Tensor& t) { return to_vector<double>(t); }
static void close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
}
static Tensor param(const std::vector<float>& values, Device dev = Device::cpu()) { return from_vector(values).to(dev).requires_grad_(); }
// Gives p a fixed gradient, as a backward pass would.
static void set_grad(Tensor& p, const std::vector<float>& g) { p.set_grad(from_vector(g, p.shape()).to(p.device())); }

DEVICE_TEST_CASE("SGD: plain, momentum, dampening, Nesterov and weight decay, step by step") {
  // plain: p ← p − lr·g with lr 0.1, g 0.5: 1 → 0.95 → 0.90
  Tensor p = param({1}, dev);
  optim::SGD plain({p}, {.lr = 0.1});
  for (double want : {0.95, 0.90}) {
    set_grad(p, {0.5});
    plain.step();
    close(vec(p), {want});
  }

  // momentum 0.9, lr 0.1, g = 1: buf 1 (the grad itself on step 1) → 1.9 → 2.71,
  // p 1 → 0.9 → 0.71 → 0.439
  p = param({1}, dev);
  optim::SGD momentum({p}, {.lr = 0.1, .momentum = 0.9});
  for (double want : {0.9, 0.71, 0.439}) {
    set_grad(p, {1});
    momentum.step();
    close(vec(p), {want});
  }

  // dampening 0.5: step 1 takes no dampening (buf = 1, p = 0.9); step 2 buf = 0.9 + 0.5·1 = 1.4,
  // p = 0.9 − 0.14 = 0.76
  p = param({1}, dev);
  optim::SGD damped({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  for (double want : {0.9, 0.76}) {
    set_grad(p, {1});
    damped.step();
    close(vec(p), {want});
  }

  // Nesterov: the step uses g + momentum·buf. Step 1: buf 1, g' 1.9, p 0.81;
  // step 2: buf 1.9, g' 1 + 0.9·1.9 = 2.71, p 0.81 − 0.271 = 0.539
  p = param({1}, dev);
  optim::SGD nesterov({p}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  for (double want : {0.81, 0.539}) {
    set_grad(p, {1});
    nesterov.step();
    close(vec(p), {want});
  }

  // weight decay 0.1: g' = g + 0.1·p. Step 1: g' 1.1, p 0.89; step 2: g' 1.089, p 0.7811
  p = param({1}, dev);
  optim::SGD decay({p}, {.lr = 0.1, .weight_decay = 0.1});
  for (double want : {0.89, 0.7811}) {
    set_grad(p, {1});
    decay.step();
    close(vec(p), {want});
  }

  CHECK(error_of([&] { optim::SGD({p}, {.lr = 0.1, .nesterov = true}); }).find("Nesterov") != std::string::npos);
}

DEVICE_TEST_CASE("SGD with real gradients: loss = Σ p², so p ← p − 0.1·2p = 0.8·p") {
  Tensor p = param({1, -2}, dev);
  optim::SGD opt({p}, {.lr = 0.1});
  for (std::vector<double> want : {std::vector<double>{0.8, -1.6}, {0.64, -1.28}}) {
    opt.zero_grad();
    (p * p).sum().backward();
    opt.step();
    close(vec(p), want);
  }
}

DEVICE_TEST_CASE("Adam: each step moves by lr·sign(g) under a constant gradient") {
  // With g constant, m̂ = m / (1 − β1^t) = g and v̂ = g² at every t, so
  // p ← p − lr · g / (|g| + eps): lr·sign(g), slightly less for |g| near eps.
  Tensor p = param({1, -1, 0.5}, dev);
  optim::Adam opt({p}, {.lr = 0.01});
  const double small = 0.01 * 1e-3 / (1e-3 + 1e-8);  // the step for |g| = 1e-3
  for (int t = 1; t <= 3; ++t) {
    set_grad(p, {0.1f, -2, 1e-3f});
    opt.step();
    close(vec(p), {1 - 0.01 * t, -1 + 0.01 * t, 0.5 - small * t});
  }
}

DEVICE_TEST_CASE("Adam: the moments and bias corrections with a gradient that changes sign") {
  // lr 0.1, p = 0. Step 1, g = 1: m = 0.1, v = 0.001; m̂ = 1, v̂ = 1; p = −0.1.
  // Step 2, g = −1: m = 0.09 − 0.1 = −0.01, v = 0.000999 + 0.001 = 0.001999;
  // m̂ = −0.01 / 0.19, v̂ = 0.001999 / 0.001999 = 1; p = −0.1 + 0.1 · 0.01 / 0.19 = −0.0947368
  Tensor p = param({0}, dev);
  optim::Adam opt({p}, {.lr = 0.1});
  set_grad(p, {1});
  opt.step();
  close(vec(p), {-0.1});
  set_grad(p, {-1});
  opt.step();
  close(vec(p), {-0.1 + 0.1 * 0.01 / 0.19});
}

DEVICE_TEST_CASE("Adam's first step is lr·g/(|g| + eps) to float32 rounding: 1 − β is rounded once") {
  // m̂ = g and v̂ = g², so p = −lr·g/(|g| + eps) = −0.0009999999729...; with 1 − β2 worked out in
  // float32 (0.00099998713) it came out 57 float32 ulps away, at −0.0010000065.
  Tensor p = param({0}, dev);
  optim::Adam adam({p}, {.lr = 1e-3});
  set_grad(p, {0.37});
  adam.step();
  const double want = -1e-3 * 0.37 / (0.37 + 1e-8), ulp = std::ldexp(1.0, -33);  // float32's spacing at 1e-3
  CHECK(std::abs(vec(p)[0] - want) <= 4 * ulp);
}

DEVICE_TEST_CASE("Adam's eps: a gradient as small as eps halves the step") {
  // m̂ = g and √v̂ = |g| on the first step, so p moves by lr·g/(|g| + eps): lr/2 where |g| = eps
  // = 1e-8 (the same float32). Without eps it would move by lr; with eps under the root, by 1e-4·lr.
  // A handful of float32 roundings (m, v, √v, +, /, ·), each 2⁻²⁴ relative: 8 ulps bound them.
  Tensor p = param({0, 0}, dev);
  optim::Adam adam({p}, {.lr = 1e-3});
  set_grad(p, {1e-8f, -1e-8f});
  adam.step();
  const double ulp = std::ldexp(1.0, -34);  // float32's spacing at 5e-4 (in [2⁻¹¹, 2⁻¹⁰))
  CHECK(std::abs(vec(p)[0] + 5e-4) <= 8 * ulp);
  CHECK(std::abs(vec(p)[1] - 5e-4) <= 8 * ulp);
}

DEVICE_TEST_CASE("Adam's L2 weight decay against AdamW's decoupled decay") {
  // Adam, wd 0.1, lr 0.1, g = 1 at p = 1. Step 1: g' = 1.1 → a pure sign step, p = 0.9.
  // Step 2: g' = 1 + 0.1·0.9 = 1.09; m = 0.9·0.11 + 0.1·1.09 = 0.208,
  // v = 0.999·0.00121 + 0.001·1.1881 = 0.00239689; m̂ = 0.208/0.19 = 1.094737,
  // √v̂ = √(0.00239689/0.001999) = 1.095009; p = 0.9 − 0.1·1.094737/1.095009 = 0.800025
  Tensor p = param({1}, dev);
  optim::Adam adam({p}, {.lr = 0.1, .weight_decay = 0.1});
  set_grad(p, {1});
  adam.step();
  close(vec(p), {0.9});
  set_grad(p, {1});
  adam.step();
  close(vec(p), {0.8000248483897221});

  // AdamW: p ← p·(1 − lr·wd), then the sign step: 1·0.99 − 0.1 = 0.89; 0.89·0.99 − 0.1 = 0.7811
  Tensor q = param({1}, dev);
  optim::AdamW adamw({q}, {.lr = 0.1, .weight_decay = 0.1});
  for (double want : {0.89, 0.7811}) {
    set_grad(q, {1});
    adamw.step();
    close(vec(q), {want});
  }
  CHECK(optim::AdamW({q}).options().weight_decay == 0.01);  // PyTorch's defaults differ
  CHECK(optim::Adam({q}).options().weight_decay == 0.0);
}

TEST_CASE("step skips parameters without a grad, bad parameters are errors") {
  Tensor a = param({1}), b = param({1});
  optim::Adam opt({a, b}, {.lr = 0.1});
  set_grad(a, {1});
  opt.step();
  close(vec(a), {0.9});
  close(vec(b), {1});  // untouched, and no state either
  CHECK(opt.state_dict().scalars.count("state.1.step") == 0);

  Tensor d = from_vector<double>({1}).requires_grad_();
  optim::SGD sgd({d}, {.lr = 0.1});
  d.set_grad(from_vector<double>({1}));
  CHECK(error_of([&] { sgd.step(); }).find("parameter 0 is float64") != std::string::npos);

  Tensor nc = zeros({3, 2}).t();  // a transposed view: not contiguous
  nc.requires_grad_();
  nc.set_grad(zeros({2, 3}));
  optim::SGD sgd2({nc}, {.lr = 0.1});
  CHECK(error_of([&] { sgd2.step(); }).find("not contiguous") != std::string::npos);
}

DEVICE_TEST_CASE("zero_grad: to none, or zeroed in place") {
  Tensor p = param({1, 2}, dev);
  optim::SGD opt({p}, {.lr = 0.1});
  set_grad(p, {3, 4});
  Tensor g = p.grad();
  opt.zero_grad(false);
  CHECK(p.grad().is_same(g));
  close(vec(g), {0, 0});
  opt.zero_grad();
  CHECK(!p.grad().defined());
}

TEST_CASE("optimizer state_dict: round trip, and strict loading") {
  auto run = [](optim::Optimizer& opt, Tensor& p, float g) { set_grad(p, {g, -g}); opt.step(); };
  Tensor p = param({1, 2});
  optim::Adam a({p}, {.lr = 0.1});
  run(a, p, 1);
  run(a, p, 0.5);
  optim::OptimizerState st = a.state_dict();
  CHECK(st.scalars.at("param_groups.0.lr") == 0.1);
  CHECK(st.scalars.at("param_groups.0.beta1") == 0.9);
  CHECK(st.scalars.at("param_groups.0.beta2") == 0.999);
  CHECK(st.scalars.at("param_groups.0.eps") == 1e-8);
  CHECK(st.scalars.at("param_groups.0.weight_decay") == 0);
  CHECK(st.scalars.at("param_groups.0.num_params") == 1);
  CHECK(st.scalars.size() == 7);
  CHECK(st.scalars.at("state.0.step") == 2);
  REQUIRE(st.tensors.size() == 2);
  CHECK(st.tensors[0].first == "state.0.exp_avg");
  CHECK(st.tensors[1].first == "state.0.exp_avg_sq");
  // exp_avg after g = 1 then 0.5: 0.9·0.1 + 0.1·0.5 = 0.14 (and −0.14)
  close(vec(st.tensors[0].second), {0.14, -0.14});

  // A fresh optimizer over a copy of p, made with other options, loaded, takes the same third
  // step as the original: the saved state's options replace the constructor's, as in PyTorch.
  Tensor q = from_vector(to_vector<float>(p), p.shape()).requires_grad_();
  optim::Adam b({q}, {.lr = 0.5, .betas = {0.5, 0.5}, .eps = 1e-3, .weight_decay = 0.1});
  b.load_state_dict(st);
  CHECK(b.lr() == 0.1);
  CHECK(b.options().betas == std::pair<double, double>{0.9, 0.999});
  CHECK(b.options().eps == 1e-8);
  CHECK(b.options().weight_decay == 0);
  run(a, p, -2);
  run(b, q, -2);
  CHECK(vec(q) == vec(p));

  auto expect_error = [&](optim::OptimizerState bad, const std::string& message) {
    CHECK(error_of([&] { b.load_state_dict(bad); }).find(message) != std::string::npos);
  };
  optim::OptimizerState bad = st;
  bad.tensors[0].second = zeros({3});
  expect_error(bad, "'state.0.exp_avg' is [3] float32, expected [2] float32");
  bad = st;
  bad.tensors[1].second = zeros({2}, kFloat64);
  expect_error(bad, "'state.0.exp_avg_sq' is [2] float64");
  bad = st;
  bad.tensors.pop_back();
  expect_error(bad, "missing key 'state.0.exp_avg_sq'");
  bad = st;
  bad.tensors.emplace_back("state.0.momentum_buffer", zeros({2}));
  expect_error(bad, "unexpected key 'state.0.momentum_buffer'");
  bad = st;
  bad.tensors.emplace_back("state.7.exp_avg", zeros({2}));
  expect_error(bad, "unexpected key 'state.7.exp_avg'");
  bad = st;
  bad.scalars.erase("param_groups.0.lr");
  expect_error(bad, "missing key 'param_groups.0.lr'");
  bad = st;
  bad.scalars.erase("state.0.step");
  expect_error(bad, "missing key 'state.0.step'");
  bad = st;
  bad.scalars.erase("param_groups.0.eps");
  expect_error(bad, "missing key 'param_groups.0.eps'");
  const std::tuple<std::string, double, std::string> bad_scalars[] = {
      {"param_groups.0.lr", -1, "'param_groups.0.lr' must be >= 0, got -1"},
      {"param_groups.0.momentum", 0.9, "unexpected key 'param_groups.0.momentum'"},
      {"param_groups.0.num_params", 2, "'param_groups.0.num_params' is 2, this optimizer's group 0 has 1 parameters"},
      {"param_groups.1.num_params", 1, "the state has 2 parameter groups, this optimizer 1"},
      {"param_groups.0.beta2", 1, "betas must be in [0, 1), got (0.9, 1)"},
  };
  for (const auto& [key, value, message] : bad_scalars) {
    bad = st;
    bad.scalars[key] = value;
    expect_error(bad, message);
  }
  // A refused load leaves the optimizer as it was, options included.
  optim::Adam c({q}, {.lr = 0.5, .betas = {0.5, 0.5}});
  bad = st;
  bad.tensors.pop_back();
  CHECK_THROWS_AS(c.load_state_dict(bad), Error);
  CHECK(c.options().betas == std::pair<double, double>{0.5, 0.5});
  CHECK(c.lr() == 0.5);
  CHECK(c.state_dict().scalars.count("state.0.step") == 0);

  // SGD without momentum keeps no buffers: its state is the lr, the options and the step counts.
  optim::SGD sgd({p}, {.lr = 0.1});
  run(sgd, p, 1);
  CHECK(sgd.state_dict().tensors.empty());
  CHECK(sgd.state_dict().scalars.at("state.0.step") == 1);
  CHECK(sgd.state_dict().scalars.at("param_groups.0.nesterov") == 0);
}

TEST_CASE("SGD state_dict carries its options: a loaded momentum brings its buffer") {
  auto run = [](optim::Optimizer& opt, Tensor& p, float g) { set_grad(p, {g, -g}); opt.step(); };
  Tensor p = param({1, 2});
  optim::SGD a({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 0.01, .nesterov = true});
  run(a, p, 1);
  const optim::OptimizerState st = a.state_dict();
  Tensor q = from_vector(to_vector<float>(p), p.shape()).requires_grad_();
  CHECK(st.scalars.at("param_groups.0.momentum") == 0.9);
  CHECK(st.scalars.at("param_groups.0.weight_decay") == 0.01);
  CHECK(st.scalars.at("param_groups.0.nesterov") == 1);
  // Made without momentum, b expects no buffer until the saved state's momentum is in.
  optim::SGD b({q}, {.lr = 0.1});
  b.load_state_dict(st);
  CHECK(b.options().momentum == 0.9);
  CHECK(b.options().nesterov);
  run(a, p, 2);
  run(b, q, 2);
  CHECK(vec(q) == vec(p));

  optim::OptimizerState bad = st;
  bad.scalars["param_groups.0.nesterov"] = 0.5;
  CHECK(error_of([&] { b.load_state_dict(bad); }).find("'nesterov' must be 0 or 1, got 0.5") != std::string::npos);
  bad = st;
  bad.scalars["param_groups.0.dampening"] = 0.1;
  CHECK(error_of([&] { b.load_state_dict(bad); }).find("Nesterov momentum requires momentum > 0 and zero dampening") != std::string::npos);
  CHECK(b.options().dampening == 0);
}

DEVICE_TEST_CASE("parameter groups: each group steps with its own options") {
  // Group 0: lr 0.1, momentum 0.9 (as the momentum case above: 1 → 0.9 → 0.71).
  // Group 1: lr 0.01, weight decay 0.5, g' = 1 + 0.5·p: b 1 → 0.985 → 0.970075,
  // c 2 → 1.98 → 1.9601.
  Tensor a = param({1}, dev), b = param({1}, dev), c = param({2}, dev);
  optim::SGD opt({{{a}, {.lr = 0.1, .momentum = 0.9}}, {{b, c}, {.lr = 0.01, .weight_decay = 0.5}}});
  for (auto [wa, wb, wc] : {std::tuple{0.9, 0.985, 1.98}, {0.71, 0.970075, 1.9601}}) {
    for (Tensor* t : {&a, &b, &c}) set_grad(*t, {1});
    opt.step();
    close(vec(a), {wa});
    close(vec(b), {wb});
    close(vec(c), {wc});
  }
  // Only group 0 keeps a momentum buffer.
  const optim::OptimizerState st = opt.state_dict();
  REQUIRE(st.tensors.size() == 1);
  CHECK(st.tensors[0].first == "state.0.momentum_buffer");
  // One group's rate moves alone: b's g' = 1 + 0.5·0.970075 = 1.4850375 at lr 0.1.
  opt.set_lr(1, 0.1);
  CHECK(opt.lr(0) == 0.1);
  for (Tensor* t : {&a, &b, &c}) set_grad(*t, {1});
  opt.step();
  close(vec(b), {0.970075 - 0.14850375});

  // AdamW with and without decay, as a transformer's matrices and vectors: 1·0.99 − 0.1 = 0.89
  // then 0.7811 against the plain sign steps 0.9 then 0.8.
  Tensor w = param({1}, dev), v = param({1}, dev);
  optim::AdamW adamw({{{w}, {.lr = 0.1, .weight_decay = 0.1}}, {{v}, {.lr = 0.1, .weight_decay = 0}}});
  for (auto [ww, wv] : {std::pair{0.89, 0.9}, {0.7811, 0.8}}) {
    set_grad(w, {1});
    set_grad(v, {1});
    adamw.step();
    close(vec(w), {ww});
    close(vec(v), {wv});
  }
  CHECK(adamw.options(0).weight_decay == 0.1);
  CHECK(adamw.options(1).weight_decay == 0);
}

TEST_CASE("parameter groups: views, empty groups and errors") {
  Tensor a = param({1}), b = param({1}), c = param({1, 2});
  optim::Adam opt({{{a}, {.lr = 0.1}}, {{b, c}, {.lr = 0.2}}, {{}, {.lr = 0.3}}});
  CHECK(opt.num_param_groups() == 3);
  REQUIRE(opt.params().size() == 3);
  CHECK(opt.params()[2].is_same(c));  // the groups' parameters in order
  REQUIRE(opt.param_group(1).size() == 2);
  CHECK(opt.param_group(1)[0].is_same(b));
  CHECK(opt.param_group(2).empty());
  CHECK(opt.lr(2) == 0.3);
  opt.set_lr(0.5);
  CHECK((opt.lr(0) == 0.5 && opt.lr(1) == 0.5 && opt.lr(2) == 0.5));
  set_grad(c, {1, -1});
  opt.step();
  close(vec(c), {0.5, 2.5});  // Adam's first step is lr·sign(g)
  CHECK(opt.state_dict().scalars.at("param_groups.2.num_params") == 0);
  CHECK(opt.state_dict().scalars.count("state.2.step") == 1);

  CHECK(error_of([&] { opt.lr(3); }).find("Adam: no parameter group 3 (it has 3)") != std::string::npos);
  CHECK(error_of([&] { opt.options(3); }).find("Adam: no parameter group 3 (it has 3)") != std::string::npos);
  CHECK(error_of([&] { opt.param_group(3); }).find("no parameter group 3") != std::string::npos);
  CHECK(error_of([&] { optim::SGD({{{a}, {.lr = 0.1}}, {{b, a}, {.lr = 0.1}}}); }).find("SGD: parameter 2 is parameter 0 again") != std::string::npos);
  CHECK(error_of([&] { optim::SGD({a, a}); }).find("parameter 1 is parameter 0 again") != std::string::npos);
  CHECK(error_of([&] { optim::SGD({{{}, {.lr = 0.1}}}); }).find("SGD: got an empty parameter list") != std::string::npos);
  CHECK(error_of([&] { optim::SGD({{{a}, {.lr = 0.1}}, {{b}, {.lr = -1}}}); }).find("SGD: lr, momentum and weight_decay must be >= 0, got -1") !=
        std::string::npos);
  CHECK(error_of([&] { optim::AdamW({{{a}, {}}, {{b}, {.betas = {0.9, 1}}}}); }).find("betas must be in [0, 1), got (0.9, 1)") != std::string::npos);

  // add_param_group: one more group with its own options; a refused one changes nothing
  Tensor d = param({1});
  optim::SGD sgd({a}, {.lr = 0.1});
  sgd.add_param_group({{d}, {.lr = 0.5, .momentum = 0.9}});
  CHECK(sgd.num_param_groups() == 2);
  CHECK((sgd.lr(1) == 0.5 && sgd.options(1).momentum == 0.9));
  set_grad(d, {1});
  sgd.step();
  close(vec(d), {0.5});  // 1 − 0.5·1: the momentum buffer starts as the gradient
  CHECK(error_of([&] { sgd.add_param_group({{b, a}, {.lr = 0.1}}); }).find("SGD: parameter 3 is parameter 0 again") != std::string::npos);
  CHECK(error_of([&] { sgd.add_param_group({{b}, {.lr = -1}}); }).find("SGD: lr, momentum and weight_decay must be >= 0") != std::string::npos);
  CHECK((sgd.params().size() == 2 && sgd.num_param_groups() == 2));
  optim::AdamW adamw({a});
  adamw.add_param_group({{b}, {.lr = 0.1, .weight_decay = 0}});
  CHECK((adamw.options(1).lr == 0.1 && adamw.options(1).weight_decay == 0 && adamw.options(0).weight_decay == 0.01));
}

TEST_CASE("optimizer state_dict with parameter groups, and a state saved before groups existed") {
  auto run = [](optim::Optimizer& opt, std::vector<Tensor> ps, float g) {
    for (Tensor& p : ps) set_grad(p, {g, -g});
    opt.step();
  };
  Tensor a = param({1, 2}), b = param({3, 4});
  optim::AdamW first({{{a}, {.lr = 0.1, .weight_decay = 0.1}}, {{b}, {.lr = 0.05, .betas = {0.8, 0.9}, .weight_decay = 0}}});
  run(first, {a, b}, 1);
  run(first, {a, b}, 0.5);
  const optim::OptimizerState st = first.state_dict();
  CHECK(st.scalars.at("param_groups.1.lr") == 0.05);
  CHECK(st.scalars.at("param_groups.1.beta1") == 0.8);
  CHECK(st.scalars.at("param_groups.0.weight_decay") == 0.1);
  CHECK(st.scalars.at("param_groups.1.num_params") == 1);
  CHECK(st.scalars.at("state.1.step") == 2);

  // A fresh two-group optimizer over copies, made with other options, takes the same third step.
  auto copy = [](const Tensor& t) { return from_vector(to_vector<float>(t), t.shape()).requires_grad_(); };
  Tensor a2 = copy(a), b2 = copy(b);
  optim::AdamW second({{{a2}, {.lr = 1}}, {{b2}, {.lr = 1}}});
  second.load_state_dict(st);
  CHECK(second.lr(1) == 0.05);
  CHECK(second.options(1).betas == std::pair<double, double>{0.8, 0.9});
  CHECK(second.options(0).weight_decay == 0.1);
  run(first, {a, b}, -2);
  run(second, {a2, b2}, -2);
  CHECK(vec(a2) == vec(a));
  CHECK(vec(b2) == vec(b));

  // The groups must match one for one; a bad option in group 1 leaves group 0's options alone.
  optim::AdamW one_group({a2, b2}, {.lr = 1});
  CHECK(error_of([&] { one_group.load_state_dict(st); }).find("the state has 2 parameter groups, this optimizer 1") != std::string::npos);
  optim::AdamW swapped({{{a2, b2}, {.lr = 1}}, {{}, {.lr = 1}}});
  CHECK(error_of([&] { swapped.load_state_dict(st); }).find("'param_groups.0.num_params' is 1, this optimizer's group 0 has 2 parameters") !=
        std::string::npos);
  optim::OptimizerState bad = st;
  bad.scalars["param_groups.1.eps"] = -1;
  optim::AdamW third({{{a2}, {.lr = 1, .eps = 1e-3}}, {{b2}, {.lr = 1}}});
  CHECK(error_of([&] { third.load_state_dict(bad); }).find("AdamW: lr, eps and weight_decay must be >= 0, got ") != std::string::npos);
  CHECK(third.options(0).eps == 1e-3);
  CHECK(third.options(0).weight_decay == 0.01);
  CHECK(third.lr(0) == 1);
  // ... and so does a bad buffer of group 1, found after every group's options were in.
  bad = st;
  bad.tensors.back().second = zeros({5});
  CHECK(error_of([&] { third.load_state_dict(bad); }).find("'state.1.exp_avg_sq' is [5] float32, expected [2] float32") != std::string::npos);
  CHECK((third.options(0).eps == 1e-3 && third.options(1).betas == std::pair<double, double>{0.9, 0.999}));
  CHECK((third.lr(0) == 1 && third.lr(1) == 1));
  CHECK(third.state_dict().scalars.count("state.0.step") == 0);

  // A one-group state as it was saved before parameter groups: keys without a prefix.
  Tensor p = param({1, 2});
  optim::SGD old({p}, {.lr = 0.1, .momentum = 0.9});
  run(old, {p}, 1);
  optim::OptimizerState legacy = {{{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0}, {"weight_decay", 0}, {"nesterov", 0}, {"state.0.step", 1}},
                                  old.state_dict().tensors};
  Tensor q = copy(p);
  optim::SGD resumed({q}, {.lr = 1});
  resumed.load_state_dict(legacy);
  CHECK(resumed.lr() == 0.1);
  CHECK(resumed.options().momentum == 0.9);
  run(old, {p}, 2);
  run(resumed, {q}, 2);
  CHECK(vec(q) == vec(p));
  CHECK(error_of([&] { second.load_state_dict(legacy); }).find("the state is of the form from before parameter groups") != std::string::npos);
}

DEVICE_TEST_CASE("clip_grad_norm_: global L2 norm over all grads") {
  // grads (3, 4) and (12): norm √(9 + 16 + 144) = 13
  Tensor a = param({0, 0}, dev), b = param({0}, dev), none = param({0}, dev);
  auto reset = [&] { set_grad(a, {3, 4}); set_grad(b, {12}); };
  reset();
  Tensor norm = optim::clip_grad_norm_({a, b, none}, 20);
  CHECK(norm.dim() == 0);
  CHECK(norm.dtype() == kFloat32);
  CHECK(norm.item<double>() == 13);
  CHECK(vec(a.grad()) == std::vector<double>{3, 4});  // below max_norm: multiplied by exactly 1
  // max_norm 6.5: every grad scaled by 6.5 / (13 + 1e-6), i.e. halved (to 1e-7)
  CHECK(optim::clip_grad_norm_({a, b, none}, 6.5).item<double>() == 13);
  close(vec(a.grad()), {1.5, 2});
  close(vec(b.grad()), {6});
  CHECK(optim::clip_grad_norm_({none}, 1).item<double>() == 0);

  // As PyTorch: an infinite norm makes the factor 0, so finite grads become 0 and inf ones NaN
  // (the GradScaler then skips the step), unless error_if_nonfinite asks for an error.
  reset();
  b.set_grad(from_vector<float>({INFINITY}).to(dev));
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm_({a, b}, 1, true), doctest::Contains("the total norm of the gradients is inf"), Error);
  CHECK(vec(a.grad()) == std::vector<double>{3, 4});  // the error comes before any change
  CHECK(std::isinf(optim::clip_grad_norm_({a, b}, 1).item<double>()));
  CHECK(vec(a.grad()) == std::vector<double>{0, 0});
  CHECK(std::isnan(vec(b.grad())[0]));
}

TEST_CASE("StepLR and CosineAnnealingLR follow PyTorch's closed forms") {
  Tensor p = param({0});
  optim::SGD opt({p}, {.lr = 1.0});
  optim::StepLR step_lr(opt, 2, 0.5);  // 1 · 0.5^⌊e/2⌋
  std::vector<double> got;
  for (int e = 1; e <= 5; ++e) { step_lr.step(); got.push_back(opt.lr()); }
  close(got, {1, 0.5, 0.5, 0.25, 0.25});
  CHECK(step_lr.last_epoch() == 5);

  // base 1.1, eta_min 0.1, T_max 4: 0.1 + (1 + cos(π e/4)) / 2 for e = 0..5
  optim::SGD opt2({p}, {.lr = 1.1});
  optim::CosineAnnealingLR cosine(opt2, 4, 0.1);
  got = {opt2.lr()};
  for (int e = 1; e <= 5; ++e) { cosine.step(); got.push_back(cosine.get_last_lr().at(0)); }
  close(got, {1.1, 0.9535533905932737, 0.6, 0.24644660940672622, 0.1, 0.24644660940672622});

  // Resumed after 2 epochs into a fresh optimizer (its lr from the saved state: 0.6) and a fresh
  // scheduler, the schedule goes on as if never stopped; the fresh scheduler alone would take
  // 0.6 as its base.
  optim::SGD opt3({p}, {.lr = 1.1});
  optim::CosineAnnealingLR first(opt3, 4, 0.1);
  first.step();
  first.step();
  optim::SGD opt4({p}, {.lr = 1.1});
  opt4.load_state_dict(opt3.state_dict());
  optim::CosineAnnealingLR resumed(opt4, 4, 0.1);
  resumed.load_state_dict(first.state_dict());
  got = {opt4.lr()};
  for (int e = 3; e <= 5; ++e) { resumed.step(); got.push_back(resumed.get_last_lr().at(0)); }
  close(got, {0.6, 0.24644660940672622, 0.1, 0.24644660940672622});
  CHECK(resumed.last_epoch() == 5);
  CHECK_THROWS_WITH_AS(resumed.load_state_dict({{"base_lrs.0", 1}}), doctest::Contains("missing key 'last_epoch'"), Error);
  CHECK_THROWS_WITH_AS(resumed.load_state_dict({{"last_epoch", 1}}), doctest::Contains("missing key 'base_lrs.0'"), Error);
  CHECK_THROWS_WITH_AS(resumed.load_state_dict({{"last_epoch", 1}, {"base_lrs.0", 1}, {"base_lrs.1", 1}}),
                       doctest::Contains("unexpected key 'base_lrs.1' (the optimizer has 1 parameter groups)"), Error);
}

TEST_CASE("schedulers scale each parameter group from its own base rate, and LambdaLR warms up") {
  Tensor a = param({0}), b = param({0});
  optim::SGD opt({{{a}, {.lr = 1.0}}, {{b}, {.lr = 0.1}}});
  optim::StepLR step_lr(opt, 2, 0.5);
  step_lr.step();
  step_lr.step();
  close(step_lr.get_last_lr(), {0.5, 0.05});
  CHECK(step_lr.state_dict() == std::map<std::string, double>{{"base_lrs.0", 1.0}, {"base_lrs.1", 0.1}, {"last_epoch", 2}});

  // A linear warmup over 4 epochs, then constant: lr_e = base · min(1, (e + 1) / 4), epoch 0's
  // rate set by the constructor.
  optim::SGD warm({{{a}, {.lr = 1.0}}, {{b}, {.lr = 0.2}}});
  auto warmup = [](int64_t e) { return std::min(1.0, double(e + 1) / 4); };
  optim::LambdaLR lambda(warm, warmup);
  close(lambda.get_last_lr(), {0.25, 0.05});
  std::vector<double> got;
  for (int e = 1; e <= 4; ++e) {
    lambda.step();
    got.push_back(warm.lr(0));
  }
  close(got, {0.5, 0.75, 1, 1});
  close({warm.lr(1)}, {0.2});

  // Resumed after epoch 1: bases and epoch come back, so epoch 2 is 0.75 and 0.15, not the
  // factor applied to the rates the fresh optimizer happened to have.
  optim::SGD before({{{a}, {.lr = 1.0}}, {{b}, {.lr = 0.2}}});
  optim::LambdaLR first(before, warmup);
  first.step();
  optim::SGD after({{{a}, {.lr = 1.0}}, {{b}, {.lr = 0.2}}});
  after.load_state_dict(before.state_dict());
  optim::LambdaLR resumed(after, warmup);  // built on the loaded rates 0.5 and 0.1: sets 0.125 and 0.025
  resumed.load_state_dict(first.state_dict());
  close(resumed.get_last_lr(), {0.5, 0.1});  // epoch 1's, from the loaded bases
  resumed.step();
  close(resumed.get_last_lr(), {0.75, 0.15});
  CHECK_THROWS_WITH_AS(optim::LambdaLR(opt, nullptr), doctest::Contains("LambdaLR: the factor function is empty"), Error);
}

DEVICE_TEST_CASE("end to end: Linear + mse_loss + SGD fits y = 2x + 1") {
  manual_seed(0);
  auto fc = std::make_shared<nn::Linear>(1, 1);
  fc->to(dev);
  Tensor x = from_vector<float>({-1, 0, 1, 2}, {4, 1}).to(dev);
  Tensor y = x * 2.0 + 1.0;
  optim::SGD opt(fc->parameters(), {.lr = 0.1, .momentum = 0.5});
  for (int i = 0; i < 200; ++i) {
    opt.zero_grad();
    mse_loss(fc->forward(x), y).backward();
    opt.step();
  }
  CHECK(fc->weight.item<double>() == doctest::Approx(2).epsilon(1e-4));
  CHECK(fc->bias.item<double>() == doctest::Approx(1).epsilon(1e-4));
}

DEVICE_TEST_CASE("an optimizer step between forward and backward makes that backward an error") {
  manual_seed(3);
  auto fc = std::make_shared<nn::Linear>(3, 2);
  fc->to(dev);
  optim::SGD opt(fc->parameters(), {.lr = 0.1});
  Tensor x = randn({4, 3}).to(dev).requires_grad_();  // so that dx = G W reads the weight
  fc->forward(x).sum().backward();
  Tensor pending = fc->forward(x).sum();  // saved the weight at this version
  opt.step();
  CHECK_THROWS_WITH_AS(pending.backward(), doctest::Contains("backward of 'linear': one of the variables needed for gradient computation"), Error);
  opt.zero_grad();
  fc->forward(x).sum().backward();  // a forward after the step is fine
  CHECK(fc->weight.grad().defined());
}
