// test_cuda.cpp — the CUDA backend against the CPU beyond the ops: the elementwise kernels' runs of
// neighbours, host <-> device copies of every dtype, the caching allocator, the GradScaler's fused
// kernels, the sync-free optimizer step, TF32's default. Every case that needs a GPU opens with
// SKIP_WITHOUT_GPU(): on a machine without one it reports itself skipped. Every op against the
// CPU, on every OpInfo sample, is test_opinfo.cpp's; the numeric suites also run their own cases
// on CUDA (tests/devices.h). This file holds what needs both devices at once.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

#include "amp/amp_kernels.h"
#include "amp/grad_scaler.h"
#include "autograd/ops.h"
#include "optim/optim.h"
#include "skip.h"
#ifdef AMPGRAD_WITH_CUDA
#include "tensor/cuda/runtime.h"
#endif

using namespace ampgrad;

namespace {

const Device gpu = Device::cuda(), cpu = Device::cpu();
using In = const std::vector<Tensor>&;

std::vector<uint8_t> bytes(const Tensor& t) {
  Tensor host = t.detach().to(cpu).contiguous();
  std::vector<uint8_t> b(host.numel() * host.element_size());
  std::memcpy(b.data(), host.raw_data(), b.size());
  return b;
}

}  // namespace

// The elementwise kernels move aligned runs of neighbours as vectors where every operand allows
// (tensor/cuda/indexing.h's moves_in_runs), one element at a time elsewhere: both ways must give
// the CPU's bits. Exact ops only (one rounding of a float32 result), so the bits must agree.
TEST_CASE("elementwise kernels in runs of neighbours: contiguous tails, row-broadcast biases and misaligned views give the CPU's bits") {
  SKIP_WITHOUT_GPU();
  manual_seed(9);
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    INFO(std::string(dtype_name(dtype)));
    const std::vector<Tensor> host = {randn({1003}).to(dtype), randn({64, 40}).to(dtype), randn({40}).to(dtype)};
    std::vector<Tensor> dev;
    for (const Tensor& t : host) dev.push_back(t.to(gpu));
    auto same = [&](const char* what, const std::function<Tensor(In)>& f) {
      INFO(what);
      CHECK(bytes(f(dev)) == bytes(f(host)));
    };
    same("a contiguous map with a tail", [](In t) { return relu(t[0]); });
    same("a contiguous cast with a tail", [](In t) { return t[0].to(kFloat32).to(kBFloat16); });
    same("a bias added down the rows", [](In t) { return t[1] + t[2]; });
    same("a bias added in place", [](In t) { return t[1].clone().add_(t[2]); });
    same("a where over rows", [](In t) { return where(gt(t[1], scalar_like(0, t[1])), t[1], t[2]); });
    same("a view 1 element in (no runs)", [](In t) { return t[1].narrow(1, 1, 32) * t[2].narrow(0, 1, 32); });
    same("a view 4 elements in (runs for float32 and float64)", [](In t) { return t[1].narrow(1, 4, 32) * t[2].narrow(0, 4, 32); });
    same("a view 8 elements in", [](In t) { return t[1].narrow(1, 8, 32) - t[2].narrow(0, 8, 32); });
    same("a transposed copy", [](In t) { return t[1].t().contiguous(); });
    same("a fill", [](In t) { return full_like(t[1], 1.5); });
    same("a same-dtype copy of rows 8 elements in", [](In t) { return t[1].narrow(1, 8, 32).contiguous(); });
    same("a comparison into bool", [](In t) { return lt(t[1], t[2]); });
  }
  for (DType dtype : {kInt64, kBool, kFloat8_e4m3fn}) {  // moved, not computed: runs of 2, 16 and 16
    INFO(std::string(dtype_name(dtype)));
    const Tensor host = (randn({64, 48}) * 3).to(dtype), dev = host.to(gpu);
    CHECK(bytes(dev.narrow(1, 16, 32).contiguous()) == bytes(host.narrow(1, 16, 32).contiguous()));
    CHECK(bytes(dev.t().contiguous()) == bytes(host.t().contiguous()));
  }
}

