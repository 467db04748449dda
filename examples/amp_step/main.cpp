// amp_step — one AMP training step of the MNIST MLP, narrated: each stage prints what it did,
// with real numbers. docs/amp-walkthrough.md follows this program through the library.
//   build/examples/amp_step [--data data-cache/mnist] [--steps 50] [--plant-overflow 1e6]
// With --plant-overflow the narrated step overflows in float16, and amp::SkipWatch says why.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "amp/autocast.h"
#include "diagnostics/autocast_log.h"
#include "diagnostics/grad_health.h"
#include "amp/grad_scaler.h"
#include "diagnostics/skip_explainer.h"
#include "data/idx.h"
#include "data/loader.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "flags.h"
#include "report_errors.h"

using namespace ampgrad;

int main(int argc, char** argv) {
  std::string dir = "data-cache/mnist";
  int warmup = 50;
  CLI::App app{"One float16 AMP training step of the MNIST MLP, stage by stage."};
  app.add_option("--data", dir, "MNIST IDX directory")->capture_default_str();
  app.add_option("--steps", warmup, "ordinary AMP steps to take before the narrated one")->check(examples::whole_number(0, 1'000'000))->capture_default_str();
  double plant = 0;
  app.add_option("--plant-overflow", plant, "multiply fc2's weight by this before the narrated step (1e6: its float16 output overflows)")
      ->check(examples::real_number(0));
  CLI11_PARSE(app, argc, argv);
  return report_errors("amp_step", [&] {
    manual_seed(0);
    data::DataLoader loader(data::load_mnist_dir(dir, "train"), {.batch_size = 128, .shuffle = true});
    auto fc1 = std::make_shared<nn::Linear>(784, 512), fc2 = std::make_shared<nn::Linear>(512, 512),
         fc3 = std::make_shared<nn::Linear>(512, 10);
    nn::Sequential model(std::make_shared<nn::Flatten>(), fc1, std::make_shared<nn::ReLU>(), fc2, std::make_shared<nn::ReLU>(), fc3);
    optim::SGD opt(model.parameters(), {.lr = 0.05, .momentum = 0.9});
    amp::GradScaler scaler;
    int64_t i = 0;
    amp::SkipWatch watch({.max_skipped_steps = 0, .explain_skips = true}, model.named_parameters(), {}, std::cout);

    auto step = [&](const data::Batch& b, bool narrate) {
      auto say = [&](const std::string& s) { if (narrate) std::cout << s << "\n"; };
      opt.zero_grad();
      watch.begin_step(b.x, [&] { amp::autocast ac(DeviceType::CPU, kFloat16); return nn::functional::cross_entropy(model.forward(b.x), b.y); });
      Tensor loss, logits;
      {
        amp::autocast ac(DeviceType::CPU, kFloat16);
        std::optional<amp::AutocastLog> trace;
        if (narrate) trace.emplace();
        logits = model.forward(b.x);
        loss = nn::functional::cross_entropy(logits, b.y);
        if (narrate) {
          std::cout << "1. autocast forward: logits " << dtype_name(logits.dtype()) << " " << shape_str(logits.shape())
                    << ", loss " << dtype_name(loss.dtype()) << " = " << loss.item<float>() << "\n";
          trace->print(std::cout);
          std::cout << "   weight casts cached in this region: " << amp::cache_size() << "\n";
        }
      }
      Tensor scaled = scaler.scale(loss);
      if (narrate) std::cout << "2. scale: loss x " << scaler.get_scale() << " = " << scaled.item<float>() << "\n";
      scaled.backward();
      Tensor g = fc1->weight.grad();
      const double S = scaler.get_scale();
      int64_t example = -1;  // the largest scaled value whose true size float16 would flush to 0
      if (narrate) {
        // the true gradient is g / S; what would float16 have made of it without the scale?
        amp::GradHealth raw = amp::grad_health(g, 1.0 / S), kept = amp::grad_health(g, 1.0);
        std::vector<float> v = to_vector<float>(g);
        for (int64_t k = 0; k < (int64_t)v.size(); ++k)
          if (v[k] != 0 && std::abs(v[k] / S) <= std::ldexp(1.0, -25) && (example < 0 || std::abs(v[k]) > std::abs(v[example]))) example = k;
        std::cout << "3. backward: fc1.weight.grad is " << dtype_name(g.dtype()) << " (the master weight's dtype), still scaled\n";
        if (example >= 0)
          std::cout << "   e.g. element " << example << ": " << v[example] << " scaled, true value " << v[example] / S
                    << " <= 2^-25: float16 would have flushed it to 0\n";
        amp::print_grad_health(std::cout, "   fc1.weight", raw, kept);
      }
      scaler.unscale_(opt);
      if (narrate) {
        std::cout << "4. unscale_: one pass x 1/" << S << " over the " << opt.params().size() << " gradients, checking for inf/NaN\n";
        if (example >= 0) std::cout << "   element " << example << " is now " << to_vector<float>(fc1->weight.grad().reshape({-1}))[example] << " in float32\n";
      }
      watch.check_loss(1, i + 1, loss, scaler);
      amp::StepResult result = scaler.step(opt);
      const bool stepped = result;
      say(std::string("5. step: ") + (stepped ? "no inf/NaN found, optimizer stepped" : "inf/NaN found, step skipped"));
      scaler.update();
      if (narrate) std::cout << "6. update: scale " << scaler.get_scale() << ", growth tracker " << scaler.get_growth_tracker()
                             << " of " << scaler.options().growth_interval << "\n";
      if (narrate && !stepped) std::cout << "7. why (amp::SkipWatch, replaying the step with a NonFiniteLocator armed):\n";
      watch.end_step(scaler, result);
    };

    for (auto b : loader) {
      if (i == warmup) {
        if (plant > 0) {
          NoGradGuard no_grad;
          fc2->weight.copy_(fc2->weight * plant);
          std::cout << "planted: fc2.weight (model.3.weight) x " << plant << "\n";
        }
        step(b, true);
        break;
      }
      step(b, false);
      ++i;
    }
  });
}
