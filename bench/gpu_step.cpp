// gpu_step.cpp — the speed of one training step on the GPU, fused AdamW, in float32 (TF32 off),
// float16 autocast with the GradScaler, and bfloat16 autocast, for one of two models:
//   --model mlp: 4 Linear layers 4096 wide (ReLU between), batch 2048, cross-entropy over 4096 classes;
//   --model gpt: examples/gpt's transformer, 6 layers x 384 wide (6 heads), block 256, batch 64, 65
//                tokens (a character vocabulary), on random tokens; attention is the fused causal op.
// Prints one line per precision, "ampgrad <model> <precision> <median ms/step>", as
// bench/torch_gpu_step.py does for PyTorch; scripts/gpu-check.sh puts both in one table. Leaves
// out correctness (the CUDA test cases).
//
// Each step is timed on the device by CUDA events recorded between steps, so the timed region
// holds no host sync (the steps' own code has none either): the host waits once before it and
// once after it, and the gaps a slow host leaves show up in the times, as they should.
//
// With --profile 1, one more step of each precision is profiled (diagnostics/profile.h), on stderr: the
// host's time to queue the step, each kernel's device time in forward and backward (Profile(true)
// waits for each), and the device time of the optimizer step with the GradScaler's.
//
//   build/bench/gpu_step [--model mlp|gpt] [--steps 50] [--warmup 10] [--profile 0]
//                        [--width 4096] [--batch 2048] [--layers 4]   (mlp; gpt: 384, 64, 6)
#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "amp/autocast.h"
#include "gpt/model.h"
#include "amp/grad_scaler.h"
#include "autograd/ops.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/cuda/runtime.h"
#include "diagnostics/profile.h"

using namespace ampgrad;

struct Config {
  std::string model = "mlp";
  int64_t width = 0, batch = 0, layers = 0;  // 0: the model's default
  int64_t block = 256, vocab = 65;           // gpt only
  int warmup = 10, steps = 50;
  bool profile = false;
};

// The model, in float32 on the GPU (master weights shared by the three precisions' runs), and
// its loss on a fixed random batch.
struct Bench {
  std::shared_ptr<nn::Module> model;
  std::function<Tensor()> loss;
};

static Bench make_bench(const Config& c) {
  const Device gpu = Device::cuda();
  manual_seed(0);
  Bench b;
  if (c.model == "mlp") {
    auto seq = std::make_shared<nn::Sequential>();
    for (int64_t l = 0; l < c.layers; ++l) {
      if (l > 0) seq->push_back(std::make_shared<nn::ReLU>());
      seq->push_back(std::make_shared<nn::Linear>(c.width, c.width));
    }
    seq->to(gpu);
    manual_seed(1);
    Tensor x = randn({c.batch, c.width}, TensorOptions().device(gpu));             // (N, D)
    Tensor y = randint(0, c.width, {c.batch}, TensorOptions(kInt64).device(gpu));  // (N)
    b.loss = [m = seq.get(), x, y] { return cross_entropy(m->forward(x), y); };
    b.model = seq;
  } else {
    auto g = std::make_shared<gpt::GPT>(
        gpt::GPTConfig{.vocab_size = c.vocab, .block_size = c.block, .n_layer = c.layers, .n_head = 6, .n_embd = c.width});
    g->to(gpu);
    manual_seed(1);
    const TensorOptions tokens = TensorOptions(kInt64).device(gpu);
    Tensor idx = randint(0, c.vocab, {c.batch, c.block}, tokens), next = randint(0, c.vocab, {c.batch, c.block}, tokens);  // (B, T)
    b.loss = [m = g.get(), idx, next, V = c.vocab] { return cross_entropy(m->forward(idx).reshape({-1, V}), next.reshape({-1})); };
    b.model = g;
  }
  return b;
}

