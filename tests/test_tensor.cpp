// test_tensor.cpp — dtypes, promotion, half rounding bit patterns, views, creation, printing,
// randomness and error messages of the tensor layer. The rounding and half-arithmetic cases run
// on every device (devices.h).
#include <doctest/doctest.h>

#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "autograd/ops.h"
#include "devices.h"
#include "test_util.h"
#include "tensor/cpu/allocator.h"
#include "tensor/cpu/rows.h"
#include "tensor/scalar_math.h"
#include "tensor/kernels.h"
#include "tensor/threads.h"

using namespace ampgrad;

static uint16_t bits(half h) { uint16_t b; std::memcpy(&b, &h, 2); return b; }
static uint16_t bits(bfloat16 h) { uint16_t b; std::memcpy(&b, &h, 2); return b; }
// round through the library's own cast kernel on dev, as every op stores its result
template <class H> static H round_to(float v, Device dev = Device::cpu()) {
  return to_vector<H>(from_vector<float>({v}).to(dev).to(dtype_of<H>()))[0];
}

TEST_CASE("dtype sizes, names and floating flags") {
  CHECK(itemsize(kFloat32) == 4);
  CHECK(itemsize(kFloat64) == 8);
  CHECK(itemsize(kFloat16) == 2);
  CHECK(itemsize(kBFloat16) == 2);
  CHECK(itemsize(kInt64) == 8);
  CHECK(itemsize(kBool) == 1);
  CHECK(std::string(dtype_name(kBFloat16)) == "bfloat16");
  CHECK(is_floating_point(kFloat16));
  CHECK_FALSE(is_floating_point(kInt64));
}

TEST_CASE("type promotion follows PyTorch") {
  CHECK(promote_types(kFloat16, kFloat32) == kFloat32);
  CHECK(promote_types(kBFloat16, kFloat16) == kFloat32);
  CHECK(promote_types(kBFloat16, kBFloat16) == kBFloat16);
  CHECK(promote_types(kInt64, kFloat16) == kFloat16);
  CHECK(promote_types(kBool, kInt64) == kInt64);
  CHECK(promote_types(kFloat64, kFloat16) == kFloat64);
  Tensor a = ones({2}, kFloat16), b = ones({2}, kFloat32);
  CHECK((a + b).dtype() == kFloat32);
  CHECK((ones({2}, kInt64) * 2.5).dtype() == kFloat32);
  CHECK((ones({2}, kInt64) + scalar_tensor(2, kInt64)).dtype() == kInt64);
  CHECK((a * 3.0).dtype() == kFloat16);  // a scalar does not widen a tensor
  CHECK((a * 3).dtype() == kFloat16);
  // An integer scalar keeps integer arithmetic, a floating one makes it float32, as
  // torch.ones(2, dtype=torch.int64) * 2 -> tensor([2, 2]) and * 2.0 -> tensor([2., 2.]).
  Tensor i = from_vector<int64_t>({1, 4});
  CHECK((i * 2).dtype() == kInt64);
  CHECK(to_vector<int64_t>(i * 2) == std::vector<int64_t>{2, 8});
  CHECK(to_vector<int64_t>(3 - i) == std::vector<int64_t>{2, -1});
  CHECK(to_vector<int64_t>(i + (int64_t(1) << 40)) == std::vector<int64_t>{(int64_t(1) << 40) + 1, (int64_t(1) << 40) + 4});
  CHECK((i * 2.0).dtype() == kFloat32);
  CHECK((i / 2).dtype() == kFloat32);  // true division, as Python's /: tensor([0.5, 2.0])
  CHECK(to_vector<float>(i / 2) == std::vector<float>{0.5f, 2.f});
  CHECK(to_vector<float>(2 / i) == std::vector<float>{2.f, 0.5f});
  CHECK((ones({2}, kBool) + 1).dtype() == kInt64);  // torch: tensor([2, 2])
  CHECK((ones({2}, kBool) * 0.5).dtype() == kFloat32);
}

DEVICE_TEST_CASE("float16 rounding is IEEE round-to-nearest-even") {
  CHECK(bits(round_to<half>(65504.f, dev)) == 0x7BFF);           // the largest finite half
  CHECK(bits(round_to<half>(65519.f, dev)) == 0x7BFF);           // below the midpoint to 65536
  CHECK(bits(round_to<half>(65520.f, dev)) == 0x7C00);           // the midpoint rounds to even: inf
  CHECK(bits(round_to<half>(1e6f, dev)) == 0x7C00);              // overflow
  CHECK(bits(round_to<half>(std::ldexp(1.f, -24), dev)) == 0x0001);  // smallest subnormal
  CHECK(bits(round_to<half>(std::ldexp(1.f, -25), dev)) == 0x0000);  // half of it: tie to even (0)
  CHECK(bits(round_to<half>(3 * std::ldexp(1.f, -26), dev)) == 0x0001);
  CHECK(bits(round_to<half>(std::ldexp(1.f, -14), dev)) == 0x0400);  // smallest normal
  CHECK(bits(round_to<half>(1 + std::ldexp(1.f, -11), dev)) == 0x3C00);      // tie -> even mantissa
  CHECK(bits(round_to<half>(1 + 3 * std::ldexp(1.f, -11), dev)) == 0x3C02);  // tie -> even (up)
  CHECK(bits(round_to<half>(-2.f, dev)) == 0xC000);
  CHECK(std::isnan(float(round_to<half>(NAN, dev))));
}

DEVICE_TEST_CASE("bfloat16 rounding is round-to-nearest-even on the top 16 bits") {
  CHECK(bits(round_to<bfloat16>(1.f, dev)) == 0x3F80);
  CHECK(bits(round_to<bfloat16>(1 + std::ldexp(1.f, -8), dev)) == 0x3F80);      // tie -> even
  CHECK(bits(round_to<bfloat16>(1 + 3 * std::ldexp(1.f, -8), dev)) == 0x3F82);  // tie -> even (up)
  CHECK(bits(round_to<bfloat16>(3.3895314e38f, dev)) == 0x7F7F);                // largest finite
  CHECK(bits(round_to<bfloat16>(1e-40f, dev)) != 0);  // float32 subnormals survive: same exponent range
}

DEVICE_TEST_CASE("half arithmetic computes in float32 and rounds once on store") {
  // 1 + 2^-11 + 2^-11 as one op (a sum): in float32 it is 1 + 2^-10, exactly a half (the next
  // one after 1); rounding after each add (1 + 2^-11 is a tie, to even: 1) would give 1. As two
  // ops (a + b + b) each rounds on store: 1, as PyTorch's half tensors give.
  const double h = std::ldexp(1.0, -11);
  Tensor terms = from_vector<double>({1, h, h}).to(kFloat16).to(dev);
  CHECK(terms.sum().item<float>() == float(1 + 2 * h));
  Tensor a = full({1}, 1.0, kFloat16).to(dev), b = full({1}, h, kFloat16).to(dev);
  CHECK((a + b + b).item<float>() == 1.0f);
  CHECK((a + (b + b)).item<float>() == float(1 + 2 * h));  // b + b = 2^-10 is exact
  // exp(10) = 22026.47 -> nearest half is 22032 (spacing 16 at this magnitude)
  CHECK(full({1}, 10.0, kFloat16).to(dev).exp().item<float>() == 22032.f);
}

