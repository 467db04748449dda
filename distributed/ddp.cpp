// ddp.cpp — DistributedDataParallel: buckets laid out at construction, filled and started from
// the engine's post-accumulate announcement, finished when the last gradient has arrived.
#include "distributed/ddp.h"

#include <cstdlib>

#include "autograd/grad_mode.h"
#include "distributed/rank_consistency.h"

namespace ampgrad::distributed {

static int64_t check_every_from_environment() {
  const char* v = std::getenv("AMPGRAD_DDP_CHECK");
  if (!v || !*v) return 0;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  AMPGRAD_CHECK(*end == 0 && n >= 0, "AMPGRAD_DDP_CHECK must be a number of steps >= 0, got '" << v << "'");
  return n;
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& pg, DdpOptions options)
    : module_(register_module("module", std::move(module))), pg_(pg), options_(options) {
  if (options_.check_every < 0) options_.check_every = check_every_from_environment();
  AMPGRAD_CHECK(options_.bucket_cap_bytes > 0, "DistributedDataParallel: bucket_cap_bytes must be > 0, got " << options_.bucket_cap_bytes);
  // The replicas must be one model before rank 0's values can fill them (as PyTorch's DDP checks
  // at construction): a broadcast into other shapes would hang or overrun.
  std::vector<std::string> layout;
  for (auto& [name, p] : named_parameters()) layout.push_back("parameter " + name + " " + dtype_name(p.dtype()) + " " + shape_str(p.shape()));
  for (auto& [name, b] : named_buffers()) layout.push_back("buffer " + name + " " + dtype_name(b.dtype()) + " " + shape_str(b.shape()));
  check_same_on_every_rank(pg_, "DistributedDataParallel: the models", layout);
  // Replicas start equal: rank 0's values everywhere.
  for (auto& [name, p] : named_parameters()) pg_.broadcast(p, 0);
  for (auto& [name, b] : named_buffers()) pg_.broadcast(b, 0);

  // Buckets in reverse registration order, each of one dtype and device, up to the cap; each
  // bucket's buffer is allocated once its parameters are known.
  nn::NamedTensors params = named_parameters();
  int64_t bucket_bytes = 0, bucket_numel = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const auto& [name, p] = *it;
    if (!p.requires_grad()) continue;
    const int64_t bytes = p.numel() * int64_t(p.element_size());
    const Tensor* first = buckets_.empty() ? nullptr : &slots_[buckets_.back().slots.front()].param;
    if (!first || bucket_bytes + bytes > options_.bucket_cap_bytes || first->dtype() != p.dtype() || first->device() != p.device()) {
      buckets_.emplace_back();
      bucket_bytes = bucket_numel = 0;
    }
    slot_of_[p.impl_ptr().get()] = int(slots_.size());
    slots_.push_back({name, p, bucket_numel, int(buckets_.size()) - 1});
    buckets_.back().slots.push_back(int(slots_.size()) - 1);
    bucket_bytes += bytes;
    bucket_numel += p.numel();
  }
  for (Bucket& b : buckets_) {
    const Slot& last = slots_[b.slots.back()];
    b.flat = empty({last.offset + last.param.numel()}, TensorOptions(last.param.dtype()).device(last.param.device()));
  }
  reset_pass();
  add_observer(this);
}

DistributedDataParallel::~DistributedDataParallel() { remove_observer(this); }

std::vector<std::vector<std::string>> DistributedDataParallel::buckets() const {
  std::vector<std::vector<std::string>> names;
  for (const Bucket& b : buckets_) {
    names.emplace_back();
    for (int s : b.slots) names.back().push_back(slots_[s].name);
  }
  return names;
}

// A backward pass that reached some parameters and not others left buckets unreduced: refused
// here, at the next forward, naming the parameters (as PyTorch without find_unused_parameters).
void DistributedDataParallel::refuse_unfinished_pass() {
  if (ready_ == 0) return;
  std::string unused;
  for (auto s = slots_.rbegin(); s != slots_.rend(); ++s)  // in registration order
    if (!s->ready) unused += (unused.empty() ? "'" : ", '") + s->name + "'";
  reset_pass();
  AMPGRAD_CHECK(false, "DistributedDataParallel: the last backward pass gave no gradient to " << unused
                           << ", so their buckets were never reduced (other ranks may be waiting in them). Every parameter "
                              "must take part in the loss on every rank: remove the unused ones from the module");
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  refuse_unfinished_pass();
  if (options_.check_every > 0 && forwards_ % options_.check_every == 0) check_parameters_match(pg_, named_parameters());
  ++forwards_;
  if (options_.broadcast_buffers && is_training())
    for (auto& [name, b] : named_buffers()) pg_.broadcast(b, 0);
  return module_->forward(x);
}

void DistributedDataParallel::on_grad_accumulated(const Tensor& leaf) {
  if (no_sync_) return;
  auto it = slot_of_.find(leaf.impl_ptr().get());
  if (it == slot_of_.end()) return;  // some other model's leaf
  Slot& s = slots_[it->second];
  if (s.ready) return;  // announced in an earlier pass that did not finish (refused at the next forward)
  s.ready = true;
  ++ready_;
  --buckets_[s.bucket].pending;
  // A collective that fails (to start, to progress or to finish) ends the pass with its error:
  // reset, so that the next forward starts a new pass rather than refusing this one as unfinished.
  try {
    launch_ready_buckets();
    if (ready_ == int(slots_.size())) return finish_pass();
    for (int b = 0; b < next_bucket_; ++b) buckets_[b].work.poll();  // MPI moves nonblocking collectives inside its calls
  } catch (...) {
    reset_pass();
    throw;
  }
}

// A bucket starts when it is full and every bucket before it has started: all ranks then issue
// the same collectives in the same order, whatever order their engines finish leaves in.
void DistributedDataParallel::launch_ready_buckets() {
  NoGradGuard no_grad;
  while (next_bucket_ < int(buckets_.size()) && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_++];
    b.work.wait();  // a pass refused halfway may have left this bucket's collective running: end it before writing its buffer
    for (int i : b.slots) {
      const Slot& s = slots_[i];
      b.flat.narrow(0, s.offset, s.param.numel()).view(s.param.shape()).copy_(s.param.grad());
    }
    b.work = pg_.all_reduce_async(b.flat, ReduceOp::avg);
  }
}

void DistributedDataParallel::finish_pass() {
  NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    b.work.wait();
    for (int i : b.slots) {
      const Slot& s = slots_[i];
      s.param.grad().copy_(b.flat.narrow(0, s.offset, s.param.numel()).view(s.param.shape()));
    }
  }
  reset_pass();
}

void DistributedDataParallel::reset_pass() {
  for (Slot& s : slots_) s.ready = false;
  for (Bucket& b : buckets_) b.pending = int(b.slots.size());
  next_bucket_ = 0;
  ready_ = 0;
}

}  // namespace ampgrad::distributed
