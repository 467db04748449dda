// test_autocast.cpp — the autocast policy in action: output dtypes per policy category (on each
// device, with that device's column of the table), nesting, device-type isolation, the
// weight-cast cache (and its no-grad case), gradients reaching float32 master weights, and the
// dispatch hook that reroutes linear. That every op consults the table, and in which dtype it
// then runs, is checked per op in test_opinfo.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

#include "amp/autocast.h"
#include "diagnostics/autocast_log.h"
#include "autograd/ops.h"
#include "devices.h"

using namespace ampgrad;

DEVICE_TEST_CASE("output dtype of each policy category, float16 and bfloat16") {
  manual_seed(0);
  Tensor x = randn({4, 8}).to(dev), w = randn({3, 8}).to(dev), b = randn({3}).to(dev);
  Tensor img = randn({2, 1, 6, 6}).to(dev), k = randn({2, 1, 3, 3}).to(dev);
  Tensor target = from_vector<int64_t>({0, 1, 2, 0}).to(dev);
  for (DType low : {kFloat16, kBFloat16}) {
    amp::autocast ac(dev.type, low);
    CHECK(amp::is_enabled(dev.type));
    CHECK(amp::get_dtype(dev.type) == low);
    Tensor y = linear(x, w, b);
    CHECK(y.dtype() == low);                                       // lower_precision
    CHECK(matmul(x, w.t()).dtype() == low);
    CHECK(conv2d(img, k).dtype() == low);
    CHECK(cross_entropy(y, target).dtype() == kFloat32);           // fp32
    CHECK(mse_loss(y, y).dtype() == kFloat32);
    CHECK(nll_loss(log_softmax(y, 1), target).dtype() == kFloat32);
    CHECK(relu(y).dtype() == low);                                 // input dtype
    CHECK(relu(x).dtype() == kFloat32);
    CHECK(softmax(y, 1).dtype() == (dev.is_cpu() ? low : kFloat32));  // CPU keeps softmax in input dtype, CUDA: fp32
    CHECK(group_norm(y, 3).dtype() == (dev.is_cpu() ? low : kFloat32));  // likewise
    CHECK((y + x.narrow(1, 0, 3)).dtype() == kFloat32);            // ordinary promotion
    CHECK(where(gt(x, scalar_like(0, x)).narrow(1, 0, 3), y, x.narrow(1, 0, 3)).dtype() == kFloat32);  // promote
    CHECK(cat({y, x.narrow(1, 0, 3)}).dtype() == kFloat32);
    CHECK(linear(x.to(kFloat64), w.to(kFloat64)).dtype() == kFloat64);  // float64 is never cast
    CHECK(embedding(target, w).dtype() == kFloat32);                 // a lookup keeps its table's dtype
  }
  CHECK_FALSE(amp::is_enabled(dev.type));
  CHECK(linear(x, w, b).dtype() == kFloat32);
}

TEST_CASE("CPU defaults to bfloat16, only half dtypes are accepted") {
  {
    amp::autocast ac(DeviceType::CPU);
    CHECK(amp::get_dtype(DeviceType::CPU) == kBFloat16);
  }
  CHECK_THROWS_WITH_AS(amp::autocast(DeviceType::CPU, kFloat64), doctest::Contains("float16 or bfloat16, got float64"), Error);
}

TEST_CASE("autocast for one device type leaves the other's tensors alone") {
  amp::autocast ac(DeviceType::CUDA);
  CHECK(amp::is_enabled(DeviceType::CUDA));
  CHECK_FALSE(amp::is_enabled(DeviceType::CPU));
  CHECK(matmul(ones({2, 2}), ones({2, 2})).dtype() == kFloat32);
}

TEST_CASE("nested regions: an inner disabled region runs in full precision, leaving restores") {
  Tensor x = ones({2, 2});
  amp::autocast outer(DeviceType::CPU, kFloat16);
  CHECK(matmul(x, x).dtype() == kFloat16);
  {
    amp::autocast inner(DeviceType::CPU, {}, false);
    CHECK_FALSE(amp::is_enabled(DeviceType::CPU));
    CHECK(matmul(x, x).dtype() == kFloat32);
    {
      amp::autocast innermost(DeviceType::CPU, kBFloat16);
      CHECK(matmul(x, x).dtype() == kBFloat16);
    }
  }
  CHECK(amp::is_enabled(DeviceType::CPU));
  CHECK(amp::get_dtype(DeviceType::CPU) == kFloat16);
  CHECK(matmul(x, x).dtype() == kFloat16);
}

