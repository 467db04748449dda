// threads.cpp — sets the OpenMP thread count; Eigen reads the same setting.
#include "tensor/threads.h"

#include <Eigen/Core>
#include <omp.h>

namespace ampgrad {

void set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}
int get_num_threads() { return omp_get_max_threads(); }

}  // namespace ampgrad
