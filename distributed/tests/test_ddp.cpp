// test_ddp.cpp — DistributedDataParallel and AMP across 2 ranks: DDP against one process at twice
// the batch, no_sync accumulation, the buckets' order, unused parameters, a collective that failed,
// a divergent replica, and the GradScaler's state equal on every rank every step, also when only
// one rank's local gradient overflowed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "diagnostics/skip_explainer.h"
#include "distributed/ddp.h"
#include "distributed/rank_consistency.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "tensor/random.h"
#include "mpi_test_util.h"

using namespace ampgrad;
using namespace ampgrad::distributed;
namespace F = ampgrad::nn::functional;

// The same MLP on every rank for the same seed (DDP's broadcast would make it so anyway).
static std::shared_ptr<nn::Sequential> mlp(uint64_t seed) {
  manual_seed(seed);
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(std::make_shared<nn::Linear>(8, 16));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<nn::Linear>(16, 4));
  return net;
}

struct Batch {
  Tensor x, y;  // (rows, 8) float32, (rows) int64
  Batch rows(int64_t start, int64_t n) const { return {x.narrow(0, start, n).contiguous(), y.narrow(0, start, n).contiguous()}; }
};
// Step s's global batch of `rows` samples, the same on every rank.
static Batch global_batch(int s, int64_t rows) {
  Generator gen(1000 + s);
  Tensor x = randn({rows, 8}, {}, &gen);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < rows; ++i) labels.push_back(int64_t(gen.next() % 4));
  return {x, from_vector(labels, {rows}, TensorOptions(kInt64))};
}

TEST_CASE("DDP on 2 ranks trains as one process on the whole batch") {
  ProcessGroup& pg = group();
  const int64_t B = 8;  // per rank; the single process takes all ranks' rows at once
  auto reference = mlp(1);
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(1), pg);
  optim::SGD ref_opt(reference->parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD ddp_opt(ddp->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int s = 0; s < 5; ++s) {
    const Batch all = global_batch(s, B * pg.size()), mine = all.rows(pg.rank() * B, B);
    ref_opt.zero_grad();
    F::cross_entropy(reference->forward(all.x), all.y).backward();
    ref_opt.step();
    ddp_opt.zero_grad();
    F::cross_entropy(ddp->forward(mine.x), mine.y).backward();
    ddp_opt.step();
  }
  // Not bit-identical: the reference sums each weight's gradient over 16 rows in one GEMM, DDP
  // over 8 per rank and then adds the two. Each sum's rounding is within 16 float32 ulps of the
  // largest term (16 · 2^-24 ≈ 1e-6 relative); over 5 steps of lr 0.1 with momentum and weights
  // and gradients of order 1, 1e-5 absolute leaves a margin of about 10.
  CHECK(max_abs_difference(*reference, ddp->module()) < 1e-5);
  CHECK(max_abs_difference(*reference, ddp->module()) > 0);  // the runs did differ in rounding: the comparison is real
  check_parameters_match(pg, ddp->named_parameters());      // replicas bit-identical to each other
}

// Each of ddp's gradients is local's, averaged over the ranks, bit for bit.
static void check_averaged(const nn::Module& local, const nn::Module& ddp) {
  std::vector<Tensor> lp = local.parameters(), dp = ddp.parameters();
  for (size_t i = 0; i < lp.size(); ++i) {
    Tensor g = lp[i].grad().clone();
    group().all_reduce(g, ReduceOp::avg);
    CHECK(to_vector<float>(dp[i].grad()) == to_vector<float>(g));
  }
}

TEST_CASE("DDP gradients are the ranks' local gradients averaged, bit for bit") {
  ProcessGroup& pg = group();
  auto local = mlp(2);
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(2), pg, DdpOptions{.bucket_cap_bytes = 256});  // several buckets
  const Batch mine = global_batch(0, 4 * pg.size()).rows(pg.rank() * 4, 4);
  F::cross_entropy(local->forward(mine.x), mine.y).backward();
  F::cross_entropy(ddp->forward(mine.x), mine.y).backward();
  check_averaged(*local, *ddp);
}

TEST_CASE("DDP buckets: reverse registration order, split at the cap") {
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(3), group(), DdpOptions{.bucket_cap_bytes = 272});
  // 272 bytes: 2.bias (4 floats) and 2.weight (4·16) fill the first; 0.bias (16) starts the next,
  // and 0.weight (16·8 = 512 bytes) is too big to join it, so it gets one of its own
  const std::vector<std::vector<std::string>> expect{
      {"module.2.bias", "module.2.weight"}, {"module.0.bias"}, {"module.0.weight"}};
  auto got = ddp->buckets();
  CHECK(got.size() == 3);
  CHECK(got == expect);
}

