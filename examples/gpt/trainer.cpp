// trainer.cpp — the GPT's training: train() sets a run up and loops; train_step() is the whole AMP
// recipe of one step. The text and sampling are text.cpp's.
#include "gpt/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "data_parallel.h"
#include "output_files.h"
#include "optim/optim.h"
#include "tensor/cpu/gemm_path.h"
#include "tensor/threads.h"
#include "trainer_support.h"
#include "training_state.h"

namespace gpt {
using namespace ampgrad;
using Clock = std::chrono::steady_clock;

// Next-token cross-entropy over every position: logits (B, T, V), targets (B, T).
static Tensor lm_loss(const Tensor& logits, const Tensor& targets) {
  return nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

// ---- saved states

// A saved state's model must be this run's: the same shapes, and token ids that mean the same
// bytes (the text's vocabulary, as hex).
static std::map<std::string, std::string> model_settings(const GPTConfig& m, const CharText& text) {
  static const char* hex = "0123456789abcdef";
  std::string vocab;
  for (unsigned char b : text.vocab) vocab += {hex[b >> 4], hex[b & 15]};
  return {{"vocab", vocab}, {"block_size", std::to_string(m.block_size)}, {"layers", std::to_string(m.n_layer)},
          {"heads", std::to_string(m.n_head)}, {"embd", std::to_string(m.n_embd)}};
}

// The settings that decide the batches, the schedule's shape and the steps' arithmetic: another
// value makes a resumed run other than the one it continues, which the log then says. (The rates
// and weight decay come back from the saved state, whatever the flags say.)
static std::map<std::string, std::string> run_settings(const TrainConfig& c) {
  auto number = [](auto v) { return examples::exact(double(v)); };
  return {{"text", c.text_path},
          {"seed", std::to_string(c.seed)},
          {"steps", std::to_string(c.steps)},
          {"warmup_steps", std::to_string(c.warmup_steps)},
          {"batch_size", std::to_string(c.batch_size)},
          {"accum_steps", std::to_string(c.accum_steps)},
          {"clip_grad", number(c.clip_grad)},
          {"dropout", number(c.model.dropout)},
          {"amp", c.amp},
          {"device", c.device}};
}

// --ddp: what every rank must run alike (rank_consistency.h). The text is compared by its length
// and vocabulary, not its path, which may differ from node to node.
static std::map<std::string, std::string> ddp_settings(const TrainConfig& c, const GPTConfig& m, const CharText& text) {
  std::map<std::string, std::string> settings = run_settings(c);
  settings.merge(model_settings(m, text));
  settings.erase("text");
  settings.merge(std::map<std::string, std::string>{
      {"text bytes", std::to_string(text.train.size() + text.val.size())}, {"lr", examples::exact(c.lr)},
      {"weight_decay", examples::exact(c.weight_decay)}, {"stop_after", std::to_string(c.stop_after)},
      {"float8", std::to_string(c.float8)}, {"checkpoint", std::to_string(c.checkpoint_segments)}, {"resume", c.resume_path}});
  return settings;
}

// ---- the optimizer's recipe

// Two parameter groups, as nanoGPT's: weight decay pulls the matrices (the linear layers'
// weights and the embeddings) toward 0, but not the biases and LayerNorm gains, which only
// shift and scale.
std::vector<optim::ParamGroup<optim::AdamWOptions>> adamw_groups(const GPT& model, const TrainConfig& c) {
  std::vector<Tensor> matrices, vectors;
  for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? matrices : vectors).push_back(p);
  return {{matrices, {.lr = c.lr, .weight_decay = c.weight_decay}}, {vectors, {.lr = c.lr, .weight_decay = 0}}};
}

double lr_factor(const TrainConfig& c, int64_t done) {
  if (done < c.warmup_steps) return double(done + 1) / double(c.warmup_steps);
  const double progress = double(done - c.warmup_steps) / double(std::max<int64_t>(c.steps - c.warmup_steps, 1));
  return 0.1 + 0.9 * (1 + std::cos(M_PI * progress)) / 2;
}

// ---- training

// A model whose parameters alone cannot fit in this machine's memory is refused before it is
// built (else it ends, minutes and gigabytes later, in an allocation failure). Each parameter
// needs 16 bytes: its float32 value and gradient, and AdamW's two moments. Activations come on top.
static void check_fits_in_memory(const GPTConfig& m) {
  const double E = double(m.n_embd), per_layer = 12 * E * E + 13 * E;  // attention 4E² + 4E, MLP 8E² + 5E, 2 LayerNorms 4E
  const double params = double(m.vocab_size) * E * 2 + double(m.block_size) * E + double(m.n_layer) * per_layer + 2 * E;
  const double needed = params * 16, physical = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  AMPGRAD_CHECK(needed <= physical, "the model (--layers " << m.n_layer << " --embd " << m.n_embd << ") has " << std::setprecision(3) << params
                                      << " parameters, which need at least " << needed / (1 << 30) << " GiB (16 bytes each: weight, gradient and "
                                      << "AdamW's two moments), more than this machine's " << physical / (1 << 30) << " GiB of memory");
}

// What one step reads and updates, made by train() before the first.
struct Step {
  const TrainConfig& c;
  const CharText& text;
  Device device;
  examples::AmpSetting precision;
  GPT& model;
  nn::Module& replica;  // the model, or under --ddp the replica that averages gradients in backward
  optim::AdamW& opt;
  optim::LambdaLR& schedule;
  amp::GradScaler& scaler;
  amp::SkipWatch& skips;
  Generator& batches;
};

// One optimizer step, the whole AMP recipe: accum_steps micro-batches, each forward under
// autocast and backward scaled; then unscale, clip, step unless inf/NaN, update the scale.
// Returns the step's loss (the micro-batches' mean), not read: a read would wait for a GPU.
static Tensor train_step(const Step& s, int64_t step, Tensor& skipped) {
  const TrainConfig& c = s.c;
  s.opt.zero_grad();
  Tensor loss = zeros({}, TensorOptions().device(s.device));
  for (int64_t micro = 0; micro < c.accum_steps; ++micro) {
    auto [x, y] = get_batch(s.text.train, c.batch_size, c.model.block_size, s.batches, s.device);
    if (c.ddp) x = examples::data_parallel::local_rows(x), y = examples::data_parallel::local_rows(y);
    // 1. forward under autocast: the GEMMs in 16 bits, the loss (and on CUDA the softmax and
    //    layer norms) in float32, as the policy table says
    s.skips.begin_step(x, [&, x = x, y = y] {  // init-captures: clang 14 cannot capture a structured binding
      examples::Autocast ac(s.device.type, s.precision);
      return lm_loss(s.model.forward(x, c.checkpoint_segments), y) / double(c.accum_steps);
    });
    Tensor micro_loss;
    {
      examples::Autocast ac(s.device.type, s.precision);
      const Tensor logits = c.checkpoint_segments ? s.model.forward(x, c.checkpoint_segments) : s.replica.forward(x);
      micro_loss = lm_loss(logits, y) / double(c.accum_steps);
    }
    // 2. scaled backward: the micro-batches' gradients add up in .grad, to their mean's
    auto backward = [&] { s.scaler.scale(micro_loss).backward(); };
    if (c.ddp && micro + 1 < c.accum_steps) examples::data_parallel::without_sync(s.replica, backward);  // reduced with the last
    else backward();
    loss = loss + micro_loss.detach();
  }
  // 3. once per step: unscale, clip, step unless inf/NaN, update the scale
  s.scaler.unscale_(s.opt);
  optim::clip_grad_norm_(s.opt.params(), c.clip_grad);
  s.skips.check_loss(0, step, loss, s.scaler);  // no epochs: named by step
  amp::StepResult stepped = s.scaler.step(s.opt);
  if (stepped.found_inf().defined()) skipped = skipped + stepped.found_inf();
  s.scaler.update();
  s.skips.end_step(s.scaler, stepped);
  s.schedule.step();
  return loss;
}

// The mean loss over eval_batches windows of `tokens`, in the training precision, the same windows
// every time (their own generator stream).
static double evaluate(const Step& s, const std::vector<unsigned char>& tokens, Generator g) {
  NoGradGuard no_grad;
  s.model.eval();
  double total = 0;
  for (int64_t i = 0; i < s.c.eval_batches; ++i) {
    auto [x, y] = get_batch(tokens, s.c.batch_size, s.c.model.block_size, g, s.device);
    examples::Autocast ac(s.device.type, s.precision);
    total += lm_loss(s.model.forward(x), y).item<double>();
  }
  s.model.train();
  return total / double(s.c.eval_batches);
}

// --resume: the saved state restored into the run, which must be the same model; returns the
// steps it had done.
static int64_t resume(const Step& s, const GPTConfig& mc, int64_t last_step, Tensor& skipped, std::ostream& log) {
  const TrainConfig& c = s.c;
  const examples::TrainingState ck(c.resume_path);
  for (auto& [k, v] : model_settings(mc, s.text))
    AMPGRAD_CHECK(ck.meta(k) == v, c.resume_path << ": the saved state's model has another " << k
                                                 << (k == "vocab" ? " (it was trained on " + ck.meta("text") + ")" : ": " + ck.meta(k) + ", this run's " + v));
  const int64_t done = ck.integer("step", 1);
  AMPGRAD_CHECK(done < last_step, c.resume_path << ": the saved state is after step " << done << "; this run ends at step " << last_step
                                                << " (--steps, --stop-after), so there is nothing left to train");
  ck.warn_if_changed(run_settings(c), log);
  ck.restore(s.model, s.opt, s.scaler, &s.schedule, log);
  AMPGRAD_CHECK(s.schedule.last_epoch() == done,
                c.resume_path << ": the schedule's epoch " << s.schedule.last_epoch() << " is not the saved state's step " << done);
  default_generator().set_state(ck.generator("rng.default"));
  s.batches.set_state(ck.generator("rng.batches"));
  skipped.fill_(double(ck.integer("skipped_steps", 0, done)));
  log << "resumed from " << c.resume_path << " after step " << done << "\n";
  return done;
}

// An evaluation point: its line in the log and the metrics file, and with --save the run saved.
static void report(const Step& s, const GPTConfig& mc, const EvalPoint& e, examples::TextOutput& metrics, std::ostream& log) {
  log << "step " << std::setw(5) << e.step << std::fixed << std::setprecision(4) << "  train_loss " << e.train_loss
      << "  val_loss " << e.val_loss << std::setprecision(1) << "  " << e.ms_per_step << " ms/step";
  if (s.scaler.is_enabled()) log << std::setprecision(0) << "  scale " << e.scale << "  skipped " << e.skipped_steps;
  log << std::defaultfloat << std::endl;  // a line per evaluation, also through a pipe
  std::ostringstream row;
  row << e.step << "," << e.train_loss << "," << e.val_loss << "," << e.scale << "," << e.skipped_steps << "," << e.ms_per_step << "\n";
  metrics.append(row.str());
  if (s.c.save_path.empty()) return;
  std::map<std::string, std::string> meta = run_settings(s.c);
  meta.merge(model_settings(mc, s.text));
  meta["step"] = std::to_string(e.step);
  meta["skipped_steps"] = std::to_string(e.skipped_steps);
  meta["rng.default"] = default_generator().get_state().to_string();
  meta["rng.batches"] = s.batches.get_state().to_string();
  examples::warn_if_nonfinite(s.model, s.c.save_path, log);
  examples::save_training_state(s.c.save_path, s.model, s.opt, s.scaler, &s.schedule, meta);
}

TrainResult train(const TrainConfig& c, std::ostream& log) {
  AMPGRAD_CHECK(c.steps >= 1 && c.batch_size >= 1 && c.accum_steps >= 1 && c.eval_every >= 1 && c.eval_batches >= 1,
                "--steps, --batch-size, --accum-steps, --eval-every and --eval-batches must be >= 1");
  AMPGRAD_CHECK(c.warmup_steps >= 0, "--warmup-steps must be >= 0, got " << c.warmup_steps);
  AMPGRAD_CHECK(c.stop_after >= 0 && c.stop_after <= c.steps, "--stop-after must be in [0, --steps], got " << c.stop_after);
  const int64_t last_step = c.stop_after ? c.stop_after : c.steps;
  const Device device = examples::training_device(c.device, c.ddp);
  const examples::AmpSetting precision = examples::amp_setting(c.amp, c.float8);
  examples::check_paths({{"--save", c.save_path, "--resume"}, {"--metrics", c.metrics_path}, {"--profile-trace", c.profile_trace}},
                        {{"--resume", c.resume_path}, {"--text", c.text_path}});
  set_num_threads(c.threads);
  // One seed, four streams: the default generator draws the weights and the dropout masks, and
  // the batches, the evaluation windows and the sample have a stream each, so that none of them
  // moves another (the same batches with dropout on or off).
  manual_seed(c.seed);
  auto stream = [&](uint64_t k) { return Generator(c.seed * 4 + k); };
  Generator batches = stream(1);

  const CharText text = CharText::load(c.text_path);
  const int64_t T = c.model.block_size;
  AMPGRAD_CHECK(int64_t(text.val.size()) > T, c.text_path << ": " << text.train.size() + text.val.size()
                                                          << " bytes are too few for block_size " << T << " (its last 10%, "
                                                          << text.val.size() << " bytes, must hold a window of " << T + 1 << ")");
  GPTConfig mc = c.model;
  mc.vocab_size = int64_t(text.vocab.size());
  if (c.ddp) examples::data_parallel::check_same_settings(ddp_settings(c, mc, text));
  if (device.is_cpu()) check_fits_in_memory(mc);
  auto model = std::make_shared<GPT>(mc);
  model->to(device);
  // --ddp: this rank's replica (rank 0's weights, gradients averaged in backward); every rank
  // draws the same global batch and trains on its rows, so rank 0's saved state resumes them all
  const std::shared_ptr<nn::Module> replica = c.ddp ? examples::data_parallel::wrap(model) : model;
  const int64_t ranks = c.ddp ? examples::data_parallel::ranks() : 1;
  AMPGRAD_CHECK(c.batch_size % ranks == 0, "--batch-size " << c.batch_size << " must be a multiple of the " << ranks << " ranks");
  AMPGRAD_CHECK(!c.ddp || c.model.dropout == 0, "--ddp with --dropout " << c.model.dropout << ": every rank would draw the same dropout "
                                                "masks (one generator state, restored from rank 0's saved state); use --dropout 0");
  AMPGRAD_CHECK(c.checkpoint_segments >= 0 && c.checkpoint_segments <= mc.n_layer,
                "--checkpoint must be in [0, " << mc.n_layer << "] (the number of layers), got " << c.checkpoint_segments);
  optim::AdamW opt(adamw_groups(*model, c));
  optim::LambdaLR schedule(opt, [&](int64_t done) { return lr_factor(c, done); });
  amp::GradScaler scaler({.enabled = c.amp == "fp16"});
  amp::SkipWatch skips = examples::skip_watch(c.watch, *model, c.ddp, log);  // stops, explaining, when steps go non-finite
  const Step s{c, text, device, precision, *model, *replica, opt, schedule, scaler, skips, batches};
  int64_t params = 0;
  for (const Tensor& p : model->parameters()) params += p.numel();
  if (precision.enabled && device.is_cpu()) log << cpu::gemm_path_note(precision.dtype) << "\n";  // what 16 bits buy on this CPU
  // each rank's, under --ddp: every rank gathers, rank 0 prints
  const std::string devices = c.ddp ? examples::data_parallel::devices(device) : device.str();
  log << "gpt: " << c.text_path << " (" << text.train.size() << " train / " << text.val.size() << " val bytes, vocab "
      << mc.vocab_size << ")  layers=" << mc.n_layer << " heads=" << mc.n_head << " embd=" << mc.n_embd << " block=" << T
      << " params=" << params << "  batch=" << c.batch_size << (c.accum_steps > 1 ? " x " + std::to_string(c.accum_steps) : "")
      << " lr=" << c.lr << " warmup=" << c.warmup_steps << " wd=" << c.weight_decay << " amp=" << c.amp << (c.float8 ? " float8=on" : "") << " device=" << devices
      << " threads=" << get_num_threads() << (c.ddp ? " ranks=" + std::to_string(ranks) : "") << "\n";

  examples::TextOutput metrics(c.metrics_path, "step,train_loss,val_loss,scale,skipped_steps,ms_per_step\n");
  TrainResult result;
  result.model = model;
  Tensor skipped = zeros({}, TensorOptions().device(device));  // summed where found_inf lives
  const int64_t first_step = c.resume_path.empty() ? 1 : resume(s, mc, last_step, skipped, log) + 1;
  std::vector<Tensor> losses;  // read once per evaluation: a read per step would wait for the GPU
  examples::Instruments first_interval(c.autocast_log, c.profile, c.profile_trace, c.memory_peak, device);  // --autocast-log, --profile, --profile-trace, --memory-peak
  auto t0 = Clock::now();
  for (int64_t step = first_step; step <= last_step; ++step) {
    losses.push_back(train_step(s, step, skipped));
    if (step % c.eval_every != 0 && step != last_step) continue;
    for (const Tensor& l : losses) result.step_losses.push_back(l.item<float>());
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / double(losses.size());
    losses.clear();
    first_interval.report(log);
    result.evals.push_back({step, evaluate(s, text.train, stream(2)), evaluate(s, text.val, stream(2)), scaler.get_scale(), skipped.item<int64_t>(), ms});
    report(s, mc, result.evals.back(), metrics, log);
    t0 = Clock::now();
  }
  if (c.sample_chars > 0) {  // printed as it is drawn: a long sample shows from its first character
    Generator g = stream(3);
    examples::Autocast ac(device.type, precision);
    log << "--- sample (" << c.sample_chars << " characters, temperature " << c.temperature << ") ---\n" << char(text.vocab[text.train[0]]);
    const std::vector<int64_t> ids = generate(*model, {int64_t(text.train[0])}, c.sample_chars, c.temperature, g,
                                              [&](int64_t id) { log << char(text.vocab.at(size_t(id))) << std::flush; });
    log << "\n";
    result.sample = text.decode(ids);
  }
  return result;
}

}  // namespace gpt