TEST_CASE("policy table: PyTorch's categories, printable") {
  using amp::CastPolicy;
  using amp::Op;
  CHECK(amp::cast_policy(Op::matmul, DeviceType::CUDA) == CastPolicy::lower_precision);
  CHECK(amp::cast_policy(Op::conv2d, DeviceType::CPU) == CastPolicy::lower_precision);
  CHECK(amp::cast_policy(Op::softmax, DeviceType::CUDA) == CastPolicy::fp32);
  CHECK(amp::cast_policy(Op::softmax, DeviceType::CPU) == CastPolicy::input_dtype);
  CHECK(amp::cast_policy(Op::cross_entropy, DeviceType::CPU) == CastPolicy::fp32);
  CHECK(amp::cast_policy(Op::cat, DeviceType::CPU) == CastPolicy::promote);
  CHECK(amp::cast_policy(Op::relu, DeviceType::CUDA) == CastPolicy::input_dtype);
  CHECK(amp::cast_policy(Op::binary_cross_entropy, DeviceType::CUDA) == CastPolicy::banned);  // as PyTorch's CUDA autocast
  CHECK(amp::cast_policy(Op::binary_cross_entropy, DeviceType::CPU) == CastPolicy::fp32);     // as PyTorch's CPU autocast
  std::ostringstream os;
  amp::print_policy_table(os);
  const std::string table = os.str();
  CHECK(table.find("matmul" + std::string(28, ' ') + "lower_precision   lower_precision") != std::string::npos);
  CHECK(table.find("binary_cross_entropy" + std::string(14, ' ') + "banned            fp32") != std::string::npos);
  CHECK(std::count(table.begin(), table.end(), '\n') == (long)amp::kNumOps + 1);
}

// PyTorch's bf16 autocast rounds a linear once, its bias added to the float32 product (torch 1.13
// on the CPU, these inputs: its 24 outputs below). Inputs of few bits make every float32 sum
// exact, so any GEMM's order gives these bits; rounding the product first, then the sum with the
// bias, would move 2 of them (as before the bias joined the GEMM's epilogue).
DEVICE_TEST_CASE("linear with a bias under bf16 autocast: PyTorch's outputs bit for bit, rounded once") {
  const int64_t N = 4, K = 16, O = 6;
  std::vector<float> xs, ws, bs;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < K; ++k) xs.push_back(float((i * 7 + k * 3) % 33 - 16) / 16);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < K; ++k) ws.push_back(float((o * 5 + k * 11) % 33 - 16) / 16);
  for (int64_t o = 0; o < O; ++o) bs.push_back(float((o * 13 + 5) % 129 - 64) / 512);
  const Tensor x = from_vector(xs, {N, K}).to(dev), w = from_vector(ws, {O, K}).to(dev), b = from_vector(bs, {O}).to(dev);
  const std::vector<float> torch = {1.1171875,  -0.046875,  -1.2109375, 0.97265625,   -0.193359375, -0.328125, 1.3359375,    1.0703125,
                                    0.8046875,  -0.625,     -0.890625,  -0.38671875,  -1.28125,     -0.6484375, -0.017578125, -0.8046875,
                                    -0.173828125, 0.97265625, 0.228515625, 0.46875,    0.7109375,    -0.7265625, -0.486328125, 0.01171875};
  amp::autocast ac(dev.type, kBFloat16);
  const Tensor y = linear(x, w, b);
  REQUIRE(y.dtype() == kBFloat16);
  CHECK(to_vector<float>(y) == torch);
  const Tensor twice = (matmul(x, w.t()).to(kFloat32) + b.to(kBFloat16).to(kFloat32)).to(kBFloat16);  // the product rounded first
  CHECK(to_vector<float>(twice) != torch);
}

DEVICE_TEST_CASE("weight-cast cache: one cast per weight per outermost region") {
  Tensor w = ones({3, 3}).to(dev).requires_grad_();
  Tensor x = ones({2, 3}).to(dev);
  amp::AutocastLog trace;
  {
    amp::autocast ac(dev.type, kFloat16);
    Tensor a = linear(x, w), b = linear(x, w);
    CHECK(amp::cache_size() == 1);
    {
      amp::autocast inner(dev.type, kFloat16);
      linear(x, w);
    }
    CHECK(amp::cache_size() == 1);  // an inner exit does not clear
    Tensor view = w.t();            // a view is not cached; neither is a tensor not requiring grad
    matmul(x, view);
    matmul(x, ones({3, 3}).to(dev));
    CHECK(amp::cache_size() == 1);
  }
  CHECK(amp::cache_size() == 0);  // cleared when the outermost region exits
  int hits = 0, casts = 0;
  for (auto& e : trace.calls()) { hits += e.cache_hits; casts += e.casts; }
  CHECK(hits == 2);   // second and third linear
  // w once; x in each of the three linears; x and the view; x and the fresh ones tensor
  CHECK(casts == 1 + 3 + 2 + 2);
}

