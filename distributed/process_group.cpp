// process_group.cpp — the group's communicator, the checks every collective shares, and the
// choice of transport by device.
#include "distributed/process_group.h"

#include <cstdio>

#include "tensor/error.h"

namespace ampgrad::distributed {

// Finishing a Work that is dropped unwaited never leaves a transport writing into a freed buffer.
// A destructor must not throw (during unwinding that is std::terminate, and the first error is
// lost), so a failure here is said on stderr, naming what failed.
static void finish_dropped(std::function<void()>& finish) noexcept {
  if (!finish) return;
  try {
    std::exchange(finish, nullptr)();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampgrad: a collective dropped without wait() failed as it finished: %s\n", e.what());
  }
}

Work& Work::operator=(Work&& o) noexcept {
  if (this != &o) {
    finish_dropped(finish_);
    finish_ = std::exchange(o.finish_, nullptr);
    poll_ = std::exchange(o.poll_, nullptr);
  }
  return *this;
}

Work::~Work() { finish_dropped(finish_); }

void Work::wait() {
  if (!finish_) return;
  auto finish = std::move(finish_);
  finish_ = nullptr;
  finish();
}

bool Work::poll() { return !finish_ || !poll_ || poll_(); }

ProcessGroup::ProcessGroup() : ProcessGroup(make_mpi_backend) {}

ProcessGroup::ProcessGroup(const std::function<std::unique_ptr<Backend>(MPI_Comm)>& host) {
  AMPGRAD_CHECK(is_initialized(), "ProcessGroup: call distributed::init() (or make a distributed::Environment) first");
  AMPGRAD_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  host_ = host(comm_);
}

ProcessGroup::~ProcessGroup() {
  nccl_.reset();
  host_.reset();
  if (comm_ != MPI_COMM_NULL && is_initialized()) MPI_Comm_free(&comm_);
}

Backend& ProcessGroup::backend_for(const char* op, const Tensor& t) {
  AMPGRAD_CHECK(t.defined(), "ProcessGroup::" << op << ": undefined tensor");
  // float8 is floating but storage-only: no transport can add it (NCCL and MPI have no such type)
  AMPGRAD_CHECK((t.is_floating_point() && !is_storage_only(t.dtype())) || t.dtype() == kInt64,
                "ProcessGroup::" << op << ": dtype " << dtype_name(t.dtype()) << " is not supported (float32, float64, float16, bfloat16 and int64 are)");
  if (t.device().is_cpu()) return *host_;
#ifdef AMPGRAD_WITH_NCCL
  if (!nccl_) nccl_ = make_nccl_backend(comm_, t.device().index);
  return *nccl_;
#else
  AMPGRAD_CHECK(false, "ProcessGroup::" << op << ": a " << t.device().str() << " tensor needs NCCL, and this build of ampgrad has none "
                                           "(configure with AMPGRAD_CUDA=ON where the CUDA toolkit ships nccl.h and libnccl)");
  return *host_;
#endif
}

static void check_reduce_op(const Tensor& t, ReduceOp op) {
  AMPGRAD_CHECK(op != ReduceOp::avg || t.is_floating_point(), "ProcessGroup::all_reduce: avg of an " << dtype_name(t.dtype())
                                                                  << " tensor is not defined (reduce with sum and divide as you mean to)");
}

void ProcessGroup::all_reduce(const Tensor& t, ReduceOp op) {
  Backend& b = backend_for("all_reduce", t);
  check_reduce_op(t, op);
  b.all_reduce(t, op, /*async=*/false).wait();
}

Work ProcessGroup::all_reduce_async(const Tensor& t, ReduceOp op) {
  Backend& b = backend_for("all_reduce", t);
  check_reduce_op(t, op);
  return b.all_reduce(t, op, /*async=*/true);
}

void ProcessGroup::broadcast(const Tensor& t, int root) {
  AMPGRAD_CHECK(root >= 0 && root < size_, "ProcessGroup::broadcast: root " << root << " is not a rank of this group of " << size_);
  backend_for("broadcast", t).broadcast(t, root);
}

Tensor ProcessGroup::all_gather(const Tensor& t) { return backend_for("all_gather", t).all_gather(t); }

void ProcessGroup::barrier() { AMPGRAD_MPI_CHECK(MPI_Barrier(comm_)); }

}  // namespace ampgrad::distributed
