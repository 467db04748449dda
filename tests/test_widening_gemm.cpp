// test_widening_gemm.cpp — the CPU's 16-bit GEMM reading its operands in place
// (tensor/cpu/widening_gemm.h): Eigen's blocked loop with each block widened just before it is
// packed must give the bits of Eigen's float32 GEMM on widened copies, in every layout and
// blocking, for float16 and for bfloat16 (which takes this path where oneDNN does not run it),
// and must hold no float32 copy of an operand.
#include <doctest/doctest.h>

#include "autograd/ops.h"
#include "tensor/cpu/allocator.h"
#include "tensor/cpu/widening_gemm.h"
#include "tensor/memory_stats.h"
#include "tensor/random.h"
#include "tensor/threads.h"
#include "test_util.h"

using namespace ampgrad;

TEST_CASE("a 16-bit GEMM widened block by block as it is packed gives the float32 GEMM's bits, in every layout and blocking") {
  // Shapes whose blocking (the fixed cache sizes of matmul.cpp) spans several depth blocks
  // (K = 2048 > kc ≈ 688) with rhs blocks 4 columns wide; several row blocks with the rhs packed
  // once (N = 3000 > mc ≈ 528); both at once; and one small block.
  const int threads = get_num_threads();
  set_num_threads(1);  // the reference: float32 matmul on one thread, Eigen's GEMM on the whole matrix
  (void)matmul(ones({4, 20}), ones({20, 4}));  // matmul.cpp fixes Eigen's cache sizes at its first call
  manual_seed(21);
  struct Mkn { int64_t m, K, N; };
  for (Mkn s : {Mkn{96, 2048, 64}, {64, 64, 3000}, {40, 2048, 1500}, {5, 17, 7}}) {
    REQUIRE(cpu::takes_blocked_gemm(s.m, s.K, s.N));
    for (DType t : {kFloat16, kBFloat16})
      for (bool a_row_major : {true, false})
        for (bool b_row_major : {true, false}) {
          INFO(dtype_name(t) << " m K N " << s.m << " " << s.K << " " << s.N << (a_row_major ? " a row-major" : " a column-major")
                             << (b_row_major ? ", b row-major" : ", b column-major"));
          const Tensor a = a_row_major ? randn({s.m, s.K}).to(t) : randn({s.K, s.m}).to(t).t();
          const Tensor b = b_row_major ? randn({s.K, s.N}).to(t) : randn({s.N, s.K}).to(t).t();
          const auto oa = cpu::as_operand(a, 0), ob = cpu::as_operand(b, 0);
          REQUIRE((oa && ob && oa->row_major == a_row_major && ob->row_major == b_row_major));
          std::vector<float> got(size_t(s.m * s.N), NAN), scratch(size_t(cpu::widening_gemm_scratch(s.m, s.K, s.N)));
          if (t == kFloat16) cpu::widening_gemm<half>(*oa, *ob, got.data(), s.N, scratch.data());
          else cpu::widening_gemm<bfloat16>(*oa, *ob, got.data(), s.N, scratch.data());
          const std::vector<float> want = to_vector<float>(matmul(a.to(kFloat32), b.to(kFloat32)));
          CHECK(got == want);
        }
  }
  set_num_threads(threads);
}

TEST_CASE("a float16 matmul holds no float32 copy of its operands: the peak rises by the output and the thread's blocks") {
  const int threads = get_num_threads();
  set_num_threads(1);
  manual_seed(22);
  const int64_t M = 256, K = 4096, N = 256;
  const Tensor a = randn({M, K}).to(kFloat16), b = randn({K, N}).to(kFloat16);
  NoGradGuard no_grad;
  reset_peak_memory_stats(Device::cpu());
  const int64_t before = memory_stats(Device::cpu()).allocated_bytes;
  const Tensor c = matmul(a, b);
  const int64_t rise = memory_stats(Device::cpu()).peak_allocated_bytes - before;
  // the float16 output, then one scratch: C's tile in float32, a widened lhs panel and rhs columns
  const int64_t scratch_floats = (M * N + 15) / 16 * 16 + cpu::widening_gemm_scratch(M, K, N);
  CHECK(rise == int64_t(cpu::rounded_block_size(size_t(M * N * 2))) + int64_t(cpu::rounded_block_size(size_t(scratch_floats * 4))));
  CHECK(rise * 4 < (M * K + K * N) * 4);  // where widened copies of a and b alone took 8 MiB
  set_num_threads(threads);
}