// C++ leaves these undefined; ampgrad defines one rule for both backends (math::to_int64).
DEVICE_TEST_CASE("a floating value casts to int64 by truncation, saturating, NaN to 0, the same on every backend") {
  const double big = 1e30, top = 9223372036854775807.0;  // top: 2^63, just past INT64_MAX
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    CAPTURE(dtype_name(t));
    const bool wide = t == kFloat32 || t == kFloat64;  // 1e30 and 2^63 overflow the 16-bit types to inf: the same answer
    const Tensor x = from_vector<double>({NAN, INFINITY, -INFINITY, wide ? big : INFINITY, wide ? -top : -INFINITY, 2.75, -2.75, -0.5})
                         .to(t).to(dev);
    CHECK(to_vector<int64_t>(x.to(kInt64)) == std::vector<int64_t>{0, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 2, -2, 0});
  }
  CHECK(to_vector<int64_t>(from_vector<double>({-9007199254740993.0, 4611686018427387904.0}).to(dev).to(kInt64)) ==
        std::vector<int64_t>{-9007199254740992, 4611686018427387904});  // in range: exact truncation of the double
}

DEVICE_TEST_CASE("half matmul equals float32 matmul of the rounded inputs, rounded once") {
  manual_seed(3);
  for (DType t : {kFloat16, kBFloat16}) {
    Tensor a = randn({37, 64}).to(t).to(dev), b = randn({64, 29}).to(t).to(dev);
    // Bit for bit where the CPU's half GEMM is built exactly so (widen, float32 GEMM, round).
    // oneDNN's bfloat16 kernels (test_bf16_gemm) and cuBLAS sum in other orders: the bound holds.
    const bool widens = dev.is_cpu() && (t == kFloat16 || onednn_bf16_kernel().empty());
    if (widens) CHECK(to_vector<float>(matmul(a, b)) == to_vector<float>(matmul(a.to(kFloat32), b.to(kFloat32)).to(t)));
    // and against a float64 reference: error within one rounding of the output plus float32
    // accumulation over K=64 terms (~64 * 2^-24 relative), far below the half ulp
    // A float32 out_dtype is that float32 accumulator, unrounded.
    const Tensor acc = kernels::gemm(a, b, {}, kFloat32);
    REQUIRE(acc.dtype() == kFloat32);
    if (widens) CHECK(to_vector<float>(acc) == to_vector<float>(matmul(a.to(kFloat32), b.to(kFloat32))));
    std::vector<double> av = to_vector<double>(a), bv = to_vector<double>(b);
    std::vector<float> got = to_vector<float>(matmul(a, b)), got32 = to_vector<float>(acc);
    double ulp = t == kFloat16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
    for (int i = 0; i < 37; i += 7)
      for (int j = 0; j < 29; j += 5) {
        double exact = 0, mag = 0;
        for (int k = 0; k < 64; ++k) { exact += av[i * 64 + k] * bv[k * 29 + j]; mag += std::abs(av[i * 64 + k] * bv[k * 29 + j]); }
        CHECK(std::abs(got[i * 29 + j] - exact) <= std::abs(exact) * ulp + mag * 64 * std::ldexp(1.0, -24) + 1e-6);
        CHECK(std::abs(got32[i * 29 + j] - exact) <= mag * 64 * std::ldexp(1.0, -24));
      }
  }
  // Only half operands have a wider accumulator to hand back.
  const Tensor f = randn({2, 3}).to(dev);
  CHECK(error_of([&] { kernels::gemm(f, f.t(), {}, kFloat64); }) ==
        "gemm: cannot write float32 operands' product as float64: out_dtype must be theirs, or float32 for float16 and bfloat16");
  CHECK(error_of([&] { kernels::gemm(f.to(kBFloat16), f.t().to(kBFloat16), {}, kFloat16); }) ==
        "gemm: cannot write bfloat16 operands' product as float16: out_dtype must be theirs, or float32 for float16 and bfloat16");
}

TEST_CASE("views share storage") {
  Tensor x = arange(0.0, 12.0, 1.0).reshape({3, 4});
  Tensor t = x.t(), n = x.narrow(1, 1, 2), e = x.select(0, 1).unsqueeze(0).expand({5, 4});
  CHECK(t.shares_storage(x));
  CHECK(n.shares_storage(x));
  CHECK(e.shares_storage(x));
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.shape() == Shape{4, 3});
  CHECK(n.storage_offset() == 1);
  CHECK(e.strides()[0] == 0);
  {
    NoGradGuard g;
    x.fill_(7);
  }
  CHECK(to_vector<float>(n) == std::vector<float>(6, 7.f));
  Tensor c = t.contiguous();
  CHECK_FALSE(c.shares_storage(x));
  CHECK(x.view({4, 3}).shares_storage(x));
  CHECK_THROWS_WITH_AS(t.view({12}), doctest::Contains("cannot be viewed as [12] without a copy"), Error);
  CHECK_FALSE(t.reshape({12}).shares_storage(x));  // reshape copies when it must
  CHECK(to_vector<float>(arange(0.0, 6.0, 1.0).reshape({2, 3}).t().reshape({6})) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(x.permute({1, 0}).strides() == Shape{1, 4});
  CHECK(ones({2, 1, 3}).squeeze().shape() == Shape{2, 3});
  CHECK(ones({2, 1, 3}).squeeze(1).shape() == Shape{2, 3});
  CHECK(ones({2, 3, 4}).flatten(1).shape() == Shape{2, 12});
  CHECK(ones({2, 3, 4}).reshape({-1, 4}).shape() == Shape{6, 4});
}

