// test_course.cpp — the course's exercises (docs/course/), each proved by the test cases whose
// names begin "exercise N.k": they pass on the library, and on a learner's tree (scripts/course.sh
// start) they fail at the exercise's stub until its region is written. A case reaches no other
// exercise's region before its own, so each exercise can be done, and is checked, on its own;
// those that need an earlier lesson's exercise too say so in their name.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "amp/amp_kernels.h"
#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "autograd/checkpoint.h"
#include "autograd/ops.h"
#include "diagnostics/memory_history.h"
#include "diagnostics/profile.h"
#include "diagnostics/trace.h"
#include "mnist/trainer.h"
#include "optim/optim.h"
#include "tensor/random.h"
#include "trainer_fixtures.h"

using namespace ampgrad;

static std::vector<float> values(const Tensor& t) { return to_vector<float>(t); }
static Tensor f16(const std::vector<float>& v, const Shape& shape) { return from_vector<float>(v, shape).to(kFloat16); }

// ---- lesson 1: mixed precision ----

TEST_CASE("exercise 1.1 round_once_gemm: float16 sums accumulate in float32, rounded once at the end") {
  // 1 + 4·2⁻¹² = 1 + 2⁻¹⁰, a float16; accumulated in float16 each 2⁻¹² would vanish against the 1
  const float tiny = std::ldexp(1.f, -12);
  const Tensor a = f16({1, tiny, tiny, tiny, tiny}, {1, 5}), b = f16({1, 1, 1, 1, 1}, {5, 1});
  const Tensor c = matmul(a, b);
  CHECK(c.dtype() == kFloat16);
  CHECK(values(c) == std::vector<float>{1.f + std::ldexp(1.f, -10)});
}

TEST_CASE("exercise 1.1 round_once_gemm: linear's bias is added in float32, before the one rounding") {
  // x·wᵀ = 2⁻¹¹ + 2⁻²² rounds to 2⁻¹¹ in float16, and 1 + 2⁻¹¹ ties to 1; unrounded, 1 + 2⁻¹¹ + 2⁻²²
  // is above the tie and rounds to 1 + 2⁻¹⁰
  const Tensor x = f16({std::ldexp(1.f, -11), std::ldexp(1.f, -22)}, {1, 2}), w = f16({1, 1}, {1, 2}), bias = f16({1}, {1});
  CHECK(values(linear(x, w, bias)) == std::vector<float>{1.f + std::ldexp(1.f, -10)});
}

TEST_CASE("exercise 1.1 round_once_gemm: a float16 GEMM is float32's, rounded once, bit for bit") {
  manual_seed(7);
  const Tensor a = randn({67, 300}).to(kFloat16), b = randn({300, 45}).to(kFloat16), bias = randn({45}).to(kFloat16);
  const Tensor expected = linear(a.to(kFloat32), transpose(b, 0, 1).to(kFloat32), bias.to(kFloat32)).to(kFloat16);
  CHECK(values(linear(a, transpose(b, 0, 1), bias)) == values(expected));
  CHECK(values(matmul(a, b)) == values(matmul(a.to(kFloat32), b.to(kFloat32)).to(kFloat16)));
}

TEST_CASE("exercise 1.2 cast_inputs: each policy row under float16 autocast on the CPU") {
  const Tensor x = ones({2, 3}), w = full({4, 3}, 0.5).requires_grad_(), h = ones({2, 3}).to(kFloat16);
  amp::autocast ac(DeviceType::CPU, kFloat16);
  const Tensor y = linear(x, w);  // lower_precision: float32 in, float16 out
  CHECK(y.dtype() == kFloat16);
  CHECK(values(y) == std::vector<float>(8, 1.5f));
  CHECK(mse_loss(h, h * 2).dtype() == kFloat32);        // fp32: float16 inputs cast up
  CHECK(cat({h, x}).dtype() == kFloat32);               // promote: the widest floating input
  CHECK(relu(x).dtype() == kFloat32);                   // input_dtype: left alone
  CHECK(relu(h).dtype() == kFloat16);
  CHECK(linear(x.to(kFloat64), w.to(kFloat64)).dtype() == kFloat64);  // float64 is never lowered
}

