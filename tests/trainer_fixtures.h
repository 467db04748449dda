// trainer_fixtures.h — what the trainers' suites share (tests/test_mnist.cpp, tests/test_gpt.cpp,
// distributed/tests/test_trainers_ddp.cpp): small deterministic data and settings for each trainer, a model's
// state as bytes for bit-identity checks, and the check that a command refuses bad flags.
#pragma once
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "data/idx.h"
#include "gpt/trainer.h"
#include "nn/module.h"
#include "tensor/random.h"
#include "test_util.h"

// 600 train / 200 test 28x28 images: random pixels, label = which of 10 horizontal bands is
// brightest. Learnable in an epoch, and deterministic.
inline void write_synthetic_mnist(const TempDir& dir) {
  ampgrad::Generator g(123);
  for (auto [split, n] : {std::pair<std::string, int64_t>{"train", 600}, {"t10k", 200}}) {
    ampgrad::data::IdxImages img{n, 28, 28, std::vector<uint8_t>(n * 784)};
    std::vector<uint8_t> labels(n);
    for (int64_t i = 0; i < n; ++i) {
      labels[i] = uint8_t(g.next() % 10);
      for (int p = 0; p < 784; ++p) {
        int band = (p / 28) * 10 / 28;
        img.pixels[i * 784 + p] = uint8_t(g.next() % 128 + (band == labels[i] ? 127 : 0));
      }
    }
    ampgrad::data::write_idx_images(dir / (split + "-images-idx3-ubyte"), img);
    ampgrad::data::write_idx_labels(dir / (split + "-labels-idx1-ubyte"), labels);
  }
}

// 37 distinct characters, each always followed by the same one; 60 periods, 2,220 bytes.
inline const std::string kPeriod = "abcdefghijklmnopqrstuvwxyz0123456789\n";

inline std::string write_periodic_text(const TempDir& dir) {
  std::ofstream f(dir / "text.txt", std::ios::binary);
  for (int i = 0; i < 60; ++i) f << kPeriod;
  return dir / "text.txt";
}

// A 2-layer GPT on that text, 60 steps of batch 8, greedy sampling: seconds on one thread.
inline gpt::TrainConfig tiny_gpt(const std::string& path) {
  gpt::TrainConfig c;
  c.text_path = path;
  c.model = {.block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32};
  c.steps = 60;
  c.batch_size = 8;
  c.lr = 1e-2;
  c.warmup_steps = 5;
  c.eval_every = 30;
  c.eval_batches = 2;
  c.threads = 1;
  c.sample_chars = 2 * int64_t(kPeriod.size());
  c.temperature = 0;
  return c;
}

// Parameters and buffers, in state_dict order, as their bytes.
inline std::vector<uint8_t> weights_bytes(const ampgrad::nn::Module& m) {
  std::vector<uint8_t> out;
  for (auto& [k, t] : m.state_dict()) {
    ampgrad::Tensor c = t.contiguous();
    const uint8_t* p = (const uint8_t*)c.raw_data();
    out.insert(out.end(), p, p + c.numel() * c.element_size());
  }
  return out;
}

// `command` followed by each case's flags must exit non-zero, printing that case's message.
inline void check_flags_refused(const std::string& command, const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& c : cases) {  // no structured binding: clang 14's CAPTURE cannot name one
    const std::string flags = c.first, message = c.second;
    CAPTURE(flags);
    const CommandResult r = run_command(command + " " + flags);
    CHECK(r.status != 0);
    CHECK_MESSAGE(r.output.find(message) != std::string::npos, r.output);
  }
}