static double median_ms_per_step(const std::string& precision, const Config& c, const Bench& b) {
  const bool use_amp = precision != "fp32";
  const DType amp_dtype = precision == "bf16" ? kBFloat16 : kFloat16;
  optim::AdamW opt(b.model->parameters(), {.lr = 1e-4});
  amp::GradScaler scaler({.enabled = precision == "fp16"});  // bf16 has float32's range: no scaling
  auto forward_backward = [&] {
    opt.zero_grad();
    Tensor loss;
    {
      amp::autocast ac(DeviceType::CUDA, amp_dtype, use_amp);
      loss = b.loss();
    }
    scaler.scale(loss).backward();
  };
  auto update = [&] {
    scaler.step(opt);  // left unread: reading it would wait for the GPU
    scaler.update();
  };
  auto step = [&] {
    forward_backward();
    update();
  };
  for (int i = 0; i < c.warmup; ++i) step();

  std::vector<cudaEvent_t> marks(c.steps + 1);
  for (cudaEvent_t& e : marks) AMPGRAD_CUDA_CHECK(cudaEventCreate(&e));
  AMPGRAD_CUDA_CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < c.steps; ++i) {
    AMPGRAD_CUDA_CHECK(cudaEventRecord(marks[i], cuda::stream()));
    step();
  }
  AMPGRAD_CUDA_CHECK(cudaEventRecord(marks[c.steps], cuda::stream()));
  AMPGRAD_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms(c.steps);
  for (int i = 0; i < c.steps; ++i) AMPGRAD_CUDA_CHECK(cudaEventElapsedTime(&ms[i], marks[i], marks[i + 1]));
  for (cudaEvent_t& e : marks) AMPGRAD_CUDA_CHECK(cudaEventDestroy(e));
  std::nth_element(ms.begin(), ms.begin() + c.steps / 2, ms.end());
  if (c.profile) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    AMPGRAD_CUDA_CHECK(cudaDeviceSynchronize());
    std::cerr << "--- " << precision << ": the host queues a step in " << host_ms << " ms; each kernel of forward and backward on the device:\n";
    {
      Profile prof(/*sync_cuda=*/true);
      forward_backward();
      prof.print(std::cerr);
    }
    cudaEvent_t before, after;  // the optimizer's and the GradScaler's fused kernels are no primitives: timed apart
    AMPGRAD_CUDA_CHECK(cudaEventCreate(&before));
    AMPGRAD_CUDA_CHECK(cudaEventCreate(&after));
    AMPGRAD_CUDA_CHECK(cudaEventRecord(before, cuda::stream()));
    update();
    AMPGRAD_CUDA_CHECK(cudaEventRecord(after, cuda::stream()));
    AMPGRAD_CUDA_CHECK(cudaEventSynchronize(after));
    float update_ms = 0;
    AMPGRAD_CUDA_CHECK(cudaEventElapsedTime(&update_ms, before, after));
    std::cerr << "scaler.step(opt) and scaler.update() on the device: " << update_ms << " ms\n";
    AMPGRAD_CUDA_CHECK(cudaEventDestroy(before));
    AMPGRAD_CUDA_CHECK(cudaEventDestroy(after));
  }
  return ms[c.steps / 2];
}

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model") {
      c.model = argv[i + 1];
      if (c.model != "mlp" && c.model != "gpt") {
        std::fprintf(stderr, "gpu_step: --model must be mlp or gpt, got '%s'\n", argv[i + 1]);
        return 2;
      }
      continue;
    }
    char* end = nullptr;
    const long value = std::strtol(argv[i + 1], &end, 10);
    const long least = flag == "--profile" || flag == "--warmup" ? 0 : 1;
    if (*end != '\0' || end == argv[i + 1] || value < least) {
      std::fprintf(stderr, "gpu_step: %s must be an integer >= %ld, got '%s'\n", argv[i], least, argv[i + 1]);
      return 2;
    }
    if (flag == "--steps") c.steps = int(value);
    else if (flag == "--warmup") c.warmup = int(value);
    else if (flag == "--width") c.width = value;
    else if (flag == "--batch") c.batch = value;
    else if (flag == "--layers") c.layers = value;
    else if (flag == "--profile") c.profile = value != 0;
    else {
      std::fprintf(stderr, "gpu_step: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (!cuda::is_available()) {
    std::fprintf(stderr, "gpu_step: no CUDA device\n");
    return 1;
  }
  const bool mlp = c.model == "mlp";
  if (!c.width) c.width = mlp ? 4096 : 384;
  if (!c.batch) c.batch = mlp ? 2048 : 64;
  if (!c.layers) c.layers = mlp ? 4 : 6;
  cuda::set_matmul_allow_tf32(false);  // the default, stated: float32 means float32 here
  const Bench b = make_bench(c);
  for (const char* precision : {"fp32", "fp16", "bf16"}) {
    const double ms = median_ms_per_step(precision, c, b);
    std::printf("ampgrad %s %s %.3f\n", c.model.c_str(), precision, ms);
    std::fflush(stdout);
  }
  const MemoryStats s = cuda::memory_stats(0);
  std::fprintf(stderr, "gpu_step: peak allocated %.0f MiB, %lld cudaMalloc calls in all\n", double(s.peak_allocated_bytes) / (1 << 20),
               (long long)s.num_system_allocs);
}
