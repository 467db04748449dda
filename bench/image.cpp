// image.cpp — speed of the CPU's image kernels at the shapes of examples/mnist's CNN, batch 128, on
// all threads (Google Benchmark): im2col of each convolution, col2im of the second (the first's
// input needs no gradient), max_pool2d after each, the transposes that turn the convolution's
// GEMM output into (N, C, H, W) and back, and batch norm's sum of each channel.
// Leaves out: the GEMMs (bench/gemm.cpp), correctness (tests/test_ops.cpp, test_cuda_host.cpp).
//
//   build/bench/image --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <functional>

#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace {
using namespace ampgrad;

// f(x) for x of `shape`, N(0, 1) in float32; counts x's elements/s.
void run(benchmark::State& state, const Shape& shape, const std::function<Tensor(const Tensor&)>& f) {
  manual_seed(0);
  const Tensor x = randn(shape);
  NoGradGuard no_grad;
  for (auto _ : state) {
    Tensor y = f(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.counters["elements/s"] = benchmark::Counter(double(x.numel()) * double(state.iterations()), benchmark::Counter::kIsRate);
}

// The CNN: (128, 1, 28, 28) -conv 5x5-> (128, 32, 24, 24) -pool 2-> (128, 32, 12, 12) -conv 5x5-> (128, 64, 8, 8) -pool 2-> (128, 64, 4, 4)
const Shape kImage1{128, 1, 28, 28}, kImage2{128, 32, 12, 12}, kCols2{128 * 8 * 8, 32 * 25};
const Shape kConv1{128, 32, 24, 24}, kConv2{128, 64, 8, 8};
#define CASE(name, shape, expr)                                                                     \
  void name(benchmark::State& state) { run(state, shape, [](const Tensor& x) { return expr; }); } \
  BENCHMARK(name)->UseRealTime()->Unit(benchmark::kMicrosecond);

CASE(im2col_conv1, kImage1, kernels::im2col(x, 5, 5, 1, 0))
CASE(im2col_conv2, kImage2, kernels::im2col(x, 5, 5, 1, 0))
CASE(col2im_conv2, kCols2, kernels::col2im(x, kImage2, 5, 5, 1, 0))
CASE(max_pool2d_conv1, kConv1, max_pool2d(x, 2))
CASE(max_pool2d_conv2, kConv2, max_pool2d(x, 2))
CASE(to_nchw_conv2, kConv2, x.view({128, 8, 8, 64}).permute({0, 3, 1, 2}).contiguous())  // the GEMM's rows -> (N, C, H, W)
CASE(to_rows_conv2, kConv2, x.permute({0, 2, 3, 1}).contiguous())                        // and back, in backward
CASE(channel_sums_conv1, kConv1, sum(x, {0, 2, 3}))                                        // batch norm's mean and variance

}  // namespace

BENCHMARK_MAIN();
