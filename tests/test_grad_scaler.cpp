// test_grad_scaler.cpp — GradScaler against PyTorch's semantics: exact scale/tracker
// sequences, skipped steps that leave parameters and optimizer state bit-identical, every
// error of the state machine, the accumulation / clipping / multi-optimizer flows, state_dict,
// and the reason it exists: a float16 gradient that underflows without scaling and survives with it.
// Each numeric case runs on every device (devices.h): on CUDA the scaler's fused unscale, its
// on-device scale update and the optimizers' fused steps are what these sequences check.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "amp/autocast.h"
#include "diagnostics/grad_health.h"
#include "amp/grad_scaler.h"
#include "autograd/ops.h"
#include "devices.h"
#include "optim/optim.h"
#include "test_util.h"

using namespace ampgrad;

static Tensor param(const std::vector<float>& v, Device dev = Device::cpu()) { return from_vector<float>(v).to(dev).requires_grad_(); }
// One iteration with planted gradients: overflow plants an inf.
static bool iteration(amp::GradScaler& s, optim::Optimizer& opt, bool overflow) {
  Tensor p = opt.params()[0];
  Tensor loss = s.scale((p * 1.0).sum());
  loss.backward();
  if (overflow) {
    NoGradGuard g;
    p.grad().narrow(0, 0, 1).fill_(INFINITY);
  }
  bool stepped = s.step(opt);
  s.update();
  opt.zero_grad();
  return stepped;
}
static std::vector<uint8_t> bytes(const Tensor& t) {
  Tensor host = t.detach().to(Device::cpu()).contiguous();
  std::vector<uint8_t> b(host.numel() * host.element_size());
  std::memcpy(b.data(), host.raw_data(), b.size());
  return b;
}

DEVICE_TEST_CASE("scale and tracker follow growth and backoff exactly") {
  optim::SGD opt({param({1, 2}, dev)}, {.lr = 0.1});
  amp::GradScaler s({.init_scale = 8, .growth_interval = 3});
  CHECK(s.get_scale() == 8);
  // clean, clean, clean -> grow; clean; overflow -> back off; clean
  std::vector<std::pair<double, int64_t>> expect = {{8, 1}, {8, 2}, {16, 0}, {16, 1}, {8, 0}, {8, 1}};
  std::vector<bool> pattern = {false, false, false, false, true, false};
  for (size_t i = 0; i < pattern.size(); ++i) {
    CHECK(iteration(s, opt, pattern[i]) == !pattern[i]);
    CHECK(s.get_scale() == expect[i].first);
    CHECK(s.get_growth_tracker() == expect[i].second);
  }
}

DEVICE_TEST_CASE("growth is capped when the grown scale would not be finite") {
  optim::SGD opt({param({1}, dev)}, {.lr = 0.1});
  amp::GradScaler s({.init_scale = 3e38, .growth_interval = 1});
  iteration(s, opt, false);
  CHECK(s.get_scale() == doctest::Approx(3e38));
  CHECK(s.get_growth_tracker() == 0);
}

DEVICE_TEST_CASE("unscale_ divides by the scale and flags inf and NaN") {
  Tensor p = param({1, 2, 3}, dev);
  optim::SGD opt({p}, {.lr = 1});
  amp::GradScaler s({.init_scale = 1024});
  Tensor loss = s.scale((p * from_vector<float>({1, 2, 3}).to(dev)).sum());
  CHECK(loss.item<float>() == 1024 * 14);
  loss.backward();
  CHECK(to_vector<float>(p.grad()) == std::vector<float>{1024, 2048, 3072});
  s.unscale_(opt);
  CHECK(to_vector<float>(p.grad()) == std::vector<float>{1, 2, 3});
  CHECK(s.step(opt));
  CHECK(to_vector<float>(p) == std::vector<float>{0, 0, 0});
  s.update();
  opt.zero_grad();
  s.scale(p.sum()).backward();
  {
    NoGradGuard g;
    p.grad().narrow(0, 1, 1).fill_(NAN);
  }
  CHECK_FALSE(s.step(opt));
  s.update();
  CHECK(s.get_scale() == 512);
}

