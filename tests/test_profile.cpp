// test_profile.cpp — the Profile counts each kernel call once, inside backward() and outside
// apart, its times add up to no more than the wall time; nested kernels, nested Profiles, calls
// that throw, and calls made while no Profile lives. Then the TraceWriter's timeline of one
// training step: valid trace-event JSON, every kernel in exactly one phase, nodes in backward.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/ops.h"
#include "devices.h"
#include "tensor/kernels.h"
#include "amp/grad_scaler.h"
#include "optim/optim.h"
#include "diagnostics/profile.h"
#include "diagnostics/trace.h"

using namespace ampgrad;

static const ProfileRow* find(const std::vector<ProfileRow>& rows, const std::string& kernel, bool backward) {
  for (const ProfileRow& r : rows)
    if (r.kernel == kernel && r.backward == backward) return &r;
  return nullptr;
}

DEVICE_TEST_CASE("a Profile counts each kernel call, inside backward() and outside apart") {
  manual_seed(1);
  Tensor x = randn({8, 5}).to(dev).requires_grad_(), w = randn({5, 3}).to(dev).requires_grad_();
  (void)exp(x.detach());  // before the Profile: not counted
  Profile prof(dev.is_cuda());
  Tensor y = relu(matmul(x, w));  // forward: one matmul, one relu
  sum(y).backward();              // backward: dx = g wᵀ and dw = xᵀ g, and relu's mask
  (void)relu(y.detach());         // after backward(): outside it again
  const std::vector<ProfileRow> rows = prof.rows();
  CHECK_FALSE(find(rows, "exp", false));
  REQUIRE(find(rows, "gemm", false));
  CHECK(find(rows, "gemm", false)->calls == 1);
  REQUIRE(find(rows, "gemm", true));
  CHECK(find(rows, "gemm", true)->calls == 2);
  REQUIRE(find(rows, "relu", false));
  CHECK(find(rows, "relu", false)->calls == 2);
  REQUIRE(find(rows, "relu_backward", true));
  CHECK(find(rows, "relu_backward", true)->calls == 1);
  CHECK_FALSE(find(rows, "relu_backward", false));

  double total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) CHECK(rows[i - 1].ms >= rows[i].ms);  // the largest first
    total += rows[i].ms;
  }
  CHECK(total <= prof.wall_ms());
  std::ostringstream table;
  prof.print(table);
  CHECK(table.str().rfind("kernel          phase        calls    total ms    share\n", 0) == 0);
  CHECK(table.str().find("\ngemm            backward         2") != std::string::npos);
  CHECK(table.str().find("\n(outside)") != std::string::npos);
  CHECK(table.str().find("100.0%\n") != std::string::npos);  // the wall time's line
}

TEST_CASE("a kernel's own kernel calls are part of its time, not rows of their own") {
  // col2im starts from an image of zeros, made by kernels::fill_.
  Tensor cols = randn({9, 8});
  Profile prof;
  (void)kernels::col2im(cols, {1, 2, 4, 4}, 2, 2, 1, 0);
  const std::vector<ProfileRow> rows = prof.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kernel == "col2im");
  CHECK(rows[0].calls == 1);
}

TEST_CASE("a kernel call that throws is not counted, and the ones after it are") {
  Tensor x = ones({2, 3});
  Profile prof;
  CHECK_THROWS_AS(kernels::sum(x, {7}, false), Error);  // the dim is checked inside the backend
  (void)exp(x);
  const std::vector<ProfileRow> rows = prof.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kernel == "exp");
  CHECK(rows[0].calls == 1);
}

TEST_CASE("Profiles nest: the inner one records while it lives, then the outer one again") {
  Tensor a = ones({3});
  Profile outer;
  (void)exp(a);
  {
    Profile inner;
    (void)exp(a);
    (void)exp(a);
    REQUIRE(inner.rows().size() == 1);
    CHECK(inner.rows()[0].calls == 2);
  }
  (void)exp(a);
  REQUIRE(outer.rows().size() == 1);
  CHECK(outer.rows()[0].calls == 2);
}

static bool inside(const nlohmann::json& inner, const nlohmann::json& outer) {
  const double slack = 1e-3;  // µs: ts and dur are doubles, their sums may round apart
  return outer["ts"].get<double>() <= inner["ts"].get<double>() + slack &&
         inner["ts"].get<double>() + inner["dur"].get<double>() <= outer["ts"].get<double>() + outer["dur"].get<double>() + slack;
}

DEVICE_TEST_CASE("a TraceWriter's timeline: kernels under exactly one phase, backward nodes under backward") {
  manual_seed(2);
  Tensor x = randn({8, 5}).to(dev), w = randn({5, 3}).to(dev).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 1024});
  const std::string path = "test_trace_" + dev.str() + ".json";
  {
    TraceWriter trace(path);
    opt.zero_grad();
    Tensor loss = sum(relu(matmul(x, w)));
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    trace.write();
  }
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);  // throws unless valid JSON
  std::remove(path.c_str());
  REQUIRE(doc["traceEvents"].is_array());
  std::vector<nlohmann::json> phases, kernels, nodes;
  std::map<int, double> last_ts;  // per tid
  for (const nlohmann::json& e : doc["traceEvents"]) {
    CHECK(e["ph"] == "X");
    CHECK(e["dur"].get<double>() >= 0);
    const int tid = e["tid"].get<int>();
    if (last_ts.count(tid)) CHECK(e["ts"].get<double>() >= last_ts[tid]);
    last_ts[tid] = e["ts"].get<double>();
    (e["cat"] == "phase" ? phases : e["cat"] == "kernel" ? kernels : nodes).push_back(e);
  }
  std::string phase_names;  // a string, so that a failure prints it
  for (const nlohmann::json& p : phases) phase_names += p["name"].get<std::string>() + " ";
  // zero_grad runs no kernel; scale() is the GradScaler's; backward()'s seed gradient (ones) is
  // made before its pass begins, so forward again; then step(): the GradScaler's unscale_, the
  // optimizer's update; then update()
  CHECK(phase_names == "forward GradScaler forward backward GradScaler optimizer GradScaler ");
  const auto phase_of = [&](const nlohmann::json& e) {
    std::string name;
    int containing = 0;
    for (const nlohmann::json& p : phases)
      if (inside(e, p)) ++containing, name = p["name"];
    CHECK_MESSAGE(containing == 1, e.dump());
    return name;
  };
  bool forward_matmul = false, backward_matmul = false;
  for (const nlohmann::json& k : kernels) {
    const std::string phase = phase_of(k);
    if (k["name"] == "gemm" && phase == "forward") {
      forward_matmul = true;
      CHECK(k["args"]["op"] == "matmul");  // the op's last kernel: its output's dtype and shape
      CHECK(k["args"]["dtype"] == "float32");
      CHECK(k["args"]["shape"] == nlohmann::json::array({8, 3}));
    }
    backward_matmul |= k["name"] == "gemm" && phase == "backward";
  }
  CHECK(forward_matmul);
  CHECK(backward_matmul);
  std::string node_names;
  for (const nlohmann::json& n : nodes) {
    CHECK(phase_of(n) == "backward");
    node_names += n["name"].get<std::string>() + " ";
  }
  // sum's, relu's, matmul's nodes from the loss down (the scale's mul first), then w's AccumulateGrad
  CHECK(node_names == "mul sum relu matmul AccumulateGrad ");
}
