// test_cuda_paths.cpp — the CUDA kernels' second paths, at the sizes that take them, against the
// CPU: column sums in more than one chunk (> 1024 rows), grid-stride loops past one grid (more
// runs than the grid's 16.7M threads, and a tail past the last run; 70,000 rows), rows longer than
// one block (D > 512), the two-pass row sum (R > 16,384), float32 GEMMs with TF32 on, 16-bit
// atomicAdd (scatter_add, index_select's backward), an event ordering a second stream after the
// compute stream, the allocator's out-of-memory retry (run alone: tests/run_alone.cmake), and a
// second GPU (ops there; a copy between GPUs ordered against the source's later writes).
// test_cuda.cpp covers the first paths. Where the data allow it (integers, an add) a result must
// be the CPU's bit for bit, so a kernel that drops a row, a chunk or a tail is seen; tests/mutants/
// holds such kernels (# device: cuda), which scripts/gpu-check.sh shows fail here.
// Each case skips first thing without a GPU (skip.h); sizes are kept to seconds on an H200.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/ops.h"
#include "skip.h"
#include "tensor/memory_stats.h"
#include "tensor/random.h"
#include "tolerance.h"
#ifdef AMPGRAD_WITH_CUDA
#include <cuda_runtime_api.h>

#include "tensor/cuda/runtime.h"
#endif

using namespace ampgrad;

namespace {

const Device cpu = Device::cpu();

double max_abs(const Tensor& t) { return max(abs(t.to(cpu).to(kFloat64))).item<double>(); }

// n values of `dtype` on the CPU, each 1 with probability 1/every, else 0 (every = 0: each -1, 0
// or 1 alike): integers whose every partial sum is exact in a float32 accumulator, so a GPU sum
// must give the CPU's bits, a sum rounded once to the dtype.
Tensor integers(Shape shape, DType dtype, uint64_t seed, uint64_t every = 0) {
  Generator gen(seed);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = every ? double(gen.next() % every == 0) : double(int64_t(gen.next() % 3) - 1);
  return from_vector(v, shape).to(dtype);
}

void check_same_bits(const std::string& what, const Tensor& on_cpu, const Tensor& on_gpu) {
  REQUIRE_MESSAGE(on_gpu.device().is_cuda(), what << " ran on " << on_gpu.device().str());
  CHECK_MESSAGE(to_vector<double>(on_gpu) == to_vector<double>(on_cpu), what << " (" << dtype_name(on_cpu.dtype()) << "): not the CPU's values");
}

// |cpu − cuda| <= tolerance(dtype, steps, R, scale) everywhere (tolerance.h), naming the worst.
void check_against_cpu(const std::string& what, const Tensor& on_cpu, const Tensor& on_gpu, int steps, int64_t R, double scale) {
  REQUIRE_MESSAGE(on_gpu.device().is_cuda(), what << " ran on " << on_gpu.device().str());
  REQUIRE_MESSAGE(on_cpu.shape() == on_gpu.shape(), what << ": cpu " << shape_str(on_cpu.shape()) << ", cuda " << shape_str(on_gpu.shape()));
  const double worst = max_abs(on_gpu.to(cpu).to(kFloat64) - on_cpu.to(kFloat64));
  const double tol = tolerance(on_cpu.dtype(), steps, R, std::max(max_abs(on_cpu), scale));
  CHECK_MESSAGE(worst <= tol, what << " (" << dtype_name(on_cpu.dtype()) << "): |cpu - cuda| reaches " << worst << ", bound " << tol);
}

// Each element within its own bound, for an op whose outputs are float32 quotients of sums of R
// terms, rounded once (softmax): cpu_cuda_half_tolerance (tolerance.h) with the element as its
// scale, so an output that is 0, or off by a factor, fails where it is small too.
void check_each_against_cpu(const std::string& what, const Tensor& on_cpu, const Tensor& on_gpu, int64_t R) {
  REQUIRE_MESSAGE(on_gpu.device().is_cuda(), what << " ran on " << on_gpu.device().str());
  const std::vector<double> c = to_vector<double>(on_cpu), g = to_vector<double>(on_gpu);
  REQUIRE(c.size() == g.size());
  size_t worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double bound = cpu_cuda_half_tolerance(on_cpu.dtype(), 0, R, c[i], std::abs(c[i]));
    const double ratio = c[i] == g[i] ? 0 : bound > 0 ? std::abs(c[i] - g[i]) / bound : INFINITY;
    if (!(ratio <= worst_ratio)) worst = i, worst_ratio = ratio;
  }
  CHECK_MESSAGE(worst_ratio <= 1, what << " (" << dtype_name(on_cpu.dtype()) << "): element " << worst << " is " << g[worst] << " on cuda, "
                                       << c[worst] << " on the cpu, " << worst_ratio << " times its bound");
}

}  // namespace

