// data_parallel_off.cpp — `mnist --ddp` in a build without MPI: refused, saying what is missing.
#include "mnist/data_parallel.h"

#include "tensor/error.h"

namespace mnist::data_parallel {

void init(int&, char**&) {
  AMPGRAD_CHECK(false, "--ddp: this build has no distributed/ (MPI was not found at configure time; "
                       "scripts/install-deps.sh installs libopenmpi-dev and openmpi-bin)");
}
int rank() { return 0; }
int ranks() { return 1; }
std::shared_ptr<ampgrad::nn::Module> wrap(std::shared_ptr<ampgrad::nn::Module> model) { return model; }
ampgrad::data::Dataset shard(const ampgrad::data::Dataset& all, uint64_t, int64_t) { return all; }
double mean(double value) { return value; }

}  // namespace mnist::data_parallel
