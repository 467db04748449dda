// test_gpt.cpp — the GPT example end to end (examples/gpt), on a text whose every character has
// one successor: a model that learned it continues it exactly. Training is deterministic (a
// rerun gives the same losses bit for bit), checkpointing the blocks changes nothing, and fp16
// with a GradScaler and bf16 learn it as float32 does.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "devices.h"
#include "gpt/trainer.h"
#include "test_util.h"

using namespace ampgrad;

// 37 distinct characters, each always followed by the same one; 60 periods, 2,220 bytes.
static const std::string kPeriod = "abcdefghijklmnopqrstuvwxyz0123456789\n";

static std::string write_periodic_text(const TempDir& dir) {
  std::ofstream f(dir / "text.txt", std::ios::binary);
  for (int i = 0; i < 60; ++i) f << kPeriod;
  return dir / "text.txt";
}

static gpt::TrainConfig tiny(const std::string& path) {
  gpt::TrainConfig c;
  c.text_path = path;
  c.model = {.block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32};
  c.steps = 60;
  c.batch_size = 8;
  c.lr = 1e-2;
  c.eval_every = 30;
  c.eval_batches = 2;
  c.threads = 1;
  c.sample_chars = 2 * int64_t(kPeriod.size());
  c.temperature = 0;
  return c;
}

TEST_CASE("CharText: the distinct bytes in order, a 90/10 split, and decode inverts encode") {
  gpt::CharText t = gpt::CharText::from_string("banana bread!");
  CHECK(std::string(t.vocab.begin(), t.vocab.end()) == " !abdenr");
  CHECK(t.train.size() == 11);  // 13 * 9 / 10
  CHECK(t.val.size() == 2);
  std::vector<int64_t> all = t.train;
  all.insert(all.end(), t.val.begin(), t.val.end());
  CHECK(t.decode(all) == "banana bread!");
  CHECK(error_of([] { gpt::CharText::load("/nonexistent/text"); }).find("cannot read the text /nonexistent/text") == 0);
  CHECK(error_of([] { gpt::CharText::from_string(""); }) == "text: the text is empty");
}

DEVICE_TEST_CASE("the GPT learns a periodic text and continues it exactly") {
  TempDir dir;
  gpt::TrainConfig c = tiny(write_periodic_text(dir));
  c.device = dev.is_cuda() ? "cuda" : "cpu";
  std::ostringstream log;
  gpt::TrainResult r = gpt::train(c, log);
  REQUIRE(r.step_losses.size() == 60);
  // GPT-2's init gives logits of about ±0.1: the first loss is ln 37 = 3.611, the uniform guess
  CHECK(std::abs(r.step_losses[0] - std::log(37.0)) < 0.05);
  REQUIRE(r.evals.size() == 2);
  CHECK(r.evals[1].step == 60);
  CHECK(r.evals[1].val_loss < 0.05);  // from 3.61: the model predicts almost every character
  CHECK(r.sample == (kPeriod + kPeriod + "a"));  // greedy decoding from "a" reproduces the text
  CHECK(log.str().find("vocab 37") != std::string::npos);
}

TEST_CASE("GPT training is bit-identical on a rerun and with its blocks checkpointed") {
  TempDir dir;
  gpt::TrainConfig c = tiny(write_periodic_text(dir));
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

TEST_CASE("GPT under fp16 with a GradScaler and under bf16 learns as float32 does") {
  TempDir dir;
  gpt::TrainConfig c = tiny(write_periodic_text(dir));
  std::ostringstream log;
  const gpt::TrainResult f32 = gpt::train(c, log);
  for (std::string amp : {"fp16", "bf16"}) {
    CAPTURE(amp);
    c.amp = amp;
    gpt::TrainResult r = gpt::train(c, log);
    // the same first batch and weights: the first loss differs by the 16-bit roundings only
    CHECK(std::abs(r.step_losses[0] - f32.step_losses[0]) < 0.01);
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
  gpt::TrainConfig c = tiny(write_periodic_text(dir));
  c.model.n_embd = 30;
  c.model.n_head = 4;
  CHECK(error_of([&] { gpt::train(c, log); }) == "GPT: n_embd 30 is not a multiple of n_head 4");
  c = tiny(write_periodic_text(dir));
  c.model.block_size = 300;
  CHECK(error_of([&] { gpt::train(c, log); }).find("bytes are too few for block_size 300") != std::string::npos);
  c = tiny(write_periodic_text(dir));
  c.amp = "fp8";
  CHECK(error_of([&] { gpt::train(c, log); }) == "--amp must be off, fp16 or bf16, got 'fp8'");
}
