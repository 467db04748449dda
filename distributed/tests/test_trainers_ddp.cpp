// test_trainers_ddp.cpp — the trainers' --ddp on 2 ranks: the GPT against one process on the
// same global batch, and each trainer's saved state, saved by rank 0 alone as the commands do,
// resumed on both ranks to the weights of a run that never stopped, bit for bit.
#include <doctest/doctest.h>

#include <sstream>

#include "distributed/rank_consistency.h"
#include "gpt/trainer.h"
#include "mnist/trainer.h"
#include "trainer_fixtures.h"
#include "mpi_test_util.h"

using namespace ampgrad;
using namespace ampgrad::distributed;

// Rank 0's string on every rank: the path of the saved state rank 0 writes.
static std::string from_rank0(std::string s) {
  int n = int(s.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  s.resize(size_t(n));
  MPI_Bcast(s.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return s;
}

// `whole` trained straight through; `half` of it with rank 0 saving, then `whole` resumed from
// there on every rank: the same weights and the same last loss and scale, bit for bit, on both.
template <class Config, class Train, class Last>
static void check_resume(Config whole, Config half, const std::string& state_path, Train train, Last last) {
  std::ostringstream log;
  const auto straight = train(whole, log);
  if (group().rank() == 0) half.save_path = state_path;  // rank 0 alone writes, as the commands do
  train(half, log);
  group().barrier();  // written before any rank reads it
  whole.resume_path = state_path;
  std::ostringstream resumed_log;
  const auto resumed = train(whole, resumed_log);
  group().barrier();  // read by every rank before rank 0's directory goes
  CHECK(resumed_log.str().find("resumed from " + state_path) != std::string::npos);  // not a fresh run that matched
  CHECK(weights_bytes(*resumed.model) == weights_bytes(*straight.model));
  CHECK(last(resumed) == last(straight));
  check_parameters_match(group(), resumed.model->named_parameters());  // and the replicas agree
}

TEST_CASE("mnist --ddp: rank 0's saved state resumes on 2 ranks bit-identically, under fp16 and the GradScaler") {
  TempDir dir;
  write_synthetic_mnist(dir);
  const mnist::TrainConfig c{.data_dir = dir.path.string(), .epochs = 2, .batch_size = 64 /* 32 per rank */, .threads = 1, .amp = "fp16", .ddp = true};
  mnist::TrainConfig half = c;
  half.epochs = 1;
  check_resume(c, half, from_rank0(dir / "epoch1.safetensors"), mnist::train,
               [](const mnist::TrainResult& r) { return std::pair(r.epochs.back().train_loss, r.epochs.back().scale); });
}

TEST_CASE("gpt --ddp: 2 ranks of 4 rows train as one process of 8, and rank 0's saved state resumes bit-identically") {
  TempDir dir;
  gpt::TrainConfig c = tiny_gpt(write_periodic_text(dir));
  c.steps = 8;  // batch 8: 4 rows per rank
  c.warmup_steps = 2;
  c.eval_every = 4;
  c.sample_chars = 0;
  std::ostringstream log;
  for (int64_t accum : {1, 2}) {  // 2: the first micro-batch's gradient stays local (no_sync), the second reduces the sum
    CAPTURE(accum);
    c.accum_steps = accum;
    c.ddp = false;
    const gpt::TrainResult single = gpt::train(c, log);  // this process alone, the whole batch
    c.ddp = true;
    const gpt::TrainResult ddp = gpt::train(c, log);
    CHECK(log.str().find(" device=cpu,cpu ") != std::string::npos);  // every rank's device, gathered
    // The one process averages the loss over 8 x 16 positions in one sum, each rank over 4 x 16 and
    // the all-reduce the two means: float32 rounding apart (~1e-7 relative per step), which Adam's
    // normalised steps of lr 1e-2 carry over 8 steps to ~1e-5.
    CHECK(max_abs_difference(*single.model, *ddp.model) < 1e-4);  // 9.5e-6 with accum 1
    CHECK(max_abs_difference(*single.model, *ddp.model) > 0);     // the rounding did differ: each rank took its half
    CHECK(ddp.evals.back().val_loss == doctest::Approx(single.evals.back().val_loss).epsilon(1e-4));
    CHECK(ddp.evals.back().val_loss < ddp.evals.front().val_loss);  // and it learned
  }
  c.accum_steps = 1;

  c.amp = "fp16";
  gpt::TrainConfig half = c;
  half.stop_after = 4;
  check_resume(c, half, from_rank0(dir / "step4.safetensors"), gpt::train,
               [](const gpt::TrainResult& r) { return std::pair(r.evals.back().val_loss, r.evals.back().scale); });
}
