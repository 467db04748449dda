// threads.cpp — sets the OpenMP thread count; Eigen reads the same setting.
#include "tensor/threads.h"

#include <Eigen/Core>
#include <omp.h>

namespace ampgrad {

// The count the process started with: OMP_NUM_THREADS where it is set (ctest sets 1, so its
// parallel cases do not each start a thread per core), else every core. Read once, before the
// first set_num_threads changes it.
static int default_num_threads() {
  static const int n = omp_get_max_threads();
  return n;
}

void set_num_threads(int n) {
  const int fallback = default_num_threads();
  if (n <= 0) n = fallback;
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}
int get_num_threads() { return omp_get_max_threads(); }

}  // namespace ampgrad
