// test_bf16_gemm.cpp — bfloat16 GEMMs on oneDNN (tensor/cpu/onednn/bf16_gemm.cpp): a tensor
// core's contract (bfloat16 products exact, float32 sums, one rounding to nearest even, or none
// into float32) in every layout matmul and linear hand the GEMM, and none of the widening path's
// float32 copies.
// Without oneDNN, or on a CPU without bfloat16 dot products, each case reports itself
// skipped: the widening path that then runs is test_tensor's.
#include <doctest/doctest.h>

#include <cmath>
#include <thread>

#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "skip.h"
#include "tensor/memory_stats.h"
#include "tensor/random.h"
#include "tensor/threads.h"
#include "test_util.h"
#include "tensor/cpu/gemm_path.h"
#ifdef AMPGRAD_WITH_ONEDNN
#include "tensor/cpu/onednn/bf16_gemm.h"
#endif

using namespace ampgrad;

#define SKIP_WITHOUT_ONEDNN() \
  SKIP_TEST_IF(onednn_bf16_kernel().empty(), "no oneDNN bfloat16 GEMM: a build without oneDNN, or a CPU where widening to float32 is the faster path (gemm_path.h)")

// a @ b of bfloat16 operands, a and b as kernels::bmm takes them (both 2-D or both 3-D), into
// a bfloat16 output (matmul) and a float32 one (the sums unrounded, as scaled_mm takes them):
// oneDNN must take this layout (not decline it to the widening path) and the kernel must run it.
// Then against float64 (within one rounding of a bfloat16 output plus float32 accumulation over
// K terms) and against the widening path (the float32 GEMM of the same values): another
// summation order, so a bfloat16 result is now and then one ulp apart, or the two float32
// accumulations' errors apart where the sum nearly cancels.
static void check_gemm(const Tensor& a, const Tensor& b) {
  CAPTURE(shape_str(a.shape()));
  CAPTURE(shape_str(b.shape()));
  const Tensor widening = matmul(a.to(kFloat32), b.to(kFloat32));
  // float64 copies, contiguous and batched: (B, M, K) and (B, K, N)
  const int64_t K = a.size(-1), M = a.size(-2), N = b.size(-1), B = widening.numel() / (M * N);
  const std::vector<double> av = to_vector<double>(a.expand(widening.dim() == 3 ? Shape{B, M, K} : Shape{M, K}));
  const std::vector<double> bv = to_vector<double>(b.expand(widening.dim() == 3 ? Shape{B, K, N} : Shape{K, N}));
  for (DType out : {kBFloat16, kFloat32}) {
    CAPTURE(dtype_name(out));
    const Tensor c = out == kBFloat16 ? matmul(a, b) : kernels::gemm(a, b, {}, kFloat32);
    REQUIRE(c.dtype() == out);
#ifdef AMPGRAD_WITH_ONEDNN
    const Tensor direct = empty(c.shape(), out);
    REQUIRE(cpu::onednn::bf16_gemm(a, b, {}, direct));
    CHECK(to_vector<float>(direct) == to_vector<float>(c));
#endif
    const double ulp = out == kBFloat16 ? std::ldexp(1.0, -7) : 0;  // no rounding of a float32 output
    const std::vector<float> got = to_vector<float>(c), other = to_vector<float>(widening.to(out));
    int64_t apart = 0;
    for (int64_t p = 0; p < B; ++p)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double exact = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double t = av[(p * M + i) * K + k] * bv[(p * K + k) * N + j];
            exact += t;
            mag += std::abs(t);
          }
          const float v = got[(p * M + i) * N + j], w = other[(p * M + i) * N + j];
          CHECK(std::abs(v - exact) <= std::abs(exact) * ulp / 2 + mag * double(K) * std::ldexp(1.0, -24));
          if (v != w) {
            ++apart;
            CHECK(std::abs(v - w) <= std::abs(w) * ulp * 1.0001 + mag * double(K) * std::ldexp(1.0, -23));
          }
        }
    if (out == kBFloat16) CHECK(apart <= c.numel() / 20);
  }
}

