// test_gpt.cpp — the GPT example end to end (examples/gpt), on a text whose every character has
// one successor: a model that learned it continues it exactly. Training is deterministic (a
// rerun gives the same losses bit for bit), checkpointing the blocks changes nothing, micro-batches
// accumulate to their whole batch, and fp16 with a GradScaler and bf16 learn it as float32 does.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "data/safetensors.h"
#include "devices.h"
#include "gpt/trainer.h"
#include "trainer_fixtures.h"

using namespace ampgrad;

TEST_CASE("CharText: the distinct bytes in order, a 90/10 split, and decode inverts encode") {
  gpt::CharText t = gpt::CharText::from_string("banana bread!");
  CHECK(std::string(t.vocab.begin(), t.vocab.end()) == " !abdenr");
  CHECK(t.train.size() == 11);  // 13 * 9 / 10
  CHECK(t.val.size() == 2);
  std::vector<int64_t> all(t.train.begin(), t.train.end());
  all.insert(all.end(), t.val.begin(), t.val.end());
  CHECK(t.decode(all) == "banana bread!");
  CHECK(error_of([] { gpt::CharText::load("/nonexistent/text"); }).find("cannot read the text /nonexistent/text") == 0);
  CHECK(error_of([] { gpt::CharText::from_string(""); }) == "text: the text is empty");
}

TEST_CASE("the optimizer's recipe: decay for the matrices only, a warmup, then a cosine to a tenth") {
  gpt::TrainConfig c;
  c.steps = 110;
  c.warmup_steps = 10;
  gpt::GPT model({.vocab_size = 5, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8});
  const auto groups = gpt::adamw_groups(model, c);
  REQUIRE(groups.size() == 2);
  // Per block 4 matrices (attention's qkv and output projections, the MLP's two) and 8 vectors
  // (their 4 biases, two LayerNorms' gains and biases); around the blocks the matrices wte, wpe
  // and lm_head (no bias) and ln_f's 2 vectors: 11 and 18 of the 29 parameters.
  CHECK(groups[0].params.size() == 11);
  CHECK(groups[1].params.size() == 18);
  CHECK(model.parameters().size() == 29);
  for (const Tensor& p : groups[0].params) CHECK(p.dim() == 2);
  for (const Tensor& p : groups[1].params) CHECK(p.dim() == 1);
  CHECK(groups[0].options.weight_decay == c.weight_decay);
  CHECK(groups[1].options.weight_decay == 0);
  CHECK(groups[0].options.lr == c.lr);
  CHECK(groups[1].options.lr == c.lr);

  // warmup: 1/10 ... 10/10; then 0.1 + 0.9·(1 + cos(π·(done − 10)/100))/2: 1 at 10, 0.55
  // halfway (60), 0.1 at the end (110)
  CHECK(gpt::lr_factor(c, 0) == doctest::Approx(0.1));
  CHECK(gpt::lr_factor(c, 4) == doctest::Approx(0.5));
  CHECK(gpt::lr_factor(c, 9) == doctest::Approx(1.0));
  CHECK(gpt::lr_factor(c, 10) == doctest::Approx(1.0));
  CHECK(gpt::lr_factor(c, 60) == doctest::Approx(0.55));
  CHECK(gpt::lr_factor(c, 110) == doctest::Approx(0.1));
  c.warmup_steps = 0;  // the plain cosine
  CHECK(gpt::lr_factor(c, 0) == doctest::Approx(1.0));
  CHECK(gpt::lr_factor(c, 55) == doctest::Approx(0.55));
}

DEVICE_TEST_CASE("the GPT learns a periodic text and continues it exactly") {
  TempDir dir;
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  c.device = dev.is_cuda() ? "cuda" : "cpu";
  std::ostringstream log;
  gpt::TrainResult r = gpt::train(c, log);
  REQUIRE(r.step_losses.size() == 60);
  // GPT-2's init makes each logit the dot product of a unit-variance row (ln_f's output) with 32
  // weights of sd 0.02: logits of sd σ = 0.02·√32 = 0.11 around 0, so the first loss is the
  // uniform guess ln 37 = 3.611 plus about σ²/2 = 0.006
  CHECK(std::abs(r.step_losses[0] - (std::log(37.0) + 0.006)) < 0.03);
  REQUIRE(r.evals.size() == 2);
  CHECK(r.evals[1].step == 60);
  CHECK(r.evals[1].val_loss < 0.05);  // from 3.61: on average e^−0.05 = 95% on the right character
  CHECK(r.sample == (kPeriod + kPeriod + "a"));  // greedy decoding from "a" reproduces the text
  CHECK(log.str().find("vocab 37") != std::string::npos);
  // the sample reaches the log as it is drawn: generate hands each token over as it draws it
  CHECK(log.str().find(") ---\n" + r.sample + "\n") != std::string::npos);
  std::vector<int64_t> handed;
  Generator g(3);
  const std::vector<int64_t> ids = gpt::generate(*r.model, {0}, 5, 0.8, g, [&](int64_t id) { handed.push_back(id); });
  CHECK(std::vector<int64_t>(ids.begin() + 1, ids.end()) == handed);
}