DEVICE_TEST_CASE("a skipped step leaves parameters and optimizer state bit-identical") {
  manual_seed(0);
  Tensor w = randn({4, 3}).to(dev).requires_grad_();
  optim::Adam opt({w}, {.lr = 0.01});
  amp::GradScaler s;
  for (int i = 0; i < 3; ++i) iteration(s, opt, false);
  auto before_w = bytes(w);
  optim::OptimizerState st = opt.state_dict();
  std::vector<std::vector<uint8_t>> before_state;
  for (auto& [k, t] : st.tensors) before_state.push_back(bytes(t));
  auto before_scalars = st.scalars;
  CHECK_FALSE(iteration(s, opt, true));
  CHECK(bytes(w) == before_w);
  optim::OptimizerState after = opt.state_dict();
  for (size_t i = 0; i < after.tensors.size(); ++i) CHECK(bytes(after.tensors[i].second) == before_state[i]);
  CHECK(after.scalars == before_scalars);  // step counts unchanged too
}

DEVICE_TEST_CASE("every parameter group is unscaled, and an overflow in one skips them all") {
  Tensor a = param({1}, dev), b = param({1, 1}, dev);
  optim::SGD opt({{{a}, {.lr = 0.1}}, {{b}, {.lr = 0.01}}});
  amp::GradScaler s({.init_scale = 1024});
  auto iterate = [&](bool overflow) {
    s.scale((a * 2.0).sum() + (b * 3.0).sum()).backward();
    if (overflow) {
      NoGradGuard g;
      b.grad().narrow(0, 1, 1).fill_(NAN);
    }
    const bool stepped = s.step(opt);
    s.update();
    opt.zero_grad();
    return stepped;
  };
  CHECK_FALSE(iterate(true));
  CHECK(to_vector<float>(a) == std::vector<float>{1});
  CHECK(to_vector<float>(b) == std::vector<float>{1, 1});
  CHECK(s.get_scale() == 512);
  // Unscaled gradients 2 and 3: a 1 − 0.1·2 = 0.8, b 1 − 0.01·3 = 0.97.
  CHECK(iterate(false));
  CHECK(to_vector<float>(a) == std::vector<float>{1 - 0.1f * 2});
  CHECK(to_vector<float>(b) == std::vector<float>{1 - 0.01f * 3, 1 - 0.01f * 3});
}

TEST_CASE("the state machine refuses misuse with PyTorch's messages") {
  Tensor p = param({1});
  optim::SGD opt({p}, {.lr = 0.1});
  amp::GradScaler s;
  CHECK_THROWS_WITH_AS(s.update(), doctest::Contains("no scale yet"), Error);
  s.scale(p.sum()).backward();
  CHECK_THROWS_WITH_AS(s.update(), "No inf checks were recorded prior to update.", Error);
  s.unscale_(opt);
  CHECK_THROWS_WITH_AS(s.unscale_(opt), "unscale_() has already been called on this optimizer since the last update().", Error);
  s.step(opt);
  CHECK_THROWS_WITH_AS(s.unscale_(opt), "unscale_() is being called after step().", Error);
  CHECK_THROWS_WITH_AS(s.step(opt), "step() has already been called since the last update().", Error);
  s.update();
  s.scale(p.sum()).backward();
  CHECK(s.step(opt));  // ready again after update
  s.update();
}

TEST_CASE("disabled scaler is a passthrough") {
  Tensor p = param({2});
  optim::SGD opt({p}, {.lr = 0.5});
  amp::GradScaler s({.enabled = false});
  Tensor loss = p.sum();
  CHECK(s.scale(loss).is_same(loss));
  loss.backward();
  CHECK(s.step(opt));
  s.update();
  CHECK(to_vector<float>(p)[0] == 1.5f);
  CHECK(s.get_scale() == 1.0);
}