TEST_CASE("creation functions") {
  CHECK(to_vector<float>(full({2}, 2.5)) == std::vector<float>{2.5f, 2.5f});
  CHECK(to_vector<int64_t>(arange(5)) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(to_vector<float>(arange(1.0, 2.0, 0.25)) == std::vector<float>{1, 1.25f, 1.5f, 1.75f});
  CHECK(zeros_like(ones({2, 3}, kFloat16)).dtype() == kFloat16);
  CHECK(ones({2, 3}, TensorOptions(kFloat64).requires_grad()).requires_grad());
}

TEST_CASE("a shape whose sizes multiply past int64 is refused, even when it holds no element") {
  // [0, 2^62, 2^62] holds nothing, but its strides (2^62, 1) and numel's running product overflow.
  const Shape huge{0, int64_t(1) << 62, int64_t(1) << 62};
  const std::string msg = "shape [0, 4611686018427387904, 4611686018427387904]: its sizes multiply past int64's range";
  CHECK(error_of([&] { numel_of(huge); }) == msg);
  CHECK(error_of([&] { empty(huge); }) == msg);
  CHECK(error_of([&] { empty({int64_t(1) << 62, 4}, kFloat32); }) == "shape [4611686018427387904, 4]: its sizes multiply past int64's range");
  // bytes too: 2^61 float32 elements are 2^63 bytes
  CHECK(error_of([&] { empty({int64_t(1) << 61}, kFloat32); }) == "shape [2305843009213693952]: its sizes multiply past int64's range");
  CHECK(numel_of({0, int64_t(1) << 62}) == 0);  // within range: a valid empty shape
  CHECK(contiguous_strides({3, 0, 5}) == Shape{0, 5, 1});
}

TEST_CASE("item and from_blob copy semantics") {
  float raw[3] = {1, 2, 3};
  Tensor b = from_blob(raw, {3}, kFloat32);
  raw[0] = 9;
  CHECK(to_vector<float>(b)[0] == 1.f);
  CHECK_THROWS_WITH_AS(b.item<float>(), doctest::Contains("3 elements"), Error);
  CHECK(b.narrow(0, 2, 1).item<double>() == 3.0);
}

TEST_CASE("randomness is reproducible and well-distributed") {
  manual_seed(42);
  std::vector<float> a = to_vector<float>(randn({1000}));
  manual_seed(42);
  std::vector<float> b = to_vector<float>(randn({1000}));
  CHECK(a == b);
  double m = 0, v = 0;
  for (float x : a) m += x;
  m /= a.size();
  for (float x : a) v += (x - m) * (x - m);
  v /= a.size();
  CHECK(std::abs(m) < 0.1);  // 4 standard errors of the mean for n = 1000
  CHECK(std::abs(v - 1) < 0.15);
  Generator g(7);
  std::vector<float> u = to_vector<float>(rand({1000}, {}, &g));
  for (float x : u) REQUIRE((x >= 0 && x < 1));
  std::vector<int64_t> r = to_vector<int64_t>(randint(3, 6, {500}));
  for (int64_t x : r) REQUIRE((x >= 3 && x < 6));
  std::vector<int64_t> p = to_vector<int64_t>(randperm(10, &g));
  std::sort(p.begin(), p.end());
  CHECK(p == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("a Generator's state as text: the same draws after a round trip, and garbage refused") {
  Generator g(11);
  g.uniform();
  g.normal();  // leaves a spare normal, which the text must carry exactly
  const std::string text = g.get_state().to_string();
  const std::vector<double> want = {g.normal(), g.uniform(), g.normal(), double(g.next())};
  Generator h(0);
  h.set_state(Generator::State::from_string(text));
  CHECK(std::vector<double>{h.normal(), h.uniform(), h.normal(), double(h.next())} == want);
  CHECK(Generator::State::from_string(Generator(3).get_state().to_string()).normal_spare == std::nullopt);
  CHECK_THROWS_WITH_AS(Generator::State::from_string("1 2 3"), doctest::Contains("Generator state: expected the engine's state and the spare normal"), Error);
  CHECK_THROWS_WITH_AS(Generator::State::from_string(text + " 7"), doctest::Contains("Generator state: expected"), Error);
  const std::string bad_spare = text.substr(0, text.rfind(' ')) + " 0x1.8p+0z";
  CHECK_THROWS_WITH_AS(Generator::State::from_string(bad_spare), doctest::Contains("the spare normal '0x1.8p+0z' is not a number"), Error);
}

TEST_CASE("printing looks like PyTorch") {
  CHECK(to_string(from_vector<float>({1, 2}, {1, 2}).to(kFloat16)) == "tensor([[1., 2.]], dtype=float16)");
  CHECK(to_string(from_vector<float>({1.5f, -2.25f})) == "tensor([ 1.5000, -2.2500])");
  CHECK(to_string(from_vector<int64_t>({3, 10})) == "tensor([ 3, 10])");
  CHECK(to_string(from_vector<bool>({true, false})) == "tensor([ True, False])");
  CHECK(to_string(scalar_tensor(0.5)) == "tensor(0.5000)");
  CHECK(to_string(from_vector<float>({1, 2, 3, 4}, {2, 2})) == "tensor([[1., 2.],\n        [3., 4.]])");
  // torch/_tensor_str.py: scientific when the finite nonzero magnitudes span more than 1000x,
  // pass 1e8, or (not all integers) go under 1e-4
  CHECK(to_string(from_vector<float>({1, 2000})) == "tensor([1.0000e+00, 2.0000e+03])");
  CHECK(to_string(from_vector<float>({0.5f, -600})) == "tensor([ 5.0000e-01, -6.0000e+02])");
  CHECK(to_string(from_vector<float>({1e8f, 0})) == "tensor([100000000.,         0.])");
  CHECK(to_string(from_vector<float>({2e-5f, 1e-5f})) == "tensor([2.0000e-05, 1.0000e-05])");
  CHECK(to_string(from_vector<float>({0, NAN})) == "tensor([0., nan])");  // widths from finite nonzero values only
  CHECK(to_string(from_vector<float>({100, -INFINITY, 0})) == "tensor([100., -inf,   0.])");
  // over 1000 elements: the first and last 3 of each long dim, measured alone (a hidden 1e10
  // makes no difference)
  std::vector<float> many(2000);
  for (int i = 0; i < 2000; ++i) many[i] = float(i);
  CHECK(to_string(from_vector<float>(many)) == "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])");
  for (int i = 0; i < 2000; ++i) many[i] = float(1000 + i);
  many[1000] = 1e10f;
  CHECK(to_string(from_vector<float>(many)) == "tensor([1000., 1001., 1002.,  ..., 2997., 2998., 2999.])");
  // empty: the shape unless it is (0,), the dtype unless it is the default
  CHECK(to_string(zeros({0})) == "tensor([])");
  CHECK(to_string(zeros({2, 0})) == "tensor([], size=(2, 0))");
  CHECK(to_string(zeros({0}, kInt64)) == "tensor([], dtype=int64)");
  // Rows wrap at 80 columns and the suffixes move to a line of their own when they would pass
  // it; the expected strings are PyTorch 1.13's repr (with its dtype names shortened).
  CHECK(to_string(arange(0, 30, 1)) ==
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
        "        28., 29.])");
  CHECK(to_string(arange(40)) ==
        "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
        "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n"
        "        36, 37, 38, 39])");
  CHECK(to_string(ones({30}, kBool)) ==
        "tensor([True, True, True, True, True, True, True, True, True, True, True, True,\n"
        "        True, True, True, True, True, True, True, True, True, True, True, True,\n"
        "        True, True, True, True, True, True])");
  CHECK(to_string(arange(0, 40, 1).reshape({2, 20})) ==
        "tensor([[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "         14., 15., 16., 17., 18., 19.],\n"
        "        [20., 21., 22., 23., 24., 25., 26., 27., 28., 29., 30., 31., 32., 33.,\n"
        "         34., 35., 36., 37., 38., 39.]])");
  CHECK(to_string(arange(0, 150, 1).reshape({2, 3, 25}).narrow(1, 0, 1)) ==
        "tensor([[[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "          14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24.]],\n"
        "\n"
        "        [[75., 76., 77., 78., 79., 80., 81., 82., 83., 84., 85., 86., 87., 88.,\n"
        "          89., 90., 91., 92., 93., 94., 95., 96., 97., 98., 99.]]])");
  CHECK(to_string(arange(0, 10000, 1).reshape({100, 100})) ==
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.7000e+01, 9.8000e+01,\n"
        "         9.9000e+01],\n"
        "        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.9700e+02, 1.9800e+02,\n"
        "         1.9900e+02],\n"
        "        [2.0000e+02, 2.0100e+02, 2.0200e+02,  ..., 2.9700e+02, 2.9800e+02,\n"
        "         2.9900e+02],\n"
        "        ...,\n"
        "        [9.7000e+03, 9.7010e+03, 9.7020e+03,  ..., 9.7970e+03, 9.7980e+03,\n"
        "         9.7990e+03],\n"
        "        [9.8000e+03, 9.8010e+03, 9.8020e+03,  ..., 9.8970e+03, 9.8980e+03,\n"
        "         9.8990e+03],\n"
        "        [9.9000e+03, 9.9010e+03, 9.9020e+03,  ..., 9.9970e+03, 9.9980e+03,\n"
        "         9.9990e+03]])");
  CHECK(to_string(arange(8000).reshape({2, 4000})) == "tensor([[   0,    1,    2,  ..., 3997, 3998, 3999],\n        [4000, 4001, 4002,  ..., 7997, 7998, 7999]])");
  CHECK(to_string(arange(0, 13, 1, kFloat16)) == "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12.],\n       dtype=float16)");
  CHECK(to_string(arange(0, 13, 1).requires_grad_()) ==
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12.],\n       requires_grad=True)");
  CHECK(to_string(arange(0, 3, 1, kFloat16).requires_grad_()) == "tensor([0., 1., 2.], dtype=float16, requires_grad=True)");
}

