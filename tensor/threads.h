// threads.h — how many CPU threads the kernels use (OpenMP, which also drives Eigen's GEMM).
// One pool only: a second one (a BLAS pool beside OpenMP) makes 2 cores fight, 3x slower.
#pragma once

namespace ampgrad {

void set_num_threads(int n);  // n <= 0: OMP_NUM_THREADS if set, else all cores
int get_num_threads();

}  // namespace ampgrad