DEVICE_TEST_CASE("gradient accumulation: scaled micro-batches give the float32 result exactly") {
  manual_seed(1);
  Tensor x = randn({8, 3}).to(dev), y = randn({8, 1}).to(dev);
  Tensor w1 = randn({1, 3}).to(dev).requires_grad_(), w2 = w1.detach().clone().requires_grad_();
  optim::SGD o1({w1}, {.lr = 0.1, .momentum = 0.9}), o2({w2}, {.lr = 0.1, .momentum = 0.9});
  amp::GradScaler s;  // 65536 = 2^16: scaling and unscaling are exact in float32
  for (int step = 0; step < 3; ++step) {
    for (int micro = 0; micro < 2; ++micro) {
      Tensor xb = x.narrow(0, micro * 4, 4), yb = y.narrow(0, micro * 4, 4);
      s.scale(mse_loss(linear(xb, w1), yb) / 2.0).backward();
      (mse_loss(linear(xb, w2), yb) / 2.0).backward();
    }
    CHECK(s.step(o1));
    s.update();
    o2.step();
    o1.zero_grad();
    o2.zero_grad();
  }
  CHECK(bytes(w1) == bytes(w2));
}

DEVICE_TEST_CASE("clipping after unscale_ sees the true gradient norm") {
  Tensor p = param({0, 0}, dev), q = param({0, 0}, dev);
  optim::SGD op({p}, {.lr = 1}), oq({q}, {.lr = 1});
  amp::GradScaler s({.init_scale = 4096});
  s.scale((p * from_vector<float>({3, 4}).to(dev)).sum()).backward();
  (q * from_vector<float>({3, 4}).to(dev)).sum().backward();
  s.unscale_(op);
  CHECK(optim::clip_grad_norm_({p}, 1.0).item<double>() == doctest::Approx(5.0));
  CHECK(optim::clip_grad_norm_({q}, 1.0).item<double>() == doctest::Approx(5.0));
  CHECK(s.step(op));
  oq.step();
  s.update();
  CHECK(to_vector<float>(p) == to_vector<float>(q));
  CHECK(to_vector<float>(p)[0] == doctest::Approx(-0.6).epsilon(1e-5));  // −3/5 after clipping to norm 1
}

DEVICE_TEST_CASE("several losses and optimizers: each skips on its own overflow, one update for all") {
  Tensor a = param({1}, dev), b = param({1}, dev);
  optim::SGD oa({a}, {.lr = 1}), ob({b}, {.lr = 1});
  amp::GradScaler s({.init_scale = 16});
  Tensor la = s.scale(a.sum()), lb = s.scale(b.sum() * 2.0);
  (la + lb).backward();
  {
    NoGradGuard g;
    b.grad().fill_(INFINITY);
  }
  CHECK(s.step(oa));
  CHECK_FALSE(s.step(ob));
  s.update();
  CHECK(to_vector<float>(a)[0] == 0.f);
  CHECK(to_vector<float>(b)[0] == 1.f);
  CHECK(s.get_scale() == 8);  // any overflow backs the shared scale off
}