TEST_CASE("host <-> device copies keep every dtype's bits, contiguous and strided") {
  SKIP_WITHOUT_GPU();
  Generator gen(5);
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool, kFloat8_e4m3fn, kFloat8_e5m2}) {
    INFO(std::string(dtype_name(dtype)));
    // Contiguous copies move bytes: any bit pattern survives, NaN payloads included.
    std::vector<uint8_t> raw(24 * itemsize(dtype));
    for (uint8_t& b : raw) b = dtype == kBool ? uint8_t(gen.next() & 1) : uint8_t(gen.next());
    Tensor host = from_blob(raw.data(), {4, 6}, dtype, TensorOptions(dtype));
    Tensor dev = host.to(gpu);
    CHECK(dev.device() == gpu);
    CHECK(bytes(dev) == raw);
    // Strided copies go through a kernel; finite values must survive it exactly, both ways.
    Tensor finite = randint(-100, 100, {4, 6}, TensorOptions(kInt64), &gen).to(dtype == kBool ? kInt64 : dtype);
    if (dtype == kBool) finite = gt(finite, scalar_like(0, finite));
    Tensor to_dev = empty({6, 4}, TensorOptions(dtype).device(gpu));
    to_dev.copy_(finite.t());  // host strided -> device
    CHECK(bytes(to_dev) == bytes(finite.t().contiguous()));
    Tensor to_host = empty({6, 4}, TensorOptions(dtype));
    to_host.copy_(finite.to(gpu).t());  // device strided -> host
    CHECK(bytes(to_host) == bytes(finite.t().contiguous()));
    // A strided copy within one dtype on the device moves elements: any bits survive.
    CHECK(bytes(dev.t().contiguous()) == bytes(host.t().contiguous()));
  }
  // A cast during the copy rounds as the CPU does (to nearest even), ties and overflow included;
  // a NaN keeps its sign and becomes the CPU's quiet NaN.
  std::vector<float> v = {1.f + std::ldexp(1.f, -11), 1.f + 3 * std::ldexp(1.f, -11), 1e-6f, -7e-8f, 65520.f, 70000.f, 3.4e38f, -INFINITY,
                          NAN, -NAN};
  for (int i = 0; i < 64; ++i) v.push_back(float(gen.normal() * 100));
  Tensor f32 = from_vector<float>(v);
  for (DType half : {kFloat16, kBFloat16, kFloat8_e4m3fn, kFloat8_e5m2}) {
    INFO(std::string(dtype_name(half)));
    Tensor on_dev = empty(f32.shape(), TensorOptions(half).device(gpu));
    on_dev.copy_(f32);  // host float32 -> device half
    CHECK(bytes(on_dev) == bytes(f32.to(half)));
    CHECK(bytes(f32.to(gpu).to(half)) == bytes(f32.to(half)));  // cast on the device
  }
  // Only copy_ and to() cross devices; an op given tensors on two devices names both.
  CHECK_THROWS_WITH_AS(cat({ones({2}), ones({2}).to(gpu)}), doctest::Contains("cat: expected all tensors on one device, got cpu and cuda:0"), Error);
  CHECK_THROWS_WITH_AS(ones({2}) + ones({2}).to(gpu), doctest::Contains("expected all tensors on one device"), Error);
}

#ifdef AMPGRAD_WITH_CUDA
// What memory_stats(0) gained since s0: {allocated, reserved, cudaMalloc calls, cudaFree calls}.
std::array<int64_t, 4> stats_since(const MemoryStats& s0) {
  const MemoryStats s = cuda::memory_stats(0);
  return {s.allocated_bytes - s0.allocated_bytes, s.reserved_bytes - s0.reserved_bytes, s.num_system_allocs - s0.num_system_allocs,
          s.num_system_frees - s0.num_system_frees};
}
using Gained = std::array<int64_t, 4>;

