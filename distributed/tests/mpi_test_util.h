// mpi_test_util.h — what the MPI suites share: the process group their cases use (made at first
// use, after mpi_test_main.cpp has started MPI), and how far apart two models' parameters are.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "distributed/process_group.h"
#include "nn/module.h"

inline ampgrad::distributed::ProcessGroup& group() {
  static ampgrad::distributed::ProcessGroup pg;
  return pg;
}

inline double max_abs_difference(const ampgrad::nn::Module& a, const ampgrad::nn::Module& b) {
  std::vector<ampgrad::Tensor> pa = a.parameters(), pb = b.parameters();
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    std::vector<double> va = ampgrad::to_vector<double>(pa[i]), vb = ampgrad::to_vector<double>(pb[i]);
    for (size_t j = 0; j < va.size(); ++j) worst = std::max(worst, std::abs(va[j] - vb[j]));
  }
  return worst;
}
