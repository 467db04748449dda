// vecmath.cpp — speed of the CPU's transcendental kernels on one thread (Google Benchmark): the
// elementwise exp, log, log1p, tanh, sigmoid, silu and gelu (forward and backward) on 1M floats,
// and the row kernels softmax, log_softmax, layer_norm and cross_entropy (forward) on (4096, 512).
// Leaves out: accuracy (tests/test_vecmath.cpp), more threads (bench/gemm.cpp's elementwise rows).
//
//   build/bench/vecmath --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <functional>

#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/threads.h"

namespace {
using namespace ampgrad;

// f(x) for x of `shape`, N(0, 2²) in float32, or in `dtype`; counts elements/s.
void run(benchmark::State& state, const Shape& shape, DType dtype, const std::function<Tensor(const Tensor&)>& f) {
  set_num_threads(1);
  manual_seed(0);
  const Tensor x = (randn(shape) * 2.0).to(dtype);
  NoGradGuard no_grad;
  for (auto _ : state) {
    Tensor y = f(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.counters["elements/s"] = benchmark::Counter(double(x.numel()) * double(state.iterations()), benchmark::Counter::kIsRate);
  set_num_threads(0);
}

const Shape kFlat{1 << 20}, kRows{4096, 512};
#define ELEMENTWISE(name, expr)                                                                                  \
  void name(benchmark::State& state, DType dtype) { run(state, kFlat, dtype, [](const Tensor& x) { return expr; }); } \
  BENCHMARK_CAPTURE(name, f32, kFloat32)->UseRealTime()->Unit(benchmark::kMicrosecond);                          \
  BENCHMARK_CAPTURE(name, bf16, kBFloat16)->UseRealTime()->Unit(benchmark::kMicrosecond);
#define ROWS(name, expr)                                                                                         \
  void name(benchmark::State& state, DType dtype) { run(state, kRows, dtype, [](const Tensor& x) { return expr; }); } \
  BENCHMARK_CAPTURE(name, f32, kFloat32)->UseRealTime()->Unit(benchmark::kMicrosecond);                          \
  BENCHMARK_CAPTURE(name, bf16, kBFloat16)->UseRealTime()->Unit(benchmark::kMicrosecond);

ELEMENTWISE(exp_1M, exp(x))
ELEMENTWISE(log_1M, log(abs(x)))
ELEMENTWISE(log1p_1M, log1p(abs(x)))
ELEMENTWISE(tanh_1M, tanh(x))
ELEMENTWISE(sigmoid_1M, sigmoid(x))
ELEMENTWISE(silu_1M, silu(x))
ELEMENTWISE(gelu_1M, gelu(x))
ELEMENTWISE(gelu_backward_1M, kernels::binary(kernels::Binary::gelu_backward, x, x))  // the kernel alone
ROWS(softmax_4096x512, softmax(x, -1))
ROWS(log_softmax_4096x512, log_softmax(x, -1))
ROWS(layer_norm_4096x512, layer_norm(x, {512}))
ROWS(cross_entropy_4096x512, cross_entropy(x, randint(0, 512, {4096})))

}  // namespace

BENCHMARK_MAIN();
