// environment.cpp — MPI's start, end and identity queries, each checked, and the rank's GPU.
#include "distributed/environment.h"

#include "tensor/device.h"
#include "tensor/error.h"
#ifdef AMPGRAD_WITH_CUDA
#include "tensor/cuda/runtime.h"
#endif

namespace ampgrad::distributed {

void check_mpi(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, message, &length);
  AMPGRAD_CHECK(false, call << " failed: " << std::string(message, length));
}

bool is_initialized() {
  int started = 0, ended = 0;
  MPI_Initialized(&started);
  MPI_Finalized(&ended);
  return started && !ended;
}

void init(int* argc, char*** argv) {
  int started = 0;
  MPI_Initialized(&started);
  if (started) return;
  int provided = 0;
  AMPGRAD_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  AMPGRAD_CHECK(provided >= MPI_THREAD_SERIALIZED, "distributed::init: MPI provides thread level " << provided
                                                       << ", ampgrad needs MPI_THREAD_SERIALIZED (" << MPI_THREAD_SERIALIZED << ")");
  // Errors come back as codes, which check_mpi turns into ampgrad::Error, instead of aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void finalize() {
  if (is_initialized()) MPI_Finalize();
}

int rank() {
  AMPGRAD_CHECK(is_initialized(), "distributed::rank: call distributed::init() first");
  int r = 0;
  AMPGRAD_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
  return r;
}

int world_size() {
  AMPGRAD_CHECK(is_initialized(), "distributed::world_size: call distributed::init() first");
  int n = 0;
  AMPGRAD_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
  return n;
}

int local_rank() {
  AMPGRAD_CHECK(is_initialized(), "distributed::local_rank: call distributed::init() first");
  MPI_Comm node;
  AMPGRAD_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int r = 0;
  MPI_Comm_rank(node, &r);
  MPI_Comm_free(&node);
  return r;
}

int device_for_local_rank(int local_rank, int device_count) {
  AMPGRAD_CHECK(device_count > 0, "distributed: no CUDA device on this node for local rank " << local_rank);
  return local_rank % device_count;
}

int set_local_device() {
  const int device = device_for_local_rank(local_rank(), cuda::device_count());
#ifdef AMPGRAD_WITH_CUDA  // else device_for_local_rank has refused: no build without CUDA has a device
  cuda::set_device(device);
#endif
  return device;
}

}  // namespace ampgrad::distributed