DEVICE_TEST_CASE("a cached cast made under no_grad still carries gradient to the weight") {
  Tensor w = full({2, 2}, 0.5).to(dev).requires_grad_();
  Tensor x = ones({1, 2}).to(dev);
  amp::autocast ac(dev.type, kFloat16);
  {
    NoGradGuard g;
    Tensor eval_out = linear(x, w);  // first use: creates the cached cast
    CHECK_FALSE(eval_out.requires_grad());
  }
  Tensor loss = linear(x, w).to(kFloat32).sum();  // cache hit, with grad on
  loss.backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == kFloat32);  // master weight gradient stays float32
  CHECK(to_vector<float>(w.grad()) == std::vector<float>{1, 1, 1, 1});
}

DEVICE_TEST_CASE("gradients flow through autocast casts into float32 .grad") {
  manual_seed(1);
  Tensor w = randn({3, 4}).to(dev).requires_grad_(), x = randn({5, 4}).to(dev);
  Tensor target = from_vector<int64_t>({0, 1, 2, 1, 0}).to(dev);
  {
    amp::autocast ac(dev.type, kBFloat16);
    cross_entropy(linear(x, w), target).backward();
  }
  Tensor g16 = w.grad();
  CHECK(g16.dtype() == kFloat32);
  // autocast is the casts its policy rows make (linear: bfloat16; cross_entropy: float32): bit for bit
  w.set_grad({});
  cross_entropy(linear(x.to(kBFloat16), w.to(kBFloat16)).to(kFloat32), target).backward();
  CHECK(to_vector<float>(g16) == to_vector<float>(w.grad()));
  // and within a few bfloat16 roundings of float32. w's gradient is Σn δ[n,i]·x[n,k] (δ = ∂loss/
  // ∂logits); each term passes through ~4 roundings of u = 2⁻⁸ (x and w to bfloat16, which move
  // the logits and so δ; δ to bfloat16; the GEMM's output), so it is within 4u of Σn |δ[n,i]·x[n,k]|.
  w.set_grad({});
  Tensor logits = linear(x, w);
  cross_entropy(logits, target).backward();
  const Tensor one_hot = from_vector<float>({1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0}, {5, 3}).to(dev);  // of target
  const Tensor delta = (softmax(logits.detach(), 1) - one_hot) / 5.0;  // ∂(mean loss)/∂logits
  std::vector<float> a = to_vector<float>(g16), b = to_vector<float>(w.grad());
  std::vector<float> terms = to_vector<float>(matmul(abs(delta).t(), abs(x)));  // (3, 4): Σn |δ[n,i]|·|x[n,k]|
  for (size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= 4 * std::ldexp(terms[i], -8));
}

TEST_CASE("a linear or matmul of any rank consults the table once, so its trace counts it once") {
  amp::AutocastLog trace;
  amp::autocast ac(DeviceType::CPU, kFloat16);
  (void)linear(ones({2, 3, 4}), ones({5, 4}), ones({5}));  // (B, T, Din): folded into one GEMM
  (void)matmul(ones({4}), ones({4, 3}));                    // 1-D cases: unsqueezed into a GEMM
  (void)matmul(ones({2, 4}), ones({4}));
  (void)scaled_dot_product_attention(ones({1, 2, 4}), ones({1, 2, 4}), ones({1, 2, 4}));  // a name past the op column's 15
  int64_t linears = 0, matmuls = 0, casts = 0;
  for (const auto& e : trace.calls()) {
    linears += std::string(e.op) == "linear";
    matmuls += std::string(e.op) == "matmul";
    casts += e.casts;
  }
  CHECK(linears == 1);
  CHECK(matmuls == 2);
  CHECK(casts == 3 + 2 + 2 + 3);  // every float32 operand cast to float16 once
  std::ostringstream os;
  trace.print(os);
  CHECK(os.str().find("linear") != std::string::npos);
  CHECK(os.str().find("lower_precision") != std::string::npos);
  // every row's inputs start under the header's "inputs", however long the op's name
  std::istringstream lines(os.str());
  std::string line, header;
  std::getline(lines, line);
  std::getline(lines, header);
  const size_t inputs_at = header.find("inputs");
  int rows = 0;
  while (std::getline(lines, line) && !line.empty() && line[0] != ' ') {  // the table's rows, until its indented notes
    INFO(line);
    CHECK(line[inputs_at - 1] == ' ');
    CHECK(line[inputs_at] != ' ');
    ++rows;
  }
  CHECK(rows >= 3);
}

