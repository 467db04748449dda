// rank_consistency.cpp — the GradScaler's state and decision made equal across ranks, and a
// checksum comparison of replicas.
#include "distributed/rank_consistency.h"

#include <cstring>
#include <sstream>

#include "autograd/grad_mode.h"

namespace ampgrad::distributed {

void broadcast_scaler_state(amp::GradScaler& scaler, ProcessGroup& pg) {
  if (!scaler.is_enabled()) return;
  std::map<std::string, double> state = scaler.state_dict();  // keys sorted: the same order on every rank
  std::vector<double> values;
  for (auto& [key, v] : state) values.push_back(v);
  Tensor t = from_vector(values, {int64_t(values.size())}, TensorOptions(kFloat64));
  pg.broadcast(t, 0);
  values = to_vector<double>(t);
  size_t i = 0;
  for (auto& [key, v] : state) v = values[i++];
  scaler.load_state_dict(state);
}

void all_reduce_found_inf(amp::GradScaler& scaler, const optim::Optimizer& optimizer, ProcessGroup& pg) {
  if (!scaler.is_enabled()) return;
  const Tensor found_inf = scaler.found_inf(optimizer);
  AMPGRAD_CHECK(found_inf.defined(), "all_reduce_found_inf: call scaler.unscale_(optimizer) first; there is no found_inf to reduce");
  pg.all_reduce(found_inf, ReduceOp::max);
}

// FNV-1a over the bytes: a bit flip anywhere changes it.
static int64_t checksum(const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor host = t.detach().to(Device::cpu()).contiguous();
  const auto* bytes = static_cast<const unsigned char*>(host.raw_data());
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = 0; i < host.numel() * int64_t(host.element_size()); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  int64_t out;
  std::memcpy(&out, &h, sizeof out);
  return out;
}

void check_parameters_match(ProcessGroup& pg, const nn::NamedTensors& params) {
  std::vector<int64_t> mine;
  for (const auto& [name, p] : params) mine.push_back(checksum(p));
  const Tensor all = pg.all_gather(from_vector(mine, {int64_t(mine.size())}, TensorOptions(kInt64)));  // (ranks, params)
  const std::vector<int64_t> sums = to_vector<int64_t>(all);
  const size_t n = mine.size();
  for (size_t i = 0; i < n; ++i)
    for (int r = 1; r < pg.size(); ++r)
      if (sums[r * n + i] != sums[i]) {
        std::ostringstream per_rank;
        for (int k = 0; k < pg.size(); ++k) per_rank << (k ? ", " : "") << "rank " << k << ": " << std::hex << uint64_t(sums[k * n + i]) << std::dec;
        AMPGRAD_CHECK(false, "replicas diverged: parameter '" << params[i].first << "' differs between ranks (checksums " << per_rank.str()
                                                              << "); the first of " << n << " parameters to differ");
      }
}

}  // namespace ampgrad::distributed