TEST_CASE("gather and scatter_add along the last dim go a row per thread: the one-thread walk's values, sums in index order") {
  // An index as long as the shape outside the last dim (max pooling's backward, a loss's gather)
  // takes the rows-to-threads path of tensor/cpu/reduce.cpp: 64 · 32 rows of 40 entries into 50.
  const int threads = get_num_threads();
  set_num_threads(2);
  manual_seed(14);
  const Shape shape{64, 32, 50};
  const Tensor index = randint(0, 50, {64, 32, 40}), src = randn({64, 32, 40}), x = randn(shape);
  const std::vector<int64_t> iv = to_vector<int64_t>(index);
  const std::vector<float> sv = to_vector<float>(src), xv = to_vector<float>(x);
  std::vector<float> scattered(64 * 32 * 50, 0.f), gathered(iv.size());
  for (size_t k = 0; k < iv.size(); ++k) {
    const int64_t pos = int64_t(k) / 40 * 50 + iv[k];
    scattered[size_t(pos)] += sv[k];  // row by row, in index order
    gathered[k] = xv[size_t(pos)];
  }
  CHECK(to_vector<float>(kernels::scatter_add(shape, 2, index, src)) == scattered);
  CHECK(to_vector<float>(kernels::gather(x, 2, index)) == gathered);
  Tensor bad = index.clone();
  bad.view({-1}).narrow(0, 70000, 1).fill_(-3);
  CHECK(error_of([&] { kernels::scatter_add(shape, 2, bad, src); }) == "scatter_add: index -3 is out of bounds for dim 2 of size 50");
  set_num_threads(threads);
}

TEST_CASE("errors name the op and the shapes") {
  CHECK_THROWS_WITH_AS(matmul(ones({2, 3}), ones({4, 5})), "matmul: cannot multiply shapes [2, 3] and [4, 5]", Error);
  CHECK_THROWS_WITH_AS(ones({2, 3}) + ones({4}), doctest::Contains("shapes [2, 3] and [4] cannot be broadcast"), Error);
  CHECK_THROWS_WITH_AS(ones({2}).data_ptr<double>(), doctest::Contains("has dtype float32"), Error);
  CHECK_THROWS_WITH_AS(gelu(ones({2}, kInt64)), doctest::Contains("gelu: not defined for dtype int64"), Error);
  CHECK_THROWS_WITH_AS(ones({6}).reshape({4, -1}), doctest::Contains("shape [4, -1] is invalid for input of shape [6]"), Error);
#ifndef AMPGRAD_WITH_CUDA
  CHECK_THROWS_WITH_AS(ones({2}).to(Device::cuda()), doctest::Contains("built without the CUDA backend"), Error);
#endif
  CHECK_THROWS_AS(ones({2}, kInt64).requires_grad_(), Error);
  CHECK_THROWS_WITH_AS(kernels::gather(ones({2, 3}), 1, zeros({3, 1}, kInt64)), doctest::Contains("is larger than [2, 3] in dim 0"), Error);
  CHECK_THROWS_WITH_AS(kernels::gather(ones({2, 3}), 1, full({2, 1}, 3, kInt64)), doctest::Contains("index 3 is out of bounds for dim 1 of size 3"), Error);
}

DEVICE_TEST_CASE("argument checks of the in-place and backward primitives hold on every backend") {
  // Checked once in tensor/kernels.cpp, so no backend can quietly do nothing with them.
  Tensor b = ones({2}, kBool).to(dev), f = ones({2}).to(dev);
  CHECK_THROWS_WITH_AS(kernels::add_(b, b, 1), doctest::Contains("add_: not defined for dtype bool"), Error);
  CHECK_THROWS_WITH_AS(kernels::add_(f, ones({2}, kFloat64).to(dev), 1), doctest::Contains("add_: dtypes differ (float32 and float64)"), Error);
  CHECK_THROWS_WITH_AS(kernels::add_(f, ones({1, 2}).to(dev), 1), doctest::Contains("add_: shape [1, 2] cannot be added in place into [2]"), Error);
  CHECK_THROWS_WITH_AS(kernels::mul_(b, 2), doctest::Contains("mul_: not defined for dtype bool"), Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add({2}, 0, zeros({2}, kInt64).to(dev), b), doctest::Contains("scatter_add: not defined for dtype bool"), Error);
  CHECK_THROWS_WITH_AS(kernels::col2im(ones({4, 4}, kBool).to(dev), {1, 1, 3, 3}, 2, 2, 1, 0), doctest::Contains("conv2d: not defined for dtype bool"), Error);
  kernels::add_(f, from_vector<float>({1, 2}).to(dev), 0.5);
  kernels::mul_(f, 4);
  CHECK(to_vector<float>(f) == std::vector<float>{6, 8});  // (1 + 0.5·(1, 2)) · 4
}

DEVICE_TEST_CASE("argument checks of the shape-bound primitives hold on every backend, with the same words") {
  // Checked once in tensor/kernels.cpp: the backends assume them, so none can read out of bounds.
  Tensor x = ones({2, 3}).to(dev), img = ones({1, 1, 4, 4}).to(dev), i = zeros({2, 1}, kInt64).to(dev);
  CHECK(error_of([&] { kernels::copy_(x, ones({2, 1, 3}).to(dev)); }) == "copy_: source of shape [2, 1, 3] does not fit destination [2, 3]");
  CHECK(error_of([&] { kernels::softmax_lastdim(scalar_tensor(1).to(dev), true); }) == "log_softmax: needs at least one dim");
  CHECK(error_of([&] { kernels::softmax_lastdim(i, false); }) == "softmax: expected a floating dtype, got int64");
  CHECK(error_of([&] { kernels::max_dim(ones({2, 0}).to(dev), 1, false, false); }) == "max: cannot reduce an empty dimension of shape [2, 0]");
  CHECK(error_of([&] { kernels::im2col(x, 1, 1, 1, 0); }) == "conv2d: expected an (N, C, H, W) tensor, got shape [2, 3]");
  CHECK(error_of([&] { kernels::im2col(img, 5, 3, 1, 0); }) == "conv2d: kernel 5x3 with stride 1 and padding 0 does not fit input [1, 1, 4, 4]");
  // (4 - 5) / 2 + 1 rounds to one output: a window one pixel too wide must still be refused
  CHECK(error_of([&] { kernels::im2col(img, 5, 5, 2, 0); }) == "conv2d: kernel 5x5 with stride 2 and padding 0 does not fit input [1, 1, 4, 4]");
  CHECK(error_of([&] { kernels::col2im(ones({1, 9}).to(dev), {1, 1, 4, 4}, 3, 3, 0, 0); }) ==
        "conv2d: kernel 3x3 with stride 0 and padding 0 does not fit input [1, 1, 4, 4]");
  CHECK(error_of([&] { kernels::col2im(ones({4, 8}).to(dev), {1, 1, 4, 4}, 3, 3, 1, 0); }) ==
        "conv2d: columns of shape [4, 8] do not match image [1, 1, 4, 4] (expected [4, 9])");
  CHECK(error_of([&] { kernels::max_pool2d(img, 5, 1); }) == "max_pool2d: kernel 5 with stride 1 does not fit input [1, 1, 4, 4]");
  CHECK(error_of([&] { max_pool2d(img, 5); }) == "max_pool2d: kernel 5 with stride 5 does not fit input [1, 1, 4, 4]");
  CHECK(error_of([&] { kernels::gather(x, 1, zeros({2}, kInt64).to(dev)); }) == "gather: index of shape [2] must have the rank of [2, 3]");
  CHECK(error_of([&] { kernels::gather(x, 1, zeros({2, 1}).to(dev)); }) == "gather: index must be int64, got float32");
  CHECK(error_of([&] { kernels::gather(x, 1, zeros({3, 1}, kInt64).to(dev)); }) == "gather: index of shape [3, 1] is larger than [2, 3] in dim 0");
  CHECK(error_of([&] { kernels::scatter_add({2, 3}, 1, i, ones({2, 2}).to(dev)); }) == "scatter_add: src [2, 2] and index [2, 1] differ");
  // cross_entropy_backward's eight operands: the (N, C) log-probabilities, (N) targets, (N, 1) coefficients
  Tensor lp = zeros({2, 3}).to(dev), t = zeros({2}, kInt64).to(dev), kept = ones({2}, kBool).to(dev), c = ones({2, 1}).to(dev);
  const auto ce = [&](const Tensor& logp, const Tensor& index, const Tensor& coef, const Tensor& spread, DType dtype) {
    return error_of([&] { kernels::cross_entropy_backward(logp, index, kept, coef, coef, spread, ones({1, 1}).to(dev), dtype); });
  };
  CHECK(ce(lp, t, c, Tensor(), kFloat16) == "");
  CHECK(ce(i.to(kFloat16), t, c, Tensor(), kFloat16) == "cross_entropy_backward: expected (N, C) float32 or float64 log-probabilities, got float16 [2, 1]");
  CHECK(ce(lp, zeros({3}, kInt64).to(dev), c, Tensor(), kFloat32) == "cross_entropy_backward: index must be [2] int64, got [3] int64");
  CHECK(ce(lp, t, ones({2}).to(dev), Tensor(), kFloat32) == "cross_entropy_backward: coef must be [2, 1] float32, got [2] float32");
  CHECK(ce(lp, t, c, ones({1, 2}).to(dev), kFloat32) == "cross_entropy_backward: spread must be [1, 3] or [1, 1] or [] float32, got [1, 2] float32");
  CHECK(ce(lp, t, c, Tensor(), kFloat64) ==
        "cross_entropy_backward: cannot write the gradient as float64 from float32 log-probabilities (float64 comes from float64; float32, "
        "float16 and bfloat16 from float32)");
}

