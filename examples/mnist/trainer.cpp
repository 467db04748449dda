// trainer.cpp — the MNIST training: train() sets a run up and loops over epochs; train_epoch()
// holds the whole AMP recipe of a step (autocast forward, scaled backward, scaler step, update).
#include "mnist/trainer.h"

#include <chrono>
#include <climits>
#include <functional>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "autograd/ops.h"
#include "data/idx.h"
#include "data/loader.h"
#include "data_parallel.h"
#include "mnist/models.h"
#include "mnist/second_derivative.h"
#include "output_files.h"
#include "nn/checkpoint.h"
#include "optim/optim.h"
#include "tensor/cpu/gemm_path.h"
#include "tensor/memory_stats.h"
#include "tensor/threads.h"
#include "trainer_support.h"
#include "training_state.h"

namespace mnist {
using namespace ampgrad;
using Clock = std::chrono::steady_clock;

std::string default_data_dir(const std::string& dataset) {
  if (dataset == "mnist") return "data-cache/mnist";
  if (dataset == "fashion") return "/usr/share/datasets/fashion-mnist";
  AMPGRAD_CHECK(false, "unknown dataset '" << dataset << "' (expected mnist or fashion)");
  return "";
}

static std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Tensor> params) {
  if (c.optimizer == "sgd") return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = c.lr, .momentum = c.momentum});
  if (c.optimizer == "adam") return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = c.lr});
  if (c.optimizer == "adamw") return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = c.lr});
  AMPGRAD_CHECK(false, "unknown optimizer '" << c.optimizer << "' (expected sgd, adam or adamw)");
  return nullptr;
}

static data::Dataset first(data::Dataset d, int64_t n) {
  if (n <= 0 || n >= d.size()) return d;
  return {d.images.narrow(0, 0, n).contiguous(), d.labels.narrow(0, 0, n).contiguous()};
}

// ---- saved states: model and optimizer tensors plus metadata, in one safetensors file ----

// The settings that decide which samples make up each batch and step, as metadata.
static std::map<std::string, std::string> data_order(const TrainConfig& c) {
  return {{"seed", std::to_string(c.seed)}, {"dataset", c.dataset}, {"batch_size", std::to_string(c.batch_size)},
          {"accum_steps", std::to_string(c.accum_steps)}, {"limit_train", std::to_string(c.limit_train)}};
}

// --ddp: what every rank must run alike (rank_consistency.h), as flag -> value.
static std::map<std::string, std::string> ddp_settings(const TrainConfig& c, int64_t train_samples) {
  auto number = [](double v) { return examples::exact(v); };
  return {{"--model", c.model}, {"--dataset", c.dataset}, {"training samples", std::to_string(train_samples)},
          {"--epochs", std::to_string(c.epochs)}, {"--batch-size", std::to_string(c.batch_size)}, {"--lr", number(c.lr)},
          {"--momentum", number(c.momentum)}, {"--optimizer", c.optimizer}, {"--seed", std::to_string(c.seed)},
          {"--device", c.device}, {"--amp", c.amp}, {"--float8", std::to_string(c.float8)}, {"--scaler", c.scaler},
          {"--accum-steps", std::to_string(c.accum_steps)}, {"--checkpoint", std::to_string(c.checkpoint_segments)},
          {"--clip-grad", number(c.clip_grad)}, {"--grad-penalty", number(c.grad_penalty)}, {"--fgsm", number(c.fgsm_eps)},
          {"--limit-test", std::to_string(c.limit_test)}, {"--resume", c.resume_path}};
}

static void save_state(const std::string& path, const TrainConfig& c, int epochs_done, const nn::Module& model,
                            const optim::Optimizer& opt, const amp::GradScaler& scaler) {
  std::map<std::string, std::string> meta{{"epoch", std::to_string(epochs_done)}, {"model", c.model}, {"optimizer", c.optimizer},
                                          {"amp", c.amp}};
  for (auto& [k, v] : data_order(c)) meta[k] = v;
  examples::save_training_state(path, model, opt, scaler, nullptr, meta);
}