TEST_CASE("bfloat16 GEMMs on oneDNN: within one rounding of float64 in every layout the ops hand it") {
  SKIP_WITHOUT_ONEDNN();
  MESSAGE("oneDNN kernel: " << onednn_bf16_kernel());
  manual_seed(11);
  auto r = [](Shape s) { return randn(s).to(kBFloat16); };
  check_gemm(r({37, 300}), r({300, 29}));                                  // row-major both
  check_gemm(r({300, 37}).t(), r({300, 29}));                              // aᵀ, as linear's dW = Gᵀ x
  check_gemm(r({37, 300}), r({29, 300}).t());                              // Wᵀ, as linear's forward
  check_gemm(r({37, 400}).narrow(1, 50, 300), r({300, 60}).narrow(1, 7, 29));  // rows with gaps
  check_gemm(r({4, 37, 300}), r({4, 300, 29}));                            // batched
  check_gemm(r({4, 37, 300}), r({300, 29}).unsqueeze(0).expand({4, 300, 29}));  // one b for every batch
  check_gemm(r({4, 16, 37}).transpose(1, 2), r({4, 16, 29}));              // batched aᵀ, as attention's backward
  check_gemm(r({37, 600}).as_strided({37, 300}, {600, 2}, 0), r({300, 29}));  // every other column: copied first
  check_gemm(r({1, 300}), r({300, 29}));
  check_gemm(r({37, 300}), r({300, 1}));
  // K = 4096: a bfloat16 accumulator would be ~2^-8 off, far outside the float32 bound
  check_gemm(r({8, 4096}), r({4096, 8}));
}

TEST_CASE("a bfloat16 GEMM rounds its float32 sum once, to nearest, ties to even") {
  SKIP_WITHOUT_ONEDNN();
  // Sums exact in float32, each between two bfloat16 neighbours (8 significant bits: 256 apart by 2).
  const std::vector<float> a = {1, 1}, b = {256, 258, 256, 256, -256, 1, 1, 1.5, 0.5, -1};  // b (2, 5), row-major
  const Tensor ta = from_vector(a, {1, 2}).to(kBFloat16), tb = from_vector(b, {2, 5}).to(kBFloat16);
  // 257: a tie, to 256 (even); 259: a tie, to 260 (even); 257.5: up; 256.5: down; -257: a tie, to -256
  CHECK(to_vector<float>(matmul(ta, tb)) == std::vector<float>{256, 260, 258, 256, -256});
}

// The bias rides in oneDNN's epilogue: added to the float32 sum, then one rounding (bfloat16 is
// 2 apart between 256 and 512). Sums 257 and 259 are ties, which alone would round to 256 and
// 260; with the bias added first, 257.75 and 258.25 both round to 258.
TEST_CASE("a bias in a bfloat16 GEMM on oneDNN is added before the one rounding") {
  SKIP_WITHOUT_ONEDNN();
  const Tensor a = from_vector<float>({1, 1}, {1, 2}).to(kBFloat16), b = from_vector<float>({128, 128, 129, 131}, {2, 2}).to(kBFloat16);
  const Tensor bias = from_vector<float>({0.75, -0.75}).to(kBFloat16);
  const Tensor out = empty({1, 2}, kBFloat16);
  REQUIRE(cpu::onednn::bf16_gemm(a, b, bias, out));
  CHECK(to_vector<float>(out) == std::vector<float>{258, 258});
}

TEST_CASE("the bfloat16 dot-product instruction flushes subnormal results to zero, the widening path keeps them") {
  SKIP_WITHOUT_ONEDNN();
  const float tiny = std::ldexp(1.0f, -65);  // a normal bfloat16; its square 2^-130 is subnormal in float32 and bfloat16
  const Tensor a = full({1, 1}, tiny).to(kBFloat16);
  CHECK(to_vector<float>(matmul(a, a)) == std::vector<float>{0});
  CHECK(to_vector<float>(matmul(a.to(kFloat32), a.to(kFloat32)).to(kBFloat16)) == std::vector<float>{std::ldexp(1.0f, -130)});
}