DEVICE_TEST_CASE("elementwise primitives take floating dtypes, int64 the sign-safe ops, bool only comparisons") {
  // One rule (defined_for in tensor/elementwise_ops.h) decides both which kernels a backend
  // compiles and what tensor/kernels.cpp refuses, so no backend meets a pair it has no kernel for.
  using kernels::Binary;
  using kernels::Unary;
  Tensor i = from_vector<int64_t>({-3, 4}).to(dev), b = from_vector<bool>({true, false}).to(dev), f = ones({2}).to(dev);
  CHECK(to_vector<int64_t>(kernels::unary(Unary::abs, i, {})) == std::vector<int64_t>{3, 4});
  CHECK(to_vector<int64_t>(kernels::unary(Unary::relu, i, {})) == std::vector<int64_t>{0, 4});
  CHECK(to_vector<int64_t>(kernels::binary(Binary::mul, i, i)) == std::vector<int64_t>{9, 16});
  CHECK(to_vector<bool>(kernels::binary(Binary::lt, b, from_vector<bool>({true, true}).to(dev))) == std::vector<bool>{false, true});
  CHECK_THROWS_WITH_AS(kernels::unary(Unary::sqrt, i, {}), "sqrt: not defined for dtype int64", Error);
  CHECK_THROWS_WITH_AS(kernels::unary(Unary::neg, b, {}), "neg: not defined for dtype bool", Error);
  CHECK_THROWS_WITH_AS(kernels::binary(Binary::div, i, i), "div: not defined for dtype int64", Error);
  CHECK_THROWS_WITH_AS(kernels::binary(Binary::add, b, b), "add: not defined for dtype bool", Error);
  CHECK_THROWS_WITH_AS(kernels::binary(Binary::add, f, i), "add: dtypes differ (float32 and int64); promote before the kernel", Error);
  CHECK_THROWS_WITH_AS(kernels::unary(Unary::pow, i, {3}), "pow: not defined for dtype int64", Error);
  CHECK_THROWS_WITH_AS(kernels::where(f, f, f), "where: condition must be bool, got float32", Error);
  CHECK_THROWS_WITH_AS(kernels::where(b, f, i), "where: dtypes differ (float32 and int64)", Error);
}

TEST_CASE("copy_ casts and broadcasts into a strided destination") {
  Tensor dst = zeros({3, 2});
  {
    NoGradGuard g;
    dst.t().copy_(from_vector<double>({1, 2, 3}, {1, 3}));
  }
  CHECK(to_vector<float>(dst) == std::vector<float>{1, 1, 2, 2, 3, 3});
  // A copy within one dtype moves elements unchanged: a float16 NaN keeps its payload (0x7E09),
  // contiguous or strided, where a round trip through float32 would make it 0x7E00.
  const uint16_t payload_nan = 0x7E09;
  Tensor h = full({2, 3}, 1.0, kFloat16);
  std::memcpy(static_cast<char*>(h.raw_data()) + 4 * sizeof(half), &payload_nan, 2);
  CHECK(bits(to_vector<half>(h)[4]) == payload_nan);
  CHECK(bits(to_vector<half>(h.t().contiguous())[3]) == payload_nan);  // (1, 1) of h is (1, 1) of hᵀ: index 1·2 + 1
}

TEST_CASE("vectorised and scalar casts round identically") {
  // Long contiguous arrays take the vector path; single elements the scalar one. Both must
  // agree bit for bit on ordinary values, ties, subnormals, overflow and NaN.
  manual_seed(9);
  const std::vector<float> special = {65504.f, 65520.f, 1e6f, std::ldexp(1.f, -25), 3 * std::ldexp(1.f, -26), 1 + std::ldexp(1.f, -11),
                                      1 + std::ldexp(1.f, -8), 3.3895314e38f, 1e-40f, -1e-40f, -0.f, INFINITY, -INFINITY};
  // The special values first, in a vector chunk with no NaN (AVX512-BF16's conversion reads a
  // subnormal as zero, so such a chunk must notice it), then ordinary values, then NaNs: the
  // default NaN of each sign, and NaNs with payloads (quiet, signalling), which F16C and
  // AVX512-BF16 alone would carry into the 16-bit mantissa; then the special values again.
  std::vector<float> v = special;
  for (float x : to_vector<float>(randn({4096}) * 1000.0)) v.push_back(x);
  for (uint32_t nan_bits : {0x7FC00000u, 0xFFC00000u, 0x7FC12345u, 0xFF800001u}) {
    float f;
    std::memcpy(&f, &nan_bits, 4);
    v.push_back(f);
  }
  for (float s : special) v.push_back(s);
  Tensor t = from_vector<float>(v);
  std::vector<half> h = to_vector<half>(t.to(kFloat16));
  std::vector<bfloat16> b = to_vector<bfloat16>(t.to(kBFloat16));
  for (size_t i = 0; i < v.size(); ++i) {
    REQUIRE(bits(h[i]) == bits(round_to<half>(v[i])));
    REQUIRE(bits(b[i]) == bits(round_to<bfloat16>(v[i])));
  }
  std::vector<float> back = to_vector<float>(t.to(kFloat16).to(kFloat32));
  for (size_t i = 0; i < v.size(); ++i) {
    const float widened = float(h[i]);
    REQUIRE(std::memcmp(&back[i], &widened, 4) == 0);  // widening is exact, NaNs included
  }
}