TEST_CASE("CUDA column sums over more than one chunk of 1024 rows: a bias gradient at batch 5000, exactly") {
  SKIP_WITHOUT_GPU();
  // Values -1, 0, 1: each column sum is exact on both devices, and a row dropped (or summed twice)
  // moves one by 1, which every dtype here resolves below 256 (bfloat16's 8 bits).
  for (DType t : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor x = integers({5000, 37}, t, 11);
    REQUIRE(max_abs(sum(x, {0})) < 256);
    check_same_bits("sum over dim 0", sum(x, {0}), sum(x.to(Device::cuda()), {0}));
  }
}

TEST_CASE("CUDA row sums past 16,384 elements take two passes, exactly") {
  SKIP_WITHOUT_GPU();
  // Ones among zeros (one in 8): sums near 12,500 (rows) and 37,500 (all), below float16's 65,504,
  // exact in float32 before the one rounding; a chunk dropped, thousands of elements, moves a sum
  // by hundreds of ones, far past any dtype's rounding step there (bfloat16's: 256 at most).
  for (DType t : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor x = integers({3, 100000}, t, 12, 8);
    check_same_bits("sum over dim 1", sum(x, {1}), sum(x.to(Device::cuda()), {1}));
    check_same_bits("sum of all", sum(x), sum(x.to(Device::cuda())));
  }
}

TEST_CASE("CUDA grid-stride loops past one grid: 67M float32 elements and a tail, 17M strided, 70,000 rows") {
  SKIP_WITHOUT_GPU();
  manual_seed(13);
  // One grid is 65,536 blocks of 256 threads (tensor/cuda/loops.cuh): 2^24 threads. A dense
  // float32 add moves runs of 4 (16 bytes), so striding needs more than 4 x 2^24 elements, and 3
  // more than a multiple of 4 leave a tail for the element-wise loop after the runs.
  const int64_t n = 4 * (int64_t(1) << 24) + 4 * 1000 + 3;
  const Tensor a = randn({n}), b = randn({n});
  const Tensor on_gpu = (a.to(Device::cuda()) + b.to(Device::cuda())).to(cpu);
  CHECK(max_abs(on_gpu - (a + b)) == 0.0);  // a float32 add is exact to the same bits everywhere
  // A transposed operand moves one element a thread: 17M elements are past one grid that way.
  const Tensor wide = randn({2, 8500000}), tall = b.narrow(0, 0, 17000000).view({8500000, 2});
  const Tensor strided = (wide.to(Device::cuda()).t() + tall.to(Device::cuda())).to(cpu);
  CHECK(max_abs(strided - (wide.t() + tall)) == 0.0);
  const Tensor rows = randn({70000, 8});
  check_against_cpu("softmax of 70,000 rows", softmax(rows, 1), softmax(rows.to(Device::cuda()), 1), 4, 8, 1.0);
  const auto [v_cpu, i_cpu] = max(rows, 1);
  const auto [v_gpu, i_gpu] = max(rows.to(Device::cuda()), 1);
  CHECK(to_vector<float>(v_gpu) == to_vector<float>(v_cpu));
  CHECK(to_vector<int64_t>(i_gpu) == to_vector<int64_t>(i_cpu));
}

