// underflow — the reason loss scaling exists, made visible. One small regression model is
// trained six ways: float32; float16 autocast without a scaler; float16 with GradScaler;
// bfloat16; and float16 and bfloat16 with every linear in FP8 (float8_autocast). Its loss
// is a mean over 1024 x 256 outputs of errors near 3e-3, so the gradient that reaches each fp16
// activation is 2·err/262144 ≈ 2e-8 at the start and shrinks as the fit
// improves: below 2^-25 ≈ 3e-8 (half float16's smallest subnormal) it rounds to exactly zero.
// Without a scaler the weights then get all-zero gradients and learning stalls; scaled by
// 65536 the same values are comfortably representable. bfloat16 has float32's exponent range
// and never underflows here. FP8's scale per tensor does not save float16: it acts inside each
// linear, and the gradient reaching the output layer is a float16 tensor (the cast back from
// the float32 loss) that has underflowed before any linear sees it. Under bfloat16 it trains.
// The output layer starts at zero, a common init for regression.
//
//   build/examples/underflow     # writes runs/underflow.csv, which scripts/plot-underflow.sh draws
#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "amp/autocast.h"
#include "diagnostics/grad_health.h"
#include "amp/grad_scaler.h"
#include "autograd/float8.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "flags.h"
#include "output_files.h"
#include "report_errors.h"

using namespace ampgrad;

struct Run {
  std::string name;
  bool amp;
  DType dtype;
  bool scaler;
  bool float8 = false;            // every linear an FP8 GEMM, each tensor scaled on its own
  std::vector<double> loss = {};  // float32 evaluation loss per logged step
  double zero_grads = 0;     // share of weight-gradient values exactly zero, last 100 steps
  amp::GradHealth health_unscaled = {}, health_scaled = {};  // of the float32 gradients at the end
};

int main(int argc, char** argv) {
  int steps = 300, log_every = 10;
  std::string csv = "runs/underflow.csv";
  CLI::App app{"Train one model six ways to show float16 gradient underflow and how loss scaling prevents it."};
  app.add_option("--steps", steps)->check(examples::whole_number(1, 1'000'000))->capture_default_str();
  app.add_option("--csv", csv, "write the loss curves here (step, one column per run; \"\" for none)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return report_errors("underflow", [&] {
    if (!csv.empty()) {  // checked before the runs, not after them
      if (std::filesystem::path dir = std::filesystem::path(csv).parent_path(); !dir.empty()) std::filesystem::create_directories(dir);
      examples::check_paths({{"--csv", csv}});
    }
    // data: x (N, Din) ~ N(0, 1); targets (N, Dout) from a fixed random teacher, magnitude ~3e-3
    manual_seed(0);
    const int64_t N = 4096, Din = 32, H = 128, Dout = 256, B = 1024;
    Tensor x = randn({N, Din});
    Tensor teacher_a = randn({Din, H}) / std::sqrt(double(Din)), teacher_b = randn({H, Dout}) / std::sqrt(double(H));
    Tensor y = matmul(tanh(matmul(x, teacher_a)), teacher_b) * 3e-3;

    std::vector<Run> runs = {{"float32", false, kFloat32, false},
                             {"fp16", true, kFloat16, false},
                             {"fp16+scaler", true, kFloat16, true},
                             {"bf16", true, kBFloat16, false},
                             {"fp16+float8", true, kFloat16, false, true},
                             {"bf16+float8", true, kBFloat16, false, true}};
    for (Run& run : runs) {
      manual_seed(1);  // the same initial weights for every run
      auto out = std::make_shared<nn::Linear>(H, Dout);
      nn::init::zeros_(out->weight);
      nn::init::zeros_(out->bias);
      auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(Din, H), std::make_shared<nn::GELU>(), out);
      optim::Adam opt(model->parameters(), {.lr = 1e-3});
      amp::GradScaler scaler({.enabled = run.scaler});
      int64_t zero = 0, total = 0;
      for (int step = 0; step < steps; ++step) {
        int64_t at = (step * B) % N;
        Tensor xb = x.narrow(0, at, B), yb = y.narrow(0, at, B);
        opt.zero_grad();
        Tensor loss;
        {
          amp::autocast ac(DeviceType::CPU, run.dtype, run.amp);
          float8_autocast f8(DeviceType::CPU, {}, run.float8);
          loss = nn::functional::mse_loss(model->forward(xb), yb);
        }
        scaler.scale(loss).backward();
        scaler.unscale_(opt);  // so the gradients below are the true ones
        if (step >= steps - 50)
          for (const Tensor& p : opt.params()) {
            std::vector<float> g = to_vector<float>(p.grad());
            for (float v : g) zero += v == 0.f;
            total += (int64_t)g.size();
          }
        if (step == steps - 1 && !run.amp) {  // what fp16 would do to the true gradients
          run.health_unscaled = amp::grad_health(opt.params()[0].grad(), 1.0);
          run.health_scaled = amp::grad_health(opt.params()[0].grad(), 65536.0);
        }
        scaler.step(opt);
        scaler.update();
        if (step % log_every == 0 || step == steps - 1) {
          NoGradGuard no_grad;
          run.loss.push_back(nn::functional::mse_loss(model->forward(x), y).item<double>());
        }
      }
      run.zero_grads = double(zero) / double(total);
    }

    std::cout << "Regression, targets ~3e-3, mse over 1024x256 outputs, Adam lr 1e-3, " << steps << " steps\n\n"
              << std::left << std::setw(13) << "run" << std::right << std::setw(13) << "loss @0" << std::setw(13)
              << "loss @" + std::to_string(steps / 2) << std::setw(13) << "final loss" << std::setw(22) << "zero weight grads\n";
    for (const Run& r : runs)
      std::cout << std::left << std::setw(13) << r.name << std::right << std::scientific << std::setprecision(3) << std::setw(13)
                << r.loss.front() << std::setw(13) << r.loss[r.loss.size() / 2] << std::setw(13) << r.loss.back() << std::fixed
                << std::setprecision(1) << std::setw(20) << 100 * r.zero_grads << "%\n";
    const Run& f32 = runs[0];
    std::cout << "\nThe float32 run's first-layer gradients at the end, as float16 would hold them:\n";
    amp::print_grad_health(std::cout, "fc1.weight", f32.health_unscaled, f32.health_scaled);
    if (!csv.empty()) {
      std::ostringstream out;
      out << "step";
      for (const Run& r : runs) out << "," << r.name;
      out << "\n";
      for (size_t i = 0; i < f32.loss.size(); ++i) {
        out << std::min<int>((int)i * log_every, steps - 1);
        for (const Run& r : runs) out << "," << r.loss[i];
        out << "\n";
      }
      examples::write_text_file(csv, out.str());
      std::cout << "\nloss curves written to " << csv << "\n";
    }
  });
}