DEVICE_TEST_CASE("state_dict round trip") {
  Tensor p = param({1}, dev);
  optim::SGD opt({p}, {.lr = 0.1});
  amp::GradScaler s({.init_scale = 128, .growth_interval = 5});
  iteration(s, opt, false);
  iteration(s, opt, false);
  auto sd = s.state_dict();
  CHECK(sd.at("scale") == 128);
  CHECK(sd.at("_growth_tracker") == 2);
  CHECK(sd.at("growth_interval") == 5);
  amp::GradScaler t;
  t.load_state_dict(sd);
  CHECK(t.get_scale() == 128);
  CHECK(t.get_growth_tracker() == 2);
  for (int i = 0; i < 3; ++i) iteration(t, opt, false);
  CHECK(t.get_scale() == 256);  // the restored tracker counted on: 2 + 3 = 5
  CHECK_THROWS_WITH_AS(t.load_state_dict({{"scale", 1}}), doctest::Contains("missing key 'growth_factor'"), Error);
  // PyTorch's rules: a disabled scaler saves {} and ignores a load; an enabled one refuses {}
  amp::GradScaler off({.enabled = false});
  CHECK(off.state_dict().empty());
  off.load_state_dict(sd);
  CHECK(off.get_scale() == 1);
  CHECK_THROWS_WITH_AS(t.load_state_dict({}), doctest::Contains("possibly because it was saved from a disabled instance"), Error);
  // what the constructor refuses, a load refuses too, and leaves the scaler as it was
  auto bad = sd;
  bad["growth_factor"] = 0.5;
  CHECK_THROWS_WITH_AS(t.load_state_dict(bad), doctest::Contains("growth_factor > 1"), Error);
  bad = sd;
  bad["_growth_tracker"] = 5;
  CHECK_THROWS_WITH_AS(t.load_state_dict(bad), "GradScaler::load_state_dict: '_growth_tracker' must be a whole number in [0, 4], got 5", Error);
  CHECK(t.get_scale() == 256);
}

DEVICE_TEST_CASE("a float16 gradient that underflows without scaling survives with it") {
  // dL/dW = g·x with g = x = 1e-4 per element: 1e-8 is below float16's smallest subnormal
  // (2^-24 ≈ 6e-8, and under half of it rounds to zero), so the fp16 GEMM of backward flushes it.
  Tensor x = full({1, 4}, 1e-4).to(dev);
  auto grad_of_w = [&](double scale) {
    Tensor w = ones({2, 4}).to(dev).requires_grad_();
    {
      amp::autocast ac(dev.type, kFloat16);
      Tensor loss = (linear(x, w).to(kFloat32) * 1e-4).sum();  // fp16 GEMM; its upstream gradient is 1e-4·scale
      (loss.to(kFloat32) * scale).backward();  // the scale multiplies in float32, as scaler.scale() does
    }
    return to_vector<float>(w.grad() / scale);
  };
  for (float g : grad_of_w(1.0)) CHECK(g == 0.f);  // lost
  for (float g : grad_of_w(65536.0)) CHECK(g == doctest::Approx(1e-8).epsilon(0.01).scale(0));  // kept (relative: 0 is within 0.01 of 1e-8)
  Tensor raw = full({4}, 1e-8).to(dev);
  CHECK(amp::grad_health(raw, 1.0).flushed == 1.0);
  CHECK(amp::grad_health(raw, 65536.0).flushed == 0.0);
  CHECK(amp::grad_health(raw, 1e13).overflow == 1.0);
}

DEVICE_TEST_CASE("history records the scale used and whether the step was skipped") {
  optim::SGD opt({param({1}, dev)}, {.lr = 0.1});
  amp::GradScaler s({.init_scale = 4, .growth_interval = 2, .record_history = true});
  iteration(s, opt, false);
  iteration(s, opt, true);
  iteration(s, opt, false);
  REQUIRE(s.history().size() == 3);
  CHECK(s.history()[0].scale == 4);
  CHECK_FALSE(s.history()[0].found_inf);
  CHECK(s.history()[1].scale == 4);
  CHECK(s.history()[1].found_inf);
  CHECK(s.history()[2].scale == 2);
  // update(new_scale) sets the scale, and the record still says whether that step was skipped
  Tensor p = opt.params()[0];
  s.scale((p * 1.0).sum()).backward();
  {
    NoGradGuard g;
    p.grad().narrow(0, 0, 1).fill_(NAN);
  }
  CHECK_FALSE(bool(s.step(opt)));
  s.update(1024.0);
  REQUIRE(s.history().size() == 4);
  CHECK(s.history()[3].scale == 2);
  CHECK(s.history()[3].found_inf);
  CHECK(s.get_scale() == 1024);
}

