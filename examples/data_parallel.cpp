// data_parallel.cpp — `--ddp` on distributed/: one ProcessGroup for the process, DDP, and this
// rank's samples: DistributedSampler's shard of a data set, or its rows of a global batch.
#include "data_parallel.h"

#include <cstdlib>
#include <memory>

#include "autograd/ops.h"
#include "distributed/ddp.h"
#include "distributed/rank_consistency.h"
#include "distributed/sampler.h"

namespace ampgrad::examples::data_parallel {

// The process's group, made at its first use (after start(), or a test's distributed::Environment)
// and ended by end(): destroyed at exit instead, its NCCL communicator and stream would go after
// CUDA's own exit teardown, onto a runtime already unloading.
static std::unique_ptr<distributed::ProcessGroup>& the_group() {
  static std::unique_ptr<distributed::ProcessGroup> pg;
  return pg;
}
static distributed::ProcessGroup& group() {
  if (!the_group()) the_group() = std::make_unique<distributed::ProcessGroup>();
  return *the_group();
}

bool start(int& argc, char**& argv) {
  distributed::init(&argc, &argv);
  std::atexit([] { distributed::finalize(); });  // for a main that leaves without end()
  return group().rank() == 0;
}

void end() {
  the_group().reset();
  distributed::finalize();
}

void abort_all(int status) {
  if (distributed::is_initialized()) MPI_Abort(MPI_COMM_WORLD, status);
}

int rank() { return group().rank(); }
int ranks() { return group().size(); }
int cuda_device() { return distributed::set_local_device(); }

std::string devices(Device mine) {
  const std::vector<int64_t> all = to_vector<int64_t>(group().all_gather(
      from_vector(std::vector<int64_t>{int64_t(mine.type), mine.index}, {2}, TensorOptions(kInt64))));  // (ranks, 2)
  std::string text;
  for (size_t r = 0; r < all.size() / 2; ++r)
    text += (r ? "," : "") + Device{DeviceType(all[2 * r]), int(all[2 * r + 1])}.str();
  return text;
}

void check_same_settings(const std::map<std::string, std::string>& settings) {
  std::vector<std::string> lines;
  for (const auto& [flag, value] : settings) lines.push_back(flag + " " + value);
  distributed::check_same_on_every_rank(group(), "the run's settings", lines);
}

std::shared_ptr<nn::Module> wrap(std::shared_ptr<nn::Module> model) {
  return std::make_shared<distributed::DistributedDataParallel>(std::move(model), group());
}

data::Dataset shard(const data::Dataset& all, uint64_t seed, int64_t epoch) {
  data::DistributedSampler sampler(all.size(), ranks(), rank(), {.seed = seed});
  const std::vector<int64_t> mine = sampler.indices(epoch);
  const Tensor index = from_vector(mine, {int64_t(mine.size())}, TensorOptions(kInt64));
  return {all.images.index_select(0, index), all.labels.index_select(0, index)};
}

Tensor local_rows(const Tensor& global) {
  const int64_t n = global.size(0) / ranks();
  return global.narrow(0, rank() * n, n);
}

void without_sync(nn::Module& replica, const std::function<void()>& backward) {
  const auto no_sync = dynamic_cast<distributed::DistributedDataParallel&>(replica).no_sync();
  backward();
}

Tensor sum_over_ranks(const Tensor& t) {
  Tensor sum = t.clone();
  group().all_reduce(sum, distributed::ReduceOp::sum);
  return sum;
}

double mean(double value) {
  Tensor t = full({1}, value, TensorOptions(kFloat64));
  group().all_reduce(t, distributed::ReduceOp::avg);
  return t.item<double>();
}

}  // namespace ampgrad::examples::data_parallel