TEST_CASE("the GPT's loss and gradients equal PyTorch's for the same weights and batch") {
  // A float64 GPT (vocab 7, block 5, 2 layers, 2 heads, 8 wide) with parameter k (in this
  // listing's order), element i set to 0.3 sin(0.7 i + k + 1); the constants are PyTorch 1.13's
  // for the same weights (bench/torch_gpt.py's model, which writes the layers out itself) and
  // batch: the loss and each parameter's gradient norm.
  const std::vector<std::pair<std::string, double>> torch_grad_norms = {
      {"wte.weight", 0.00865068610502956}, {"wpe.weight", 0.00678123494468045},
      {"h.0.ln_1.weight", 0.00120713716982281}, {"h.0.ln_1.bias", 0.000548280708217763},
      {"h.0.attn.c_attn.weight", 0.00068171592917614}, {"h.0.attn.c_attn.bias", 0.000443050063171479},
      {"h.0.attn.c_proj.weight", 0.00792776563712655}, {"h.0.attn.c_proj.bias", 0.00585102866789464},
      {"h.0.ln_2.weight", 0.00178460576776442}, {"h.0.ln_2.bias", 0.00124787823033891},
      {"h.0.mlp.c_fc.weight", 0.000581980848635026}, {"h.0.mlp.c_fc.bias", 0.000651442580236109},
      {"h.0.mlp.c_proj.weight", 0.00828574403861134}, {"h.0.mlp.c_proj.bias", 0.00577870895495935},
      {"h.1.ln_1.weight", 0.000507641642441255}, {"h.1.ln_1.bias", 0.000285382898310492},
      {"h.1.attn.c_attn.weight", 0.000240150219664451}, {"h.1.attn.c_attn.bias", 0.00023557884185959},
      {"h.1.attn.c_proj.weight", 0.00706070811055257}, {"h.1.attn.c_proj.bias", 0.00575893832621408},
      {"h.1.ln_2.weight", 0.00111466087313536}, {"h.1.ln_2.bias", 0.00120379937646624},
      {"h.1.mlp.c_fc.weight", 0.000465730984433621}, {"h.1.mlp.c_fc.bias", 0.000576353837654108},
      {"h.1.mlp.c_proj.weight", 0.00714424286374997}, {"h.1.mlp.c_proj.bias", 0.00562017954520254},
      {"ln_f.weight", 0.0832601723914618}, {"ln_f.bias", 0.0795296826500249},
      {"lm_head.weight", 0.112865847041979}};
  gpt::GPT model({.vocab_size = 7, .block_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 8});
  model.to(kFloat64);
  const nn::NamedTensors params = model.named_parameters();
  REQUIRE(params.size() == torch_grad_norms.size());
  for (size_t k = 0; k < params.size(); ++k) {
    REQUIRE(params[k].first == torch_grad_norms[k].first);
    Tensor p = params[k].second;
    std::vector<double> v(size_t(p.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.3 * std::sin(0.7 * double(i) + double(k) + 1);
    NoGradGuard no_grad;
    p.copy_(from_vector(v, p.shape()));
  }
  Tensor x = from_vector<int64_t>({0, 1, 2, 3, 4, 6, 5, 4, 3, 2, 1, 1, 2, 2, 0}, {3, 5});
  Tensor y = from_vector<int64_t>({1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 1, 2, 2, 0, 6}, {3, 5});
  Tensor loss = nn::functional::cross_entropy(model.forward(x).reshape({15, 7}), y.reshape({15}));
  loss.backward();
  // float64 throughout: the two libraries differ by summation order alone, ~1e-15 relative
  // (the gradients pass through ~40 ops, so a margin of 1e-10)
  CHECK(loss.item<double>() == doctest::Approx(1.90658275544918).epsilon(1e-12));
  for (size_t k = 0; k < params.size(); ++k) {
    CAPTURE(params[k].first);
    const double norm = std::sqrt(sum(params[k].second.grad() * params[k].second.grad()).item<double>());
    CHECK(norm == doctest::Approx(torch_grad_norms[k].second).epsilon(1e-10));
  }
}

TEST_CASE("GPT training is bit-identical on a rerun and with its blocks checkpointed") {
  TempDir dir;
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  c.model.dropout = 0.1;  // the checkpointed rerun must redraw the same masks
  c.steps = 20;
  c.sample_chars = 0;
  std::ostringstream log;
  const std::vector<float> first = gpt::train(c, log).step_losses;
  CHECK(gpt::train(c, log).step_losses == first);
  for (int64_t segments : {1, 2}) {
    c.checkpoint_segments = segments;
    CHECK(gpt::train(c, log).step_losses == first);
  }
  c.checkpoint_segments = 3;
  CHECK(error_of([&] { gpt::train(c, log); }) == "--checkpoint must be in [0, 2] (the number of layers), got 3");
}

TEST_CASE("a GPT run stopped, saved and resumed is the uninterrupted run, bit for bit") {
  TempDir dir;
  const std::string ck = dir / "gpt.safetensors";
  for (std::string amp : {"off", "fp16"}) {
    CAPTURE(amp);
    gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
    c.model.dropout = 0.1;  // the dropout masks go on from the saved generator state
    c.steps = 24;
    c.eval_every = 6;
    c.sample_chars = 8;
    c.temperature = 1;
    c.amp = amp;
    std::ostringstream log;
    const gpt::TrainResult straight = gpt::train(c, log);
    // A time-limited job: 10 steps of the 24-step schedule (10 is not an evaluation step, so
    // stopping makes it one), saved, then resumed to the end.
    c.stop_after = 10;
    c.save_path = ck;
    const gpt::TrainResult stopped = gpt::train(c, log);
    REQUIRE(stopped.step_losses.size() == 10);
    CHECK(stopped.evals.back().step == 10);
    c.stop_after = 0;
    c.save_path = "";
    c.resume_path = ck;
    std::ostringstream resumed_log;
    const gpt::TrainResult resumed = gpt::train(c, resumed_log);
    CHECK(resumed_log.str().find("resumed from " + ck + " after step 10") != std::string::npos);
    CHECK(resumed_log.str().find("warning") == std::string::npos);
    CHECK(resumed_log.str().find("note") == std::string::npos);
    CHECK(std::vector<float>(straight.step_losses.begin() + 10, straight.step_losses.end()) == resumed.step_losses);
    REQUIRE(resumed.evals.size() == 3);  // steps 12, 18, 24
    for (size_t i = 0; i < 3; ++i) {
      const gpt::EvalPoint &want = straight.evals[i + 1], &got = resumed.evals[i];
      CHECK(got.step == want.step);
      CHECK(got.val_loss == want.val_loss);
      CHECK(got.scale == want.scale);
      CHECK(got.skipped_steps == want.skipped_steps);
    }
    const nn::StateDict a = straight.model->state_dict(), b = resumed.model->state_dict();
    for (size_t i = 0; i < a.size(); ++i) CHECK(to_vector<float>(a[i].second) == to_vector<float>(b[i].second));
    CHECK(resumed.sample == straight.sample);
  }

  // Other batches or schedule are a warning. The count of skipped steps goes on from the
  // saved state's: planting 3 there adds 3 to the run's.
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  c.resume_path = ck;
  c.amp = "fp16";
  c.seed = 5;
  std::ostringstream log;
  const int64_t skipped = gpt::train(c, log).evals.back().skipped_steps;
  CHECK(log.str().find("warning: " + ck + " was trained with seed=0, this run uses seed=5") != std::string::npos);
  data::SafeTensors file = data::load_safetensors(ck);
  CHECK(file.metadata.at("skipped_steps") == "0");
  file.metadata["skipped_steps"] = "3";
  data::save_safetensors(ck, file.tensors, file.metadata);
  CHECK(gpt::train(c, log).evals.back().skipped_steps == skipped + 3);
  // Another text's vocabulary, or another shape of model, is an error.
  {
    std::ofstream f(dir / "other.txt");
    for (int i = 0; i < 60; ++i) f << "the other text, with its own bytes; ";
  }
  c.text_path = dir / "other.txt";
  CHECK(error_of([&] { gpt::train(c, log); }).find(ck + ": the saved state's model has another vocab (it was trained on " + (dir / "text.txt")) ==
        0);
  c = tiny_gpt(write_periodic_text(dir));
  c.resume_path = ck;
  c.model.n_head = 4;
  CHECK(error_of([&] { gpt::train(c, log); }) == ck + ": the saved state's model has another heads: 2, this run's 4");
  c.model.n_head = 2;
  c.stop_after = 61;
  CHECK(error_of([&] { gpt::train(c, log); }) == "--stop-after must be in [0, --steps], got 61");
  c.stop_after = 10;  // the saved state is after step 10
  CHECK(error_of([&] { gpt::train(c, log); }) ==
        ck + ": the saved state is after step 10; this run ends at step 10 (--steps, --stop-after), so there is nothing left to train");
  // Flags that the saved state overrides are named: its base rate, not this run's, goes on.
  c.stop_after = 12;
  c.lr = 0.02;
  std::ostringstream override_log;
  gpt::train(c, override_log);
  CHECK(override_log.str().find("note: " + ck + " sets the schedule's base_lrs.0 to 0.01 (this run's flags gave 0.02)") != std::string::npos);
}

TEST_CASE("GPT gradient accumulation: two micro-batches of 4 step as one batch of 8") {
  // The batch stream draws windows in order, so micro-batches 4 + 4 are the batch of 8's windows,
  // and the mean of their two means is its mean: the steps differ by float32 summation order
  // alone, ~1e-7 of the loss a step, which 20 Adam steps grow to no more than ~1e-5.
  TempDir dir;
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  c.steps = 20;
  c.sample_chars = 0;
  std::ostringstream log;
  const std::vector<float> whole = gpt::train(c, log).step_losses;
  c.batch_size = 4;
  c.accum_steps = 2;
  const std::vector<float> split = gpt::train(c, log).step_losses;
  REQUIRE(split.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) CHECK(split[i] == doctest::Approx(whole[i]).epsilon(1e-4));
  c.accum_steps = 1;  // and not by chance: half the batch alone takes other steps
  const std::vector<float> half = gpt::train(c, log).step_losses;
  CHECK(std::abs(half[0] - whole[0]) > 1e-3);
}

TEST_CASE("GPT under fp16 with a GradScaler and under bf16 learns as float32 does") {
  TempDir dir;
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  std::ostringstream log;
  const gpt::TrainResult f32 = gpt::train(c, log);
  for (std::string amp : {"fp16", "bf16"}) {
    CAPTURE(amp);
    c.amp = amp;
    gpt::TrainResult r = gpt::train(c, log);
    // the same first batch and weights: the first loss differs by the 16-bit roundings only. The
    // logits (sd 0.11, so |z| < 0.5) each carry at most a few bfloat16 roundings of 2^−9 of
    // their size, under 0.005, and the mean loss moves by no more than the largest logit error
    CHECK(std::abs(r.step_losses[0] - f32.step_losses[0]) < 0.005);
    CHECK(r.evals.back().val_loss < 0.05);
    CHECK(r.sample == f32.sample);
    // each skipped step halved the scale, and 60 steps are too few for it to grow (every 2,000)
    const gpt::EvalPoint& last = r.evals.back();
    CHECK(last.scale == (amp == "fp16" ? std::ldexp(65536.0, -int(last.skipped_steps)) : 1.0));
    if (amp == "bf16") CHECK(last.skipped_steps == 0);
  }
}

TEST_CASE("the GPT trainer names bad settings") {
  TempDir dir;
  std::ostringstream log;
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  c.model.n_embd = 30;
  c.model.n_head = 4;
  CHECK(error_of([&] { gpt::train(c, log); }) == "GPT: n_embd 30 is not a multiple of n_head 4");
  c = tiny_gpt(write_periodic_text(dir));
  c.model.block_size = 300;
  CHECK(error_of([&] { gpt::train(c, log); }).find("bytes are too few for block_size 300") != std::string::npos);
  c = tiny_gpt(write_periodic_text(dir));
  c.amp = "fp8";
  CHECK(error_of([&] { gpt::train(c, log); }) == "--amp must be off, fp16 or bf16, got 'fp8'");
}

TEST_CASE("the gpt command refuses nonsensical flags before any work, naming the flag and the value") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--steps 0", "--steps: must be a whole number in [1, 1099511627776], got '0'"},
      {"--lr inf", "--lr: must be a finite number >= 0, got 'inf'"},
      {"--threads -3", "--threads: must be a whole number in [0, 1024], got '-3'"},
      {"--clip-grad -1", "--clip-grad: must be a finite number > 0, got '-1'"},
      {"--clip-grad nan", "--clip-grad: must be a finite number > 0, got 'nan'"},
      {"--seed -1", "--seed: must be a whole number in [0, 9223372036854775807], got '-1'"},
      {"--batch-size 1e20", "--batch-size: must be a whole number in [1, 1048576], got '1e20'"},
      {"--accum-steps 0", "--accum-steps: must be a whole number in [1, 1048576], got '0'"},
      {"--dropout nan", "--dropout: must be a finite number >= 0 and <= 0.99, got 'nan'"},
  };
  check_flags_refused(TRAINER_COMMAND " --text /nonexistent", cases);
}