TEST_CASE("exercise 1.2 cast_inputs: a weight is cast once per region, and its gradient comes back in float32") {
  const Tensor x = ones({2, 3}), w = full({4, 3}, 0.5).requires_grad_();
  {
    amp::autocast ac(DeviceType::CPU);  // the CPU's default: bfloat16
    const Tensor y = linear(x, w) + linear(x * 2, w);
    CHECK(y.dtype() == kBFloat16);
    CHECK(amp::cache_size() == 1);
    sum(y).backward();
  }
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == kFloat32);
  CHECK(values(w.grad()) == std::vector<float>(12, 6.f));  // 2 rows of x + 2 rows of 2x, per weight
}

TEST_CASE("exercise 1.3 non_finite_check_and_unscale: every gradient times inv_scale, found_inf untouched when all are finite") {
  const Tensor g1 = from_vector<float>({2, -4, 8}), g2 = from_vector<float>({0.5f});
  const Tensor found_inf = zeros({}), inv_scale = full({}, 0.25);
  amp::non_finite_check_and_unscale_({g1, g2}, found_inf, inv_scale);
  CHECK(values(g1) == std::vector<float>{0.5f, -1, 2});
  CHECK(values(g2) == std::vector<float>{0.125f});
  CHECK(found_inf.item<float>() == 0.f);
}

TEST_CASE("exercise 1.3 non_finite_check_and_unscale: an inf or a NaN anywhere sets found_inf, and the rest is still unscaled") {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor g1 = from_vector<float>({1, inf}), g2 = from_vector<float>({NAN, 6});
  const Tensor found_inf = zeros({}), inv_scale = full({}, 0.5);
  amp::non_finite_check_and_unscale_({g1, g2}, found_inf, inv_scale);
  CHECK(found_inf.item<float>() == 1.f);
  CHECK(values(g1) == std::vector<float>{0.5f, inf});
  CHECK(std::isnan(values(g2)[0]));
  CHECK(values(g2)[1] == 3.f);
}

TEST_CASE("exercise 1.4 update_scale: back off on overflow, grow after growth_interval clean steps, never to inf") {
  Tensor scale = full({}, 1024);
  const Tensor tracker = zeros({}, kInt64), clean = zeros({}), overflow = ones({});
  auto update = [&](const Tensor& found_inf) { amp::update_scale_(scale, tracker, found_inf, 2.0, 0.5, 3); };
  update(clean);
  update(clean);
  CHECK(scale.item<float>() == 1024.f);
  CHECK(tracker.item<int64_t>() == 2);
  update(overflow);  // halved, and the clean steps start again
  CHECK(scale.item<float>() == 512.f);
  CHECK(tracker.item<int64_t>() == 0);
  for (int i = 0; i < 3; ++i) update(clean);  // the third clean step in a row doubles it
  CHECK(scale.item<float>() == 1024.f);
  CHECK(tracker.item<int64_t>() == 0);
  scale.fill_(3e38);  // doubled, float32 would overflow: kept
  for (int i = 0; i < 3; ++i) update(clean);
  CHECK(scale.item<float>() == 3e38f);
  CHECK(tracker.item<int64_t>() == 0);
}

// ---- lesson 2: gradient accumulation ----

// The MLP's weights after one epoch of `limit` synthetic samples in float32.
static std::vector<float> trained(const TempDir& dir, int64_t limit, int64_t batch_size, int64_t accum_steps) {
  mnist::TrainConfig c;
  c.data_dir = dir.path.string();
  c.epochs = 1;
  c.limit_train = limit;
  c.limit_test = 100;
  c.batch_size = batch_size;
  c.accum_steps = accum_steps;
  c.threads = 1;
  std::ostringstream log;
  std::vector<float> all;
  for (const Tensor& p : mnist::train(c, log).model->parameters())
    for (float v : values(p)) all.push_back(v);
  return all;
}

TEST_CASE("exercise 2.1 accumulate: an epoch's last group, short of accum_steps, steps on the mean of its micro-batches") {
  // 64 samples in batches of 32 are 2 micro-batches: with accum_steps 4 they form one short
  // group, which must weigh each by 1/2, exactly as accum_steps 2 does (not by 1/4)
  TempDir dir;
  write_synthetic_mnist(dir);
  CHECK(trained(dir, 64, 32, 4) == trained(dir, 64, 32, 2));
}