TEST_CASE("DDP no_sync: accumulation steps stay local, the next backward reduces their sum") {
  ProcessGroup& pg = group();
  auto local = mlp(4);
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(4), pg);
  const Batch all = global_batch(7, 8 * pg.size()), first = all.rows(pg.rank() * 8, 4), second = all.rows(pg.rank() * 8 + 4, 4);
  F::cross_entropy(local->forward(first.x), first.y).backward();
  {
    auto no_sync = ddp->no_sync();
    F::cross_entropy(ddp->forward(first.x), first.y).backward();
  }
  // nothing was reduced: the local gradient, exactly (and it differs across ranks)
  std::vector<Tensor> lp = local->parameters(), dp = ddp->parameters();
  for (size_t i = 0; i < lp.size(); ++i) CHECK(to_vector<float>(dp[i].grad()) == to_vector<float>(lp[i].grad()));
  Tensor first_grad = dp[0].grad().clone().unsqueeze(0);
  std::vector<float> gathered = to_vector<float>(pg.all_gather(first_grad));
  CHECK(!std::equal(gathered.begin(), gathered.begin() + first_grad.numel(), gathered.begin() + first_grad.numel()));

  F::cross_entropy(local->forward(second.x), second.y).backward();
  F::cross_entropy(ddp->forward(second.x), second.y).backward();
  for (size_t i = 0; i < lp.size(); ++i) {
    Tensor g = lp[i].grad().clone();
    pg.all_reduce(g, ReduceOp::avg);  // the sum of both micro-batches, averaged over ranks
    CHECK(to_vector<float>(dp[i].grad()) == to_vector<float>(g));
  }
}

struct WithUnused : nn::Module {
  std::shared_ptr<nn::Linear> used = register_module("used", std::make_shared<nn::Linear>(8, 4));
  std::shared_ptr<nn::Linear> unused = register_module("unused", std::make_shared<nn::Linear>(8, 4));
  Tensor forward(const Tensor& x) override { return used->forward(x); }
};

TEST_CASE("DDP refuses a parameter that got no gradient, naming it") {
  auto ddp = std::make_shared<DistributedDataParallel>(std::make_shared<WithUnused>(), group());
  const Batch b = global_batch(0, 4);
  F::cross_entropy(ddp->forward(b.x), b.y).backward();
  CHECK_THROWS_WITH_AS(ddp->forward(b.x), doctest::Contains("gave no gradient to 'module.unused.weight', 'module.unused.bias'"), Error);
}

// Registered first, `late` is reduced last: a pass that leaves it out has already started the
// buckets of `used`, and the refused pass leaves their collectives running.
struct LateUnused : nn::Module {
  std::shared_ptr<nn::Linear> late = register_module("late", std::make_shared<nn::Linear>(8, 4));
  std::shared_ptr<nn::Linear> used = register_module("used", std::make_shared<nn::Linear>(8, 4));
  bool use_late = false;
  Tensor forward(const Tensor& x) override { return use_late ? used->forward(x) + late->forward(x) : used->forward(x); }
};

TEST_CASE("DDP after a refused pass: the next pass waits for the old collectives before refilling their buckets") {
  ProcessGroup& pg = group();
  manual_seed(5);
  auto local = std::make_shared<LateUnused>();
  manual_seed(5);
  auto inner = std::make_shared<LateUnused>();
  auto ddp = std::make_shared<DistributedDataParallel>(inner, pg, DdpOptions{.bucket_cap_bytes = 64});  // one bucket per parameter
  const Batch mine = global_batch(3, 4 * pg.size()).rows(pg.rank() * 4, 4);
  F::cross_entropy(ddp->forward(mine.x), mine.y).backward();  // late got nothing: used's buckets started, late's never
  CHECK_THROWS_WITH_AS(ddp->forward(mine.x), doctest::Contains("gave no gradient to 'module.late.weight', 'module.late.bias'"), Error);
  ddp->zero_grad();
  local->use_late = inner->use_late = true;
  F::cross_entropy(local->forward(mine.x), mine.y).backward();
  F::cross_entropy(ddp->forward(mine.x), mine.y).backward();
  check_averaged(*local, *ddp);
}

// MPI, except that the next `failures` all-reduces to finish report a lost network (after MPI's
// own wait, so the ranks still meet in every collective).
struct FailingWaits final : Backend {
  std::unique_ptr<Backend> mpi;
  int failures = 0;
  explicit FailingWaits(MPI_Comm comm) : mpi(make_mpi_backend(comm)) {}
  Work all_reduce(const Tensor& t, ReduceOp op, bool async) override {
    auto work = std::make_shared<Work>(mpi->all_reduce(t, op, async));
    return Work([work, this] {
      work->wait();
      if (failures == 0) return;
      --failures;
      AMPGRAD_CHECK(false, "MPI_Wait failed: the network went down");
    });
  }
  void broadcast(const Tensor& t, int root) override { mpi->broadcast(t, root); }
  Tensor all_gather(const Tensor& t) override { return mpi->all_gather(t); }
};

