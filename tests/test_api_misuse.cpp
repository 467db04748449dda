// test_api_misuse.cpp — the library's public API misused as a careless user would (issue 44): shape
// arithmetic past int64, views past their storage, numbers that are no int64, PyTorch's refusals.
// Each case ends in an ampgrad::Error whose words are asserted (the op and the value), or in
// PyTorch's result; under scripts/sanitize.sh (ASan + UBSan) none may report undefined behaviour.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "autograd/checkpoint.h"
#include "autograd/ops.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "test_util.h"

using namespace ampgrad;

// The Error f throws must contain `words`.
template <class F> static void check_refused(F f, const std::string& words) {
  const std::string message = error_of(f);
  CHECK_MESSAGE(message.find(words) != std::string::npos, "expected '" << words << "', got '" << message << "'");
}

TEST_CASE("shape arithmetic that would pass int64's range is refused, naming the op") {
  const int64_t big = int64_t(1) << 32;
  check_refused([&] { zeros({0}).reshape({big, big, 0}); }, "reshape: invalid shape [4294967296, 4294967296, 0]");
  check_refused([&] { zeros({0}).reshape({big, big, -1}); }, "reshape: invalid shape");
  check_refused([] { zeros({3}).narrow(0, INT64_MAX, INT64_MAX); }, "narrow: start 9223372036854775807 + length 9223372036854775807 exceeds dim 0");
  check_refused([] { zeros({3}).narrow(0, 2, 2); }, "narrow: start 2 + length 2 exceeds dim 0 of shape [3]");
  CHECK(to_vector<float>(arange(0, 4).narrow(0, 1, 3)) == std::vector<float>{1, 2, 3});
  // conv2d: a padding whose in + 2·padding passes int64, then one whose columns cannot be counted
  const Tensor x = zeros({1, 1, 3, 3}), w = zeros({1, 1, 3, 3});
  check_refused([&] { conv2d(x, w, {}, 1, INT64_MAX / 2); }, "conv2d: kernel 3x3 with stride 1 and padding 4611686018427387903 does not fit input [1, 1, 3, 3]");
  check_refused([&] { conv2d(x, w, {}, 1, int64_t(1) << 40); }, "conv2d: padding 1099511627776 makes input [1, 1, 3, 3]'s columns too many to count");
  // randint over the whole of int64: high − low in uint64, the draws in range and seeded
  Generator g1, g2;
  g1.manual_seed(7), g2.manual_seed(7);
  const std::vector<int64_t> a = to_vector<int64_t>(randint(INT64_MIN, INT64_MAX, {64}, {}, &g1));
  CHECK(a == to_vector<int64_t>(randint(INT64_MIN, INT64_MAX, {64}, {}, &g2)));
  CHECK(std::count_if(a.begin(), a.end(), [](int64_t v) { return v < 0; }) > 8);  // both halves drawn
  CHECK(std::count_if(a.begin(), a.end(), [](int64_t v) { return v > 0; }) > 8);
  for (int64_t v : to_vector<int64_t>(randint(-3, 2, {200}, {}, &g1))) CHECK((v >= -3 && v < 2));
}

TEST_CASE("as_strided reads its own storage only") {
  const Tensor t = arange(0, 6);  // 6 float32: 24 bytes
  check_refused([&] { t.as_strided({2}, {1}, -1); }, "as_strided: sizes [2], strides [1] and storage offset -1 are out of bounds for a storage of 24 bytes");
  check_refused([&] { t.as_strided({2}, {-1}, 3); }, "as_strided: sizes [2], strides [-1]");
  check_refused([&] { t.as_strided({2, 2}, {1}, 0); }, "as_strided: sizes [2, 2], strides [1]");
  check_refused([&] { t.as_strided({3, 2}, {2, 1}, 1); }, "are out of bounds for a storage of 24 bytes");  // last element 6
  check_refused([&] { t.as_strided({2, 2}, {INT64_MAX, 1}, 0); }, "are out of bounds");                   // offset overflows
  CHECK(to_vector<float>(t.as_strided({2, 2}, {3, 1}, 1)) == std::vector<float>{1, 2, 4, 5});  // ends at the last element
  CHECK(t.as_strided({0, 5}, {1, 1}, 100).numel() == 0);  // no element, nothing read
}

