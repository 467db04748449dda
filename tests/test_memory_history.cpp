// test_memory_history.cpp — MemoryHistory (diagnostics/memory_history.h): its peak agrees with
// memory_stats to the byte, each block is named by what made it, and in a training step it says
// which blocks the step holds for backward and at its peak, and who made them.
#include <doctest/doctest.h>

#include <sstream>
#include <tuple>

#include "amp/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/ops.h"
#include "devices.h"
#include "nn/checkpoint.h"
#include "nn/nn.h"
#include "tensor/kernels.h"
#include "diagnostics/memory_history.h"
#include "tensor/memory_stats.h"
#include "test_util.h"

using namespace ampgrad;

static constexpr int64_t KiB = 1024;

using Groups = std::vector<std::tuple<std::string, int64_t, int64_t>>;  // made by, blocks, bytes
namespace doctest {
template <> struct StringMaker<Groups> {
  static String convert(const Groups& groups) {
    std::ostringstream os;
    for (const auto& [made_by, blocks, bytes] : groups) os << "{" << made_by << ", " << blocks << ", " << bytes << "} ";
    return os.str().c_str();
  }
};
}  // namespace doctest

// What record() announces when an op returns out.
static void name_output(const Tensor& out, const char* op) {
  announce([&](Observer& o) { o.on_op_output(out, op, {}); });
}

static Groups tuples(const std::vector<MemoryGroup>& groups) {
  Groups out;
  for (const MemoryGroup& g : groups) out.emplace_back(g.made_by, g.blocks, g.bytes);
  return out;
}
static int64_t total(const std::vector<MemoryGroup>& groups) {
  int64_t bytes = 0;
  for (const MemoryGroup& g : groups) bytes += g.bytes;
  return bytes;
}

DEVICE_TEST_CASE("MemoryHistory: the peak, the blocks alive at it and the timeline, to the byte of memory_stats") {
  const TensorOptions on(dev);  // sizes both allocators keep exact: multiples of 512 bytes, under 1 MiB
  Tensor old = empty({64 * KiB}, on);  // 256 KiB made before the history
  reset_peak_memory_stats(dev);
  const int64_t base = memory_stats(dev).allocated_bytes;
  MemoryHistory history(dev);
  Tensor a = empty({64 * KiB}, on);  // +256 KiB, made outside any kernel or named scope
  old = Tensor();                    // -256 KiB
  Tensor b;
  {
    MadeBy outer("outer");
    MadeBy inner("inner");  // the outermost name holds
    b = empty({128 * KiB}, on);     // +512 KiB: the peak, 512 KiB above the start
  }
  b = Tensor();
  Tensor c = empty({32 * KiB}, on);  // +128 KiB
  Tensor host = dev.is_cuda() ? empty({KiB}) : Tensor();  // another device's block: not recorded

  CHECK(history.peak_bytes() == 512 * KiB);
  CHECK(history.peak_bytes() == memory_stats(dev).peak_allocated_bytes - base);
  std::vector<int64_t> bytes;
  double last_ms = 0;
  for (const MemoryPoint& p : history.timeline()) {
    bytes.push_back(p.bytes);
    CHECK(p.ms >= last_ms);
    last_ms = p.ms;
  }
  CHECK(bytes == std::vector<int64_t>{256 * KiB, 0, 512 * KiB, 0, 128 * KiB});

  std::ostringstream os;
  history.print(os);
  std::string text = os.str();
  const size_t ms_end = text.find(" ms in"), ms_begin = text.rfind(' ', ms_end - 1) + 1;
  text.replace(ms_begin, ms_end - ms_begin, "T");  // the time it took varies
  CHECK(text == "memory on " + dev.str() +
                    ": peak 0.50 MiB above the start, T ms in, reached by a block of 0.50 MiB from outer\n"
            "alive then, by what made them:\n"
            "  made by                         blocks         MiB\n"
            "  outer                                1        0.50\n"
            "  (outside kernels)                    1        0.25\n"
            "  minus 0.25 MiB of blocks made before the history began and freed by the peak\n");
  CHECK(error_of([] { MemoryHistory second; }) == "MemoryHistory: another one is recording (one at a time)");
}