// ---- the scale's domain, and steps under real autocast ----

TEST_CASE("a scale that is not positive and finite is refused wherever it enters, naming it") {
  for (double bad : {double(INFINITY), 0.0, -2.0, double(NAN)}) {
    CAPTURE(bad);
    std::ostringstream value;
    value << bad;
    CHECK(error_of([&] { amp::GradScaler s({.init_scale = bad}); }) == "GradScaler: the scale must be positive and finite, got " + value.str());
    amp::GradScaler s({.init_scale = 8, .growth_interval = 5});
    std::map<std::string, double> sd = s.state_dict();
    sd["scale"] = bad;  // inf skipped every later step, silently
    CHECK(error_of([&] { s.load_state_dict(sd); }) == "GradScaler::load_state_dict: the scale must be positive and finite, got " + value.str());
    CHECK(s.get_scale() == 8);  // left as it was
    Tensor p = param({1});
    s.scale(p.sum()).backward();
    CHECK(error_of([&] { s.update(bad); }) == "update(new_scale): the scale must be positive and finite, got " + value.str());
    CHECK(s.get_scale() == 8);
  }
  // Counts from a saved state: a cast of 1e300 to int64 was undefined behaviour.
  amp::GradScaler s({.init_scale = 8, .growth_interval = 5});
  std::map<std::string, double> sd = s.state_dict();
  sd["growth_interval"] = 1e300;
  CHECK(error_of([&] { s.load_state_dict(sd); }) ==
        "GradScaler::load_state_dict: 'growth_interval' must be a whole number in [1, 9223372036854775807], got 1e+300");
  sd["growth_interval"] = 2.5;
  CHECK(error_of([&] { s.load_state_dict(sd); }) ==
        "GradScaler::load_state_dict: 'growth_interval' must be a whole number in [1, 9223372036854775807], got 2.5");
  sd["growth_interval"] = 5;
  sd["_growth_tracker"] = NAN;
  CHECK(error_of([&] { s.load_state_dict(sd); }) == "GradScaler::load_state_dict: '_growth_tracker' must be a whole number in [0, 4], got nan");
}

// The model of the autocast cases: out = x·wᵀ in float16, loss = Σ out in float32, so
// ∂loss/∂w = Σ_b x_b = (1 + 3, 2 + 4) = (4, 6) whatever w is, and the scaled gradient S·(4, 6)
// passes through float16 twice: as ∂loss/∂out (S itself) and as the GEMM's result S·(4, 6).
// Float16's largest value is 65504, so S = 65536 overflows the first, S = 32768 and 16384 the
// second (S·6 = 196608, 98304), and S ≤ 8192 is exact (powers of two times small integers).
static const std::vector<float> kX = {1, 2, 3, 4};  // (2, 2)
static Tensor autocast_loss(const Tensor& w, Device dev) {
  amp::autocast ac(dev.type, kFloat16);
  Tensor out = linear(from_vector<float>(kX, {2, 2}).to(dev), w);
  CHECK(out.dtype() == kFloat16);  // the policy table's lower-precision GEMM
  return out.to(kFloat32).sum();
}

DEVICE_TEST_CASE("an AMP step under real autocast: float16 forward and backward, float32 master weights, exact update") {
  Tensor w = from_vector<float>({0.5f, -0.25f}, {1, 2}).to(dev).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.125});
  amp::GradScaler s({.init_scale = 1024});
  Tensor loss = autocast_loss(w, dev);
  CHECK(loss.item<float>() == 0.5f);  // 1·0.5 − 2·0.25 + 3·0.5 − 4·0.25
  s.scale(loss).backward();
  CHECK(w.grad().dtype() == kFloat32);  // the cast's backward returned it to the master's dtype
  CHECK(to_vector<float>(w.grad()) == std::vector<float>{4096, 6144});
  CHECK(s.step(opt));
  s.update();
  CHECK(to_vector<float>(w) == std::vector<float>{0.5f - 0.125f * 4, -0.25f - 0.125f * 6});
  CHECK(s.get_scale() == 1024);
  CHECK(s.get_growth_tracker() == 1);
}