// Returns the number of epochs the saved state had completed. Settings that change the batches
// from here on, if they differ from the saved state's, are named in the log: the run is then no
// longer the one an uninterrupted run would have been.
static int load_state(const std::string& path, const TrainConfig& c, nn::Module& model, optim::Optimizer& opt,
                           amp::GradScaler& scaler, std::ostream& log) {
  const examples::TrainingState ck(path);
  AMPGRAD_CHECK(ck.meta("model") == c.model && ck.meta("optimizer") == c.optimizer,
                path << ": saved state is of model=" << ck.meta("model") << " optimizer=" << ck.meta("optimizer") << ", this run uses model="
                     << c.model << " optimizer=" << c.optimizer);
  ck.warn_if_changed(data_order(c), log);
  ck.restore(model, opt, scaler, nullptr, log);
  return int(ck.integer("epoch", 1, INT_MAX));
}

static void progress_bar(std::ostream& log, int64_t done, int64_t total, double elapsed, int64_t samples) {
  const int width = 30;
  int filled = int(width * done / std::max<int64_t>(total, 1));
  double rate = samples / std::max(elapsed, 1e-9);
  double eta = elapsed / std::max<int64_t>(done, 1) * (total - done);
  log << "\r  [" << std::string(filled, '=') << (filled < width ? ">" : "") << std::string(std::max(0, width - filled - 1), ' ')
      << "] " << done << "/" << total << "  " << std::fixed << std::setprecision(0) << rate << " samples/s  ETA "
      << std::setprecision(1) << eta << "s   " << std::flush;
}

// What an epoch reads and updates, made by train() before the first.
struct Run {
  const TrainConfig& c;
  Device device;
  examples::AmpSetting precision;
  nn::Sequential& model;
  nn::Module& replica;  // the model, or under --ddp the replica that averages gradients in backward
  std::function<Tensor(const Tensor&)> forward;  // the replica's, or with --checkpoint N recomputed in backward
  optim::Optimizer& opt;
  amp::GradScaler& scaler;
  amp::SkipWatch& skips;
};

// What an epoch's steps leave: the training loss summed over its batches and the steps skipped,
// both summed where the loss lives (no host read per step), and the batches and samples seen.
struct EpochSums {
  Tensor loss, skipped;
  int64_t batches = 0, samples = 0;
};