TEST_CASE("CPU kernels split between threads give each element's one-thread value") {
  // parallel_for hands each of 3 threads a third of the elements (rows, columns): a third of a
  // strided walk starts mid-row, so its odometer must start there. Each result is checked
  // against the element's value computed here, and bit for bit against the same call on one
  // thread (softmax rows too: 301 rows of 500 are split between the threads).
  const int threads = get_num_threads();
  manual_seed(11);
  const int64_t M = 301, K = 517, N = 500;
  Tensor base = randn({M, K}), b = randn({N});
  Tensor a = base.narrow(1, 3, N);  // (M, N), rows 517 apart: walked row by row
  std::vector<float> av = to_vector<float>(base), bv = to_vector<float>(b);
  auto run_all = [&] {
    NoGradGuard g;
    return std::vector<Tensor>{a * b, a.t().to(kFloat16), base.to(kBFloat16), sum(base, {0}), sum(a, {1}), max(a, 1).first,
                               max(a, 1).second, softmax(a, 1), log_softmax(base.to(kBFloat16), 1)};
  };
  set_num_threads(3);
  const std::vector<Tensor> split = run_all();
  set_num_threads(1);
  const std::vector<Tensor> one = run_all();
  set_num_threads(threads);
  for (size_t i = 0; i < split.size(); ++i) CHECK(to_vector<double>(split[i].to(kFloat64)) == to_vector<double>(one[i].to(kFloat64)));

  std::vector<float> prod = to_vector<float>(split[0]);
  std::vector<half> at = to_vector<half>(split[1]);
  std::vector<bfloat16> wide = to_vector<bfloat16>(split[2]);
  std::vector<float> col = to_vector<float>(split[3]), row = to_vector<float>(split[4]), mx = to_vector<float>(split[5]);
  std::vector<int64_t> arg = to_vector<int64_t>(split[6]);
  std::vector<float> soft = to_vector<float>(split[7]);
  for (int64_t i = 0; i < M * K; ++i) REQUIRE(bits(wide[i]) == bits(bfloat16(av[i])));
  std::vector<double> col_sum(K, 0.0);  // contiguous, summed over dim 0: whole rows accumulate
  for (int64_t i = 0; i < M * K; ++i) col_sum[i % K] += av[i];
  for (int64_t j = 0; j < K; ++j) REQUIRE(col[j] == float(col_sum[j]));
  for (int64_t i = 0; i < M; ++i) {
    double row_sum = 0;
    int64_t best = 0;
    for (int64_t j = 0; j < N; ++j) {
      const float x = av[i * K + 3 + j];
      REQUIRE(prod[i * N + j] == x * bv[j]);
      REQUIRE(bits(at[j * M + i]) == bits(half(x)));
      row_sum += x;
      if (x > av[i * K + 3 + best]) best = j;
    }
    REQUIRE(row[i] == float(row_sum));  // float32 sums accumulate in double, in order
    REQUIRE(arg[i] == best);
    REQUIRE(mx[i] == av[i * K + 3 + best]);
    // softmax: the library's float32 exps of x − max, summed in its 8 lanes, each divided by the sum
    auto e = [&](int64_t j) { return math::exp(av[i * K + 3 + j] - mx[i]); };
    const float exp_sum = cpu::lane_sum<float>(N, e);
    for (int64_t j = 0; j < N; ++j) REQUIRE(soft[i * N + j] == e(j) / exp_sum);
  }
}

TEST_CASE("a 16-bit row's float32 buffer is aligned to the widest vector, as a tensor's storage is") {
  // half_convert.h's WidenedBuffer (a row kernel's, a sum's): from malloc it was 16-byte aligned,
  // and 512-bit loads and stores split across cache lines (a 16-bit attention softmax up to 1.2x
  // slower). Eight buffers of
  // other sizes, so a malloc that happened to align one cannot pass for the rule. The widest
  // vector is Eigen's: 64 bytes under AVX-512, 32 under AVX.
  MESSAGE("the build's vector alignment: " << EIGEN_DEFAULT_ALIGN_BYTES << " bytes");
  const Tensor x = zeros({1000}, kBFloat16);
  for (int64_t n : {1, 7, 64, 95, 100, 256, 513, 1000}) {
    cpu::RowBuffer<bfloat16> row(n);
    CHECK(reinterpret_cast<uintptr_t>(row.read((const bfloat16*)x.raw_data())) % EIGEN_DEFAULT_ALIGN_BYTES == 0);
  }
}

TEST_CASE("CPU GEMMs cut into tiles between threads give the one-thread bits") {
  // matmul.cpp cuts C's rows into a tile per thread (at multiples of 4, Eigen's right-hand
  // panels) and runs Eigen's sequential GEMM on each, and oneDNN's bfloat16 GEMM shares C's blocks
  // out: every row must get the whole GEMM's arithmetic, so 1, 2 and 3 threads agree bit for bit
  // (the float32 sums of 16-bit operands too, where a reordered sum shows), in every dtype, for
  // transposed operands (Wᵀ, read column-major), K above Eigen's depth block (~290), M and N not
  // multiples of 4 or 24 (the last tile holding the odd rows), a batch of 2, a matrix-vector
  // product (N = 1), the MNIST MLP's last layer forward and back (N or K = 10: split only since
  // its 655k multiply-adds count as work for two threads), a linear's bias, and a weight
  // gradient's Xᵀ (column-major, K = 2048) — except that one in bfloat16 on oneDNN, whose threads
  // split such a K between them and add their partial sums: its bits follow the thread count.
  const int threads = get_num_threads();
  manual_seed(12);
  struct Shape3 { int64_t B, M, K, N; bool a_columns = false; };
  for (Shape3 s : {Shape3{1, 128, 784, 512}, {1, 61, 300, 331}, {1, 258, 70, 97}, {1, 23, 517, 97}, {2, 45, 517, 97}, {1, 1031, 1030, 1},
                   {1, 128, 512, 10}, {1, 128, 10, 512}, {1, 256, 2048, 64, true}}) {
    for (DType t : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
      const Tensor w = randn({s.B, s.N, s.K}).to(t), bias = randn({s.N}).to(t);  // b = wᵀ, column-major
      const Tensor a = s.a_columns ? randn({s.B, s.K, s.M}).to(t).transpose(1, 2) : randn({s.B, s.M, s.K}).to(t);
      // the rounded product, a linear's with its bias, and for 16-bit operands the float32 sums, where a reordered sum shows
      auto run = [&](int n) {
        set_num_threads(n);
        NoGradGuard g;
        std::vector<Tensor> c{matmul(a, w.transpose(1, 2)).flatten(), linear(a, w.select(0, 0), bias).flatten()};
        if (is_half(t)) c.push_back(kernels::gemm(a, w.transpose(1, 2), {}, kFloat32).flatten());
        for (Tensor& x : c) x = x.to(kFloat64);
        return cat(c);
      };
      const Tensor one = run(1), two = run(2), three = run(3);
      set_num_threads(threads);
      const std::string what = std::string(dtype_name(t)) + " B M K N " + std::to_string(s.B) + " " + std::to_string(s.M) + " " +
                               std::to_string(s.K) + " " + std::to_string(s.N);
      INFO(what);
      if (!(t == kBFloat16 && s.a_columns && !onednn_bf16_kernel().empty())) {
        CHECK(to_vector<double>(two) == to_vector<double>(one));
        CHECK(to_vector<double>(three) == to_vector<double>(one));
      }
      if (t == kFloat16) {  // and one rounding of the float32 GEMM of the widened inputs
        NoGradGuard g;
        CHECK(to_vector<double>(one.narrow(0, 0, s.B * s.M * s.N)) ==
              to_vector<double>(matmul(a.to(kFloat32), w.to(kFloat32).transpose(1, 2)).to(t).to(kFloat64).flatten()));
      }
    }
  }
}

