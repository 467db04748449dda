// data_parallel_off.cpp — `--ddp` in a build without MPI: refused, saying what is missing.
#include "data_parallel.h"

#include "tensor/error.h"

namespace ampgrad::examples::data_parallel {

bool start(int&, char**&) {
  AMPGRAD_CHECK(false, "--ddp: this build has no distributed/ (MPI was not found at configure time; "
                       "scripts/install-deps.sh installs libopenmpi-dev and openmpi-bin)");
  return false;
}
void abort_all(int) {}
int rank() { return 0; }
int ranks() { return 1; }
void end() {}
int cuda_device() { return 0; }
std::string devices(Device mine) { return mine.str(); }
void check_same_settings(const std::map<std::string, std::string>&) {}
std::shared_ptr<nn::Module> wrap(std::shared_ptr<nn::Module> model) { return model; }
data::Dataset shard(const data::Dataset& all, uint64_t, int64_t) { return all; }
Tensor local_rows(const Tensor& global) { return global; }
void without_sync(nn::Module&, const std::function<void()>& backward) { backward(); }
double mean(double value) { return value; }
Tensor sum_over_ranks(const Tensor& t) { return t; }

}  // namespace ampgrad::examples::data_parallel
