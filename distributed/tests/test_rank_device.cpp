// test_rank_device.cpp — a rank's GPU (issue 42 §2): after set_local_device and the rank's first
// op, its GPU is current and no other GPU has a context in this process. Before, a guard restored
// device 0 after every op, and since CUDA 12 that opens GPU 0's context: N contexts on GPU 0.
// A suite of its own (its own processes): another case's op on cuda:0 would open that context.
// Needs a GPU per rank (mpirun -np 2: two).
#include <doctest/doctest.h>

#include "autograd/ops.h"
#include "distributed/environment.h"
#include "mpi_test_util.h"
#include "skip.h"
#ifdef AMPGRAD_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#endif

using namespace ampgrad;

#ifdef AMPGRAD_WITH_CUDA
// Whether GPU d's primary context is active in this process (cuDevicePrimaryCtxGetState). The
// driver is loaded here, as cublas_lazy.cpp loads cuBLAS: the suites link no libcuda, which a
// build machine without a driver lacks.
static bool primary_context_active(int d) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(driver, "cannot load the CUDA driver, libcuda.so.1: " << dlerror());
  const auto device_get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(dlsym(driver, "cuDeviceGet"));
  const auto get_state = reinterpret_cast<CUresult (*)(CUdevice, unsigned*, int*)>(dlsym(driver, "cuDevicePrimaryCtxGetState"));
  REQUIRE_MESSAGE((device_get && get_state), "libcuda.so.1 lacks cuDeviceGet or cuDevicePrimaryCtxGetState");
  CUdevice device = 0;
  unsigned flags = 0;
  int active = 0;
  REQUIRE(device_get(&device, d) == CUDA_SUCCESS);
  REQUIRE(get_state(device, &flags, &active) == CUDA_SUCCESS);
  return active != 0;
}

TEST_CASE("a rank's first op on its GPU leaves that GPU current and opens no context on another") {
  const int ranks = group().size();
  SKIP_TEST_IF(cuda::device_count() < ranks,
               "a GPU per rank: " << ranks << " ranks, " << cuda::device_count() << " GPU(s) (" << cuda::unavailable_reason() << ")");
  const int mine = distributed::set_local_device();
  CHECK(mine == group().rank());  // one node: local rank = rank
  const Tensor x = ones({1000}, TensorOptions().device(Device::cuda(mine))) * 2.0;  // allocates and launches on cuda:mine
  CHECK(sum(x).item<float>() == 2000.0f);
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == mine);
  for (int d = 0; d < cuda::device_count(); ++d) {
    CAPTURE(d);
    CHECK(primary_context_active(d) == (d == mine));
  }
}
#else
TEST_CASE("a rank's first op on its GPU leaves that GPU current and opens no context on another") {
  SKIP_TEST_IF(true, "built without the CUDA backend");
}
#endif