TEST_CASE("DDP after a collective failed as backward finished: backward raises it, and the next pass runs") {
  FailingWaits* transport = nullptr;
  ProcessGroup pg([&](MPI_Comm comm) {
    auto made = std::make_unique<FailingWaits>(comm);
    transport = made.get();
    return made;
  });
  auto local = mlp(9);
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(9), pg, DdpOptions{.bucket_cap_bytes = 256});  // several buckets
  const Batch mine = global_batch(4, 4 * pg.size()).rows(pg.rank() * 4, 4);
  transport->failures = 1;  // the first bucket's, as backward finishes
  CHECK_THROWS_WITH_AS(F::cross_entropy(ddp->forward(mine.x), mine.y).backward(), doctest::Contains("the network went down"), Error);
  ddp->zero_grad();
  // The failed pass had every gradient: the next forward must not refuse it as unfinished (it
  // said "gave no gradient to " and no name), and the pass after it averages as ever.
  CHECK_NOTHROW(F::cross_entropy(ddp->forward(mine.x), mine.y).backward());
  F::cross_entropy(local->forward(mine.x), mine.y).backward();
  check_averaged(*local, *ddp);
}

TEST_CASE("DDP refuses, on every rank, replicas whose parameters differ in shape, name or number") {
  auto differ = [&](std::shared_ptr<nn::Sequential> net, const std::string& message) {
    CHECK_THROWS_WITH_AS(DistributedDataParallel(net, group()), doctest::Contains(message.c_str()), Error);
  };
  auto net = mlp(1);
  net->push_back(std::make_shared<nn::Linear>(4, group().rank() == 0 ? 4 : 5));  // 3.weight: (4, 4) on rank 0, (5, 4) on rank 1
  differ(net, "DistributedDataParallel: the models differ between ranks: rank 0 has 'parameter module.3.weight float32 [4, 4]', rank 1 "
              "has 'parameter module.3.weight float32 [5, 4]'");
  net = mlp(1);
  if (group().rank() == 1) net->push_back(std::make_shared<nn::Linear>(4, 4));  // two more parameters on rank 1
  differ(net, "rank 0 has nothing more (4 entries), rank 1 has 'parameter module.3.weight float32 [4, 4]'");
  differ(group().rank() == 0 ? mlp(1) : std::make_shared<nn::Sequential>(), "rank 0 has 'parameter module.0.weight float32 [16, 8]', rank 1 has nothing more (0 entries)");
}

TEST_CASE("check_parameters_match names the first parameter that differs between ranks") {
  ProcessGroup& pg = group();
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(5), pg, DdpOptions{.check_every = 1});
  const Batch b = global_batch(0, 4);
  CHECK_NOTHROW(ddp->forward(b.x));
  if (pg.rank() == 1) {
    NoGradGuard no_grad;
    ddp->module().named_parameters()[2].second.add_(ones({4, 16}), 1e-6);  // 2.weight, on one rank only
  }
  CHECK_THROWS_WITH_AS(ddp->forward(b.x), doctest::Contains("parameter 'module.2.weight' differs between ranks"), Error);
}

// What each rank's scaler shows after a step, gathered: (ranks, 3) of scale, growth tracker, stepped.
static std::vector<double> scaler_states(amp::GradScaler& scaler, bool stepped) {
  Tensor mine = from_vector(std::vector<double>{scaler.get_scale(), double(scaler.get_growth_tracker()), stepped ? 1.0 : 0.0}, {3},
                            TensorOptions(kFloat64));
  return to_vector<double>(group().all_gather(mine));
}

TEST_CASE("AMP across ranks: scale, growth tracker and skip decision equal on every rank, every step") {
  // float16 autocast on the CPU; at step 3 rank 1's inputs are 10^5 times larger, so its float16
  // activations overflow and its local gradient is inf/NaN. The all-reduce carries that into every
  // rank's gradient before unscale_, so every rank skips step 3 and halves its scale.
  ProcessGroup& pg = group();
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(6), pg);
  optim::SGD opt(ddp->parameters(), {.lr = 0.05});
  amp::GradScaler scaler({.init_scale = 1024, .growth_interval = 2});
  int skipped = 0;
  for (int s = 0; s < 6; ++s) {
    Batch mine = global_batch(s, 4 * pg.size()).rows(pg.rank() * 4, 4);
    if (s == 3 && pg.rank() == 1) mine.x = mine.x * 1e5;
    opt.zero_grad();
    Tensor loss;
    {
      amp::autocast ac(DeviceType::CPU, kFloat16);
      loss = F::cross_entropy(ddp->forward(mine.x), mine.y);
    }
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    skipped += !stepped;
    CAPTURE(s);
    const std::vector<double> states = scaler_states(scaler, stepped);
    for (int r = 1; r < pg.size(); ++r) CHECK(std::equal(states.begin(), states.begin() + 3, states.begin() + 3 * r));
    CHECK(stepped == (s != 3));
  }
  CHECK(skipped == 1);
  // 1024 -> 2048 (after steps 0, 1) -> 1024 (step 3 skipped) -> 2048 (after steps 4, 5)
  CHECK(scaler.get_scale() == 2048);
  check_parameters_match(pg, ddp->named_parameters());
}

