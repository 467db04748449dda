// trainer.cpp — the GPT's training loop. Read train() top to bottom: it is the whole recipe.
#include "gpt/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "data/input_file.h"
#include "data_parallel.h"
#include "output_files.h"
#include "optim/optim.h"
#include "tensor/threads.h"
#include "trainer_support.h"
#include "training_state.h"

namespace gpt {
using namespace ampgrad;
using Clock = std::chrono::steady_clock;

// ---- the text, as byte tokens

// The bytes become token ids where they lie; the last tenth is then copied out as the validation split.
static CharText tokenize(std::vector<unsigned char> bytes, const std::string& name) {
  CharText t;
  bool seen[256] = {};
  for (unsigned char ch : bytes) seen[ch] = true;
  unsigned char id_of[256];
  for (int b = 0; b < 256; ++b)
    if (seen[b]) {
      id_of[b] = (unsigned char)t.vocab.size();
      t.vocab.push_back((unsigned char)b);
    }
  AMPGRAD_CHECK(!t.vocab.empty(), name << ": the text is empty");
  for (unsigned char& ch : bytes) ch = id_of[ch];
  const size_t n_train = bytes.size() * 9 / 10;
  t.val.assign(bytes.begin() + std::ptrdiff_t(n_train), bytes.end());
  bytes.resize(n_train);
  t.train = std::move(bytes);
  return t;
}

CharText CharText::from_string(const std::string& text, const std::string& name) {
  return tokenize(std::vector<unsigned char>(text.begin(), text.end()), name);
}

CharText CharText::load(const std::string& path) {
  AMPGRAD_CHECK(std::filesystem::exists(path),
                "cannot read the text " << path << " (the default, from Debian's fortunes package, comes with scripts/install-deps.sh)");
  // Its type before it is opened: opening a FIFO would wait for a writer, forever.
  std::vector<unsigned char> bytes(data::input_file_size(path));
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  AMPGRAD_CHECK(f && f.gcount() == std::streamsize(bytes.size()), "error reading " << path);
  return tokenize(std::move(bytes), path);
}

std::string CharText::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t id : ids) s.push_back(char(vocab.at(size_t(id))));
  return s;
}

// B random windows of T + 1 tokens from `tokens`: inputs x the first T, targets y the last T,
// so position t of y is the token that follows x[0..t].   x, y int64 (B, T)
static std::pair<Tensor, Tensor> get_batch(const std::vector<unsigned char>& tokens, int64_t B, int64_t T, Generator& gen, Device device) {
  std::vector<int64_t> x(B * T), y(B * T);
  const int64_t starts = int64_t(tokens.size()) - T;  // windows that fit
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = int64_t(gen.uniform() * double(starts));
    std::copy_n(tokens.begin() + s, T, x.begin() + b * T);
    std::copy_n(tokens.begin() + s + 1, T, y.begin() + b * T);
  }
  return {from_vector(x, {B, T}).to(device), from_vector(y, {B, T}).to(device)};
}

