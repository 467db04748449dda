// test_memory.cpp — measuring and cutting a step's memory: the allocators' statistics, and
// activation checkpointing (autograd/checkpoint.h), whose gradients must equal an ordinary
// forward's bit for bit while its peak is a fraction of the ordinary one.
#include <doctest/doctest.h>

#include "amp/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "devices.h"
#include "nn/checkpoint.h"
#include "nn/nn.h"
#include "tensor/cpu/allocator.h"
#include "tensor/memory_stats.h"
#include "test_util.h"

using namespace ampgrad;

// What the CPU allocator gained since s0: {allocated, reserved, system allocs, system frees}.
using Gained = std::array<int64_t, 4>;
static Gained cpu_gained(const MemoryStats& s0) {
  const MemoryStats s = memory_stats(Device::cpu());
  return {s.allocated_bytes - s0.allocated_bytes, s.reserved_bytes - s0.reserved_bytes, s.num_system_allocs - s0.num_system_allocs,
          s.num_system_frees - s0.num_system_frees};
}

TEST_CASE("CPU memory_stats: allocated, reserved, peak and system calls follow each block") {
  cpu::empty_cache();
  reset_peak_memory_stats(Device::cpu());
  const MemoryStats s0 = memory_stats(Device::cpu());
  CHECK(s0.peak_allocated_bytes == s0.allocated_bytes);
  {
    Tensor big = empty({1 << 16});  // 256 KiB: from malloc, cached when freed
    CHECK(cpu_gained(s0) == Gained{1 << 18, 1 << 18, 1, 0});
  }
  CHECK(cpu_gained(s0) == Gained{0, 1 << 18, 1, 0});  // held in the cache, still reserved
  {
    Tensor again = empty({1 << 16});  // the cached block: no malloc
    Tensor small = empty({10});       // 40 bytes round to 64, straight from malloc
    CHECK(cpu_gained(s0) == Gained{(1 << 18) + 64, (1 << 18) + 64, 2, 0});
  }
  CHECK(cpu_gained(s0) == Gained{0, 1 << 18, 2, 1});  // the small block went back at once
  CHECK(memory_stats(Device::cpu()).peak_allocated_bytes == s0.allocated_bytes + (1 << 18) + 64);
  reset_peak_memory_stats(Device::cpu());
  CHECK(memory_stats(Device::cpu()).peak_allocated_bytes == s0.allocated_bytes);
  cpu::empty_cache();
  CHECK(cpu_gained(s0) == Gained{0, 0, 2, 2});
}

// ---- activation checkpointing

// A deep MLP with dropout: L blocks of Linear, ReLU, Dropout, then a 10-way head.
static std::shared_ptr<nn::Sequential> deep_mlp(int64_t width, int64_t blocks, double p, Device dev) {
  manual_seed(1);
  auto net = std::make_shared<nn::Sequential>();
  for (int64_t l = 0; l < blocks; ++l) {
    net->push_back(std::make_shared<nn::Linear>(width, width));
    net->push_back(std::make_shared<nn::ReLU>());
    net->push_back(std::make_shared<nn::Dropout>(p));
  }
  net->push_back(std::make_shared<nn::Linear>(width, 10));
  net->to(dev);
  return net;
}

// One forward and backward from a fixed seed (dropout's masks), plain (segments 0) or through
// checkpoint_sequential; returns the loss, the input's gradient and every parameter's gradient.
static std::vector<std::vector<double>> step(nn::Sequential& net, const Tensor& x, const Tensor& y, int64_t segments,
                                             std::optional<DType> autocast_dtype = {}) {
  net.zero_grad();
  Tensor xg = x.detach().requires_grad_();
  manual_seed(7);
  Tensor loss;
  {
    amp::autocast ac(x.device().type, autocast_dtype.value_or(kFloat16), autocast_dtype.has_value());
    Tensor logits = segments ? nn::checkpoint_sequential(net, segments, xg) : net.forward(xg);
    loss = cross_entropy(logits, y);
  }
  loss.backward();
  std::vector<std::vector<double>> out{to_vector<double>(loss), to_vector<double>(xg.grad())};
  for (const Tensor& p : net.parameters()) out.push_back(to_vector<double>(p.grad()));
  return out;
}

DEVICE_TEST_CASE("checkpoint_sequential gives the ordinary step's loss and gradients bit for bit") {
  auto net = deep_mlp(32, 6, 0.25, dev);
  manual_seed(2);
  Tensor x = randn({16, 32}).to(dev), y = randint(0, 10, {16}).to(dev);
  const auto plain = step(*net, x, y, 0);
  for (int64_t segments : {2, 3, 19}) {  // 1 would run the plain forward
    CAPTURE(segments);
    CHECK(step(*net, x, y, segments) == plain);  // dropout's masks drawn again, the same
  }
  // Under autocast the rerun casts again, in the first run's dtype.
  const auto amp_plain = step(*net, x, y, 0, kFloat16);
  CHECK(amp_plain != plain);
  CHECK(step(*net, x, y, 3, kFloat16) == amp_plain);
  CHECK(step(*net, x, y, 3, kBFloat16) == step(*net, x, y, 0, kBFloat16));
}

