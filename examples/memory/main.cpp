// memory — where a training step's memory goes, and ways to cut it. One forward and
// backward of a deep MLP (blocks of Linear + ReLU) in each configuration: float32, 16-bit
// autocast, FP8 linears, and activation checkpointing. For each it prints what the forward leaves held for
// backward (the saved activations), the step's peak, both above what lived before the step
// (the weights), and the step's median time; with --at-peak, what was alive at each peak and
// what made it, and with --timeline, memory over the last step of each (scripts/plot-memory.sh).
//   build/examples/memory [--width 512] [--blocks 16] [--batch 2048] [--segments 4] [--steps 3]
//                         [--at-peak] [--timeline runs/memory-timeline.dat]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>

#include "amp/autocast.h"
#include "autograd/float8.h"
#include "nn/checkpoint.h"
#include "nn/nn.h"
#include "diagnostics/memory_history.h"
#include "tensor/memory_stats.h"
#include "flags.h"
#include "output_files.h"
#include "report_errors.h"

using namespace ampgrad;

struct Config {
  const char* name;
  std::optional<DType> autocast;  // none: float32
  int64_t segments;               // 0: no checkpointing
  bool float8 = false;            // every linear an FP8 GEMM (float8_autocast)
};

struct Measured {
  double held_mib, peak_mib, ms;
  std::string at_peak;                // the last step's MemoryHistory, printed
  std::vector<MemoryPoint> timeline;  // and its allocated memory after each event
};

static double mib(int64_t bytes) { return double(bytes) / (1 << 20); }

static Measured measure(nn::Sequential& net, const Tensor& x, const Tensor& y, const Config& cfg, int steps) {
  const Device dev = x.device();
  Measured m{};
  std::vector<double> ms;
  for (int s = 0; s <= steps; ++s) {  // step 0 warms the caches and is not counted
    net.zero_grad();                  // gradients freed: each step makes them anew, as in training
    reset_peak_memory_stats(dev);
    const int64_t before = memory_stats(dev).allocated_bytes;
    std::optional<MemoryHistory> history;
    if (s == steps) history.emplace(dev);  // the last step: what was alive at its peak
    const auto t0 = std::chrono::steady_clock::now();
    Tensor loss;
    {
      amp::autocast ac(dev.type, cfg.autocast.value_or(kBFloat16), cfg.autocast.has_value());
      float8_autocast f8(dev.type, {}, cfg.float8);
      Tensor logits = cfg.segments ? nn::checkpoint_sequential(net, cfg.segments, x) : net.forward(x);
      loss = cross_entropy(logits, y);
    }
    const int64_t held = memory_stats(dev).allocated_bytes - before;
    loss.backward();
    loss.item<float>();  // on a GPU, wait for the step
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s == 0) continue;
    m.held_mib = mib(held);
    m.peak_mib = mib(memory_stats(dev).peak_allocated_bytes - before);
    ms.push_back(t);
    if (history) {
      std::ostringstream os;
      history->print(os);
      m.at_peak = os.str();
      m.timeline = history->timeline();
    }
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  m.ms = ms[ms.size() / 2];
  return m;
}

int main(int argc, char** argv) {
  int64_t width = 512, blocks = 16, batch = 2048, segments = 4;
  int steps = 3;
  bool at_peak = false;
  std::string device = "cpu", timeline;
  CLI::App app{"A deep MLP's training step: the memory it holds, in float32, under autocast and checkpointed."};
  app.add_option("--width", width, "features of every hidden layer")->check(examples::whole_number(1, 1 << 16))->capture_default_str();
  app.add_option("--blocks", blocks, "Linear + ReLU blocks before the 10-way head")->check(examples::whole_number(1, 1 << 10))->capture_default_str();
  app.add_option("--batch", batch)->check(examples::whole_number(1, 1 << 20))->capture_default_str();
  app.add_option("--segments", segments, "checkpoint_sequential's segment count")->check(examples::whole_number(1, 1 << 11))->capture_default_str();
  app.add_option("--steps", steps, "timed steps per configuration (median reported)")->check(examples::whole_number(1, 1000))->capture_default_str();
  app.add_flag("--at-peak", at_peak, "after the table, what was alive at each step's peak and what made it (a MemoryHistory)");
  app.add_option("--timeline", timeline, "write each configuration's memory over its last step: gnuplot data, a block per configuration");
  app.add_option("--device", device, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return report_errors("memory", [&] {
    examples::check_paths({{"--timeline", timeline}});
    const Device dev = device == "cuda" ? Device::cuda() : Device::cpu();

    manual_seed(0);
    nn::Sequential net;
    for (int64_t b = 0; b < blocks; ++b) {
      net.push_back(std::make_shared<nn::Linear>(width, width));
      net.push_back(std::make_shared<nn::ReLU>());
    }
    net.push_back(std::make_shared<nn::Linear>(width, 10));
    AMPGRAD_CHECK(segments <= int64_t(net.size()), "--segments " << segments << " is more than the model's " << net.size() << " modules");
    net.to(dev);
    int64_t weights = 0;
    for (const Tensor& p : net.parameters()) weights += p.numel() * 4;
    Tensor x = randn({batch, width}).to(dev), y = randint(0, 10, {batch}).to(dev);

    const std::string ck = "checkpoint " + std::to_string(segments);
    const std::string ck_bf16 = "bf16 autocast, " + ck;
    const Config configs[] = {{"float32", {}, 0},          {"fp16 autocast", kFloat16, 0}, {"bf16 autocast", kBFloat16, 0},
                              {"bf16 autocast, float8", kBFloat16, 0, true}, {ck.c_str(), {}, segments},
                              {ck_bf16.c_str(), kBFloat16, segments}};
    std::printf("%lld blocks of Linear(%lld, %lld) + ReLU, batch %lld, on %s: weights %.1f MiB, one activation %.1f MiB (float32)\n",
                (long long)blocks, (long long)width, (long long)width, (long long)batch, dev.str().c_str(), mib(weights),
                mib(batch * width * 4));
    std::printf("%-28s %14s %12s %10s\n", "forward and backward", "held for bwd", "step peak", "ms/step");
    std::vector<Measured> measured;
    for (const Config& cfg : configs) {
      const Measured& m = measured.emplace_back(measure(net, x, y, cfg, steps));
      std::printf("%-28s %10.1f MiB %8.1f MiB %10.1f\n", cfg.name, m.held_mib, m.peak_mib, m.ms);
    }
    std::printf("held for bwd: allocated after the forward, above what lived before it; step peak: the most the step held\n"
                "above that, its gradients included. Checkpointing keeps each segment's input and reruns the segment in\n"
                "backward; autocast keeps 16-bit activations but adds a 16-bit copy of each weight whose input wants a\n"
                "gradient (all but the first layer's); float8 keeps each linear's input and weight in 8 bits.\n");
    if (at_peak)
      for (size_t i = 0; i < measured.size(); ++i) std::printf("\n%s\n%s", configs[i].name, measured[i].at_peak.c_str());
    if (!timeline.empty()) {  // a block per configuration, its title on its first line
      std::ostringstream os;
      for (size_t i = 0; i < measured.size(); ++i) {
        os << (i ? "\n\n" : "") << '"' << configs[i].name << "\"\n";
        for (const MemoryPoint& p : measured[i].timeline) os << p.ms << " " << mib(p.bytes) << "\n";
      }
      examples::write_text_file(timeline, os.str());
      std::printf("\nmemory over each last step written to %s (scripts/plot-memory.sh draws it)\n", timeline.c_str());
    }
  });
}