TEST_CASE("CPU sums and half bias adds widen in one pass: float32 (float64) arithmetic in order, rounded once") {
  // The widened paths must give what converting element by element gave: a float32 accumulator
  // running in order down each column (or along each row), and y + x in float32, rounded once.
  // 37 rows go 8 side by side and one by one, each read in chunks of 1,024 (reduce.cpp).
  manual_seed(12);
  const int64_t M = 37, N = 2500;
  {  // float32 rows sum in double, in order
    Tensor x = randn({M, N});
    const std::vector<float> xv = to_vector<float>(x), row = to_vector<float>(sum(x, {1}));
    for (int64_t i = 0; i < M; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < N; ++j) acc += xv[i * N + j];
      REQUIRE(row[i] == float(acc));
    }
  }
  for (DType t : {kFloat16, kBFloat16}) {
    Tensor x = randn({M, N}).to(t), b = randn({N}).to(t);
    std::vector<float> xv = to_vector<float>(x), bv = to_vector<float>(b);
    std::vector<float> col = to_vector<float>(sum(x, {0})), row = to_vector<float>(sum(x, {1}));
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t i = 0; i < M; ++i) acc += xv[i * N + j];
      REQUIRE(col[j] == to_vector<float>(scalar_tensor(acc).to(t))[0]);
    }
    for (int64_t i = 0; i < M; ++i) {
      float acc = 0;
      for (int64_t j = 0; j < N; ++j) acc += xv[i * N + j];
      REQUIRE(row[i] == to_vector<float>(scalar_tensor(acc).to(t))[0]);
    }
    Tensor y = x.clone();
    {
      NoGradGuard g;
      y.add_(b, 0.5);  // (M, N) += 0.5 · (N): broadcast, as a half linear adds its bias
    }
    std::vector<float> yv = to_vector<float>(y);
    for (int64_t k = 0; k < M * N; ++k) REQUIRE(yv[k] == to_vector<float>(scalar_tensor(xv[k] + 0.5f * bv[k % N]).to(t))[0]);
  }
}

TEST_CASE("CPU sums read a view's rows in place where they nest: batch norm's channel sums, in order, with no copy") {
  // Summing (N, C, H, W) over (0, 2, 3) reads each channel's N planes where they lie (reduce.cpp's
  // row_runs), here of 1,100 elements (past a 1,024-element chunk), 8 channels side by side; every
  // third channel is read in place too; a view whose reduced dims do not nest (every other
  // column) is copied first. Each must still sum in the row's order.
  manual_seed(14);
  const int64_t N = 3, C = 19, H = 20, W = 55;
  for (DType t : {kFloat32, kFloat16, kBFloat16}) {
    INFO(dtype_name(t));
    const Tensor x = randn({N, C, H, W}).to(t);
    const std::vector<float> xv = to_vector<float>(x.to(kFloat32));
    const auto want = [&](auto acc, int64_t c, auto&& in_row) {  // the row's elements added in order
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < H * W; ++k)
          if (in_row(k)) acc += decltype(acc)(xv[(n * C + c) * H * W + k]);
      return to_vector<float>(scalar_tensor(double(acc)).to(kFloat32).to(t).to(kFloat32))[0];
    };
    const auto check = [&](const Tensor& got, auto&& in_row, int64_t c0, int64_t step) {
      const std::vector<float> g = to_vector<float>(got.to(kFloat32));
      for (int64_t i = 0; i < int64_t(g.size()); ++i)
        REQUIRE(g[i] == (t == kFloat32 ? want(0.0, c0 + i * step, in_row) : want(0.0f, c0 + i * step, in_row)));
    };
    reset_peak_memory_stats(Device::cpu());
    const int64_t before = memory_stats(Device::cpu()).allocated_bytes;
    const Tensor channels = sum(x, {0, 2, 3});
    CHECK(memory_stats(Device::cpu()).peak_allocated_bytes - before == int64_t(cpu::rounded_block_size(size_t(C) * x.element_size())));
    check(channels, [](int64_t) { return true; }, 0, 1);
    const Tensor every_third_channel = x.as_strided({N, 5, H, W}, {C * H * W, 3 * H * W, W, 1}, 2 * H * W);  // 2, 5, ..., 14
    check(sum(every_third_channel, {0, 2, 3}), [](int64_t) { return true; }, 2, 3);
    const Tensor every_other_column = x.as_strided({N, C, H, (W + 1) / 2}, {C * H * W, H * W, W, 2}, 0);
    check(sum(every_other_column, {0, 2, 3}), [](int64_t k) { return k % W % 2 == 0; }, 0, 1);
  }
}

TEST_CASE("CPU 16-bit elementwise ops go a tile at a time: element-by-element float32 bits, and no float32 copy held") {
  // Contiguous operands are widened a tile at a time on the stack; a transposed view of the same
  // values takes the strided path, which converts element by element. 37 × 300 elements make
  // many 512-element tiles, with rows crossing their edges.
  manual_seed(13);
  const int64_t M = 37, N = 300;
  const auto values = [](const Tensor& t) { return to_vector<float>(t.to(kFloat32)); };
  const auto peak_rise = [](auto f) {
    reset_peak_memory_stats(Device::cpu());
    const int64_t before = memory_stats(Device::cpu()).allocated_bytes;
    Tensor out = f();
    return memory_stats(Device::cpu()).peak_allocated_bytes - before;
  };
  for (DType t : {kFloat16, kBFloat16}) {
    CAPTURE(dtype_name(t));
    Tensor a = randn({M, N}).to(t), b = randn({M, N}).to(t);
    using kernels::Binary, kernels::Unary;
    for (auto [r, c] : {std::pair{M, N}, std::pair<int64_t, int64_t>{2, 100}}) {  // many tiles, and less than one
      const int64_t rows = r, cols = c;  // variables, not bindings: CAPTURE captures them, which clang < 16 refuses
      CAPTURE(rows);
      const Tensor p = a.narrow(0, 0, rows).narrow(1, 0, cols).contiguous(), q = b.narrow(0, 0, rows).narrow(1, 0, cols).contiguous(),
                   p_strided = p.t().contiguous().t();
      REQUIRE_FALSE(p_strided.is_contiguous());
      for (Unary op : {Unary::exp, Unary::tanh, Unary::sigmoid, Unary::relu, Unary::gelu}) {
        CAPTURE(kernels::unary_name(op));
        CHECK(values(kernels::unary(op, p, {})) == values(kernels::unary(op, p_strided, {})));
      }
      for (Binary op : {Binary::add, Binary::mul, Binary::div, Binary::lt, Binary::relu_backward, Binary::gelu_backward}) {
        CAPTURE(kernels::binary_name(op));
        CHECK(values(kernels::binary(op, p, q)) == values(kernels::binary(op, p_strided, q)));
      }
    }
    // The peak rises by the output alone (M·N 16-bit values, rounded to 64 bytes), where widening
    // whole tensors held three float32 copies, 6× that, beside it.
    const int64_t out_bytes = (M * N * 2 + 63) / 64 * 64;
    CHECK(peak_rise([&] { return kernels::binary(Binary::gelu_backward, a, b); }) == out_bytes);
    CHECK(peak_rise([&] { return kernels::unary(Unary::gelu, a, {}); }) == out_bytes);
    // The bias add in place, y += α·x: x a row shorter than a tile, one longer, one number, or y's
    // own shape; the float32 op rounded once, and no allocation.
    for (int64_t W : {10, 300, 700})
      for (const Shape& x_shape : {Shape{W}, Shape{1, W}, Shape{}, Shape{11, W}}) {
        CAPTURE(W);
        CAPTURE(shape_str(x_shape));
        Tensor y = randn({11, W}).to(t), x = randn(x_shape).to(t);
        Tensor expected = y.to(kFloat32);
        kernels::add_(expected, x.to(kFloat32), 0.3);
        CHECK(peak_rise([&] {
                kernels::add_(y, x, 0.3);
                return Tensor();
              }) == 0);
        CHECK(values(y) == values(expected.to(t)));
      }
  }
}