TEST_CASE("CUDA rows longer than one block: softmax, layer_norm and max over 3000 columns") {
  SKIP_WITHOUT_GPU();
  manual_seed(14);
  for (DType t : {kFloat32, kBFloat16}) {
    const Tensor x = randn({4, 3000}).to(t), g = x.to(Device::cuda());
    // every output is below 0.01: held to its own size, not to the row's (an all-zero row passed)
    check_each_against_cpu("softmax", softmax(x, 1), softmax(g, 1), 3000);
    check_against_cpu("layer_norm", layer_norm(x, {3000}), layer_norm(g, {3000}), 6, 3000, 4.0);
    const auto [v_cpu, i_cpu] = max(x, 1);
    const auto [v_gpu, i_gpu] = max(g, 1);
    CHECK(to_vector<float>(v_gpu) == to_vector<float>(v_cpu));
    CHECK(to_vector<int64_t>(i_gpu) == to_vector<int64_t>(i_cpu));
  }
}

TEST_CASE("CUDA 16-bit atomicAdd: index_select's backward adds 1000 gradients into 8 rows, exactly") {
  SKIP_WITHOUT_GPU();
  // Gradients of -1, 0 or 1, 125 to a row: every partial sum, in whatever order the atomics run,
  // is an integer of magnitude <= 125, exact in float16 and bfloat16 (8 significant bits), so the
  // GPU's atomics must give the CPU's sums bit for bit; a lost update would not.
  Generator gen(15);
  std::vector<int64_t> picks;
  std::vector<double> ups;
  for (int i = 0; i < 1000; ++i) picks.push_back(i % 8);
  for (int i = 0; i < 1000 * 64; ++i) ups.push_back(double(int64_t(gen.next() % 3) - 1));
  const Tensor index = from_vector(picks, {1000}, TensorOptions(kInt64)), upstream = from_vector(ups, {1000, 64});
  for (DType t : {kFloat16, kBFloat16}) {
    CAPTURE(dtype_name(t));
    auto grad_on = [&](Device d) {
      const Tensor x = zeros({8, 64}, TensorOptions(t).device(d)).requires_grad_();
      index_select(x, 0, index.to(d)).backward(upstream.to(t).to(d));
      return to_vector<float>(x.grad());
    };
    const std::vector<float> on_cpu = grad_on(cpu);
    CHECK(*std::max_element(on_cpu.begin(), on_cpu.end()) >= 10.0f);  // sums, not single terms
    CHECK(grad_on(Device::cuda()) == on_cpu);
  }
}

TEST_CASE("CUDA copy between GPUs: the source's later work waits for the copy to read it") {
  SKIP_WITHOUT_GPU();
  SKIP_TEST_IF(cuda::device_count() < 2, "one GPU: a copy between GPUs needs a second");
  // cuda:1's stream is kept busy (16 GEMMs, tens of ms), so each copy queued there behind them
  // reads late; meanwhile cuda:0 overwrites the source in place, or hands its block to a new
  // tensor. With the two devices' streams unordered, those writes land first and the copy reads them.
  manual_seed(18);
  const Tensor x = randn({1 << 24}), busy = randn({4096, 4096}).to(Device::cuda(1));
  auto keep_busy = [&] {
    Tensor sink = busy;
    for (int i = 0; i < 16; ++i) sink = matmul(sink, busy);
  };
  keep_busy();
  Tensor src = x.to(Device::cuda(0));
  const Tensor copied = src.to(Device::cuda(1));
  src.fill_(0.0);
  keep_busy();
  Tensor from_freed;
  {
    const Tensor temporary = x.to(Device::cuda(0));
    from_freed = temporary.to(Device::cuda(1));
  }
  const Tensor reuse = full({1 << 24}, 7.0, TensorOptions().device(Device::cuda(0)));  // the block the temporary gave back
  CHECK(to_vector<float>(copied) == to_vector<float>(x));
  CHECK(to_vector<float>(from_freed) == to_vector<float>(x));
  CHECK(to_vector<float>(src) == std::vector<float>(size_t(1) << 24, 0.0f));
}