TEST_CASE("caching allocator: a freed block is reused, stats move, empty_cache returns it") {
  SKIP_WITHOUT_GPU();
  SKIP_TEST_IF(!cuda::memory_caching_enabled(), "AMPGRAD_NO_CUDA_MEMORY_CACHING is set");
  cuda::empty_cache();
  cuda::reset_peak_memory_stats(0);  // earlier cases' peaks
  const MemoryStats s0 = cuda::memory_stats(0);
  void* a = cuda::allocate(1000, 0);  // rounds up to 1024 (512-byte granules below 1 MiB)
  CHECK(stats_since(s0) == Gained{1024, 1024, 1, 0});
  cuda::deallocate(a, 0);
  CHECK(stats_since(s0) == Gained{0, 1024, 1, 0});  // cached, not freed
  void* b = cuda::allocate(600, 0);                 // also rounds to 1024: the cached block
  CHECK(b == a);
  CHECK(stats_since(s0) == Gained{1024, 1024, 1, 0});
  cuda::deallocate(b, 0);

  void* big = cuda::allocate((3 << 20) + 1, 0);  // rounds to 3.25 MiB (eighths of 2 MiB between 2 and 4 MiB)
  CHECK(stats_since(s0) == Gained{13 << 18, (13 << 18) + 1024, 2, 0});
  CHECK(cuda::memory_stats(0).peak_allocated_bytes == s0.allocated_bytes + (13 << 18));
  cuda::deallocate(big, 0);
  cuda::reset_peak_memory_stats(0);
  CHECK(cuda::memory_stats(0).peak_allocated_bytes == s0.allocated_bytes);
  CHECK(cuda::allocate(0, 0) == nullptr);  // an empty tensor owns no memory

  cuda::empty_cache();
  CHECK(stats_since(s0) == Gained{0, 0, 2, 2});  // the 1 KiB and the 3.25 MiB block

  // Through tensors: a training step's second iteration allocates nothing new.
  { Tensor t = empty({1000}, TensorOptions().device(gpu)); }
  const int64_t mallocs = cuda::memory_stats(0).num_system_allocs;
  { Tensor t = empty({1000}, TensorOptions().device(gpu)); }
  CHECK(cuda::memory_stats(0).num_system_allocs == mallocs);
}

