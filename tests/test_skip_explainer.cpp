// test_skip_explainer.cpp — the skip explainer (diagnostics/skip_explainer.h) and its locator
// (diagnostics/nonfinite_locator.h) on a two-layer MLP whose numbers are set by hand, so that each case
// knows where the first inf/NaN must appear: a forward overflow in float16, a NaN in the batch,
// an overflow that only the backward meets, a run of skipped steps, a bfloat16 step with no
// scaler. Every message is checked word for word. (The trainers' flags: test_mnist, test_gpt.)
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

#include "amp/autocast.h"
#include "diagnostics/skip_explainer.h"
#include "autograd/ops.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "test_util.h"

using namespace ampgrad;

namespace {
// x (2, 4) of ones -> model.0: Linear(4, 8), every weight 1 -> 4 -> model.1: ReLU -> model.2:
// Linear(8, 4), every weight w2 -> 32·w2. With w2 = 3000 that is 96000: past float16's 65504.
struct Setup {
  std::shared_ptr<nn::Sequential> model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
                                                                          std::make_shared<nn::Linear>(8, 4));
  Tensor x = ones({2, 4}), y = zeros({2}, TensorOptions(kInt64));
  optim::SGD opt{model->parameters(), optim::SGDOptions{.lr = 0.1}};
  std::ostringstream log;

  explicit Setup(double w2) {
    NoGradGuard no_grad;
    for (auto& [name, p] : model->named_parameters()) p.fill_(name == "2.weight" ? w2 : name == "0.weight" ? 1.0 : 0.0);
  }
  Tensor loss(DType dtype) {
    amp::autocast ac(DeviceType::CPU, dtype);
    return nn::functional::cross_entropy(model->forward(x), y);
  }
  amp::SkipWatch watch(amp::SkipWatchOptions o) {
    return amp::SkipWatch(o, model->named_parameters(), {}, log);
  }
  // One AMP step as the trainers take it, watched.
  void step(amp::SkipWatch& watch, amp::GradScaler& scaler, int64_t n, DType dtype = kFloat16) {
    watch.begin_step(x, [this, dtype] { return loss(dtype); });
    const Tensor l = loss(dtype);
    scaler.scale(l).backward();
    watch.check_loss(1, n, l, scaler);
    amp::StepResult stepped = scaler.step(opt);
    scaler.update();
    watch.end_step(scaler, stepped);
    opt.zero_grad();
  }
};

std::string stop_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const amp::SkipWatch::Stop& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a Linear whose float16 output overflows is named: module, op, forward, dtype, policy row and the largest input") {
  Setup s(3000);
  amp::NonFiniteLocator where(s.model->named_parameters(), "model");
  s.loss(kFloat16);
  REQUIRE(where.report());
  CHECK(where.report()->str() ==
        "first inf/NaN: forward, op linear, module model.2, ran in float16 (policy row linear: lower_precision)\n"
        "  its output held 8 inf and 0 NaN; largest |input| 3000 (model.2.weight) beside float16's max 65504");
}

TEST_CASE("below float16's max nothing is reported, and with no locator alive nothing is checked") {
  Setup s(2000);  // 64000: still a float16
  amp::NonFiniteLocator where(s.model->named_parameters(), "model");
  s.loss(kFloat16).backward();
  CHECK(!where.report());
}

TEST_CASE("the step stops after --max-skipped-steps in a row, naming the gradients and where the first inf appeared") {
  Setup s(3000);
  amp::GradScaler scaler({.init_scale = 4});
  amp::SkipWatch watch = s.watch({.max_skipped_steps = 3});
  s.step(watch, scaler, 1);
  s.step(watch, scaler, 2);
  CHECK(s.log.str() == "");  // the scale is 1, not below it
  const std::string stop = stop_message([&] { s.step(watch, scaler, 3); });
  CHECK(stop ==
        "stopped at epoch 1, step 3: 3 optimizer steps in a row were skipped (--max-skipped-steps 3), each for inf/NaN in its "
        "gradients; the loss scale is now 0.5\n"
        "gradients holding inf/NaN (the step replayed, loss scale 1):\n"
        "  model.0.weight: 32 of 32 (0 inf, 32 NaN)\n"
        "  model.0.bias: 8 of 8 (0 inf, 8 NaN)\n"
        "  model.2.weight: 32 of 32 (0 inf, 32 NaN)\n"
        "  model.2.bias: 4 of 4 (0 inf, 4 NaN)\n"
        "first inf/NaN: forward, op linear, module model.2, ran in float16 (policy row linear: lower_precision)\n"
        "  its output held 8 inf and 0 NaN; largest |input| 3000 (model.2.weight) beside float16's max 65504\n"
        "float16 cannot hold this model's values at linear: try --amp bf16 (float32's range), or run linear in float32 (its row in "
        "tensor/ops.def: lower_precision -> fp32)");
  // the warning came once, as the scale fell to 0.5, with the same explanation
  const std::string warning = "warning: the loss scale fell below 1 (0.5) at epoch 1, step 3: float16's range does not fit this model's values (pytorch#99640).\n";
  CHECK(s.log.str().find(warning) == 0);
  CHECK(s.log.str().find("warning", 1) == std::string::npos);
}