#ifdef AMPGRAD_WITH_CUDA
TEST_CASE("CUDA events order two streams: a copy on a second stream waits for the compute stream's write") {
  SKIP_WITHOUT_GPU();
  // On one GPU, what orders a copy between GPUs (copy.cpp) and NCCL's collectives: a non-blocking
  // stream waits for nothing by itself. The compute stream is kept busy (16 GEMMs, tens of ms)
  // before a fill, so a copy on the side stream that did not wait for it would read the zeros.
  const size_t n = size_t(1) << 24;
  const Tensor busy = randn({4096, 4096}).to(Device::cuda());
  Tensor src = zeros({int64_t(n)}, TensorOptions().device(Device::cuda()));
  const Tensor dst = empty({int64_t(n)}, TensorOptions().device(Device::cuda()));
  Tensor sink = busy;
  for (int i = 0; i < 16; ++i) sink = matmul(sink, busy);
  src.fill_(1.0);
  cudaStream_t side = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess);
  {
    cuda::Event filled(0);
    filled.record(cuda::stream());
    filled.wait_in(side);
  }  // released before the copy is queued: the wait stays
  REQUIRE(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), n * sizeof(float), cudaMemcpyDeviceToDevice, side) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(side) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(side) == cudaSuccess);
  CHECK(to_vector<float>(dst) == std::vector<float>(n, 1.0f));
}

TEST_CASE("CUDA float32 matmul with TF32 on: inputs rounded to 11 significant bits, float32 sums") {
  SKIP_WITHOUT_GPU();
  manual_seed(16);
  const Tensor a = randn({128, 512}), b = randn({512, 96});
  cuda::set_matmul_allow_tf32(true);
  const Tensor on_gpu = matmul(a.to(Device::cuda()), b.to(Device::cuda())).to(cpu);
  cuda::set_matmul_allow_tf32(false);
  // Each product errs by up to 2·2⁻¹¹ of itself (both inputs rounded to TF32), so an output by up
  // to 2⁻¹⁰ · Σ|a||b|; float32 alone agrees to ~1e-4 here, TF32 typically errs by ~1e-2.
  const double worst = max_abs(on_gpu - matmul(a, b));
  CHECK(worst <= std::ldexp(1.0, -10) * max_abs(matmul(abs(a), abs(b))) * 1.01);
  CHECK(worst > 1e-3);  // TF32 was really used
}

TEST_CASE("CUDA allocator: out of memory releases the cached blocks and tries again") {
  SKIP_WITHOUT_GPU();
  SKIP_TEST_IF(!cuda::memory_caching_enabled(), "AMPGRAD_NO_CUDA_MEMORY_CACHING is set");
  cuda::empty_cache();
  size_t free_bytes = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  // Two thirds of the free memory, freed into the cache; then three quarters, a size the cached
  // block cannot serve and the driver cannot either until the cache is given back.
  const int64_t first = int64_t(free_bytes / 3 * 2) / 4, second = int64_t(free_bytes / 4 * 3) / 4;  // float32 elements
  { const Tensor big = empty({first}, TensorOptions(kFloat32).device(Device::cuda())); }
  CHECK(memory_stats(Device::cuda()).reserved_bytes >= first * 4);
  const int64_t frees_before = memory_stats(Device::cuda()).num_system_frees;
  const Tensor bigger = full({second}, 1.0, TensorOptions(kFloat32).device(Device::cuda()));
  CHECK(memory_stats(Device::cuda()).num_system_frees > frees_before);  // the cache was released to make room
  CHECK(bigger.narrow(0, second - 1, 1).item<float>() == 1.0f);
}

TEST_CASE("CUDA on a second GPU: ops run there, and copies cross between GPUs") {
  SKIP_WITHOUT_GPU();
  SKIP_TEST_IF(cuda::device_count() < 2, "one GPU: cuda:1 needs a second");
  manual_seed(17);
  const Tensor x = randn({300, 40});
  const Tensor on1 = x.to(Device::cuda(1));
  CHECK(on1.device() == Device::cuda(1));
  check_against_cpu("softmax on cuda:1", softmax(x, 1), softmax(on1, 1), 4, 40, 1.0);
  const Tensor back = on1.to(Device::cuda(0)).to(kFloat16).to(Device::cuda(1)).to(cpu);  // peer copies both ways
  CHECK(to_vector<float>(back) == to_vector<float>(x.to(kFloat16).to(kFloat32)));
  const Tensor strided = on1.transpose(0, 1).to(Device::cuda(0)).to(cpu);  // a view crosses as a contiguous copy
  CHECK(to_vector<float>(strided) == to_vector<float>(x.transpose(0, 1).contiguous()));
}
#else
TEST_CASE("CUDA TF32 GEMMs, the allocator's retry and a second GPU") { SKIP_TEST_IF(true, "built without the CUDA backend"); }
#endif
