// main.cpp — the `gpt` command: parses flags into a TrainConfig, trains, prints a sample.
//   build/examples/gpt --amp bf16 --steps 1000
#include <CLI/CLI.hpp>
#include <iostream>

#include "data_parallel.h"
#include "failure_watch_flags.h"
#include "flags.h"
#include "gpt/trainer.h"
#include "report_errors.h"

int main(int argc, char** argv) {
  using ampgrad::examples::real_number, ampgrad::examples::whole_number;
  gpt::TrainConfig c;
  CLI::App app{"Train a small character-level GPT on a text file with ampgrad, optionally under AMP, and sample from it."};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--text", c.text_path, "any text file; its bytes are the tokens")->capture_default_str();
  app.add_option("--steps", c.steps)->check(whole_number(1, int64_t(1) << 40))->capture_default_str();
  app.add_option("--batch-size", c.batch_size)->check(whole_number(1, 1 << 20))->capture_default_str();
  app.add_option("--accum-steps", c.accum_steps, "micro-batches of --batch-size per optimizer step")->check(whole_number(1, 1 << 20))->capture_default_str();
  app.add_option("--block-size", c.model.block_size, "context length")->check(whole_number(1, 1 << 20))->capture_default_str();
  app.add_option("--layers", c.model.n_layer)->check(whole_number(1, 1024))->capture_default_str();
  app.add_option("--heads", c.model.n_head)->check(whole_number(1, 1024))->capture_default_str();
  app.add_option("--embd", c.model.n_embd, "width of the residual stream (a multiple of --heads)")->check(whole_number(1, 1 << 20))->capture_default_str();
  app.add_option("--dropout", c.model.dropout)->check(real_number(0, false, 0.99))->capture_default_str();
  app.add_option("--lr", c.lr, "AdamW's peak rate, reached after the warmup and decayed to a tenth along a cosine")->check(real_number(0))->capture_default_str();
  app.add_option("--warmup-steps", c.warmup_steps, "steps of linear warmup to --lr")->check(whole_number(0, int64_t(1) << 40))->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay, "AdamW's, for the weight matrices and embeddings (none for biases and LayerNorm gains)")
      ->check(real_number(0))->capture_default_str();
  app.add_option("--clip-grad", c.clip_grad, "max global gradient norm")->check(real_number(0, /*above_lo=*/true))->capture_default_str();
  app.add_option("--eval-every", c.eval_every)->check(whole_number(1))->capture_default_str();
  app.add_option("--eval-batches", c.eval_batches)->check(whole_number(1, 1 << 20))->capture_default_str();
  app.add_option("--seed", c.seed)->check(whole_number(0))->capture_default_str();
  app.add_option("--threads", c.threads, "CPU threads (0: OMP_NUM_THREADS if set, else all cores)")->check(whole_number(0, 1024))->capture_default_str();
  app.add_option("--device", c.device, "cpu | cuda | cuda:N: where the model and batches live (cuda under --ddp: each rank its node's GPU by local rank)")->capture_default_str();
  app.add_option("--amp", c.amp, "off | fp16 (with a GradScaler) | bf16")->check(CLI::IsMember({"off", "fp16", "bf16"}))->capture_default_str();
  app.add_flag("--float8", c.float8, "every linear as an FP8 GEMM (e4m3 forward, e5m2 gradients, a scale per tensor), numerics emulated");
  app.add_option("--checkpoint", c.checkpoint_segments, "recompute the blocks' activations in backward, in N segments (0: off)")
      ->check(whole_number(0, 1024))->capture_default_str();
  app.add_option("--sample", c.sample_chars, "characters to generate after training")->check(whole_number(0, 1 << 20))->capture_default_str();
  app.add_option("--temperature", c.temperature, "sampling temperature (0: always the likeliest)")->check(real_number(0))->capture_default_str();
  app.add_option("--metrics", c.metrics_path, "CSV of each evaluation");
  app.add_option("--save", c.save_path, "saved state (safetensors), rewritten at every evaluation");
  app.add_option("--resume", c.resume_path, "continue the run that saved this file, as if never stopped");
  app.add_option("--stop-after", c.stop_after, "stop after this step of the --steps schedule (0: run it all); --resume goes on")
      ->check(whole_number(0, int64_t(1) << 40))->capture_default_str();
  app.add_flag("--autocast-log", c.autocast_log, "print what autocast did to each op until the first evaluation");
  app.add_flag("--memory-peak", c.memory_peak, "print what was alive at the memory peak before the first evaluation, and what made it");
  app.add_flag("--profile", c.profile, "print where the time went until the first evaluation, kernel by kernel");
  app.add_option("--profile-trace", c.profile_trace, "write the timeline until the first evaluation (kernels, backward nodes, phases) as Chrome trace JSON for ui.perfetto.dev");
  app.add_flag("--ddp", c.ddp, "data-parallel over the ranks of mpirun (mpirun -np 2 gpt --ddp): --batch-size is the global batch, "
                              "split evenly; rank 0 alone prints and writes");
  ampgrad::examples::add_failure_watch_flags(app, c.watch);  // --explain-skips, --detect-anomaly, --max-skipped-steps
  CLI11_PARSE(app, argc, argv);
  std::ostream* log = &std::cout;
  std::ostream quiet(nullptr);  // what the ranks other than 0 print to: nothing
  try {
    if (c.ddp && !ampgrad::examples::data_parallel::start(argc, argv)) {  // a rank other than 0
      log = &quiet;
      c.sample_chars = 0;
      c.save_path.clear(), c.metrics_path.clear(), c.profile_trace.clear();
    }
    gpt::train(c, *log);  // the sample, if any, printed to the log as it is drawn
    if (c.ddp) ampgrad::examples::data_parallel::end();
  } catch (const std::exception& e) {
    print_error("gpt", e);
    if (c.ddp) ampgrad::examples::data_parallel::abort_all(1);
    return 1;
  }
}