TEST_CASE("a replay changes nothing: the weights, the generator and the gradients are as the step left them") {
  Setup s(3000);
  amp::GradScaler scaler;
  amp::SkipWatch watch = s.watch({.max_skipped_steps = 0, .explain_skips = true});
  const std::string draw_before = default_generator().get_state().to_string();
  s.step(watch, scaler, 1);
  CHECK(default_generator().get_state().to_string() == draw_before);
  for (auto& [name, p] : s.model->named_parameters()) CHECK(!p.grad().defined());
  CHECK(s.log.str().find("step skipped at epoch 1, step 1 (scale 65536):\ngradients holding inf/NaN (the step replayed, loss scale 65536):\n") == 0);
  s.step(watch, scaler, 2);  // the same run of skips: explained once
  CHECK(s.log.str().find("step skipped", 1) == std::string::npos);
}

TEST_CASE("a replay that throws leaves the generator as the step left it, and its error goes on") {
  Setup s(1);
  amp::SkipWatch watch = s.watch({});
  watch.begin_step(s.x, [] {
    for (int i = 0; i < 3; ++i) randn({1});  // the replay draws more than the step did, then fails
    throw std::runtime_error("replay failed");
    return Tensor();
  });
  randn({1});  // the step's own draw
  const std::string after_step = default_generator().get_state().to_string();
  CHECK_THROWS_WITH(watch.explain(1.0), "replay failed");
  CHECK(default_generator().get_state().to_string() == after_step);
}

TEST_CASE("a NaN in the input batch is named as the input, and a bfloat16 step with no scaler stops at it") {
  Setup s(1);
  s.model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 4));
  s.x = full({2, 4}, NAN);
  amp::GradScaler off({.enabled = false});
  amp::SkipWatch watch = s.watch({});
  const std::string stop = stop_message([&] { s.step(watch, off, 7, kBFloat16); });
  CHECK(stop.find("stopped at epoch 1, step 7: the loss is nan, with no GradScaler to skip the step\n") == 0);
  CHECK(stop.find("first inf/NaN: the input batch held 0 inf and 8 NaN before any op ran") != std::string::npos);
}

TEST_CASE("a NaN weight under bfloat16 stops the step, naming the weight as the input that held it") {
  Setup s(1);
  {
    NoGradGuard no_grad;
    s.model->named_parameters()[2].second.fill_(NAN);
  }
  amp::GradScaler off({.enabled = false});
  amp::SkipWatch watch = s.watch({});
  const std::string stop = stop_message([&] { s.step(watch, off, 1, kBFloat16); });
  CHECK(stop.find("first inf/NaN: forward, op to, module model.2, ran in bfloat16 (policy row linear: lower_precision)\n"
                  "  its output held 0 inf and 32 NaN; its input model.2.weight already held 0 inf and 32 NaN") != std::string::npos);
}

TEST_CASE("an overflow that only the backward meets (a huge loss scale) names the backward node") {
  Setup s(1);
  amp::NonFiniteLocator where(s.model->named_parameters(), "model");
  (s.loss(kFloat16) * 1e38).backward();
  REQUIRE(where.report());
  CHECK(where.report()->str() ==
        "first inf/NaN: backward, op to in the backward of node to, ran in float16\n"
        "  its output held 8 inf and 0 NaN; largest |input| 3.75e+37 (input 0) beside float16's max 65504");
  // At the GradScaler's 65536 the weight gradient of model.2, g (2, 4) of about 24576 times h (2, 8) of 4s, is 196608.
  amp::GradScaler scaler;
  amp::SkipWatch watch = s.watch({.max_skipped_steps = 1});
  const std::string stop = stop_message([&] { s.step(watch, scaler, 1); });
  CHECK(stop.find("gradients holding inf/NaN (the step replayed, loss scale 65536):\n  model.2.weight: 32 of 32 (32 inf, 0 NaN)\n"
                  "first inf/NaN: backward, op matmul in the backward of node linear, ran in float16\n"
                  "  its output held 32 inf and 0 NaN; largest |input| 24576 (input 0) beside float16's max 65504\n"
                  "a scaled gradient overflowed float16: the GradScaler halves the scale and steps again (usual while it finds its level)") !=
        std::string::npos);
}

TEST_CASE("--detect-anomaly: the step itself is watched, so no replay is needed") {
  Setup s(3000);
  amp::GradScaler scaler;
  amp::SkipWatch watch = s.watch({.max_skipped_steps = 1, .detect_anomaly = true});
  const std::string stop = stop_message([&] { s.step(watch, scaler, 1); });
  CHECK(stop.find("gradients holding inf/NaN (this step, loss scale 65536):\n  model.0.weight: 32 of 32") != std::string::npos);
  CHECK(stop.find("first inf/NaN: forward, op linear, module model.2, ran in float16") != std::string::npos);
}

TEST_CASE("healthy steps: nothing is logged, nothing stops, and the gradients count none") {
  Setup s(1);
  amp::GradScaler scaler({.init_scale = 1024});  // at 65536 the backward of model.2 overflows (196608): a skip
  amp::SkipWatch watch = s.watch({.max_skipped_steps = 1, .explain_skips = true});
  for (int64_t n = 1; n <= 3; ++n) s.step(watch, scaler, n);
  CHECK(s.log.str() == "");
  CHECK(amp::nonfinite_gradients(s.model->named_parameters()).empty());
}