TEST_CASE("MemoryHistory names a block by the op it became, else by its primitive, and keeps a named scope's and a view's") {
  Tensor x = randn({64 * KiB});
  MemoryHistory history;
  Tensor t = kernels::binary(kernels::Binary::mul, x, x);  // a primitive's block, named "mul" until an op takes it
  Tensor u = kernels::unary(kernels::Unary::exp, x, {});
  CHECK(tuples(history.live_now()) == Groups{{"exp", 1, 256 * KiB}, {"mul", 1, 256 * KiB}});
  name_output(t, "my_op");     // the op that records it as its output names it
  name_output(t, "later_op");  // and keeps it: a later op only passes it on
  name_output(u.view({256, 256}), "a_view");  // a view's block is its base's
  Tensor s;
  {
    MadeBy scoped("scoped");
    s = empty({KiB});
  }
  name_output(s, "my_op");  // a scope's name is not a primitive's guess: it holds
  CHECK(tuples(history.live_now()) == Groups{{"exp", 1, 256 * KiB}, {"my_op", 1, 256 * KiB}, {"scoped", 1, 4 * KiB}});
}

static int64_t bytes_of(const std::vector<MemoryGroup>& groups, const std::string& made_by) {
  for (const MemoryGroup& g : groups)
    if (g.made_by == made_by) return g.bytes;
  return 0;
}

DEVICE_TEST_CASE("MemoryHistory names forward blocks by their op, backward ones by the node, autocast's by the cast") {
  const int64_t scalar = dev.is_cuda() ? 512 : 64;  // a one-element block, as each allocator rounds it
  manual_seed(1);
  Tensor w = randn({256, 256}).to(dev).requires_grad_(), x = randn({256, 256}).to(dev), b = randn({256}).to(dev).requires_grad_();
  {
    MemoryHistory history(dev);
    Tensor p = w * x;           // 256 KiB, kept here
    Tensor loss = (p + b).mean();  // p + b is freed at once; the loss is one element
    // The peak is the forward's last block, mean's output, made by the sum kernel beside p and
    // p + b: named by its op, though the op named it after the peak. On CUDA the sum of 65,536
    // elements adds its chunks' partial sums, a scratch block alive only inside the kernel call.
    Groups at_peak{{"add", 1, 256 * KiB}, {"mul", 1, 256 * KiB}, {"mean", 1, scalar}};
    if (dev.is_cuda()) at_peak.emplace_back("sum", 1, scalar);
    CHECK(tuples(history.live_at_peak()) == at_peak);
    loss.backward();  // w.grad = dL/dp · x, from mul's backward; b.grad, add's gradient summed over the rows
    CHECK(tuples(history.live_now()) == Groups{{"mul", 1, 256 * KiB}, {"mul backward", 1, 256 * KiB}, {"add backward", 1, 1 * KiB}, {"mean", 1, scalar}});
  }
  {
    // Where two paths' gradients meet, the engine sums them: "gradient sum", at this backward's peak.
    MemoryHistory history(dev);
    Tensor h = w * x;
    Tensor loss = (h * x).sum() + (h * 2.0).sum();
    loss.backward();
    CHECK(bytes_of(history.live_at_peak(), "gradient sum") == 256 * KiB);
  }
  // Under bf16 autocast a Linear(256, 256) on a (64, 256) batch holds its weight and bias cast once
  // for the region (the cache), the input cast for this call, and its 16-bit output.
  nn::Linear lin(256, 256);
  lin.to(dev);
  Tensor in = randn({64, 256}).to(dev);
  MemoryHistory history(dev);
  amp::autocast ac(dev.type, kBFloat16);
  Tensor y = lin.forward(in);
  CHECK(tuples(history.live_now()) ==
        Groups{{"autocast weight cache", 2, 256 * 256 * 2 + 256 * 2}, {"autocast cast", 1, 64 * 256 * 2}, {"linear", 1, 64 * 256 * 2}});
}