TEST_CASE("a number goes into int64 by one rule: in range for fill_, whole for the arithmetic") {
  check_refused([] { full({1}, NAN, kInt64); }, "fill_: value nan cannot be converted to type int64 without overflow");
  check_refused([] { full({1}, 1e30, kInt64); }, "fill_: value 1e+30 cannot be converted to type int64 without overflow");
  check_refused([] { zeros({2}, kInt64).fill_(-INFINITY); }, "fill_: value -inf cannot be converted");
  CHECK(to_vector<int64_t>(full({1}, 2.7, kInt64)) == std::vector<int64_t>{2});  // truncated, as PyTorch's full
  CHECK(to_vector<int64_t>(full({1}, -0x1p63, kInt64)) == std::vector<int64_t>{INT64_MIN});
  Tensor i = ones({2}, kInt64);
  check_refused([&] { i.mul_(NAN); }, "mul_: result type Float can't be cast to the desired output type Long (factor nan)");
  check_refused([&] { i.mul_(0.5); }, "mul_: result type Float can't be cast to the desired output type Long (factor 0.5)");
  check_refused([&] { i.add_(ones({2}), 1.0); }, "add_: result type float32 can't be cast to the desired output type int64");
  check_refused([&] { i.add_(ones({2}, kInt64), 0.5); }, "add_: result type Float can't be cast to the desired output type Long (alpha 0.5)");
  i.mul_(3).add_(ones({2}, kInt64), 2);
  CHECK(to_vector<int64_t>(i) == std::vector<int64_t>{5, 5});
  // arange: its length checked in double before any int64 or allocation is made of it
  check_refused([] { arange(0, 1e30); }, "arange: cannot go from 0 to 1e+30 in steps of 1");
  check_refused([] { arange(-INFINITY, 0); }, "arange: cannot go from -inf to 0 in steps of 1");
  check_refused([] { arange(0, NAN); }, "arange: cannot go from 0 to nan");
  check_refused([] { arange(0, 1e17); }, "out of memory allocating");  // 8e17 bytes of float64, refused by arithmetic
  CHECK(error_of([] { arange(0, 1e17); }).find("bytes on the CPU: the machine has") != std::string::npos);
  CHECK(to_vector<int64_t>(arange(5)) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(to_vector<float>(arange(1, 2, 0.25)) == std::vector<float>{1, 1.25, 1.5, 1.75});
}

TEST_CASE("from_blob refuses null data, and Module::to a dtype that holds no parameters") {
  check_refused([] { from_blob(nullptr, {3}, kFloat32); }, "from_blob: data is null for shape [3]");
  CHECK(from_blob(nullptr, {0, 3}, kFloat32).numel() == 0);
  nn::Linear fc(2, 3);
  check_refused([&] { fc.to(kInt64); }, "Module::to only accepts floating point dtypes, but got desired dtype=int64");
  check_refused([&] { fc.to(kBool); }, "desired dtype=bool");
  CHECK(fc.weight.dtype() == kFloat32);
  fc.to(kFloat64);
  CHECK(fc.weight.dtype() == kFloat64);
}

TEST_CASE("GradScaler: no inf check recorded, and a gradient unscaled twice, are refused") {
  Tensor p = ones({2}).requires_grad_(), q = ones({2}).requires_grad_();
  optim::SGD without_grads({p}, {.lr = 0.1});
  amp::GradScaler s;
  const Tensor r = ones({}).requires_grad_();
  s.scale(r * 2).backward();  // a loss that reaches no parameter of the optimizer
  check_refused([&] { s.step(without_grads); }, "No inf checks were recorded for this optimizer.");
  CHECK(to_vector<float>(p) == std::vector<float>{1, 1});
  // two optimizers over one parameter: the second unscale_ would divide its gradient again
  amp::GradScaler t({.init_scale = 4});
  optim::SGD first({q}, {.lr = 0.5}), second({q}, {.lr = 0.5});
  t.scale((q * 3).sum()).backward();
  t.unscale_(first);
  CHECK(to_vector<float>(q.grad()) == std::vector<float>{3, 3});
  check_refused([&] { t.unscale_(second); }, "unscale_(): parameter 0's gradient was already unscaled by another optimizer since the last update().");
  CHECK(to_vector<float>(q.grad()) == std::vector<float>{3, 3});
  CHECK(t.step(first));
  t.update();
  CHECK(to_vector<float>(q) == std::vector<float>{-0.5, -0.5});  // 1 − 0.5 · 3
}

TEST_CASE("rates, initialisers and eps are refused out of their domains, naming the value") {
  Tensor p = ones({2}).requires_grad_();
  optim::SGD sgd({p}, {.lr = 0.1});
  check_refused([&] { sgd.set_lr(NAN); }, "SGD: set_lr: the learning rate must be finite and >= 0, got nan");
  check_refused([&] { sgd.set_lr(0, -1); }, "SGD: set_lr: the learning rate must be finite and >= 0, got -1");
  check_refused([&] { sgd.set_lr(INFINITY); }, "got inf");
  CHECK(sgd.lr(0) == 0.1);
  check_refused([&] { optim::Adam({p}, {.lr = -1}); }, "Adam: lr, eps and weight_decay must be >= 0, got -1, 1e-08, 0");
  check_refused([&] { optim::AdamW({p}, {.eps = -1}); }, "AdamW: lr, eps and weight_decay must be >= 0, got 0.001, -1, 0.01");
  check_refused([&] { optim::AdamW({p}, {.betas = {0.9, 1.0}}); }, "AdamW: betas must be in [0, 1), got (0.9, 1)");
  Tensor w = zeros({2, 2});
  check_refused([&] { nn::init::uniform_(w, 1, 0); }, "uniform_ expects to return a [from, to) range, but found from=1 > to=0");
  check_refused([&] { nn::init::normal_(w, 0, -1); }, "normal_ expects std >= 0.0, but found std -1");
  check_refused([] { layer_norm(ones({2, 3}), {3}, {}, {}, -1); }, "layer_norm: eps must be >= 0, got -1");
  CHECK(to_vector<float>(layer_norm(from_vector<float>({1, 3}, {1, 2}), {2}, {}, {}, 0)) == std::vector<float>{-1, 1});
}

TEST_CASE("autocast guards closed out of order leave autocast as it was before both") {
  auto outer = std::make_unique<amp::autocast>(DeviceType::CPU, kBFloat16);
  auto inner = std::make_unique<amp::autocast>(DeviceType::CPU, kFloat16);
  outer.reset();  // the inner guard is still open: its state holds
  CHECK(amp::is_enabled(DeviceType::CPU));
  CHECK(amp::get_dtype(DeviceType::CPU) == kFloat16);
  inner.reset();
  CHECK(!amp::is_enabled(DeviceType::CPU));
  CHECK(amp::get_dtype(DeviceType::CPU) == kBFloat16);  // the CPU default, as before the first guard
  // in order, and a CUDA guard between CPU ones, as before
  {
    amp::autocast a(DeviceType::CPU, kFloat16);
    auto cuda = std::make_unique<amp::autocast>(DeviceType::CUDA, kBFloat16);
    amp::autocast b(DeviceType::CPU, kBFloat16, false);
    cuda.reset();
    CHECK(!amp::is_enabled(DeviceType::CUDA));
    CHECK(!amp::is_enabled(DeviceType::CPU));
  }
  CHECK(!amp::is_enabled(DeviceType::CPU));
  CHECK(amp::get_dtype(DeviceType::CUDA) == kFloat16);
}

TEST_CASE("sum over an expanded dim reads one slice: no materialised copy, the same value") {
  const Tensor huge = zeros({1}).expand({int64_t(1) << 40});
  CHECK(huge.sum().item<float>() == 0);  // 4 TiB if it were copied
  const Tensor tenth = full({1, 3}, 0.1).expand({1000, 3});
  CHECK(tenth.sum().item<float>() == float(3000 * double(0.1f)));  // the closed form: 3000 adds of 0.1f are exact in double
  CHECK(tenth.sum().item<float>() == tenth.contiguous().sum().item<float>());  // and the materialised sum agrees
  CHECK(to_vector<float>(tenth.sum({0})) == to_vector<float>(tenth.contiguous().sum({0})));
  CHECK(to_vector<int64_t>(ones({3, 1}, kInt64).expand({3, 5}).sum({1})) == std::vector<int64_t>{5, 5, 5});
  const Tensor h = full({2, 1}, 0.5, kFloat16).expand({2, 7});
  CHECK(to_vector<float>(h.sum({1}).to(kFloat32)) == std::vector<float>{3.5, 3.5});
}

TEST_CASE("misuse that PyTorch names by its argument: an undefined tensor, an index, an empty function") {
  const Tensor x = ones({2, 3}), w = ones({4, 3});
  check_refused([&] { linear(Tensor(), w); }, "linear: argument 1 is an undefined tensor");
  check_refused([&] { linear(x, Tensor()); }, "linear: argument 2 is an undefined tensor");
  check_refused([&] { matmul(x, Tensor()); }, "matmul: argument 2 is an undefined tensor");
  check_refused([&] { add(Tensor(), x); }, "add: argument 1 is an undefined tensor");
  CHECK(to_vector<float>(linear(x, w)) == std::vector<float>(8, 3));  // an absent bias is allowed
  nn::Sequential seq(std::make_shared<nn::ReLU>());
  check_refused([&] { seq[1]; }, "Sequential: index 1 is out of range for its 1 modules");
  check_refused([&] { checkpoint(RegionFn(), {x.detach().requires_grad_()}); }, "checkpoint: the function is empty");
}