TEST_CASE("exercise 2.1 accumulate: 3 micro-batches of 8 step as one batch of 24, the short last group too") {
  // 64 samples: groups of 24, 24 and 16 samples either way; the same means, summed in another order
  TempDir dir;
  write_synthetic_mnist(dir);
  const std::vector<float> accumulated = trained(dir, 64, 8, 3), whole = trained(dir, 64, 24, 1);
  REQUIRE(accumulated.size() == whole.size());
  double worst = 0;
  for (size_t i = 0; i < whole.size(); ++i) worst = std::max(worst, double(std::abs(accumulated[i] - whole[i])));
  CHECK(worst < 1e-6);  // float32 sums of a few hundred terms in another order: ~1e-7 of weights ≲ 0.1
}

TEST_CASE("exercise 2.2 clip_grad_norm: gradients above max_norm scaled down to it, the total norm returned") {
  const Tensor a = zeros({2}).requires_grad_(), b = zeros({1}).requires_grad_();
  (sum(a * from_vector<float>({3, 0})) + sum(b * 4)).backward();  // gradients (3, 0) and (4): norm 5
  const Tensor norm = optim::clip_grad_norm_({a, b}, 1.0);
  CHECK(norm.item<float>() == 5.f);
  CHECK(values(a.grad())[0] == doctest::Approx(0.6).epsilon(1e-6));
  CHECK(values(a.grad())[1] == 0.f);
  CHECK(values(b.grad())[0] == doctest::Approx(0.8).epsilon(1e-6));
  CHECK(optim::clip_grad_norm_({a, b}, 10.0).item<float>() == doctest::Approx(1.0).epsilon(1e-6));  // within: unchanged
  CHECK(values(b.grad())[0] == doctest::Approx(0.8).epsilon(1e-6));
}

TEST_CASE("exercise 2.2 clip_grad_norm: after the scaler's unscale_ it clips the true gradients (needs 1.3)") {
  const Tensor p = zeros({2}).requires_grad_();
  optim::SGD opt({p}, {.lr = 1.0});
  amp::GradScaler scaler({.init_scale = 1024});
  scaler.scale(sum(p * from_vector<float>({6, 8}))).backward();  // .grad holds (6144, 8192)
  scaler.unscale_(opt);
  CHECK(optim::clip_grad_norm_(opt.params(), 5.0).item<float>() == 10.f);  // the norm of (6, 8)
  scaler.step(opt);  // p -= (3, 4)
  CHECK(values(p)[0] == doctest::Approx(-3).epsilon(1e-6));
  CHECK(values(p)[1] == doctest::Approx(-4).epsilon(1e-6));
}

// ---- lesson 3: profiling ----

TEST_CASE("exercise 3.1 kernel_time: a Profile totals each kernel's calls and time, inside backward() apart") {
  manual_seed(1);
  const Tensor x = randn({64, 32}).requires_grad_(), w = randn({32, 16}).requires_grad_();
  Profile prof;
  const Tensor y = relu(matmul(x, w));  // forward: one gemm, one relu
  sum(y).backward();                    // backward: two gemms (dx, dw) and relu's mask
  std::map<std::pair<std::string, bool>, ProfileRow> rows;
  double total = 0;
  for (const ProfileRow& r : prof.rows()) {
    rows[{r.kernel, r.backward}] = r;
    total += r.ms;
    CHECK(r.ms > 0);
  }
  CHECK(rows[{"gemm", false}].calls == 1);
  CHECK(rows[{"gemm", true}].calls == 2);
  CHECK(rows[{"relu", false}].calls == 1);
  CHECK(rows[{"relu_backward", true}].calls == 1);
  CHECK(rows.count({"relu_backward", false}) == 0);
  CHECK(total <= prof.wall_ms());
}

