// trainer.h — the GPT's training loop on a text file, character by character (after nanoGPT's
// shakespeare_char, shrunk for a CPU, with AdamW's default betas): weight decay for the matrices
// only, a warmup then a cosine learning rate, gradient clipping, and the same AMP step as the
// MNIST trainer (autocast forward, scaled backward, scaler step, scaler update). The CLI
// (main.cpp) fills a TrainConfig; tests call train().
#pragma once
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "failure_watch.h"
#include "gpt/model.h"
#include "gpt/text.h"
#include "optim/adam.h"
#include "tensor/random.h"

namespace gpt {

struct TrainConfig {
  std::string text_path = "/usr/share/games/fortunes/songs-poems";  // Debian package fortunes
  GPTConfig model;                  // vocab_size comes from the text
  int64_t steps = 2000;
  int64_t batch_size = 32;
  int64_t accum_steps = 1;          // micro-batches of batch_size per optimizer step
  double lr = 2e-3;                 // reached after the warmup, then decays to lr/10 along a cosine
  int64_t warmup_steps = 100;       // the rate climbs linearly to lr over these
  double weight_decay = 0.1;        // nanoGPT's, for the matrices; none for biases and gains
  double clip_grad = 1.0;
  int64_t eval_every = 100, eval_batches = 20;
  uint64_t seed = 0;
  int threads = 0;                  // 0: OMP_NUM_THREADS if set, else all cores
  std::string device = "cpu";       // cpu | cuda
  std::string amp = "off";          // off | fp16 | bf16
  bool float8 = false;              // every linear an FP8 GEMM: e4m3 forward, e5m2 gradients, scaled per tensor
  int64_t checkpoint_segments = 0;  // recompute the blocks' activations in backward (0: off)
  int64_t sample_chars = 300;       // generated after training (0: none)
  double temperature = 0.8;
  std::string metrics_path;
  std::string save_path;            // a saved state, rewritten at every evaluation
  std::string resume_path;          // continue a run from its saved state, exactly
  int64_t stop_after = 0;           // stop after this step (0: steps), as a time-limited job would
  bool autocast_log = false;           // print what autocast did to each op over the first evaluation interval
  bool profile = false;             // print where that interval's time went, kernel by kernel
  std::string profile_trace;        // write that interval's timeline here (Chrome trace-event JSON)
  bool memory_peak = false;         // print what was alive at that interval's peak, and what made it
  bool ddp = false;                 // data-parallel under mpirun (data_parallel.h): batch_size is the global batch
  ampgrad::examples::FailureWatch watch = {};  // --explain-skips, --detect-anomaly, --max-skipped-steps (failure_watch.h)
};

struct EvalPoint {
  int64_t step;
  double train_loss, val_loss;  // mean over eval_batches random batches of each split
  double scale;                 // the GradScaler's scale (1 without one)
  int64_t skipped_steps;        // so far
  double ms_per_step;           // training steps since the last evaluation
};

struct TrainResult {
  std::vector<EvalPoint> evals;
  std::vector<float> step_losses;  // every training step's loss (under --ddp, on this rank's rows)
  std::string sample;
  std::shared_ptr<GPT> model;
};

TrainResult train(const TrainConfig& config, std::ostream& log);

// The recipe's two AdamW groups: the matrices (dim >= 2) with config.weight_decay, the biases and
// LayerNorm gains with none.
std::vector<ampgrad::optim::ParamGroup<ampgrad::optim::AdamWOptions>> adamw_groups(const GPT& model, const TrainConfig& config);
// The rate for the step after `done` steps, as a fraction of config.lr: (done + 1) / warmup_steps
// during the warmup, then a cosine from 1 to 0.1 at done == steps.
double lr_factor(const TrainConfig& config, int64_t done);

}  // namespace gpt