TEST_CASE("a bfloat16 GEMM on oneDNN allocates its output and a scratchpad, no float32 copies") {
  SKIP_WITHOUT_ONEDNN();
  manual_seed(12);
  const Tensor a = randn({256, 512}).to(kBFloat16), b = randn({512, 256}).to(kBFloat16);
  matmul(a, b);  // builds the kernel for this geometry first
  reset_peak_memory_stats(Device::cpu());
  const int64_t before = memory_stats(Device::cpu()).allocated_bytes;
  const Tensor c = matmul(a, b);
  const int64_t rise = memory_stats(Device::cpu()).peak_allocated_bytes - before;
  MESSAGE("peak rise " << rise << " bytes, the output 131072 of them");
  // The output, 128 KiB, and oneDNN's scratchpad (its packed copy of b, 2 bytes an element, and
  // per-thread tiles), under 512 KiB; the widening path held a and b in float32 (1 MiB) and a
  // float32 output (256 KiB) besides.
  CHECK(rise >= 256 * 256 * 2);
  CHECK(rise < 256 * 256 * 2 + 512 * 256 * 4);
}

TEST_CASE("bfloat16 GEMMs from two threads at once: each call brings its own scratchpad") {
  SKIP_WITHOUT_ONEDNN();
  manual_seed(14);
  const Tensor a = randn({300, 500}).to(kBFloat16), b = randn({500, 200}).to(kBFloat16);
  const std::vector<float> want = to_vector<float>(matmul(a, b));
  int wrong[2] = {0, 0};
  auto work = [&](int t) {
    for (int i = 0; i < 20; ++i) wrong[t] += to_vector<float>(matmul(a, b)) != want;
  };
  std::thread one(work, 0), two(work, 1);
  one.join();
  two.join();
  CHECK(wrong[0] + wrong[1] == 0);
}

TEST_CASE("bfloat16 GEMMs rerun bit for bit, also after a GEMM at another thread count") {
  SKIP_WITHOUT_ONEDNN();
  manual_seed(13);
  const Tensor a = randn({200, 300}).to(kBFloat16), b = randn({300, 150}).to(kBFloat16);
  const std::vector<float> once = to_vector<float>(matmul(a, b));
  CHECK(to_vector<float>(matmul(a, b)) == once);
  const int threads = get_num_threads();
  set_num_threads(threads == 1 ? 2 : 1);
  check_gemm(a, b);
  set_num_threads(threads);
  CHECK(to_vector<float>(matmul(a, b)) == once);
}

// Which path a bfloat16 GEMM takes is a rule from the CPU's features, not a timing, so reruns take
// the same path and give the same bits; and a 16-bit run's first line says which it is.
TEST_CASE("the bfloat16 GEMM's path follows the CPU's features, and the run's note names it") {
  using cpu::Bf16Path, cpu::bf16_path;
  CHECK(bf16_path({.amx = true, .avx512_bf16 = true, .amd = false}) == Bf16Path::amx);
  CHECK(bf16_path({.amx = false, .avx512_bf16 = true, .amd = true}) == Bf16Path::dot_product);   // Zen 4 and 5
  CHECK(bf16_path({.amx = false, .avx512_bf16 = true, .amd = false}) == Bf16Path::widened);      // Intel without AMX: half float32's rate
  CHECK(bf16_path({.amx = false, .avx512_bf16 = false, .amd = true}) == Bf16Path::widened);
  CHECK(cpu::gemm_path_note(kFloat16).find("float16 GEMMs widened to float32") != std::string::npos);
  const std::string note = cpu::gemm_path_note(kBFloat16);
  MESSAGE(note);
#ifdef AMPGRAD_WITH_ONEDNN
  const Bf16Path here = cpu::onednn::bf16_gemm_path();
  CHECK(note.find(here == Bf16Path::amx ? "on AMX tiles" : here == Bf16Path::dot_product ? "on AVX512-BF16 dot products" : "widened to float32") !=
        std::string::npos);
  CHECK((here == Bf16Path::widened) == onednn_bf16_kernel().empty());  // oneDNN runs exactly where the rule sends it
#else
  CHECK(note.find("widened to float32") != std::string::npos);
#endif
}