// One epoch of the whole AMP recipe. Each micro-batch: 1. forward under autocast, 2. backward of
// the scaled loss; each effective batch of accum_steps: 3. unscale (+ clip), step unless inf/NaN,
// update the scale.
static EpochSums train_epoch(const Run& r, int epoch, data::DataLoader& loader, Clock::time_point t0, std::ostream& log) {
  const TrainConfig& c = r.c;
  EpochSums sums{zeros({}, TensorOptions().device(r.device)), zeros({}, TensorOptions().device(r.device))};
  Tensor group_loss;
  const int64_t n_batches = loader.size();
  r.opt.zero_grad();
  for (auto [x_host, y_host] : loader) {
    const Tensor x = c.grad_penalty > 0 ? x_host.to(r.device).requires_grad_() : x_host.to(r.device), y = y_host.to(r.device);
    // 1. forward under autocast: GEMMs in 16 bits, the loss in float32 (the policy table)
    r.skips.begin_step(x, [&, x, y] { examples::Autocast ac(r.device.type, r.precision); return nn::functional::cross_entropy(r.forward(x), y); });
    Tensor loss;
    {
      examples::Autocast ac(r.device.type, r.precision);
      loss = nn::functional::cross_entropy(r.forward(x), y);
    }
    const Tensor objective = c.grad_penalty > 0 ? loss + input_gradient_penalty(loss, x, r.scaler, c.grad_penalty, r.precision) : loss;
    // 2. scaled backward; gradients of micro-batches add up in .grad, each weighted so that the
    //    step sees the mean over its group (the last group of an epoch may be short)
    const bool starts_group = sums.batches % c.accum_steps == 0;
    const bool ends_group = (sums.batches + 1) % c.accum_steps == 0 || sums.batches + 1 == n_batches;
    auto backward = [&] {
      // exercise 2.1: accumulate — backward of the scaled objective divided by its group's micro-batches: accum_steps, or fewer in the epoch's last group
      const int64_t group_start = sums.batches / c.accum_steps * c.accum_steps;
      const int64_t group_size = std::min<int64_t>(c.accum_steps, n_batches - group_start);
      r.scaler.scale(objective / double(group_size)).backward();
      // end exercise 2.1
    };
    if (c.ddp && !ends_group) examples::data_parallel::without_sync(r.replica, backward);  // reduced with the group's last
    else backward();
    sums.loss = sums.loss + loss.detach();
    group_loss = starts_group ? loss.detach() : group_loss + loss.detach();  // any micro-batch's inf/NaN counts
    ++sums.batches;
    sums.samples += x.size(0);
    // 3. once per effective batch: unscale (+ clip), step unless inf/NaN, update the scale
    if (ends_group) {
      if (c.clip_grad > 0) {
        r.scaler.unscale_(r.opt);
        optim::clip_grad_norm_(r.opt.params(), c.clip_grad);
      }
      r.skips.check_loss(epoch + 1, (sums.batches - 1) / c.accum_steps + 1, group_loss, r.scaler);
      amp::StepResult stepped = r.scaler.step(r.opt);  // left unread: a read would wait for the GPU
      if (stepped.found_inf().defined()) sums.skipped = sums.skipped + stepped.found_inf();
      r.scaler.update();
      r.skips.end_step(r.scaler, stepped);
      r.opt.zero_grad();
    }
    if (c.progress) progress_bar(log, sums.batches, n_batches, std::chrono::duration<double>(Clock::now() - t0).count(), sums.samples);
  }
  return sums;
}

// The test set's loss, accuracy and (with --fgsm) accuracy under the attack, in the training precision.
struct Evaluation {
  double loss;
  int64_t correct = 0, fgsm_correct = 0;
};
static Evaluation evaluate(const Run& r, data::DataLoader& test_loader) {
  r.model.eval();
  Evaluation e{0};
  for (auto [x_host, y_host] : test_loader) {
    const Tensor x = x_host.to(r.device), y = y_host.to(r.device);
    const Tensor attacked = r.c.fgsm_eps > 0 ? fgsm(r.model, x, y, r.c.fgsm_eps) : Tensor();
    NoGradGuard no_grad;
    examples::Autocast ac(r.device.type, r.precision);
    Tensor logits = r.model.forward(x);
    e.loss += nn::functional::cross_entropy(logits, y).item<double>() * x.size(0);
    e.correct += sum(eq(argmax(logits, 1), y)).item<int64_t>();
    if (attacked.defined()) e.fgsm_correct += sum(eq(argmax(r.model.forward(attacked), 1), y)).item<int64_t>();
  }
  return e;
}