TEST_CASE("GPT: an unwritable --save fails before training, and a directory or a device as text or saved state is named") {
  TempDir dir;
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  std::ostringstream log;
  c.save_path = dir / "no-such-dir/ckpt.safetensors";
  const std::string msg = error_of([&] { gpt::train(c, log); });
  CHECK_MESSAGE(msg.find("--save " + c.save_path + ": cannot create the temporary file " + c.save_path + ".tmp.") == 0, msg);
  CHECK(log.str().empty());
  c.save_path.clear();
  c.resume_path = dir.path.string();
  CHECK(error_of([&] { gpt::train(c, log); }) == dir.path.string() + ": cannot read it as a file: it is a directory");
  c.resume_path.clear();
  c.text_path = "/dev/null";
  CHECK(error_of([&] { gpt::train(c, log); }) == "/dev/null: cannot read it as a file: it is a device or other special file");
  c.text_path = dir.path.string();
  CHECK(error_of([&] { gpt::train(c, log); }) == dir.path.string() + ": cannot read it as a file: it is a directory");
}

TEST_CASE("GPT: saved state step counts that are not counts are refused, naming the key and the value") {
  TempDir dir;
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  c.steps = 4;
  c.eval_every = 2;
  c.stop_after = 2;
  c.sample_chars = 0;
  c.save_path = dir / "ckpt.safetensors";
  std::ostringstream log;
  gpt::train(c, log);
  const data::SafeTensors saved = data::load_safetensors(c.save_path);
  c.resume_path = dir / "bad.safetensors";
  c.save_path.clear();
  c.stop_after = 0;
  auto resume_error = [&](const std::string& key, const std::string& value) {
    std::map<std::string, std::string> meta = saved.metadata;
    meta[key] = value;
    data::save_safetensors(c.resume_path, saved.tensors, meta);
    return error_of([&] { gpt::train(c, log); });
  };
  const std::string step = c.resume_path + ": metadata 'step' must be a whole number in [1, 9223372036854775807], got ";
  CHECK(resume_error("step", "1e300") == step + "1e+300");
  CHECK(resume_error("step", "nan") == step + "nan");
  CHECK(resume_error("step", "-3") == step + "-3");
  CHECK(resume_error("skipped_steps", "1e300") ==
        c.resume_path + ": metadata 'skipped_steps' must be a whole number in [0, 2], got 1e+300");
  CHECK(resume_error("scheduler.last_epoch", "1e300") ==
        "LRScheduler::load_state_dict: 'last_epoch' must be a whole number in [0, 9223372036854775807], got 1e+300");
}

