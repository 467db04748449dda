// gemm.cpp — speed of the GEMM path and of one MLP training step, on the CPU (Google Benchmark).
// Holds: this CPU's measured FMA peak, float32 matmul at 256..2048 on 1 and 2 threads as GFLOP/s
// and as a fraction of that peak, the emulated tensor-core matmul in float16 (widen to float32,
// float32 GEMM, round once) and bfloat16 (oneDNN's bfloat16 kernel where built and the CPU has
// one, else widened as float16), one forward+backward of the 784-512-512-10 MLP in float32 and
// under CPU autocast (and with FP8 linears), and three non-GEMM kernels on 1 and 2 threads.
// Leaves out: correctness (tests/), whole epochs (scripts/bench.sh).
//
//   build/bench/gemm --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   build/bench/gemm --benchmark_filter='matmul_n/f32'
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "amp/autocast.h"
#include "autograd/float8.h"
#include "autograd/ops.h"
#include "nn/nn.h"
#include "tensor/threads.h"

namespace {
using namespace ampgrad;

// ---- the FMA-throughput peak ----
// Twelve independent accumulator chains: an FMA has ~4 cycles of latency and the core issues two
// per cycle, so at least 8 chains are needed to keep both FMA pipes busy. Compiled with the
// library's own vector flags, so it is the peak of the instructions Eigen's GEMM kernel uses:
// 16-lane FMAs where the build has AVX-512 (CMakeLists.txt), else 8-lane AVX2 ones.
constexpr int kChains = 12;
#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
// vsum keeps the chains live; a store, as _mm512_reduce_add_ps makes GCC 12 warn (bug 105593)
inline float vsum(Vec a) { float out[16]; _mm512_storeu_ps(out, a); return out[0] + out[15]; }
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int kLanes = 8;
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vsum(Vec a) { float out[8]; _mm256_storeu_ps(out, a); return out[0] + out[7]; }
#else
constexpr int kLanes = 0;
#endif

// Runs `iters` rounds on one thread; returns the flops done.
double fma_loop(int64_t iters) {
#if defined(__AVX2__) && defined(__FMA__)
  // Named variables, not an array: GCC keeps an array of vectors on the stack, and the chains
  // would then run at store-to-load speed instead of FMA speed.
  Vec a0 = vset(0), a1 = vset(1), a2 = vset(2), a3 = vset(3), a4 = vset(4), a5 = vset(5), a6 = vset(6), a7 = vset(7),
      a8 = vset(8), a9 = vset(9), a10 = vset(10), a11 = vset(11);
  const Vec mul = vset(0.999999f), add = vset(1e-6f);
  for (int64_t n = 0; n < iters; ++n) {
    a0 = vfma(a0, mul, add); a1 = vfma(a1, mul, add); a2 = vfma(a2, mul, add); a3 = vfma(a3, mul, add);
    a4 = vfma(a4, mul, add); a5 = vfma(a5, mul, add); a6 = vfma(a6, mul, add); a7 = vfma(a7, mul, add);
    a8 = vfma(a8, mul, add); a9 = vfma(a9, mul, add); a10 = vfma(a10, mul, add); a11 = vfma(a11, mul, add);
    // keeps the compiler from folding rounds together (the chains stay in registers)
    asm volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),
                 "+v"(a9), "+v"(a10), "+v"(a11));
  }
  benchmark::DoNotOptimize(vsum(a0) + vsum(a1) + vsum(a2) + vsum(a3) + vsum(a4) + vsum(a5) + vsum(a6) + vsum(a7) +
                           vsum(a8) + vsum(a9) + vsum(a10) + vsum(a11));
  return double(iters) * kChains * kLanes * 2;
#else
  (void)iters;
  return 0;  // no AVX2/FMA: no peak to measure; the fraction counters are left out
#endif
}