TEST_CASE("exercise 3.2 trace_events: the timeline of a step, complete events in order, each kernel inside its phase") {
  TempDir dir;
  {
    TraceWriter trace(dir / "step.json");
    const Tensor x = ones({4, 3}).requires_grad_();
    sum(relu(x) * 2).backward();
    trace.write();
  }
  std::ifstream in(dir / "step.json");
  const nlohmann::json events = nlohmann::json::parse(in)["traceEvents"];
  std::vector<nlohmann::json> phases;
  int kernels = 0;
  double last_ts = -1;
  for (const nlohmann::json& e : events) {
    CHECK(e["ph"] == "X");
    CHECK(e["ts"].get<double>() >= last_ts);  // by start
    CHECK(e["dur"].get<double>() >= 0);
    last_ts = e["ts"];
    if (e["cat"] == "phase") phases.push_back(e);
    if (e["cat"] != "kernel") continue;
    ++kernels;
    int inside = 0;  // the phases holding it
    for (const nlohmann::json& p : phases)
      inside += p["ts"].get<double>() <= e["ts"].get<double>() &&
                e["ts"].get<double>() + e["dur"].get<double>() <= p["ts"].get<double>() + p["dur"].get<double>();
    CHECK(inside == 1);
  }
  REQUIRE(phases.size() == 2);
  CHECK(phases[0]["name"] == "forward");
  CHECK(phases[1]["name"] == "backward");
  CHECK(kernels >= 4);  // relu, mul, sum forward; their backward kernels
}

// ---- lesson 4: memory ----

TEST_CASE("exercise 4.1 replay_to_peak: what was alive at the peak, by maker, and what older blocks freed before it") {
  Tensor older = empty({2048});  // 8 KiB from before the history
  MemoryHistory history;
  Tensor a = empty({1024});  // +4 KiB
  older = Tensor();          // -8 KiB
  Tensor b = empty({4096});  // +16 KiB: the peak, 12 KiB above the start
  b = Tensor();
  a = Tensor();
  Tensor c = empty({512});  // 2 KiB after the peak: not in it
  CHECK(history.peak_bytes() == 12288);
  CHECK(history.freed_before_peak() == 8192);
  const std::vector<MemoryGroup> at_peak = history.live_at_peak();  // a and b, which less older's 8 KiB make the peak
  REQUIRE(at_peak.size() == 1);
  CHECK(at_peak[0].made_by == "(outside kernels)");
  CHECK(at_peak[0].blocks == 2);
  CHECK(at_peak[0].bytes == 20480);
  const std::vector<MemoryGroup> now = history.live_now();
  REQUIRE(now.size() == 1);
  CHECK(now[0].blocks == 1);
  CHECK(now[0].bytes == 2048);
}

TEST_CASE("exercise 4.2 rerun_region: a checkpointed region's gradients are the plain ones, its dropout mask replayed") {
  Tensor x = from_vector<float>({1, -2, 3, -4, 5, -6, 7, -8}).requires_grad_(), w = full({8}, 0.5).requires_grad_();
  int runs = 0;
  const RegionFn region = [&](const std::vector<Tensor>& in) {
    ++runs;
    return dropout(relu(in[0] * in[1]), 0.5, true) * in[0];
  };
  manual_seed(3);
  sum(region({x, w})).backward();
  const std::vector<float> dx = values(x.grad()), dw = values(w.grad());
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  manual_seed(3);
  sum(checkpoint(region, {x, w})).backward();
  CHECK(runs == 3);  // plain, then the checkpoint's forward and its rerun in backward
  CHECK(values(x.grad()) == dx);
  CHECK(values(w.grad()) == dw);
}

TEST_CASE("exercise 4.2 rerun_region: the rerun runs under the first run's autocast, though backward runs without (needs 1.2)") {
  const Tensor x = ones({2, 3}).requires_grad_(), w = full({4, 3}, 0.5).requires_grad_();
  std::vector<bool> autocast_on;
  const RegionFn region = [&](const std::vector<Tensor>& in) {
    autocast_on.push_back(amp::is_enabled(DeviceType::CPU));
    return linear(in[0], in[1]);
  };
  Tensor y;
  {
    amp::autocast ac(DeviceType::CPU);
    y = checkpoint(region, {x, w});
  }
  CHECK(y.dtype() == kBFloat16);
  sum(y).backward();
  CHECK(autocast_on == std::vector<bool>{true, true});
  CHECK(values(w.grad()) == std::vector<float>(12, 2.f));
}