// Next-token cross-entropy over every position: logits (B, T, V), targets (B, T).
static Tensor lm_loss(const Tensor& logits, const Tensor& targets) {
  return nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

// ---- generation

std::vector<int64_t> generate(GPT& model, std::vector<int64_t> ids, int64_t n, double temperature, Generator& gen) {
  AMPGRAD_CHECK(!ids.empty(), "generate: needs at least one token of context");
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const Device device = model.wte->weight.device();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t T = std::min<int64_t>(int64_t(ids.size()), model.config.block_size);  // the context that fits
    Tensor idx = from_vector(std::vector<int64_t>(ids.end() - T, ids.end()), {1, T}).to(device);
    Tensor logits = model.forward(idx).select(1, T - 1).select(0, 0).to(kFloat32).to(Device::cpu());  // (V)
    std::vector<float> l = to_vector<float>(logits);
    int64_t next = std::max_element(l.begin(), l.end()) - l.begin();
    if (temperature > 0) {  // inverse-CDF draw from softmax(l / temperature)
      std::vector<double> p(l.size());
      double total = 0;
      for (size_t v = 0; v < l.size(); ++v) total += p[v] = std::exp((l[v] - l[next]) / temperature);
      double u = gen.uniform() * total;
      for (next = 0; next + 1 < int64_t(p.size()) && u >= p[next]; ++next) u -= p[next];
    }
    ids.push_back(next);
  }
  model.train(was_training);
  return ids;
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
  int64_t params = 0;
  for (const Tensor& p : model->parameters()) params += p.numel();
  log << "gpt: " << c.text_path << " (" << text.train.size() << " train / " << text.val.size() << " val bytes, vocab "
      << mc.vocab_size << ")  layers=" << mc.n_layer << " heads=" << mc.n_head << " embd=" << mc.n_embd << " block=" << T
      << " params=" << params << "  batch=" << c.batch_size << (c.accum_steps > 1 ? " x " + std::to_string(c.accum_steps) : "")
      << " lr=" << c.lr << " warmup=" << c.warmup_steps << " wd=" << c.weight_decay << " amp=" << c.amp << (c.float8 ? " float8=on" : "") << " device=" << device.str()
      << " threads=" << get_num_threads() << (c.ddp ? " ranks=" + std::to_string(ranks) : "") << "\n";

  examples::TextOutput metrics(c.metrics_path, "step,train_loss,val_loss,scale,skipped_steps,ms_per_step\n");
  // Evaluation, in the training precision, on the same random windows every time.
  auto evaluate = [&](const std::vector<unsigned char>& tokens) {
    NoGradGuard no_grad;
    model->eval();
    Generator g = stream(2);
    double total = 0;
    for (int64_t i = 0; i < c.eval_batches; ++i) {
      auto [x, y] = get_batch(tokens, c.batch_size, T, g, device);
      examples::Autocast ac(device.type, precision);
      total += lm_loss(model->forward(x), y).item<double>();
    }
    model->train();
    return total / double(c.eval_batches);
  };

  TrainResult result;
  result.model = model;
  Tensor skipped = zeros({}, TensorOptions().device(device));  // summed where found_inf lives
  int64_t first_step = 1;
  if (!c.resume_path.empty()) {
    const examples::TrainingState ck(c.resume_path);
    for (auto& [k, v] : model_settings(mc, text))
      AMPGRAD_CHECK(ck.meta(k) == v, c.resume_path << ": the saved state's model has another " << k
                                                   << (k == "vocab" ? " (it was trained on " + ck.meta("text") + ")" : ": " + ck.meta(k) + ", this run's " + v));
    const int64_t done = ck.integer("step", 1);
    AMPGRAD_CHECK(done < last_step, c.resume_path << ": the saved state is after step " << done << "; this run ends at step " << last_step
                                                  << " (--steps, --stop-after), so there is nothing left to train");
    ck.warn_if_changed(run_settings(c), log);
    ck.restore(*model, opt, scaler, &schedule, log);
    AMPGRAD_CHECK(schedule.last_epoch() == done,
                  c.resume_path << ": the schedule's epoch " << schedule.last_epoch() << " is not the saved state's step " << done);
    default_generator().set_state(ck.generator("rng.default"));
    batches.set_state(ck.generator("rng.batches"));
    skipped.fill_(double(ck.integer("skipped_steps", 0, done)));
    first_step = done + 1;
    log << "resumed from " << c.resume_path << " after step " << done << "\n";
  }
  std::vector<Tensor> losses;  // read once per evaluation: a read per step would wait for the GPU
  examples::Instruments first_interval(c.autocast_log, c.profile, c.profile_trace, c.memory_peak, device);  // --autocast-log, --profile, --profile-trace, --memory-peak
  auto t0 = Clock::now();
  for (int64_t step = first_step; step <= last_step; ++step) {
    opt.zero_grad();
    Tensor loss = zeros({}, TensorOptions().device(device));  // the step's: the micro-batches' mean
    for (int64_t micro = 0; micro < c.accum_steps; ++micro) {
      auto [x, y] = get_batch(text.train, c.batch_size, T, batches, device);
      if (c.ddp) x = examples::data_parallel::local_rows(x), y = examples::data_parallel::local_rows(y);
      // 1. forward under autocast: the GEMMs in 16 bits, the loss (and on CUDA the softmax and
      //    layer norms) in float32, as the policy table says
      skips.begin_step(x, [&, x = x, y = y] {  // init-captures: clang 14 cannot capture a structured binding
        examples::Autocast ac(device.type, precision);
        return lm_loss(model->forward(x, c.checkpoint_segments), y) / double(c.accum_steps);
      });
      Tensor micro_loss;
      {
        examples::Autocast ac(device.type, precision);
        const Tensor logits = c.checkpoint_segments ? model->forward(x, c.checkpoint_segments) : replica->forward(x);
        micro_loss = lm_loss(logits, y) / double(c.accum_steps);
      }
      // 2. scaled backward: the micro-batches' gradients add up in .grad, to their mean's
      auto backward = [&] { scaler.scale(micro_loss).backward(); };
      if (c.ddp && micro + 1 < c.accum_steps) examples::data_parallel::without_sync(*replica, backward);  // reduced with the last
      else backward();
      loss = loss + micro_loss.detach();
    }
    // 3. once per step: unscale, clip, step unless inf/NaN, update the scale
    scaler.unscale_(opt);
    optim::clip_grad_norm_(opt.params(), c.clip_grad);
    skips.check_loss(0, step, loss, scaler);  // no epochs: named by step
    amp::StepResult stepped = scaler.step(opt);
    if (stepped.found_inf().defined()) skipped = skipped + stepped.found_inf();
    scaler.update();
    skips.end_step(scaler, stepped);
    schedule.step();
    losses.push_back(loss);  // already detached: a sum of detached micro-batch losses

    if (step % c.eval_every == 0 || step == last_step) {
      for (const Tensor& l : losses) result.step_losses.push_back(l.item<float>());
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / double(losses.size());
      losses.clear();
      first_interval.report(log);
      EvalPoint e{step, evaluate(text.train), evaluate(text.val), scaler.get_scale(), skipped.item<int64_t>(), ms};
      result.evals.push_back(e);
      log << "step " << std::setw(5) << step << std::fixed << std::setprecision(4) << "  train_loss " << e.train_loss
          << "  val_loss " << e.val_loss << std::setprecision(1) << "  " << e.ms_per_step << " ms/step";
      if (scaler.is_enabled()) log << std::setprecision(0) << "  scale " << e.scale << "  skipped " << e.skipped_steps;
      log << std::defaultfloat << std::endl;  // a line per evaluation, also through a pipe
      std::ostringstream row;
      row << e.step << "," << e.train_loss << "," << e.val_loss << "," << e.scale << "," << e.skipped_steps << "," << e.ms_per_step << "\n";
      metrics.append(row.str());
      if (!c.save_path.empty()) {
        std::map<std::string, std::string> meta = run_settings(c);
        meta.merge(model_settings(mc, text));
        meta["step"] = std::to_string(step);
        meta["skipped_steps"] = std::to_string(e.skipped_steps);
        meta["rng.default"] = default_generator().get_state().to_string();
        meta["rng.batches"] = batches.get_state().to_string();
        examples::warn_if_nonfinite(*model, c.save_path, log);
        examples::save_training_state(c.save_path, *model, opt, scaler, &schedule, meta);
      }
      t0 = Clock::now();
    }
  }
  if (c.sample_chars > 0) {
    Generator g = stream(3);
    examples::Autocast ac(device.type, precision);
    result.sample = text.decode(generate(*model, {int64_t(text.train[0])}, c.sample_chars, c.temperature, g));
  }
  return result;
}

}  // namespace gpt