// Sets (value) or unsets (nullptr) an environment variable for one scope, then puts back what
// was there.
struct ScopedEnv {
  const char* name;
  std::optional<std::string> saved;
  ScopedEnv(const char* name, const char* value) : name(name) {
    if (const char* v = std::getenv(name)) saved = v;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { saved ? setenv(name, saved->c_str(), 1) : unsetenv(name); }
};

TEST_CASE("AMPGRAD_NO_CUDA_MEMORY_CACHING: set at all, it turns caching off") {
  {
    ScopedEnv off("AMPGRAD_NO_CUDA_MEMORY_CACHING", "0");  // set at all, as PyTorch's switch
    CHECK_FALSE(cuda::memory_caching_enabled());
  }
  ScopedEnv on("AMPGRAD_NO_CUDA_MEMORY_CACHING", nullptr);
  CHECK(cuda::memory_caching_enabled());
}

TEST_CASE("AMPGRAD_NO_CUDA_MEMORY_CACHING: blocks of the exact size, returned to the driver at once") {
  SKIP_WITHOUT_GPU();
  ScopedEnv off("AMPGRAD_NO_CUDA_MEMORY_CACHING", "1");
  const MemoryStats s0 = cuda::memory_stats(0);
  void* a = cuda::allocate(1000, 0);  // not rounded to 1024: a read of byte 1000 is out of bounds
  CHECK(stats_since(s0) == Gained{1000, 1000, 1, 0});
  cuda::deallocate(a, 0);
  CHECK(stats_since(s0) == Gained{0, 0, 1, 1});
  void* b = cuda::allocate(1000, 0);
  {
    ScopedEnv on("AMPGRAD_NO_CUDA_MEMORY_CACHING", nullptr);
    cuda::deallocate(b, 0);  // caching is back, but a 1000-byte block fits no free list
  }
  CHECK(stats_since(s0) == Gained{0, 0, 2, 2});
}

TEST_CASE("TF32 is off by default, so float32 GEMMs keep float32 accuracy") {
  SKIP_WITHOUT_GPU();
  CHECK_FALSE(cuda::matmul_allow_tf32());
  // K = 256 products of N(0,1) values. float32: each addition errs by up to 2⁻²⁴ of a partial
  // sum of size ~√k, about 2⁻²⁴·K/√2 ≈ 1e-5 in all (std), ~5e-5 at the worst of 4096 outputs.
  // TF32 rounds each input to 11 significant bits (2⁻¹¹): ~√(2K)·2⁻¹¹ ≈ 1e-2. 1e-3 tells them
  // apart with a tenfold margin either way.
  manual_seed(3);
  Tensor a = randn({64, 256}, kFloat64), b = randn({256, 64}, kFloat64);
  Tensor exact = matmul(a, b);
  Tensor on_gpu = matmul(a.to(kFloat32).to(gpu), b.to(kFloat32).to(gpu)).to(cpu).to(kFloat64);
  CHECK(max(abs(on_gpu - exact)).item<double>() < 1e-3);
  cuda::set_matmul_allow_tf32(true);
  CHECK(cuda::matmul_allow_tf32());
  cuda::set_matmul_allow_tf32(false);
}
#else
TEST_CASE("caching allocator and TF32 switch") { SKIP_TEST_IF(true, "built without the CUDA backend"); }
#endif

TEST_CASE("fused unscale over mixed-size gradients: the CPU's values, planted inf and NaN found") {
  SKIP_WITHOUT_GPU();
  // Sizes around the kernel's 16384-element chunks, an empty one, and enough tensors (400) that
  // the list takes several launches (~159 pointers fit in one launch's parameters).
  std::vector<int64_t> sizes = {1, 7, 16383, 16384, 16385, 100003, 0, 3};
  for (int i = 0; i < 392; ++i) sizes.push_back(1 + i % 5);
  auto run = [&](const std::vector<std::pair<size_t, int64_t>>& plant, float value) {
    manual_seed(9);
    std::vector<Tensor> host, dev;
    for (size_t t = 0; t < sizes.size(); ++t) {
      Tensor g = randn({sizes[t]}) * 65536.0;
      for (auto [planted_in, i] : plant)
        if (planted_in == t) g.narrow(0, i, 1).fill_(value);
      host.push_back(g);
      dev.push_back(g.to(gpu));
    }
    Tensor found_host = zeros({}), found_dev = zeros({}, TensorOptions().device(gpu));
    amp::non_finite_check_and_unscale_(host, found_host, full({}, 1.0 / 65536));
    amp::non_finite_check_and_unscale_(dev, found_dev, full({}, 1.0 / 65536, TensorOptions().device(gpu)));
    int64_t differ = 0;  // one float32 multiply per element on both: equal values (NaN payloads may differ)
    for (size_t t = 0; t < sizes.size(); ++t) {
      const std::vector<double> a = to_vector<double>(host[t]), b = to_vector<double>(dev[t]);
      for (size_t i = 0; i < a.size(); ++i) differ += !((std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i]);
    }
    CHECK(differ == 0);
    CHECK(found_dev.item<float>() == found_host.item<float>());
    return found_dev.item<float>();
  };
  CHECK(run({}, 0) == 0.f);
  CHECK(run({{sizes.size() - 1, 0}}, INFINITY) == 1.f);  // in the last launch
  CHECK(run({{5, 16384}}, NAN) == 1.f);                  // first element of a chunk
  CHECK(run({{3, 16383}}, -INFINITY) == 1.f);            // last element of a tensor
}

// The parameters and optimizer state of one run, as bytes, for bit-identity checks.
static std::vector<std::vector<uint8_t>> snapshot(const std::vector<Tensor>& params, const optim::Optimizer& opt) {
  std::vector<std::vector<uint8_t>> out;
  for (const Tensor& p : params) out.push_back(bytes(p));
  optim::OptimizerState st = opt.state_dict();
  for (auto& [name, t] : st.tensors) out.push_back(bytes(t));
  for (auto& [name, v] : st.scalars) out.push_back(std::vector<uint8_t>((const uint8_t*)&v, (const uint8_t*)&v + sizeof v));
  return out;
}

TEST_CASE("sync-free step on the GPU: overflow skips bit-identically, clean steps match the CPU") {
  SKIP_WITHOUT_GPU();
  using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  std::vector<std::pair<const char*, MakeOpt>> optimizers = {
      {"SGD momentum nesterov", [](auto p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}); }},
      {"Adam", [](auto p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}); }},
      {"AdamW", [](auto p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.01}); }},
  };
  for (const auto& optimizer : optimizers) {
    const char* const name = optimizer.first;  // not a structured binding: INFO captures it, which clang < 16 refuses
    const MakeOpt& make = optimizer.second;
    INFO(name);
    manual_seed(11);
    // c spans two of the fused kernels' chunks and every register slot of their threads
    Tensor w = randn({5, 3}), b = randn({3}), c = randn({16385 + 1000});
    std::vector<Tensor> on_cpu = {w.clone().requires_grad_(), b.clone().requires_grad_(), c.clone().requires_grad_()};
    std::vector<Tensor> on_gpu = {w.to(gpu).requires_grad_(), b.to(gpu).requires_grad_(), c.to(gpu).requires_grad_()};
    auto opt_cpu = make(on_cpu), opt_gpu = make(on_gpu);
    amp::GradScaler s_cpu({.init_scale = 1024, .growth_interval = 2}), s_gpu({.init_scale = 1024, .growth_interval = 2});
    // One iteration; overflow plants an inf in the weight's gradient. Returns the step's verdict.
    auto iteration = [](amp::GradScaler& s, optim::Optimizer& opt, const std::vector<Tensor>& p, bool overflow) {
      s.scale((p[0] * p[0]).sum() + (p[1] * 3.0).sum() + (p[2] * p[2]).sum()).backward();
      if (overflow) {
        NoGradGuard g;
        p[0].grad().narrow(0, 2, 1).fill_(INFINITY);
      }
      amp::StepResult r = s.step(opt);
      s.update();
      opt.zero_grad();
      return r;
    };
    // The scaler and optimizer math runs in float32 on both; FMA contraction may differ, so
    // parameters agree to a few float32 ulps per step (test_optim.cpp's 1e-6 relative).
    auto agree = [&] {
      for (size_t k = 0; k < on_cpu.size(); ++k) {
        const std::vector<double> a = to_vector<double>(on_cpu[k]), g = to_vector<double>(on_gpu[k]);
        for (size_t i = 0; i < a.size(); ++i) CHECK(g[i] == doctest::Approx(a[i]).epsilon(1e-6));
      }
      CHECK(s_gpu.get_scale() == s_cpu.get_scale());
      CHECK(opt_gpu->state_dict().scalars == opt_cpu->state_dict().scalars);  // step counts
    };
    for (int i = 0; i < 3; ++i) {
      iteration(s_cpu, *opt_cpu, on_cpu, false);
      iteration(s_gpu, *opt_gpu, on_gpu, false);  // its result unread: no host sync
    }
    agree();
    const auto before = snapshot(on_gpu, *opt_gpu);
    const double scale_before = s_gpu.get_scale();
    CHECK_FALSE(iteration(s_gpu, *opt_gpu, on_gpu, true));  // reading the result syncs, by request
    CHECK(snapshot(on_gpu, *opt_gpu) == before);             // parameters, buffers, step counts
    CHECK(s_gpu.get_scale() == scale_before / 2);            // backed off on the device
    iteration(s_cpu, *opt_cpu, on_cpu, true);
    for (int i = 0; i < 2; ++i) {
      iteration(s_cpu, *opt_cpu, on_cpu, false);
      iteration(s_gpu, *opt_gpu, on_gpu, false);
    }
    agree();  // Adam's bias correction counted only the clean steps
  }
}
