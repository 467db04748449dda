// allreduce.cpp — all-reduce bandwidth of distributed::ProcessGroup against MPI_Allreduce called
// directly on the same float32 buffer, 64 KB to 64 MB: the median of repeated runs, each after a
// barrier, and the bus bandwidth as nccl-tests defines it (2(N-1)/N x bytes / time). Rank 0 prints.
//   mpirun -np 2 --oversubscribe build/distributed/allreduce_bench [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "distributed/process_group.h"

using namespace ampgrad;
using namespace ampgrad::distributed;

template <class F> static double median_seconds(int repeats, MPI_Comm comm, const F& run) {
  std::vector<double> times;
  for (int i = 0; i < repeats + 2; ++i) {  // two warm-up runs
    MPI_Barrier(comm);
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 2) times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  // every rank's own median; the slowest rank's is the collective's
  double median = times[times.size() / 2], slowest = 0;
  MPI_Allreduce(&median, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

int main(int argc, char** argv) {
  Environment env(argc, argv);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  ProcessGroup pg;
  const int n = pg.size();
  if (pg.rank() == 0)
    std::printf("all-reduce (sum, float32), %d ranks, median of %d\n%10s %14s %14s %12s %12s %8s\n", n, repeats, "bytes", "MPI_Allreduce us",
                "ProcessGroup us", "MPI busbw GB/s", "PG busbw GB/s", "PG/MPI");
  for (int64_t bytes = 64 << 10; bytes <= (64 << 20); bytes *= 4) {
    Tensor t = ones({bytes / 4});
    const double mpi = median_seconds(repeats, MPI_COMM_WORLD, [&] {
      MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), int(t.numel()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    const double group = median_seconds(repeats, MPI_COMM_WORLD, [&] { pg.all_reduce(t, ReduceOp::sum); });
    const double bus = 2.0 * (n - 1) / n * double(bytes) / 1e9;
    if (pg.rank() == 0)
      std::printf("%10lld %14.1f %14.1f %12.2f %12.2f %8.3f\n", (long long)bytes, mpi * 1e6, group * 1e6, bus / mpi, bus / group, group / mpi);
  }
}