// Flops done by `threads` threads each running fma_loop(iters) at once.
double fma_parallel(int threads, int64_t iters) {
  double flops = 0;
#pragma omp parallel num_threads(threads) reduction(+ : flops)
  flops += fma_loop(iters);
  return flops;
}

// One core's peak GFLOP/s, measured once (best of 5 × ~0.1 s). The peak on t threads is t times
// this: the cores are alike, and one busy core elsewhere on a shared machine then cannot lower
// the yardstick (the fma_peak/threads:2 benchmark shows what two threads really reach).
double core_peak_gflops() {
  static const double peak = [] {
    const int64_t iters = 2'000'000;  // ~0.1 s at ~3 GHz
    fma_parallel(1, iters / 10);      // wake the clocks
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      double flops = fma_parallel(1, iters);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, flops / s * 1e-9);
    }
    return best;
  }();
  return peak;
}
double peak_gflops(int threads) { return threads * core_peak_gflops(); }

void fma_peak(benchmark::State& state) {
  const int threads = int(state.range(0));
  const int64_t iters = 200'000;
  double flops = 0;
  for (auto _ : state) flops += fma_parallel(threads, iters);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(std::to_string(kLanes) + "-lane fma, " + std::to_string(kChains) + " chains/thread");
}
BENCHMARK(fma_peak)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- matmul: (n, n) @ (n, n) ----
// Arguments: n, threads. The inputs are made in the benchmarked dtype, so a half matmul times
// the whole tensor-core path: for float16, widen both inputs, float32 GEMM, round the result
// once; for bfloat16 on oneDNN, its kernel, whose dot-product instruction does two products a
// lane where an FMA does one, so its of_peak (a fraction of the float32 FMA peak) can pass 1.
void matmul_n(benchmark::State& state, DType dtype) {
  const int64_t n = state.range(0);
  const int threads = int(state.range(1));
  set_num_threads(threads);
  manual_seed(0);
  Tensor a = randn({n, n}).to(dtype), b = randn({n, n}).to(dtype);
  NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double flops_per_iter = 2.0 * n * n * n;
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iter * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
  // fraction of the FMA peak on as many threads: a plain number (GFLOP/s ÷ peak), timed by the
  // same wall clock around the loop, since a rate counter would print as "x/s"
  if (double peak = peak_gflops(threads); peak > 0)
    state.counters["of_peak"] = flops_per_iter * 1e-9 * double(state.iterations()) / seconds / peak;
  set_num_threads(0);
}

void gemm_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "threads"});
  for (int threads : {1, 2})
    for (int64_t n : {256, 512, 1024, 2048}) b->Args({n, threads});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(matmul_n, f32, kFloat32)->Apply(gemm_args);
BENCHMARK_CAPTURE(matmul_n, f16, kFloat16)->Apply(gemm_args);
BENCHMARK_CAPTURE(matmul_n, bf16, kBFloat16)->Apply(gemm_args);