DEVICE_TEST_CASE("consecutive overflows under autocast: the scale halves each time, the tracker resets, the weights stay") {
  Tensor w = from_vector<float>({0.5f, -0.25f}, {1, 2}).to(dev).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.125, .momentum = 0.5});
  amp::GradScaler s({.init_scale = 8192});
  auto iterate = [&] {
    s.scale(autocast_loss(w, dev)).backward();
    const bool stepped = s.step(opt);
    s.update();
    opt.zero_grad();
    return stepped;
  };
  CHECK(iterate());  // clean at 8192: w = (0.5, −0.25) − 0.125·(4, 6)
  CHECK(s.get_growth_tracker() == 1);
  s.update(65536.0);  // as a caller may set it; the tracker is left as it was
  const std::vector<uint8_t> w_before = bytes(w), momentum_before = bytes(opt.state_dict().tensors.at(0).second);
  for (double expected_scale : {32768.0, 16384.0, 8192.0}) {
    CAPTURE(expected_scale);
    CHECK_FALSE(iterate());
    CHECK(s.get_scale() == expected_scale);
    CHECK(s.get_growth_tracker() == 0);
    CHECK(bytes(w) == w_before);
    CHECK(bytes(opt.state_dict().tensors.at(0).second) == momentum_before);
  }
  CHECK(iterate());  // clean again at 8192; momentum 0.5: buffer (4, 6)·1.5, w −= 0.125 of it
  CHECK(to_vector<float>(w) == std::vector<float>{0.5f - 0.5f - 0.75f, -0.25f - 0.75f - 1.125f});
  CHECK(s.get_growth_tracker() == 1);
}

DEVICE_TEST_CASE("an overflow seen by unscale_ skips the step even after clip_grad_norm_ turned the gradients to NaN") {
  Tensor p = param({1, 2}, dev);
  optim::SGD opt({p}, {.lr = 1, .momentum = 0.9});
  amp::GradScaler s({.init_scale = 1024});
  auto iterate = [&](bool overflow) {
    s.scale((p * from_vector<float>({3, 4}).to(dev)).sum()).backward();
    if (overflow) {
      NoGradGuard g;
      p.grad().narrow(0, 0, 1).fill_(INFINITY);
    }
    s.unscale_(opt);
    const double norm = optim::clip_grad_norm_(opt.params(), 1.0).item<double>();
    const bool stepped = s.step(opt);
    s.update();
    opt.zero_grad();
    return std::pair(stepped, norm);
  };
  CHECK(iterate(false) == std::pair(true, 5.0));  // (3, 4) clipped to (0.6, 0.8)
  const std::vector<float> after_one = to_vector<float>(p);
  CHECK(after_one[0] == doctest::Approx(1 - 0.6).epsilon(1e-6));
  const std::vector<uint8_t> p_before = bytes(p), momentum_before = bytes(opt.state_dict().tensors.at(0).second);
  // The norm is inf, so clipping multiplies by max_norm / (inf + 1e-6) = 0: the inf becomes NaN
  // and the rest 0. The step must still be skipped, on the flag unscale_ recorded before.
  auto [stepped, norm] = iterate(true);
  CHECK_FALSE(stepped);
  CHECK(std::isinf(norm));
  CHECK(bytes(p) == p_before);
  CHECK(bytes(opt.state_dict().tensors.at(0).second) == momentum_before);
  CHECK(s.get_scale() == 512);
  CHECK(s.get_growth_tracker() == 0);
  CHECK(iterate(false).first);  // and the next clean step goes on from the same weights
  for (float v : to_vector<float>(p)) CHECK(std::isfinite(v));
}