TEST_CASE("the dispatch hook: a LinearRouteGuard reroutes linear on its device type, nests, and is off under suspend") {
  const Tensor x = from_vector<float>({1.f, 2.f}).reshape({1, 2}), w = from_vector<float>({3.f, 4.f}).reshape({1, 2});
  const auto y = [&] { return linear(x, w).item<float>(); };  // 1·3 + 2·4 = 11 as itself
  CHECK(y() == 11.f);
  {
    // A route that suspends amp for its own steps, as an edge's fused op does, and reads its
    // capture after: linear runs a copy of the route, which the suspension leaves in place.
    const float factor = 2.f;
    amp::LinearRouteGuard doubled(DeviceType::CPU, [factor](const Tensor& x, const Tensor& w, const Tensor&) {
      amp::suspend own_steps;
      return matmul(x, w.t()) * double(factor);
    });
    CHECK(y() == 22.f);
    {
      amp::LinearRouteGuard off(DeviceType::CPU, {});
      CHECK(y() == 11.f);
    }
    {
      amp::LinearRouteGuard other_device(DeviceType::CUDA, {});
      CHECK(y() == 22.f);
    }
    {
      amp::suspend backward_like;
      CHECK(y() == 11.f);
    }
    CHECK(y() == 22.f);
  }
  CHECK(y() == 11.f);
}

DEVICE_TEST_CASE("two micro-batches in one autocast region: both backwards reach the weight") {
  // The cached cast of w serves both forwards, so its node must survive the first backward.
  Tensor w = full({2, 3}, 0.5).to(dev).requires_grad_();
  Tensor x1 = ones({4, 3}).to(dev), x2 = full({4, 3}, 2.0).to(dev);
  {
    amp::autocast ac(dev.type, kFloat16);
    linear(x1, w).to(kFloat32).sum().backward();
    linear(x2, w).to(kFloat32).sum().backward();
  }
  // d/dW of sum(x W^T) is the column sums of x: 4 + 8 = 12 per element
  CHECK(to_vector<float>(w.grad()) == std::vector<float>(6, 12.f));
}

// Why PyTorch's CUDA autocast refuses binary_cross_entropy. The CPU's autocast (PyTorch's too)
// runs it in float32, and this shows what that cannot repair: a logit of 9 through a float16
// sigmoid is exactly 1 (σ(9) = 0.99988, and float16's last step below 1 is 0.00049), so a target
// of 0 costs the clamped 100 instead of 9.0001, with a gradient to match. The logits form is exact.
TEST_CASE("binary_cross_entropy after a float16 sigmoid, and the logits form that autocast keeps exact") {
  Tensor x = full({1}, 9.0).requires_grad_(), target = zeros({1});
  amp::autocast ac(DeviceType::CPU, kFloat16);
  Tensor p = sigmoid(x.to(kFloat16));
  CHECK(p.item<double>() == 1.0);
  CHECK(binary_cross_entropy(p, target).item<double>() == doctest::Approx(100));
  Tensor exact = binary_cross_entropy_with_logits(x.to(kFloat16), target);  // fp32 row: the float16 logit 9 widened, exactly
  CHECK(exact.dtype() == kFloat32);
  CHECK(exact.item<double>() == doctest::Approx(9 + std::log1p(std::exp(-9.0))).epsilon(1e-6));
  exact.backward();
  CHECK(x.grad().item<double>() == doctest::Approx(1 / (1 + std::exp(-9.0))).epsilon(1e-3));  // σ(9) − 0, through the float16 cast
  CHECK(std::string(amp::why_banned(amp::Op::binary_cross_entropy)).find("binary_cross_entropy_with_logits") != std::string::npos);
}

// The trace's legend: rows of calls outside autocast, or with no floating input, are explained
// under the table, and only when the table has them.
TEST_CASE("the autocast log explains its (autocast off) and input-less rows, only when it has them") {
  auto summary = [](auto body) {
    amp::AutocastLog trace;
    body();
    std::ostringstream os;
    trace.print(os);
    return os.str();
  };
  auto has = [](const std::string& s, const char* part) { return s.find(part) != std::string::npos; };
  const std::string inside = summary([] {
    amp::autocast ac(DeviceType::CPU, kFloat16);
    (void)matmul(ones({2, 2}), ones({2, 2}));
  });
  CHECK(!has(inside, "(autocast off)"));
  CHECK(!has(inside, "inputs -:"));
  const std::string outside = summary([] {
    (void)matmul(ones({2, 2}), ones({2, 2}));
    (void)to(from_vector<int64_t>({1, 2}), Device::cpu());
  });
  CHECK(has(outside, "matmul         float32,float32           float32   (autocast off)"));
  CHECK(has(outside, "\n(autocast off): called outside every autocast region"));
  CHECK(has(outside, "\ninputs -: no floating-point input"));
}