// ---- one training step of the MNIST MLP: forward, cross-entropy, backward (no optimizer) ----
// x (128, 784), y (128); model 784-512-512-10 with ReLU. `amp` off = float32; else CPU autocast
// in that dtype, as the trainer runs it (parameters stay float32 master weights); `float8`: every
// linear an FP8 GEMM (float8_autocast), as `mnist --float8`. Argument: threads.
void mlp_step(benchmark::State& state, std::optional<DType> amp_dtype, bool float8 = false) {
  const int threads = int(state.range(0));
  set_num_threads(threads);
  manual_seed(0);
  using std::make_shared;
  auto model = make_shared<nn::Sequential>(make_shared<nn::Linear>(784, 512), make_shared<nn::ReLU>(),
                                           make_shared<nn::Linear>(512, 512), make_shared<nn::ReLU>(),
                                           make_shared<nn::Linear>(512, 10));
  const int64_t N = 128;
  Tensor x = rand({N, 784});                 // (N, 784) in [0, 1), like the images
  Tensor y = randint(0, 10, {N});            // (N)
  for (auto _ : state) {
    model->zero_grad();
    Tensor loss;
    {
      amp::autocast ac(DeviceType::CPU, amp_dtype.value_or(kBFloat16), amp_dtype.has_value());
      float8_autocast f8(DeviceType::CPU, {}, float8);
      loss = cross_entropy(model->forward(x), y);
    }
    loss.backward();
    benchmark::DoNotOptimize(loss.raw_data());
  }
  // 3 GEMMs per layer (forward, dx, dW) of 2·N·Din·Dout flops each, less the first layer's dx,
  // which is skipped (x needs no gradient). Elementwise work is not counted.
  const double fwd = 2.0 * N * (784.0 * 512 + 512.0 * 512 + 512.0 * 10);
  const double step_flops = fwd * 3 - 2.0 * N * 784 * 512;
  state.counters["GFLOP/s"] = benchmark::Counter(step_flops * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["samples/s"] = benchmark::Counter(double(N) * double(state.iterations()), benchmark::Counter::kIsRate);
  set_num_threads(0);
}
BENCHMARK_CAPTURE(mlp_step, f32, std::nullopt)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mlp_step, amp_f16, std::optional<DType>(kFloat16))->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mlp_step, amp_bf16, std::optional<DType>(kBFloat16))->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mlp_step, f32_float8, std::nullopt, true)->ArgName("threads")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mlp_step, amp_bf16_float8, std::optional<DType>(kBFloat16), true)->ArgName("threads")->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- the non-GEMM kernels: one strided walk, two casts, one column sum, (1024, 1024) ----
// What the threads of parallel.h buy outside the GEMM: gelu of a transposed view (the strided
// walk), the float32 -> float16 and -> bfloat16 casts autocast makes of a weight (F16C; AVX512-BF16
// where the CPU has it), and a bias gradient's column sum; and gelu of the contiguous tensor, whose loads are plain vector loads (the strided walk
// gathers its elements, to the same values). Arguments: threads; the 1- and 2-thread rows of one
// run give the ratio.
void elementwise(benchmark::State& state, int which) {
  set_num_threads(int(state.range(0)));
  manual_seed(0);
  Tensor x = randn({1024, 1024});
  NoGradGuard no_grad;
  for (auto _ : state) {
    Tensor y = which == 0 ? gelu(x.t()) : which == 1 ? x.to(kFloat16) : which == 2 ? sum(x, {0}) : which == 4 ? x.to(kBFloat16) : gelu(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.counters["elements/s"] = benchmark::Counter(double(x.numel()) * double(state.iterations()), benchmark::Counter::kIsRate);
  set_num_threads(0);
}
BENCHMARK_CAPTURE(elementwise, gelu_strided, 0)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(elementwise, cast_f16, 1)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(elementwise, cast_bf16, 4)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(elementwise, column_sum, 2)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(elementwise, gelu_contiguous, 3)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- a 16-bit mul, (2048, 512) bfloat16: as the CPU runs it, widening a tile at a time on the
// stack, beside what it did before, widening both operands whole, the float32 mul, narrowing
// (the same bits; the second holds three float32 copies at once).
void half_mul(benchmark::State& state, bool whole) {
  manual_seed(0);
  Tensor a = randn({2048, 512}).to(kBFloat16), b = randn({2048, 512}).to(kBFloat16);
  NoGradGuard no_grad;
  for (auto _ : state) {
    Tensor y = whole ? (a.to(kFloat32) * b.to(kFloat32)).to(kBFloat16) : a * b;
    benchmark::DoNotOptimize(y.raw_data());
  }
}
BENCHMARK_CAPTURE(half_mul, tiles, false)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(half_mul, whole_copies, true)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

// Measures the peak first, while nothing else of ours runs, and prints it in the context block
// (and the JSON's "context"), so every of_peak figure can be checked against it.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (int threads : {1, 2}) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", peak_gflops(threads));
    benchmark::AddCustomContext("fma_peak_gflops_" + std::to_string(threads) + "t", buf);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
