// test_collectives.cpp — ProcessGroup's collectives on 2 ranks, every dtype, against values worked
// out by hand (rank r holds (i + 1)(r + 1)/2 at position i; every sum, max and mean of them is
// exact in every dtype, so the expected values are exact too), the watchdog's rhythm, and
// DistributedSampler's shards.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "autograd/ops.h"
#include "distributed/process_group.h"
#include "distributed/sampler.h"
#include "distributed/watchdog.h"
#include "tensor/device.h"
#include "mpi_test_util.h"
#include "skip.h"

using namespace ampgrad;
using namespace ampgrad::distributed;

// Rank r's values: (i + 1)(r + 1)/2 for floating dtypes, (i + 1)(r + 1) for int64.
static Tensor rank_values(DType dtype, int r, Device device = Device::cpu()) {
  std::vector<double> v;
  for (int i = 0; i < 6; ++i) v.push_back((i + 1) * (r + 1) * (is_floating_point(dtype) ? 0.5 : 1.0));
  return from_vector(v, {2, 3}, TensorOptions(dtype)).to(device);
}

static void check_collectives(DType dtype, Device device) {
  ProcessGroup& pg = group();
  const int n = pg.size(), r = pg.rank();
  CAPTURE(dtype_name(dtype));
  std::vector<double> sum(6, 0.0), max(6, 0.0);
  for (int k = 0; k < n; ++k) {
    std::vector<double> v = to_vector<double>(rank_values(dtype, k));
    for (int i = 0; i < 6; ++i) sum[i] += v[i], max[i] = std::max(max[i], v[i]);
  }
  Tensor t = rank_values(dtype, r, device);
  pg.all_reduce(t, ReduceOp::sum);
  CHECK(t.dtype() == dtype);
  CHECK(to_vector<double>(t) == sum);
  t = rank_values(dtype, r, device);
  pg.all_reduce(t, ReduceOp::max);
  CHECK(to_vector<double>(t) == max);
  if (is_floating_point(dtype)) {
    t = rank_values(dtype, r, device);
    pg.all_reduce(t, ReduceOp::avg);
    std::vector<double> mean = sum;
    for (double& m : mean) m /= n;
    CHECK(to_vector<double>(t) == mean);
  }
  // a transposed view: reduced through a contiguous copy, written back into the view's elements
  Tensor base = rank_values(dtype, r, device);
  pg.all_reduce(base.t(), ReduceOp::sum);
  CHECK(to_vector<double>(base) == sum);

  t = rank_values(dtype, r, device);
  pg.broadcast(t, n - 1);
  CHECK(to_vector<double>(t) == to_vector<double>(rank_values(dtype, n - 1)));

  Tensor gathered = pg.all_gather(rank_values(dtype, r, device));
  REQUIRE(gathered.shape() == Shape{n, 2, 3});
  for (int k = 0; k < n; ++k) CHECK(to_vector<double>(gathered.select(0, k)) == to_vector<double>(rank_values(dtype, k)));
}

TEST_CASE("collectives: all_reduce, broadcast and all_gather on CPU tensors of every dtype") {
  REQUIRE(group().size() >= 2);  // ctest starts this suite with mpirun -np 2
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64}) check_collectives(dtype, Device::cpu());
}

TEST_CASE("collectives: the same on CUDA tensors through NCCL") {
  // A rank per GPU: this needs as many GPUs as ranks on one machine.
  SKIP_TEST_IF(cuda::device_count() < group().size(),
               "NCCL needs " << group().size() << " GPUs here, found " << cuda::device_count() << " (" << cuda::unavailable_reason() << ")");
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64}) check_collectives(dtype, Device::cuda(group().rank()));
}

TEST_CASE("collectives: a float16 mean is taken in float32 and rounded once") {
  // 60000 + 61024 overflows float16 (its largest finite value is 65504); the float32 sum halved
  // is 60512, which float16 holds exactly (a multiple of 32, its spacing there).
  SKIP_TEST_IF(group().size() != 2, "the case is written for 2 ranks");
  ProcessGroup& pg = group();
  Tensor t = full({3}, pg.rank() == 0 ? 60000.0 : 61024.0, TensorOptions(kFloat16));
  pg.all_reduce(t, ReduceOp::avg);
  CHECK(to_vector<double>(t) == std::vector<double>(3, 60512.0));
}

TEST_CASE("collectives: asynchronous work completes on wait; refused inputs are named") {
  ProcessGroup& pg = group();
  Tensor t = full({1000}, double(pg.rank() + 1));
  Work w = pg.all_reduce_async(t, ReduceOp::sum);
  while (!w.poll()) {}
  w.wait();
  const double expect = pg.size() * (pg.size() + 1) / 2.0;
  CHECK(to_vector<double>(t) == std::vector<double>(1000, expect));
  CHECK_THROWS_WITH_AS(pg.all_reduce(ones({2}, TensorOptions(kInt64)), ReduceOp::avg),
                       doctest::Contains("avg of an int64 tensor is not defined"), Error);
  CHECK_THROWS_WITH_AS(pg.all_reduce(ones({2}, TensorOptions(kBool))), doctest::Contains("dtype bool is not supported"), Error);
  CHECK_THROWS_WITH_AS(pg.broadcast(ones({2}), pg.size()), doctest::Contains("is not a rank of this group"), Error);
  // float8 is floating but storage-only: MPI would have reduced its bytes as int64 (8 times the buffer)
  for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    const Tensor t8 = ones({4}).to(f8);
    CHECK_THROWS_WITH_AS(pg.all_reduce(t8), doctest::Contains((std::string("all_reduce: dtype ") + dtype_name(f8) + " is not supported").c_str()), Error);
    CHECK_THROWS_WITH_AS(pg.broadcast(t8), doctest::Contains((std::string("broadcast: dtype ") + dtype_name(f8) + " is not supported").c_str()), Error);
  }
}

