// parallel.h — how the CPU kernels outside the GEMM share work between threads: parallel_for
// splits n items (elements, rows, columns) into one contiguous piece per OpenMP thread. Work of
// under kGrain elements in all runs on the calling thread, since waking the pool costs more
// than it saves; so does work that starts inside a parallel region. Each piece is a function of
// n and the thread count alone, and each item is computed as on one thread, so every result is
// bit-identical whatever the thread count or timing.
//
//   parallel_for(rows, R, [&](int64_t begin, int64_t end) { for (r = begin; r < end; ++r) ... });
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace ampgrad::cpu {

inline constexpr int64_t kGrain = 32768;  // PyTorch's at::internal::GRAIN_SIZE

// Calls f(begin, end) on pieces of [0, n); each item touches about item_size elements.
// f must not throw: an exception cannot leave an OpenMP region.
template <class F> void parallel_for(int64_t n, int64_t item_size, const F& f) {
  const int64_t pieces = std::min({int64_t(omp_get_max_threads()), n, n * std::max<int64_t>(item_size, 1) / kGrain});
  if (pieces <= 1 || omp_in_parallel()) {
    if (n > 0) f(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(int(pieces))
  {
    const int64_t per = (n + omp_get_num_threads() - 1) / omp_get_num_threads();
    const int64_t begin = std::min(n, omp_get_thread_num() * per), end = std::min(n, begin + per);
    if (begin < end) f(begin, end);
  }
}

}  // namespace ampgrad::cpu
