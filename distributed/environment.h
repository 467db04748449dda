// environment.h — the MPI process environment: start and end it, and ask who this process is.
// mpirun launches N copies of one program; each learns its rank (0..N-1) and N here. Nothing
// about tensors (process_group.h) or training (ddp.h).
//
//   int main(int argc, char** argv) {
//     distributed::Environment env(argc, argv);     // MPI_Init_thread ... MPI_Finalize on exit
//     if (distributed::rank() == 0) std::cout << distributed::world_size() << " ranks\n";
//   }
#pragma once
#include <mpi.h>

namespace ampgrad::distributed {

// Starts MPI (idempotent) asking for MPI_THREAD_SERIALIZED: collectives may be called from any
// one thread at a time (the backward's thread calls them from DDP's hook).
void init(int* argc = nullptr, char*** argv = nullptr);
void finalize();  // idempotent; after it no collective may run
bool is_initialized();
int rank();        // in MPI_COMM_WORLD
int world_size();
int local_rank();  // among the ranks on this node (MPI_COMM_TYPE_SHARED): which GPU of the node is this rank's

// The GPU a rank drives, one per rank: its node-local rank modulo the node's GPUs (a node running
// more ranks than it has GPUs shares them round-robin, which NCCL refuses with "duplicate GPU").
int device_for_local_rank(int local_rank, int device_count);
// This rank's GPU (device_for_local_rank of its local rank and the node's GPUs), made the
// process's current device as torch.cuda.set_device(local_rank) does: a rank that drives cuda:1
// then never opens a context on GPU 0. An Error on a node without GPUs.
int set_local_device();

// init() for its lifetime, finalize() after: the usual first line of a data-parallel main.
class Environment {
 public:
  Environment(int& argc, char**& argv) { init(&argc, &argv); }
  ~Environment() { finalize(); }
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
};

// Raises ampgrad::Error naming the MPI call and MPI's message when it did not succeed.
void check_mpi(int status, const char* call);
#define AMPGRAD_MPI_CHECK(call) ::ampgrad::distributed::check_mpi((call), #call)

}  // namespace ampgrad::distributed
