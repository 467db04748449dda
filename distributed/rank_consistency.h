// rank_consistency.h — AMP across ranks, and the check that replicas agree.
//
// Why DDP needs no extra collective for the GradScaler: DDP all-reduces gradients during backward,
// before the scaler unscales them, and every rank receives the same reduced bits. An inf or NaN
// in one rank's *local* gradient is in the sum, hence in every rank's reduced gradient; every
// rank's unscale_ finds it, every rank skips the step, and every rank's scale and growth tracker
// move the same way. (tests/test_ddp.cpp plants an overflow on one rank and checks this each step.)
//
// Where ranks can still diverge, the collectives below restore agreement:
//   - a scaler loaded on one rank only (rank 0 read the saved state): broadcast_scaler_state;
//   - unscale_ before gradients are synchronised (a manual all-reduce after clipping, or a
//     per-rank inf check): all_reduce_found_inf, a max over ranks, before step();
//   - anything else: check_parameters_match, which AMPGRAD_DDP_CHECK=N runs every N forwards.
// And before any of it, what must agree for the ranks to meet in the same collectives at all:
// check_same_on_every_rank, for a run's settings (the trainers) and the model's parameters (DDP).
//
//   scaler.unscale_(opt);  distributed::all_reduce_found_inf(scaler, opt, pg);  scaler.step(opt);
#pragma once
#include "amp/grad_scaler.h"
#include "distributed/process_group.h"
#include "nn/module.h"

namespace ampgrad::distributed {

// Rank 0's scale, growth tracker and options on every rank.
void broadcast_scaler_state(amp::GradScaler& scaler, ProcessGroup& pg);

// found_inf = max over ranks of found_inf, for the optimizer unscale_ has run for: one rank's
// overflow skips the step everywhere.
void all_reduce_found_inf(amp::GradScaler& scaler, const optim::Optimizer& optimizer, ProcessGroup& pg);

// Every rank's `lines` against rank 0's: returns quietly on every rank when all are equal, else
// raises on every rank the same Error, "<what> differ between ranks: rank 0 has '<line>', rank r
// has '<line>'" for the first rank and line that differ. One all-gather of a hash when all agree.
void check_same_on_every_rank(ProcessGroup& pg, const std::string& what, const std::vector<std::string>& lines);

// Raises an Error naming the first parameter (in `params` order) whose bytes differ between
// ranks, with each rank's checksum; returns quietly when all agree. Reads every parameter to the
// host: a debugging aid, not for every step of a long run.
void check_parameters_match(ProcessGroup& pg, const nn::NamedTensors& params);

}  // namespace ampgrad::distributed