DEVICE_TEST_CASE("checkpoint_sequential through BatchNorm: the same gradients, and the running statistics take the batch once") {
  auto make = [&] {
    manual_seed(3);
    auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::BatchNorm1d>(8),
                                                std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 8),
                                                std::make_shared<nn::BatchNorm1d>(8), std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(8, 3));
    net->to(dev);
    return net;
  };
  auto plain = make(), checkpointed = make();  // two nets: each step moves its running statistics
  manual_seed(4);
  Tensor x = randn({16, 8}).to(dev), y = randint(0, 3, {16}).to(dev);
  CHECK(step(*checkpointed, x, y, 2) == step(*plain, x, y, 0));  // segment 1, checkpointed, holds the first BatchNorm
  const nn::StateDict a = plain->state_dict(), b = checkpointed->state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i].first);
    CHECK(to_vector<double>(a[i].second) == to_vector<double>(b[i].second));
  }
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm>((*checkpointed)[1]);
  REQUIRE(bn);
  CHECK(bn->num_batches_tracked.item<int64_t>() == 1);
}

TEST_CASE("checkpoint_sequential: the peak holds one segment's activations, not all of them") {
  // 16 blocks of 256 wide on a batch of 1024: each activation is 1 MiB, and an ordinary step
  // keeps two per block (relu's output, dropout's) and dropout's bool mask until its backward;
  // checkpointed in 4 segments it keeps the segment inputs and one segment's worth.
  auto net = deep_mlp(256, 16, 0.1, Device::cpu());
  manual_seed(3);
  Tensor x = randn({1024, 256}), y = randint(0, 10, {1024});
  auto peak_of = [&](int64_t segments) {
    step(*net, x, y, segments);  // warm: every block size has been allocated once
    net->zero_grad();            // as step() does first: the baseline holds no gradients
    reset_peak_memory_stats(Device::cpu());
    const int64_t before = memory_stats(Device::cpu()).allocated_bytes;
    step(*net, x, y, segments);
    return memory_stats(Device::cpu()).peak_allocated_bytes - before;
  };
  const int64_t plain = peak_of(0), four = peak_of(4), sixteen_blocks = 16 * (2 * 4 + 1) * 1024 * 256;
  CAPTURE(plain);
  CAPTURE(four);
  CHECK(plain > sixteen_blocks);   // at least the activations the estimate above counts
  CHECK(four < plain / 2);         // measured 0.40x
}

TEST_CASE("checkpoint: gradcheck through inputs, a weight it captured and an earlier result") {
  manual_seed(4);
  Tensor x = randn({3, 4}, kFloat64).requires_grad_(), b = randn({3, 5}, kFloat64).requires_grad_(),
         w = randn({4, 5}, kFloat64).requires_grad_(), v = randn({3, 5}, kFloat64).requires_grad_();
  CHECK(gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor earlier = exp(in[3]);  // recorded before the region, read by it without being an input
        return checkpoint([w = in[2], earlier](const std::vector<Tensor>& r) { return tanh(matmul(r[0], w)) * r[1] + earlier; },
                          {in[0], in[1]});
      },
      {x, b, w, v}));
}

