// fuzz_training_state.cpp — libFuzzer harness for the training-state restore
// (examples/training_state.h) as the trainers use it: open, compare settings, restore the
// model, optimizer, scaler and schedule the saved state names, read the step; then the restored
// run must take a step. A restored scaler whose scale is not positive and finite would skip
// every later step without a word, so that is a finding too.
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>

#include "fuzz_input.h"
#include "tiny_run.h"
#include "training_state.h"

using namespace ampgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_path("training.safetensors");
  fuzz::new_input(path, data, size);
  std::optional<examples::TrainingState> ck;
  std::string optimizer;
  if (fuzz::refused([&] { optimizer = ck.emplace(path).meta("optimizer"); })) return 0;
  if (optimizer != "sgd" && optimizer != "adamw") return 0;
  fuzz::TinyRun run(optimizer);
  std::ostringstream log;
  if (fuzz::refused([&] {
        ck->warn_if_changed({{"seed", "0"}, {"batch_size", "2"}}, log);
        ck->restore(*run.model, *run.opt, run.scaler, run.schedule.get(), log);
        (void)ck->number("step");
      }))
    return 0;
  const double scale = run.scaler.get_scale();
  if (!(std::isfinite(scale) && scale > 0)) std::abort();
  // What restore accepted must train: an Error from this step is a finding, not a refusal.
  try {
    run.step();
  } catch (const Error& e) {
    std::fprintf(stderr, "the restored run cannot take a step: %s\n", e.what());
    std::abort();
  }
  return 0;
}
