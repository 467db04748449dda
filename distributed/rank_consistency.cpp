// rank_consistency.cpp — the GradScaler's state and decision made equal across ranks, and a
// checksum comparison of replicas.
#include "distributed/rank_consistency.h"

#include <algorithm>
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
static int64_t fnv1a(const unsigned char* bytes, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  int64_t out;
  std::memcpy(&out, &h, sizeof out);
  return out;
}

static int64_t checksum(const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor host = t.detach().to(Device::cpu()).contiguous();
  return fnv1a(static_cast<const unsigned char*>(host.raw_data()), size_t(host.numel()) * host.element_size());
}

// Rank `root`'s text on every rank, its bytes widened to int64 (the dtypes hold no byte).
static std::string broadcast_text(ProcessGroup& pg, const std::string& text, int root) {
  Tensor length = full({1}, double(text.size()), TensorOptions(kInt64));
  pg.broadcast(length, root);
  std::vector<int64_t> chars(text.begin(), text.end());
  chars.resize(size_t(length.item<int64_t>()));
  Tensor t = from_vector(chars, {int64_t(chars.size())}, TensorOptions(kInt64));
  pg.broadcast(t, root);
  chars = to_vector<int64_t>(t);
  return std::string(chars.begin(), chars.end());
}

void check_same_on_every_rank(ProcessGroup& pg, const std::string& what, const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + '\n';
  const int64_t mine = fnv1a(reinterpret_cast<const unsigned char*>(text.data()), text.size());
  const std::vector<int64_t> hashes = to_vector<int64_t>(pg.all_gather(from_vector(std::vector<int64_t>{mine}, {1}, TensorOptions(kInt64))));
  const auto other = std::find_if(hashes.begin(), hashes.end(), [&](int64_t h) { return h != hashes[0]; });
  if (other == hashes.end()) return;
  const int r = int(other - hashes.begin());
  // Every rank learns rank 0's and rank r's lines, and so raises the same message.
  auto split = [](const std::string& all) {
    std::vector<std::string> out;
    std::istringstream in(all);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const std::vector<std::string> first = split(broadcast_text(pg, text, 0)), differing = split(broadcast_text(pg, text, r));
  size_t i = 0;
  while (i < first.size() && i < differing.size() && first[i] == differing[i]) ++i;
  auto quoted = [](const std::vector<std::string>& v, size_t i) {
    return i < v.size() ? "'" + v[i] + "'" : "nothing more (" + std::to_string(v.size()) + " entries)";
  };
  AMPGRAD_CHECK(false, what << " differ between ranks: rank 0 has " << quoted(first, i) << ", rank " << r << " has " << quoted(differing, i));
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