DEVICE_TEST_CASE("in-place writes refuse an expanded destination and a partly overlapping source") {
  // PyTorch's rules: with more than one thread (or a GPU) such writes would race, and even on
  // one they depend on the order of the walk.
  NoGradGuard g;
  const std::string shared = "more than one element of the written-to tensor refers to a single memory location";
  CHECK_THROWS_WITH_AS(zeros({1}).to(dev).expand({4}).fill_(1), doctest::Contains(("fill_: unsupported operation: " + shared).c_str()), Error);
  CHECK_THROWS_WITH_AS(zeros({1}).to(dev).expand({4}).add_(ones({4}).to(dev)), doctest::Contains(shared.c_str()), Error);
  const std::string overlap = "some elements of the input tensor and the written-to tensor refer to a single memory location";
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2}).to(dev);
  CHECK_THROWS_WITH_AS(x.copy_(x.t()), doctest::Contains(overlap.c_str()), Error);
  Tensor v = from_vector<float>({1, 2, 3, 4, 5}).to(dev);
  CHECK_THROWS_WITH_AS(v.narrow(0, 1, 4).copy_(v.narrow(0, 0, 4)), doctest::Contains(("copy_: unsupported operation: " + overlap).c_str()), Error);
  CHECK(to_vector<float>(v) == std::vector<float>{1, 2, 3, 4, 5});  // refused before any write
  // The same view on both sides is elementwise, and interleaved views share no element: both fine.
  Tensor y = from_vector<float>({1, 2, 3, 4}).to(dev);
  y.add_(y.view({4}));
  CHECK(to_vector<float>(y) == std::vector<float>{2, 4, 6, 8});
  y.view({2, 2}).select(1, 0).copy_(y.view({2, 2}).select(1, 1));
  CHECK(to_vector<float>(y) == std::vector<float>{4, 4, 8, 8});
  // an empty tensor writes nothing, whatever its strides say
  zeros({2, 0}).to(dev).fill_(1);
}

// 0 is "the default": OMP_NUM_THREADS where it is set (ctest sets 1, so that parallel cases do
// not each start a thread per core), else every core, as the trainers' --threads 0 promises.
TEST_CASE("set_num_threads(0) goes back to OMP_NUM_THREADS where it is set, else to every core") {
  const int threads = get_num_threads();
  const char* env = std::getenv("OMP_NUM_THREADS");
  const int from_env = env ? std::atoi(env) : 0;  // unset or empty: OpenMP's own default
  const int expected = from_env > 0 ? from_env : omp_get_num_procs();
  set_num_threads(expected + 1);
  CHECK(get_num_threads() == expected + 1);
  set_num_threads(0);
  CHECK(get_num_threads() == expected);
  set_num_threads(threads);
}

TEST_CASE("the CPU allocator hands a freed large block back for the same size") {
  cpu::empty_cache();
  void* p;
  {
    Tensor big = empty({1 << 16});  // 256 KiB: cached when freed
    p = big.raw_data();
  }
  CHECK(cpu::cached_bytes() == (1 << 18));
  Tensor again = empty({1 << 16});
  CHECK(again.raw_data() == p);
  CHECK(cpu::cached_bytes() == 0);
  { Tensor small = empty({16}); }
  CHECK(cpu::cached_bytes() == 0);  // small blocks go straight back to malloc
}

TEST_CASE("the CPU allocator reuses a block for any size of its class, and caches at most its cap, the oldest going first") {
  cpu::empty_cache();
  void* p;
  {
    Tensor a = empty({25000});  // 100,000 bytes: class 106,496 (64 KiB + 5 steps of 8 KiB)
    p = a.raw_data();
  }
  CHECK(cpu::cached_bytes() == 106496);
  CHECK(cpu::rounded_block_size(100000) == 106496);
  CHECK(cpu::rounded_block_size(65537) == 73728);   // just past a power of two: one step of 8 KiB
  CHECK(cpu::rounded_block_size(1 << 20) == 1 << 20);
  CHECK(cpu::rounded_block_size(40) == 64);          // small blocks: 64-byte steps
  CHECK(cpu::rounded_block_size(65000) == 65024);
  {
    Tensor b = empty({26000});  // 104,000 bytes: the same class, the same block
    CHECK(b.raw_data() == p);
  }
  // Blocks of sizes that never repeat, freed one by one past the cap: the cache stays under it, and
  // what it let go are the least recently freed.
  const size_t cap = cpu::cache_cap();
  std::vector<int64_t> sizes;  // in floats: every class from 1 MiB up, each a step of 1/8 of its power of two
  for (int64_t bytes = 1 << 20, total = 0; total <= int64_t(cap); bytes += int64_t(std::bit_floor(uint64_t(bytes))) / 8) {
    sizes.push_back(bytes / 4);
    total += bytes;
    Tensor t = empty({sizes.back()});
  }
  CHECK(cpu::cached_bytes() <= cap);
  CHECK(cpu::cached_bytes() >= cap - 4 * sizes.back());  // full, less at most one block
  const int64_t mallocs = memory_stats(Device::cpu()).num_system_allocs;
  { Tensor newest = empty({sizes.back()}); }
  CHECK(memory_stats(Device::cpu()).num_system_allocs == mallocs);  // still cached
  { Tensor oldest = empty({sizes.front()}); }
  CHECK(memory_stats(Device::cpu()).num_system_allocs == mallocs + 1);  // evicted: a fresh malloc
  cpu::empty_cache();
}

DEVICE_TEST_CASE("half elementwise ops equal the float32 op rounded once") {
  // The CPU's contiguous fast path widens first; the strided path converts per element. Both
  // must give the float32 result rounded once; so must CUDA's kernels, which load, compute in
  // float32 and round on store.
  manual_seed(10);
  Tensor x = randn({64, 33}).to(dev), y = randn({64, 33}).to(dev);
  for (DType t : {kFloat16, kBFloat16}) {
    Tensor xh = x.to(t), yh = y.to(t);
    CHECK(to_vector<float>(gelu(xh)) == to_vector<float>(gelu(xh.to(kFloat32)).to(t)));
    CHECK(to_vector<float>(xh * yh) == to_vector<float>((xh.to(kFloat32) * yh.to(kFloat32)).to(t)));
    Tensor strided = xh.t();  // non-contiguous: the per-element path
    CHECK(to_vector<float>(gelu(strided)) == to_vector<float>(gelu(strided.to(kFloat32)).to(t)));
    CHECK(to_vector<bool>(lt(xh, yh)) == to_vector<bool>(lt(xh.to(kFloat32), yh.to(kFloat32))));
  }
}
