// mpi_backend.cpp — collectives on CPU tensors through MPI. A tensor MPI can reduce as it lies
// (contiguous float32, float64 or int64) is reduced in place; any other (16-bit, or a view) goes
// through a contiguous copy in the wire type (16-bit widened to float32), written back once when
// the work finishes: a float16 sum is rounded once, whatever order MPI adds the ranks in.
// Broadcast and all_gather move bytes, so every dtype travels unchanged.
#include <climits>
#include <memory>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "distributed/process_group.h"

namespace ampgrad::distributed {
namespace {

DType wire_dtype(DType t) { return is_half(t) ? kFloat32 : t; }

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    default: break;  // halves are widened to float32 first; ProcessGroup refuses the rest
  }
  AMPGRAD_CHECK(false, "ProcessGroup: MPI reduces no " << dtype_name(t) << " tensors");
  return MPI_DATATYPE_NULL;
}

int mpi_count(const char* op, int64_t n) {
  AMPGRAD_CHECK(n <= INT_MAX, "ProcessGroup::" << op << ": " << n << " elements (bytes) exceed MPI's int count; split the tensor");
  return int(n);
}

class MpiBackend final : public Backend {
 public:
  explicit MpiBackend(MPI_Comm comm) : comm_(comm) { MPI_Comm_size(comm, &size_); }

  Work all_reduce(const Tensor& t, ReduceOp op, bool async) override {
    NoGradGuard no_grad;
    Tensor target = t.detach();
    const DType wire = wire_dtype(t.dtype());
    const bool in_place = t.dtype() == wire && t.is_contiguous();
    const Tensor buffer = in_place ? target : target.to(wire).contiguous();
    auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);  // stays null when blocking: MPI_Wait returns at once
    const int count = mpi_count("all_reduce", buffer.numel());
    const MPI_Op mpi_op = op == ReduceOp::max ? MPI_MAX : MPI_SUM;
    if (async) AMPGRAD_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer.raw_data(), count, mpi_type(wire), mpi_op, comm_, request.get()));
    else AMPGRAD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer.raw_data(), count, mpi_type(wire), mpi_op, comm_));
    const int ranks = size_;
    auto finish = [=]() mutable {
      AMPGRAD_MPI_CHECK(MPI_Wait(request.get(), MPI_STATUS_IGNORE));
      NoGradGuard no_grad;
      // avg divides the float32 (or wider) sum, then rounds once into a 16-bit target
      if (op == ReduceOp::avg) target.copy_(buffer / double(ranks));
      else if (!in_place) target.copy_(buffer);
      else target.bump_version();  // MPI wrote into it: a saved copy of it is stale now
    };
    auto poll = [request] {
      int done = 0;
      AMPGRAD_MPI_CHECK(MPI_Test(request.get(), &done, MPI_STATUS_IGNORE));
      return done != 0;
    };
    return Work(finish, poll);
  }

  void broadcast(const Tensor& t, int root) override {
    NoGradGuard no_grad;
    Tensor target = t.detach();
    const Tensor buffer = target.contiguous();
    AMPGRAD_MPI_CHECK(MPI_Bcast(buffer.raw_data(), mpi_count("broadcast", buffer.numel() * int64_t(buffer.element_size())), MPI_BYTE, root, comm_));
    if (!buffer.is_same(target)) target.copy_(buffer);
    else target.bump_version();
  }

  Tensor all_gather(const Tensor& t) override {
    NoGradGuard no_grad;
    const Tensor local = t.detach().contiguous();
    Shape shape{size_};
    shape.insert(shape.end(), t.shape().begin(), t.shape().end());
    Tensor out = empty(shape, TensorOptions(t.dtype()));
    const int bytes = mpi_count("all_gather", local.numel() * int64_t(local.element_size()));
    AMPGRAD_MPI_CHECK(MPI_Allgather(local.raw_data(), bytes, MPI_BYTE, out.raw_data(), bytes, MPI_BYTE, comm_));
    return out;
  }

 private:
  MPI_Comm comm_;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(MPI_Comm comm) { return std::make_unique<MpiBackend>(comm); }

}  // namespace ampgrad::distributed
