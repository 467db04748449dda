// random.h — a seedable Generator and the random creation functions.
// Results are reproducible across runs, compilers and platforms: the engine is std::mt19937_64
// (its output sequence is fixed by the standard) and the float conversions are written here,
// not left to std::*_distribution, whose algorithms differ between standard libraries.
//
//   manual_seed(0);
//   Tensor a = randn({2, 3});      // same values on every run
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}
  void manual_seed(uint64_t seed) { std::lock_guard l(mu_); engine_.seed(seed); normal_spare_.reset(); }
  double uniform();  // [0, 1), 53 random bits
  double normal();   // standard normal, Box–Muller
  uint64_t next();   // raw 64 bits
  std::mutex& mutex() { return mu_; }

  // torch.get_rng_state / set_rng_state: the whole state, so a stretch of draws can be replayed
  // (activation checkpointing redraws a region's dropout masks this way).
  struct State {
    std::mt19937_64 engine;
    std::optional<double> normal_spare;
    // As text, for a saved state: the engine as the standard library prints it (libstdc++: its
    // 312 words and position; libc++ writes another form, so a state moves between builds on
    // one library only), then the spare normal exactly (hex float) or "-". from_string raises
    // on anything else.
    std::string to_string() const;
    static State from_string(const std::string& text);
  };
  State get_state() { std::lock_guard l(mu_); return {engine_, normal_spare_}; }
  void set_state(const State& s) { std::lock_guard l(mu_); engine_ = s.engine; normal_spare_ = s.normal_spare; }

 private:
  std::mt19937_64 engine_;
  std::optional<double> normal_spare_;
  std::mutex mu_;
};

Generator& default_generator();

// Notes, while it lives, every Generator that random creation on this thread draws from, with
// its state before the first draw. Activation checkpointing replays a region's
// draws, dropout masks included, from these. Nested recorders all take note.
class DrawRecorder {
 public:
  using Drawn = std::vector<std::pair<Generator*, Generator::State>>;
  DrawRecorder();
  ~DrawRecorder();
  DrawRecorder(const DrawRecorder&) = delete;
  DrawRecorder& operator=(const DrawRecorder&) = delete;
  const Drawn& drawn() const { return drawn_; }

 private:
  friend Generator& draw_source(Generator* gen);
  Drawn drawn_;
  DrawRecorder* prev_;
};

// The generator a random function draws from: `gen`, or the default one; noted by the recorders.
Generator& draw_source(Generator* gen);
void manual_seed(uint64_t seed);  // seeds the default generator

Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);   // U[0, 1)
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);  // N(0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);  // int64 unless opts choose
Tensor randperm(int64_t n, Generator* gen = nullptr);  // int64 permutation of [0, n)

// In-place fills (no autograd): initialisers use these.
Tensor& uniform_(Tensor& t, double low, double high, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean, double std, Generator* gen = nullptr);

}  // namespace ampgrad