TEST_CASE("checkpoint: outside grad mode a plain call, and a region that returns its input passes it on") {
  Tensor x = from_vector<double>({1, 2}).requires_grad_();
  {
    NoGradGuard no_grad;
    CHECK_FALSE(checkpoint([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, {x}).requires_grad());
  }
  CHECK(error_of([&] { checkpoint([](const std::vector<Tensor>&) { return Tensor(); }, {x}); }) ==
        "checkpoint: the function returned an undefined tensor");
  Tensor same = checkpoint([](const std::vector<Tensor>& in) { return in[0]; }, {x});
  CHECK(same.is_same(x));
  (same * 3.0).sum().backward();
  CHECK(to_vector<double>(x.grad()) == std::vector<double>{3, 3});

  // retain_graph: the region reruns for each backward
  Tensor y = checkpoint([](const std::vector<Tensor>& in) { return in[0] * in[0]; }, {x}).sum();
  x.set_grad(Tensor());
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  CHECK(to_vector<double>(x.grad()) == std::vector<double>{4, 8});
}

TEST_CASE("checkpoint: an input or weight written in place before backward, or a rerun that differs, raises") {
  Tensor w = from_vector<double>({1, 2}).requires_grad_();
  Tensor x = from_vector<double>({3, 4});
  Tensor y = checkpoint([w](const std::vector<Tensor>& in) { return (in[0] * w).sum(); }, {x});
  x.add_(scalar_like(1.0, x));
  CHECK(error_of([&] { y.backward(); }).find("modified by an inplace operation") != std::string::npos);

  Tensor x2 = from_vector<double>({3, 4});
  Tensor y2 = checkpoint([w](const std::vector<Tensor>& in) { return (in[0] * w).sum(); }, {x2});
  {
    NoGradGuard no_grad;
    w.add_(scalar_like(1.0, w));  // an optimizer step between forward and backward
  }
  CHECK(error_of([&] { y2.backward(); }).find("modified by an inplace operation") != std::string::npos);

  bool first = true;
  Tensor u = from_vector<double>({5, 6}).requires_grad_();
  Tensor y3 = checkpoint([&first, w, u](const std::vector<Tensor>& in) { return (in[0] * (first ? w : u)).sum(); }, {x2});
  first = false;
  CHECK(error_of([&] { y3.backward(); }).find("rerun in backward read other tensors than its first run") != std::string::npos);
}

TEST_CASE("checkpoint under autocast: a weight two regions share is cast in each, backward inside the region or not") {
  manual_seed(5);
  auto lin = std::make_shared<nn::Linear>(8, 8);
  Tensor x = randn({4, 8});
  auto grads = [&](bool checkpointed, bool backward_inside) {
    lin->zero_grad();
    auto block = [lin](const std::vector<Tensor>& in) { return relu(lin->forward(in[0])); };
    std::optional<amp::autocast> ac(std::in_place, DeviceType::CPU, kFloat16);
    Tensor h = checkpointed ? checkpoint(block, {checkpoint(block, {x})}) : block({block({x})});
    Tensor loss = h.to(kFloat32).sum();
    if (!backward_inside) ac.reset();
    loss.backward();
    return to_vector<double>(lin->weight.grad());
  };
  const auto plain = grads(false, false);
  for (bool inside : {false, true}) {
    CAPTURE(inside);
    const auto ck = grads(true, inside);
    REQUIRE(ck.size() == plain.size());
    // Not bit for bit: the plain step casts the weight once and sums the two uses' half
    // gradients in float16; each region casts its own, and the leaf sums them in float32.
    for (size_t i = 0; i < ck.size(); ++i) CHECK(ck[i] == doctest::Approx(plain[i]).epsilon(4e-3));
  }
}

TEST_CASE("checkpoint_sequential: segments must fit the modules") {
  nn::Sequential net(std::make_shared<nn::ReLU>(), std::make_shared<nn::ReLU>());
  CHECK(error_of([&] { nn::checkpoint_sequential(net, 0, ones({2})); }) == "checkpoint_sequential: segments must be in [1, 2] for 2 modules, got 0");
  CHECK(error_of([&] { nn::checkpoint_sequential(net, 3, ones({2})); }) == "checkpoint_sequential: segments must be in [1, 2] for 2 modules, got 3");
}

TEST_CASE("checkpoint: nested regions, an input given twice, an int64 input, a Dropout with its own Generator") {
  manual_seed(6);
  Tensor x = randn({4, 6}, kFloat64).requires_grad_(), w = randn({6, 6}, kFloat64).requires_grad_();
  Tensor idx = from_vector<int64_t>({2, 0, 1, 3});
  Generator gen(11);
  auto drop = std::make_shared<nn::Dropout>(0.5, &gen);
  // y = per-row cross-entropy of dropout(tanh(x w)) * x + x against idx; a region in a region
  auto inner = [w](const std::vector<Tensor>& in) { return tanh(matmul(in[0], w)); };
  auto body = [drop](const Tensor& h, const Tensor& a, const Tensor& b, const Tensor& i) {
    return cross_entropy(drop->forward(h) * a + b, i, {.reduction = Reduction::None});
  };
  auto grads_of = [&](bool checkpointed) {
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    gen.manual_seed(3);
    Tensor y = checkpointed ? checkpoint(
                                  [inner, body](const std::vector<Tensor>& in) {
                                    return body(checkpoint(inner, {in[0]}), in[0], in[1], in[2]);
                                  },
                                  {x, x, idx})
                            : body(inner({x}), x, x, idx);
    (y * y).sum().backward();
    return std::vector<std::vector<double>>{to_vector<double>(y), to_vector<double>(x.grad()), to_vector<double>(w.grad())};
  };
  const auto plain = grads_of(false), ck = grads_of(true);
  CHECK(ck[0] == plain[0]);
  CHECK(ck[2] == plain[2]);  // w is read once: its gradient is bit for bit the plain one
  for (size_t i = 0; i < plain[1].size(); ++i) CHECK(ck[1][i] == doctest::Approx(plain[1][i]).epsilon(1e-13));
}

TEST_CASE("checkpoint: a tensor kept from inside the region, or a rerun that returns another shape, raises") {
  Tensor a = from_vector<double>({1, 2}).requires_grad_(), w = from_vector<double>({3, 4}).requires_grad_();
  auto kept = std::make_shared<Tensor>();
  CHECK(error_of([&] {
          checkpoint([kept, w](const std::vector<Tensor>& in) { *kept = in[0] * w; return relu(*kept); }, {a * 2.0});
        }).find("a tensor computed inside the region from input 0 outlives the region") != std::string::npos);
  auto transpose = std::make_shared<bool>(false);
  Tensor m = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor y = checkpoint([transpose](const std::vector<Tensor>& in) { return *transpose ? in[0].t() * 2.0 : in[0] * 2.0; }, {m});
  *transpose = true;
  CHECK(error_of([&] { y.sum().backward(); }) ==
        "checkpoint: the region's rerun in backward returned float64 [3, 2] on cpu, its first run float64 [2, 3] on cpu; a "
        "checkpointed function must compute the same from the same inputs");
}

TEST_CASE("cross_entropy's backward holds its gradient and (N)-sized pieces, no other (N, C) tensor") {
  // The logits are a language model's largest activation; written as ops the backward held six
  // tensors of their size at once.
  const int64_t N = 256, C = 1000;
  manual_seed(5);
  Tensor x = randn({N, C}).requires_grad_(), y = randint(0, C, {N});
  for (double eps : {0.0, 0.1}) {
    CAPTURE(eps);
    x.set_grad(Tensor());
    Tensor loss = cross_entropy(x, y, {.label_smoothing = eps});
    reset_peak_memory_stats(Device::cpu());
    const int64_t before = memory_stats(Device::cpu()).allocated_bytes;
    loss.backward();
    const int64_t rise = memory_stats(Device::cpu()).peak_allocated_bytes - before;
    const int64_t gradient = int64_t(cpu::rounded_block_size(N * C * 4));  // its block: the allocator rounds to a size class
    CHECK(rise >= gradient);
    CHECK(rise <= gradient + 4 * N * 4 + 16 * 64);  // a few (N) float32 coefficients and scalars besides
  }
}

TEST_CASE("what a forward keeps for backward: ReLU its output, dropout a bool mask, layer norm its input and row statistics, a frozen layer nothing of its input") {
  // Each count is what the graph holds above what lived before, the result included. Every
  // size is a multiple of the allocator's 64 bytes: the counts are exact.
  manual_seed(8);
  nn::Linear fc1(128, 256), fc2(256, 16);
  Tensor x = randn({64, 128});  // data: no gradient wanted
  auto held_by = [](auto forward) {
    const int64_t before = memory_stats(Device::cpu()).allocated_bytes;
    Tensor out = forward();
    return memory_stats(Device::cpu()).allocated_bytes - before;
  };
  const int64_t hidden = 64 * 256 * 4, result = 64 * 16 * 4;
  // fc1's output goes: ReLU keeps its own output, the tensor fc2 keeps anyway
  CHECK(held_by([&] { return fc2.forward(relu(fc1.forward(x))); }) == hidden + result);
  // dropout keeps its bool mask, a byte an element, and nothing of its input
  CHECK(held_by([&] { return dropout(fc1.forward(x), 0.5, true); }) == hidden / 4 + hidden);  // the mask, the result
  // layer norm keeps its input and each row's mean and 1/std, two float32s a row
  nn::LayerNorm ln(Shape{256});
  CHECK(held_by([&] { return ln.forward(fc1.forward(x)); }) == hidden + 2 * 64 * 4 + hidden);  // input, statistics, result
  // an embedding keeps the caller's indices (a view: no bytes) and holds nothing but its output,
  // even at its peak: no (N, D) index is expanded and copied on the way
  nn::Embedding emb(95, 64);
  Tensor tokens = randint(0, 95, {32, 64});
  reset_peak_memory_stats(Device::cpu());
  const int64_t start = memory_stats(Device::cpu()).allocated_bytes, looked_up = 32 * 64 * 64 * 4;
  CHECK(held_by([&] { return emb.forward(tokens); }) == looked_up);
  CHECK(memory_stats(Device::cpu()).peak_allocated_bytes - start == looked_up);
  // a frozen layer keeps nothing of its input, which only its weight's gradient would read
  for (Tensor p : fc2.parameters()) p.requires_grad_(false);
  CHECK(held_by([&] { return fc2.forward(fc1.forward(x)); }) == result);
}