// An epoch's line in the log and the metrics file.
static void report(const TrainConfig& c, const EpochResult& r, bool scaler_on, examples::TextOutput& metrics, std::ostream& log) {
  log << "epoch " << r.epoch << "/" << c.epochs << std::fixed << std::setprecision(4) << "  train_loss " << r.train_loss
      << "  test_loss " << r.test_loss << "  test_acc " << r.test_acc;
  if (c.fgsm_eps > 0) log << "  fgsm_acc " << r.fgsm_acc;
  log << std::setprecision(2) << "  " << r.seconds << "s";
  if (scaler_on) log << "  scale " << std::setprecision(0) << r.scale << "  skipped " << r.skipped_steps;
  log << std::setprecision(1) << "  step_peak " << double(r.step_peak_bytes) / (1 << 20) << "MiB" << std::defaultfloat
      << std::endl;  // flushed: the line shows as the epoch ends, through a pipe too (tee, CI logs)
  std::ostringstream row;
  row << r.epoch << "," << r.train_loss << "," << r.test_loss << "," << r.test_acc << "," << r.seconds << "," << r.scale << ","
      << r.skipped_steps << "," << r.step_peak_bytes << (c.fgsm_eps > 0 ? "," + std::to_string(r.fgsm_acc) : "") << "\n";
  metrics.append(row.str());
}