TEST_CASE("collectives: a Work dropped unwaited whose finish fails says so on stderr, and does not terminate") {
  std::fflush(stderr);
  FILE* captured = std::tmpfile();
  const int saved = dup(2);
  dup2(fileno(captured), 2);
  {
    Work dropped([] { AMPGRAD_CHECK(false, "cudaStreamWaitEvent failed: an illegal memory access"); });
    Work replaced([] { AMPGRAD_CHECK(false, "the first one"); });
    replaced = Work();  // operator= finishes the old one: the same rule
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text(4096, '\0');
  std::rewind(captured);
  text.resize(std::fread(text.data(), 1, text.size(), captured));
  std::fclose(captured);
  CHECK(text.find("a collective dropped without wait() failed as it finished: the first one") != std::string::npos);
  CHECK(text.find("failed as it finished: cudaStreamWaitEvent failed: an illegal memory access") != std::string::npos);
  Work waited([] { AMPGRAD_CHECK(false, "peer gone"); });
  CHECK_THROWS_WITH_AS(waited.wait(), doctest::Contains("peer gone"), Error);  // wait() still throws to its caller
}

TEST_CASE("Watchdog: asks its probe every interval, and stops at once when destroyed") {
  std::atomic<int> asked{0};
  {
    Watchdog watch([&] { return ++asked, std::string(); }, std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  CHECK(asked >= 5);   // about 20; a loaded machine may wake it late
  CHECK(asked <= 20);  // never before its interval
  const auto start = std::chrono::steady_clock::now();
  { Watchdog idle([] { return std::string(); }, std::chrono::hours(1)); }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));  // woken to stop, not after its hour
}

TEST_CASE("collectives: each rank on a node drives its own GPU, round-robin past the node's count") {
  CHECK(local_rank() == rank());  // mpirun -np 2 here: both ranks on this node
  CHECK(device_for_local_rank(0, 8) == 0);
  CHECK(device_for_local_rank(1, 8) == 1);
  CHECK(device_for_local_rank(9, 8) == 1);
  CHECK(device_for_local_rank(1, 1) == 0);
  CHECK_THROWS_WITH_AS(device_for_local_rank(1, 0), doctest::Contains("no CUDA device on this node for local rank 1"), Error);
}

TEST_CASE("DistributedSampler: PyTorch's shards, disjoint, padded from the head, reshuffled per epoch") {
  ProcessGroup& pg = group();
  // PyTorch: list(DistributedSampler(range(5), num_replicas=2, rank=r, shuffle=False)) is [0, 2, 4] and [1, 3, 0]
  const std::vector<int64_t> expect[2] = {{0, 2, 4}, {1, 3, 0}};
  for (int r = 0; r < 2; ++r) CHECK(data::DistributedSampler(5, 2, r, {.shuffle = false}).indices(0) == expect[r]);
  CHECK(data::DistributedSampler(5, 2, 1, {.shuffle = false, .drop_last = true}).indices(0) == std::vector<int64_t>{1, 3});

  const int64_t size = 101;
  data::DistributedSampler sampler(size, pg.size(), pg.rank(), {.seed = 7});
  std::vector<int64_t> epoch0 = sampler.indices(0), epoch1 = sampler.indices(1);
  CHECK(int64_t(epoch0.size()) == sampler.num_samples());
  CHECK(epoch0 != epoch1);
  CHECK(epoch0 == sampler.indices(0));
  // gathered over the ranks: every index appears, and only the padding repeats
  Tensor all = pg.all_gather(from_vector(epoch0, {int64_t(epoch0.size())}, TensorOptions(kInt64)));
  std::vector<int64_t> flat = to_vector<int64_t>(all);
  std::set<int64_t> distinct(flat.begin(), flat.end());
  CHECK(int64_t(distinct.size()) == size);
  CHECK(int64_t(flat.size()) == sampler.total_size());
  CHECK(sampler.total_size() - size == (pg.size() - size % pg.size()) % pg.size());
  data::DistributedSampler cut(size, pg.size(), pg.rank(), {.seed = 7, .drop_last = true});
  std::vector<int64_t> kept = to_vector<int64_t>(pg.all_gather(from_vector(cut.indices(0), {cut.num_samples()}, TensorOptions(kInt64))));
  CHECK(std::set<int64_t>(kept.begin(), kept.end()).size() == kept.size());  // no repeats
  CHECK(int64_t(kept.size()) == size / pg.size() * pg.size());
}