// ---- when steps go non-finite (examples/failure_watch.h, diagnostics/skip_explainer.h) ----

TEST_CASE("GPT: a rate of 1e30 overflows the weights: bf16 stops at the NaN loss and fp16 after --max-skipped-steps, each naming the layer") {
  TempDir dir;
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  c.lr = 1e30, c.warmup_steps = 0, c.sample_chars = 0, c.amp = "bf16";
  std::ostringstream log;
  const std::string stop = error_of([&] { gpt::train(c, log); });
  CHECK(stop.find("stopped at step 2: the loss is nan, with no GradScaler to skip the step\n") == 0);
  CHECK(stop.find("\n  ... and 21 more parameters\n") != std::string::npos);  // 29 tensors, 8 shown
  CHECK(stop.find("first inf/NaN: forward, op linear, module model.h.0.attn.c_attn, ran in bfloat16 (policy row linear: lower_precision)\n") !=
        std::string::npos);
  const CommandResult r = run_command(std::string(TRAINER_COMMAND) + " --text " + std::string(dir / "text.txt") +
                                      " --steps 20 --lr 1e30 --warmup-steps 0 --block-size 16 --layers 2 --heads 2 --embd 32 --batch-size 8 "
                                      "--threads 1 --sample 0 --amp fp16 --max-skipped-steps 3");
  CAPTURE(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("gpt: stopped at step 4: 3 optimizer steps in a row were skipped (--max-skipped-steps 3), each for inf/NaN in its "
                      "gradients; the loss scale is now 8192\n") != std::string::npos);
  CHECK(r.output.find("first inf/NaN: forward, op to, no module's parameter (it ran after module model.h.0.ln_1), ran in float16 (policy row "
                      "linear: lower_precision)\n") != std::string::npos);
}
