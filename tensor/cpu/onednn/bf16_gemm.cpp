// bf16_gemm.cpp — a bfloat16 GEMM as one oneDNN matmul. On a CPU with AVX512-BF16 (Zen 4,
// Cooper Lake and later) its kernel multiplies pairs of bfloat16 values exactly and adds them to
// float32 accumulators (vdpbf16ps), then rounds each result to bfloat16 once, to nearest even
// (or writes the float32 sums as they are, for a float32 output): a tensor core's contract, the
// one matmul.cpp's widening path keeps, read straight from the 16-bit operands. That saves the
// two float32 copies the widening makes and runs about 4× faster (docs/results.md). Unlike the widening path, the instruction treats subnormal inputs
// and results as zero; a bfloat16 subnormal lies below 1.2e-38. On other CPUs oneDNN would
// emulate the instruction, more slowly than the widening: there bf16_gemm declines.
#include "tensor/cpu/onednn/bf16_gemm.h"

#include <omp.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <tuple>

#include "tensor/cpu/gemm_operand.h"
#include "tensor/cpu/loops.h"
#include "tensor/error.h"

namespace ampgrad::cpu::onednn {
namespace {
using dnnl::memory;

// An operand as oneDNN's matmul reads it: (batch, rows, cols) with strides, the matrix row- or
// column-major (gemm_operand.h) with rows or columns that do not overlap; a batch stride of 0 (a
// 2-D operand expanded over the batch) becomes a batch of 1, which the matmul broadcasts.
struct Layout {
  memory::dims dims, strides;
};
std::optional<Layout> layout(const Tensor& t) {
  const auto m = as_operand(t, 0);
  if (!m || m->ld < (m->row_major ? m->cols : m->rows)) return std::nullopt;  // overlapping rows: oneDNN refuses them
  const int64_t span = m->ld * (m->row_major ? m->rows : m->cols);  // a batch stride for a batch of 1
  int64_t B = t.dim() == 3 ? t.size(0) : 1, sb = t.dim() == 3 ? t.stride(0) : span;
  if (B == 1 || sb == 0) B = 1, sb = span;
  return Layout{{B, m->rows, m->cols}, m->row_major ? memory::dims{sb, m->ld, 1} : memory::dims{sb, 1, m->ld}};
}

// A matmul for one geometry, and the descriptors its arguments are wrapped in. Building one
// compiles its kernel (milliseconds), so each geometry's is kept: a training step has a few.
struct Gemm {
  dnnl::matmul run;
  memory::desc a, b, out, scratch;
  std::string kernel;  // oneDNN's name for it
};

const dnnl::engine& engine() {
  static const dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}

// Whether the CPU has the bfloat16 dot product (AVX512-BF16, or AMX, whose mask holds its bits).
bool cpu_has_bf16_dot() {
  static const bool has = [] {
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
  }();
  return has;
}

// The matmul for these layouts, or null where oneDNN does not take them. The thread count is
// part of the key: a kernel divides its work for the threads it was built for.
std::shared_ptr<const Gemm> gemm_for(const Layout& a, const Layout& b, const Layout& out, memory::data_type out_type) {
  using Key = std::tuple<std::array<memory::dims, 6>, memory::data_type, int>;
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const Gemm>> built;
  const Key key{{a.dims, a.strides, b.dims, b.strides, out.dims, out.strides}, out_type, omp_get_max_threads()};
  std::lock_guard lock(mutex);
  if (auto it = built.find(key); it != built.end()) return it->second;
  std::shared_ptr<const Gemm> gemm;
  try {
    const memory::desc ad(a.dims, memory::data_type::bf16, a.strides), bd(b.dims, memory::data_type::bf16, b.strides),
        od(out.dims, out_type, out.strides);
    // The library's own scratchpad is one buffer per primitive, which two threads running the
    // same GEMM at once would share: each call brings its own instead.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, od), attr, engine());
    const std::string kernel = pd.impl_info_str();
    if (kernel.rfind("ref", 0) != 0) gemm = std::make_shared<const Gemm>(Gemm{dnnl::matmul(pd), ad, bd, od, pd.scratchpad_desc(), kernel});
  } catch (const dnnl::error&) {
    // a layout this oneDNN does not take: the caller widens instead
  }
  // An inference loop over growing lengths makes a geometry per length: past 256, start afresh.
  if (built.size() >= 256) built.clear();
  built.emplace(key, gemm);
  return gemm;
}
}  // namespace

bool bf16_gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  if (!cpu_has_bf16_dot()) return false;
  Tensor a = a_in, b = b_in;
  auto la = layout(a), lb = layout(b);
  if (!la) la = layout(a = contiguous_copy(a));  // a layout no GEMM reads in place
  if (!lb) lb = layout(b = contiguous_copy(b));
  const auto gemm = gemm_for(*la, *lb, *layout(out), out.dtype() == kFloat32 ? memory::data_type::f32 : memory::data_type::bf16);
  if (!gemm) return false;
  // from the library's allocator, so memory_stats and a MemoryHistory see it (as "matmul")
  const Tensor scratch = empty({int64_t(gemm->scratch.get_size())}, kBool);
  thread_local dnnl::stream stream(engine());
  try {
    gemm->run.execute(stream, {{DNNL_ARG_SRC, memory(gemm->a, engine(), a.raw_data())},
                               {DNNL_ARG_WEIGHTS, memory(gemm->b, engine(), b.raw_data())},
                               {DNNL_ARG_DST, memory(gemm->out, engine(), out.raw_data())},
                               {DNNL_ARG_SCRATCHPAD, memory(gemm->scratch, engine(), scratch.raw_data())}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error("matmul: oneDNN's bfloat16 GEMM of shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " failed: " + e.what());
  }
  return true;
}

std::string bf16_gemm_kernel() {
  if (!cpu_has_bf16_dot()) return "";
  const Layout square{{1, 64, 64}, {64 * 64, 64, 1}};
  const auto gemm = gemm_for(square, square, square, memory::data_type::bf16);
  return gemm ? gemm->kernel : "";
}

}  // namespace ampgrad::cpu::onednn