TEST_CASE("AMP across ranks: unscale_ before synchronising needs all_reduce_found_inf") {
  // Without DDP each rank's found_inf sees only its own gradient: rank 1 overflows, rank 0 does not.
  ProcessGroup& pg = group();
  auto net = mlp(7);
  optim::SGD opt(net->parameters(), {.lr = 0.05});
  amp::GradScaler scaler({.init_scale = 1024});
  Batch mine = global_batch(0, 4);
  if (pg.rank() == 1) mine.x = mine.x * 1e5;
  {
    amp::autocast ac(DeviceType::CPU, kFloat16);
    scaler.scale(F::cross_entropy(net->forward(mine.x), mine.y)).backward();
  }
  scaler.unscale_(opt);
  CHECK(scaler.found_inf(opt).item<float>() == (pg.rank() == 1 ? 1.f : 0.f));  // the ranks disagree
  all_reduce_found_inf(scaler, opt, pg);
  CHECK(scaler.found_inf(opt).item<float>() == 1.f);  // now every rank skips
  CHECK_FALSE(bool(scaler.step(opt)));
  scaler.update();
  CHECK(scaler.get_scale() == 512);
}

TEST_CASE("SkipWatch under DDP: a loss gone non-finite on one rank stops every rank at that step") {
  // No GradScaler (float32), so the watch stops at a non-finite loss. At step 3 rank 1's input is
  // NaN. Summed over ranks, its count stops rank 0 at the same step, and both replay the step to
  // explain it: a rank that stopped alone would wait forever in its replay's all-reduce.
  ProcessGroup& pg = group();
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(8), pg);
  optim::SGD opt(ddp->parameters(), {.lr = 0.05});
  amp::GradScaler scaler({.enabled = false});
  auto sum_over_ranks = [&pg](const Tensor& t) {
    Tensor sum = t.clone();
    pg.all_reduce(sum, ReduceOp::sum);
    return sum;
  };
  std::ostringstream log;
  amp::SkipWatch watch({.sum_over_ranks = sum_over_ranks}, ddp->named_parameters(), {}, log);
  std::string stopped;
  int64_t step = 1;
  for (; step <= 4; ++step) {
    Batch mine = global_batch(int(step), 4 * pg.size()).rows(pg.rank() * 4, 4);
    if (step == 3 && pg.rank() == 1) mine.x = mine.x * std::nan("");
    watch.begin_step(mine.x, [&, x = mine.x, y = mine.y] { return F::cross_entropy(ddp->forward(x), y); });
    opt.zero_grad();
    Tensor loss = F::cross_entropy(ddp->forward(mine.x), mine.y);
    scaler.scale(loss).backward();
    try {
      watch.check_loss(0, step, loss, scaler);
    } catch (const amp::SkipWatch::Stop& e) {
      stopped = e.what();
      break;
    }
    watch.end_step(scaler, scaler.step(opt));
  }
  CAPTURE(stopped);
  CHECK(step == 3);
  CHECK(stopped.find(pg.rank() == 1 ? "stopped at step 3: the loss is nan here, and not finite on 1 of the ranks"
                                    : "stopped at step 3: the loss is ") == 0);
  CHECK(stopped.find("not finite on 1 of the ranks") != std::string::npos);
  CHECK(stopped.find("gradients holding inf/NaN (the step replayed") != std::string::npos);
}

TEST_CASE("broadcast_scaler_state: a saved state loaded on rank 0 reaches every rank") {
  ProcessGroup& pg = group();
  amp::GradScaler scaler({.growth_interval = 100});
  if (pg.rank() == 0)
    scaler.load_state_dict({{"scale", 256.0}, {"growth_factor", 2.0}, {"backoff_factor", 0.5}, {"growth_interval", 100.0}, {"_growth_tracker", 7.0}});
  broadcast_scaler_state(scaler, pg);
  CHECK(scaler.get_scale() == 256.0);
  CHECK(scaler.get_growth_tracker() == 7);
}