// An MLP's step under a MemoryHistory: what the forward leaves held for backward, and the peak.
struct Step {
  Groups held;
  int64_t peak, peak_from_stats, live_at_peak_less_freed;
  std::vector<MemoryGroup> at_peak;
};
static Step mlp_step(nn::Sequential& net, const Tensor& x, const Tensor& y, std::optional<DType> autocast, int64_t segments) {
  const Device cpu = Device::cpu();
  net.zero_grad();
  reset_peak_memory_stats(cpu);
  const int64_t base = memory_stats(cpu).allocated_bytes;
  MemoryHistory history;
  Tensor loss;
  {
    amp::autocast ac(DeviceType::CPU, autocast.value_or(kBFloat16), autocast.has_value());
    loss = cross_entropy(segments ? nn::checkpoint_sequential(net, segments, x) : net.forward(x), y);
  }
  Step s{tuples(history.live_now()), 0, 0, 0, {}};
  loss.backward();
  s.peak = history.peak_bytes();
  s.peak_from_stats = memory_stats(cpu).peak_allocated_bytes - base;
  s.at_peak = history.live_at_peak();
  s.live_at_peak_less_freed = total(s.at_peak) - history.freed_before_peak();
  return s;
}

TEST_CASE("MemoryHistory on an MLP's step: held for backward, by maker, in float32, bf16 and checkpointed") {
  // 4 blocks of Linear(128, 128) + ReLU and a 10-way head, batch 256: one activation is 128 KiB
  // in float32. x wants no gradient, so the first Linear keeps its input but not its weight.
  manual_seed(2);
  nn::Sequential net;
  for (int b = 0; b < 4; ++b) {
    net.push_back(std::make_shared<nn::Linear>(128, 128));
    net.push_back(std::make_shared<nn::ReLU>());
  }
  net.push_back(std::make_shared<nn::Linear>(128, 10));
  Tensor x = randn({256, 128}), y = randint(0, 10, {256});
  mlp_step(net, x, y, {}, 0);  // warm

  // cross_entropy keeps what its backward reads: the log-probabilities (256 × 10 float32) and its
  // targets (the class indices, int64; each row's weight, float32; whether it counts, bool; their
  // count, a scalar); the loss is a scalar too, out of a division by that count.
  const Groups loss_held{{"log_softmax", 1, 256 * 10 * 4}, {"where", 1, 256 * 8}, {"to", 1, 256 * 4}, {"ne", 1, 256}, {"div", 1, 64}, {"sum", 1, 64}};
  const auto with_loss = [&](Groups g) {
    g.insert(g.end(), loss_held.begin(), loss_held.end());
    return g;
  };
  // float32: each ReLU keeps its output, which the next Linear reads too.
  const Step f32 = mlp_step(net, x, y, {}, 0);
  CHECK(f32.held == with_loss({{"relu", 4, 4 * 128 * KiB}}));
  // bf16: 16-bit activations, the 16-bit input the first Linear keeps, and a 16-bit copy of every
  // weight whose layer's input wants a gradient: 3 hidden ones and the head's (10 × 128).
  const Step bf16 = mlp_step(net, x, y, kBFloat16, 0);
  CHECK(bf16.held == with_loss({{"relu", 4, 4 * 64 * KiB}, {"autocast weight cache", 4, 3 * 128 * 128 * 2 + 10 * 128 * 2}, {"autocast cast", 1, 64 * KiB}}));
  // checkpointed in 2 segments, (Linear, ReLU) × 2 and the rest: the first keeps only its input (x,
  // made before) and its output, which the second, run unchecked, reads; the second keeps its
  // ReLUs' outputs. The first segment's activations are made again in its backward.
  const Step ck = mlp_step(net, x, y, {}, 2);
  CHECK(ck.held == with_loss({{"relu", 3, 3 * 128 * KiB}}));
  bool rerun_at_peak = false;
  for (const MemoryGroup& g : ck.at_peak) rerun_at_peak |= g.made_by == "checkpoint backward" && g.bytes >= 2 * 128 * KiB;
  CHECK(rerun_at_peak);
  for (const Step* s : {&f32, &bf16, &ck}) {
    CHECK(s->peak == s->peak_from_stats);
    CHECK(s->live_at_peak_less_freed == s->peak);
  }
}
