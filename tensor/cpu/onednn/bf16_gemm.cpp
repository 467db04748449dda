// bf16_gemm.cpp — a bfloat16 GEMM as one oneDNN matmul. On a CPU with AVX512-BF16 (Zen 4,
// Cooper Lake and later) its kernel multiplies pairs of bfloat16 values exactly and adds them to
// float32 accumulators (vdpbf16ps), then rounds each result to bfloat16 once, to nearest even
// (or writes the float32 sums as they are, for a float32 output): a tensor core's contract, the
// one matmul.cpp's widening path keeps, read straight from the 16-bit operands. That saves the
// two float32 copies the widening makes. Unlike the widening path, the instruction treats
// subnormal inputs and results as zero; a bfloat16 subnormal lies below 1.2e-38. bf16_gemm runs
// where it is the faster path (gemm_path.h's rule): on AMX tiles, and on AMD's AVX512-BF16 (Zen 4
// and 5); Intel's AVX512-BF16 without AMX runs it at half float32's rate (docs/results.md), and
// elsewhere oneDNN would emulate the instruction: there it declines and matmul.cpp widens.
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
#include <unordered_map>

#include "tensor/cpu/gemm_operand.h"
#include "tensor/cpu/gemm_path.h"
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
  memory::desc a, b, bias, out, scratch;
  std::string kernel;  // oneDNN's name for it
};

const dnnl::engine& engine() {
  static const dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}

// oneDNN's ISA on this CPU, as gemm_path.h's rule reads it: AMX, the bfloat16 dot product
// (AVX512-BF16; AMX's mask holds its bits too), and whose CPU it is.
Bf16Path path_here() {
  static const Bf16Path path = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto has = [&](dnnl::cpu_isa i) { return (isa & static_cast<unsigned>(i)) == static_cast<unsigned>(i); };
    return bf16_path({.amx = has(dnnl::cpu_isa::avx512_core_amx), .avx512_bf16 = has(dnnl::cpu_isa::avx512_core_bf16),
                      .amd = __builtin_cpu_is("amd") > 0});
  }();
  return path;
}

// The matmul for these layouts, or null where oneDNN does not take them. The thread count is
// part of the key: a kernel divides its work for the threads it was built for.
std::shared_ptr<const Gemm> gemm_for(const Layout& a, const Layout& b, bool bias, const Layout& out, memory::data_type out_type) {
  using Key = std::tuple<std::array<memory::dims, 6>, bool, memory::data_type, int>;
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const Gemm>> built;
  const Key key{{a.dims, a.strides, b.dims, b.strides, out.dims, out.strides}, bias, out_type, omp_get_max_threads()};
  std::lock_guard lock(mutex);
  if (auto it = built.find(key); it != built.end()) return it->second;
  std::shared_ptr<const Gemm> gemm;
  try {
    // a bias (N) is one row broadcast over the batch and the rows, added before the output's rounding
    const memory::desc ad(a.dims, memory::data_type::bf16, a.strides), bd(b.dims, memory::data_type::bf16, b.strides),
        biasd = bias ? memory::desc({1, 1, out.dims[2]}, memory::data_type::bf16, memory::format_tag::abc) : memory::desc(),
        od(out.dims, out_type, out.strides);
    // The library's own scratchpad is one buffer per primitive, which two threads running the
    // same GEMM at once would share: each call brings its own instead.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, biasd, od), attr, engine());
    const std::string kernel = pd.impl_info_str();
    if (kernel.rfind("ref", 0) != 0) gemm = std::make_shared<const Gemm>(Gemm{dnnl::matmul(pd), ad, bd, biasd, od, pd.scratchpad_desc(), kernel});
  } catch (const dnnl::error&) {
    // a layout this oneDNN does not take: the caller widens instead
  }
  // An inference loop over growing lengths makes a geometry per length: past 256, start afresh.
  if (built.size() >= 256) built.clear();
  built.emplace(key, gemm);
  return gemm;
}
}  // namespace

bool bf16_gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& bias, const Tensor& out) {
  if (path_here() == Bf16Path::widened) return false;
  Tensor a = a_in, b = b_in;
  auto la = layout(a), lb = layout(b);
  if (!la) la = layout(a = contiguous_copy(a));  // a layout no GEMM reads in place
  if (!lb) lb = layout(b = contiguous_copy(b));
  const auto gemm = gemm_for(*la, *lb, bias.defined(), *layout(out), out.dtype() == kFloat32 ? memory::data_type::f32 : memory::data_type::bf16);
  if (!gemm) return false;
  const Tensor bias_row = bias.defined() ? bias.contiguous() : Tensor();
  // from the library's allocator, so memory_stats and a MemoryHistory see it (as "matmul")
  const Tensor scratch = empty({int64_t(gemm->scratch.get_size())}, kBool);
  thread_local dnnl::stream stream(engine());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(gemm->a, engine(), a.raw_data())},
                                       {DNNL_ARG_WEIGHTS, memory(gemm->b, engine(), b.raw_data())},
                                       {DNNL_ARG_DST, memory(gemm->out, engine(), out.raw_data())},
                                       {DNNL_ARG_SCRATCHPAD, memory(gemm->scratch, engine(), scratch.raw_data())}};
  if (bias_row.defined()) args.emplace(DNNL_ARG_BIAS, memory(gemm->bias, engine(), bias_row.raw_data()));
  try {
    gemm->run.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error("matmul: oneDNN's bfloat16 GEMM of shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " failed: " + e.what());
  }
  return true;
}

std::string bf16_gemm_kernel() {
  if (path_here() == Bf16Path::widened) return "";
  const Layout square{{1, 64, 64}, {64 * 64, 64, 1}};
  const auto gemm = gemm_for(square, square, false, square, memory::data_type::bf16);
  return gemm ? gemm->kernel : "";
}

Bf16Path bf16_gemm_path() { return path_here(); }

}  // namespace ampgrad::cpu::onednn
