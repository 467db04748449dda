// autocast_log.cpp — the autocast log's summary: one row per (op, input dtypes, dtype it ran in,
// policy), with the calls, casts and cache hits of each.
#include <iomanip>
#include <map>
#include <ostream>
#include <string>
#include <tuple>

#include "diagnostics/autocast_log.h"
#include "tensor/dtype.h"

namespace ampgrad::amp {

static std::string dtypes_str(const std::vector<DType>& ds) {
  std::string s;
  for (DType d : ds) s += (s.empty() ? "" : ",") + std::string(dtype_name(d));
  return s.empty() ? "-" : s;
}

void AutocastLog::print(std::ostream& os) const {
  struct Row { int calls = 0, casts = 0, hits = 0; };
  std::map<std::tuple<std::string, std::string, std::string, std::string>, Row> rows;
  for (const AutocastCall& e : calls_) {
    Row& r = rows[{e.op, dtypes_str(e.input_dtypes), e.run_dtype ? dtype_name(*e.run_dtype) : "-", e.policy}];
    r.calls++;
    r.casts += e.casts;
    r.hits += e.cache_hits;
  }
  int op_width = 15, inputs_width = 26, ran_in_width = 10;  // wider for a longer name
  for (auto& [k, r] : rows) {
    op_width = std::max(op_width, int(std::get<0>(k).size()) + 1);
    inputs_width = std::max(inputs_width, int(std::get<1>(k).size()) + 1);
    ran_in_width = std::max(ran_in_width, int(std::get<2>(k).size()) + 1);
  }
  os << "autocast log: " << calls_.size() << " op calls\n"
     << std::left << std::setw(op_width) << "op" << std::setw(inputs_width) << "inputs" << std::setw(ran_in_width) << "ran in"
     << std::setw(17) << "policy" << std::right << std::setw(7) << "calls" << std::setw(7) << "casts" << std::setw(12) << "cache hits" << "\n";
  bool outside = false, untyped = false;
  for (auto& [k, r] : rows) {
    os << std::left << std::setw(op_width) << std::get<0>(k) << std::setw(inputs_width) << std::get<1>(k) << std::setw(ran_in_width) << std::get<2>(k)
       << std::setw(17) << std::get<3>(k) << std::right << std::setw(7) << r.calls << std::setw(7) << r.casts << std::setw(10) << r.hits << "\n";
    outside |= std::get<3>(k) == "(autocast off)";
    untyped |= std::get<1>(k) == "-";
  }
  // The rows a reader would otherwise puzzle over: calls autocast saw but had no say in.
  if (outside)
    os << "(autocast off): called outside every autocast region (a batch moved to the device, the GradScaler's scale, the\n"
          "  optimizer, the program's own sums), so autocast changed nothing; the dtype is the program's.\n";
  if (untyped) os << "inputs -: no floating-point input (int64 labels, a bool mask), which autocast never casts.\n";
}

}  // namespace ampgrad::amp