TrainResult train(const TrainConfig& c, std::ostream& log) {
  AMPGRAD_CHECK(c.accum_steps >= 1, "--accum-steps must be >= 1");
  AMPGRAD_CHECK(c.grad_penalty >= 0 && c.fgsm_eps >= 0, "--grad-penalty and --fgsm must be >= 0");
  AMPGRAD_CHECK(!(c.float8 && c.grad_penalty > 0), "--grad-penalty differentiates the model twice, and --float8's linear is once differentiable");
  const Device device = examples::training_device(c.device, c.ddp);
  const examples::AmpSetting precision = examples::amp_setting(c.amp, c.float8);
  examples::check_paths({{"--save", c.save_path, "--resume"}, {"--metrics", c.metrics_path}, {"--scale-history", c.scale_history_path},
                         {"--profile-trace", c.profile_trace}},
                        {{"--resume", c.resume_path}});
  set_num_threads(c.threads);
  manual_seed(c.seed);

  const std::string dir = c.data_dir.empty() ? default_data_dir(c.dataset) : c.data_dir;
  const data::ImageSize size{28, 28};  // what every model of models.h takes
  data::Dataset train_set = first(data::load_mnist_dir(dir, "train", size), c.limit_train);
  data::Dataset test_set = first(data::load_mnist_dir(dir, "test", size), c.limit_test);
  if (c.ddp) examples::data_parallel::check_same_settings(ddp_settings(c, train_set.size()));
  data::DataLoader train_loader(train_set, {.batch_size = c.batch_size, .shuffle = true, .seed = c.seed});
  data::DataLoader test_loader(test_set, {.batch_size = 1000});

  std::shared_ptr<nn::Sequential> model = make_model(c.model);
  model->to(device);
  // --ddp: this rank's replica (rank 0's weights, gradients averaged in backward) and its share of the batch
  const std::shared_ptr<nn::Module> replica = c.ddp ? examples::data_parallel::wrap(model) : model;
  const int64_t ranks = c.ddp ? examples::data_parallel::ranks() : 1;
  AMPGRAD_CHECK(c.batch_size % ranks == 0, "--batch-size " << c.batch_size << " must be a multiple of the " << ranks << " ranks");
  AMPGRAD_CHECK(c.checkpoint_segments >= 0 && c.checkpoint_segments <= int64_t(model->size()),
                "--checkpoint must be in [0, " << model->size() << "] for the " << c.model << "'s " << model->size() << " modules, got "
                                               << c.checkpoint_segments);
  std::unique_ptr<optim::Optimizer> opt = make_optimizer(c, model->parameters());
  const bool use_scaler = c.scaler == "on" || (c.scaler == "auto" && c.amp == "fp16");
  amp::GradScaler scaler({.enabled = use_scaler, .record_history = !c.scale_history_path.empty()});
  amp::SkipWatch skips = examples::skip_watch(c.watch, *model, c.ddp, log);  // stops, explaining, when steps go non-finite
  // --checkpoint N: the model's activations recomputed in backward, segment by segment (nn/container.h)
  const Run run{c, device, precision, *model, *replica, [&](const Tensor& x) {
    return c.checkpoint_segments ? nn::checkpoint_sequential(*model, c.checkpoint_segments, x) : replica->forward(x);
  }, *opt, scaler, skips};

  int start_epoch = 0;
  if (!c.resume_path.empty()) {
    start_epoch = load_state(c.resume_path, c, *model, *opt, scaler, log);
    log << "resumed from " << c.resume_path << " after epoch " << start_epoch << "\n";
  }
  train_loader.set_epoch(start_epoch);
  examples::TextOutput metrics(c.metrics_path, std::string("epoch,train_loss,test_loss,test_acc,seconds,scale,skipped_steps,step_peak_bytes") +
                                                   (c.fgsm_eps > 0 ? ",fgsm_acc\n" : "\n"));
  if (precision.enabled && device.is_cpu()) log << cpu::gemm_path_note(precision.dtype) << "\n";  // what 16 bits buy on this CPU
  // each rank's, under --ddp: every rank gathers, rank 0 prints
  const std::string devices = c.ddp ? examples::data_parallel::devices(device) : device.str();
  log << "model=" << c.model << " dataset=" << c.dataset << " (" << train_set.size() << " train / " << test_set.size()
      << " test) optimizer=" << c.optimizer << " lr=" << opt->lr() << " batch=" << c.batch_size << " amp=" << c.amp
      << (c.float8 ? " float8=on" : "") << " scaler=" << (use_scaler ? "on" : "off") << " device=" << devices << " threads=" << get_num_threads() << (c.ddp ? " ranks=" + std::to_string(ranks) : "") << "\n";

  TrainResult result;
  result.model = model;
  double train_seconds = 0;
  int64_t train_samples = 0;
  examples::Instruments first_epoch(c.autocast_log, c.profile, c.profile_trace, c.memory_peak, device);  // --autocast-log, --profile, --profile-trace, --memory-peak
  for (int epoch = start_epoch; epoch < c.epochs; ++epoch) {
    model->train();
    reset_peak_memory_stats(device);
    const int64_t held_before = memory_stats(device).allocated_bytes;
    const auto t0 = Clock::now();
    std::optional<data::DataLoader> shard;  // --ddp: this rank's samples of the epoch
    if (c.ddp) shard.emplace(examples::data_parallel::shard(train_set, c.seed, epoch), data::DataLoaderOptions{.batch_size = c.batch_size / ranks});
    const EpochSums sums = train_epoch(run, epoch, shard ? *shard : train_loader, t0, log);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const int64_t step_peak = memory_stats(device).peak_allocated_bytes - held_before;
    if (c.progress) log << "\r" << std::string(80, ' ') << "\r";
    train_seconds += seconds;
    train_samples += sums.samples;
    first_epoch.report(log);
    const Evaluation e = evaluate(run, test_loader);
    const double train_loss = c.ddp ? examples::data_parallel::mean(sums.loss.item<double>()) : sums.loss.item<double>();
    result.epochs.push_back({epoch + 1, train_loss / sums.batches, e.loss / test_set.size(), double(e.correct) / test_set.size(), seconds,
                             scaler.get_scale(), sums.skipped.item<int64_t>(), step_peak, double(e.fgsm_correct) / test_set.size()});
    report(c, result.epochs.back(), use_scaler, metrics, log);
    if (!c.save_path.empty()) examples::warn_if_nonfinite(*model, c.save_path, log);
    if (!c.save_path.empty()) save_state(c.save_path, c, epoch + 1, *model, *opt, scaler);
  }
  if (!c.scale_history_path.empty()) {
    std::ostringstream h;
    h << "iteration,scale,found_inf\n";
    for (const amp::ScaleRecord& s : scaler.history()) h << s.iteration << "," << s.scale << "," << s.found_inf << "\n";
    examples::write_text_file(c.scale_history_path, h.str());
  }
  result.train_samples_per_s = train_samples / std::max(train_seconds, 1e-9);
  return result;
}

}  // namespace mnist
