// test_opinfo.cpp — one OpInfo entry per op (as PyTorch's OpInfo and ggml's test-backend-ops)
// drives every test of the op, on every device and each sample (finite, NaN/inf, strided,
// broadcast: sample()): forward against a float64 reference in every dtype; on the CPU each 16-bit
// output bit for bit against the op in float32 rounded once; gradcheck and gradgradcheck, the CPU
// against CUDA in float32/float16/bfloat16, and the output dtype under autocast against the
// policy table (tensor/ops.def). Special cases an entry cannot say (options, running statistics,
// masks) keep their own tests in test_ops.cpp & co. Below them, the completeness tests: every op
// of ops.def has an entry, consults its policy row, and has the nn exposure its line generates.
//
// How to add a test for a new op: one entry in op_infos() — its amp::Op, a variant name, the
// inputs' shapes and domain, the op as a lambda, and its reference in double (closed form, from
// the inputs' values in row-major order, NaN and ±inf included, as PyTorch treats them); for a
// sum or a chain of roundings, R, steps and rounded too (see tolerance() and check_rounded_once()).
// exp's entry is the whole of its tests:
//   {Op::exp, "", {{{4, 6}, -2, 2}}, [](In i) { return exp(i[0]); }, map1([](double x) { return std::exp(x); })},
// An op with scalar arguments lists the values to test them at, and its lambdas take them:
//   {.op = Op::leaky_relu, .inputs = {{{4, 6}}}, .f = [](In i, const Args& a) { return leaky_relu(i[0], a[0]); },
//    .reference = ..., .args = {{0}, {0.01}, {1}, {-0.5}}},
// The completeness test finds it; an op whose tests need more than a row goes in by_hand().
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>

#include "amp/autocast.h"
#include "diagnostics/autocast_log.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "devices.h"
#include "nn/activation.h"
#include "nn/functional.h"
#include "test_util.h"
#include "tolerance.h"

using namespace ampgrad;
using amp::CastPolicy;
using amp::Op;

namespace {

using In = const std::vector<Tensor>&;
using Values = std::vector<std::vector<double>>;  // each input's values, row-major
using Args = std::vector<double>;                 // the scalar arguments of one call (ops.def's ARG), in order

// A lambda of (input) or of (input, args): an entry's op and its reference, with or without the
// scalar arguments their op takes.
template <class Result, class Input> struct Call {
  std::function<Result(Input, const Args&)> call;
  template <class F> Call(F f) : call([f](Input in, const Args& a) {
    if constexpr (std::is_invocable_v<F, Input, const Args&>) return Result(f(in, a));
    else return Result(f(in));
  }) {}
  Result operator()(Input in, const Args& a = {}) const { return call(in, a); }
};
using Reference = Call<std::vector<double>, const Values&>;

struct Input {
  Shape shape;
  double lo = -1, hi = 1;  // uniform in [lo, hi): the op's domain (positive for log and sqrt)
};

struct OpInfo {
  Op op;
  std::string variant{};  // tells two entries of one op apart ("" for the only one)
  std::vector<Input> inputs;
  Call<Tensor, In> f;
  Reference reference;
  int64_t R = 1;       // the longest float32 sum in the forward or the backward
  int steps = 8;       // roundings to the dtype along the longest chain, forward and backward
  bool differentiable = true;
  int rounded = 0;     // a composite's roundings to a 16-bit dtype before its last (0: computes in float32, rounds once)
  std::string no_nonfinite{};  // why the NaN/inf sample cannot apply to this entry; empty: it applies
  std::vector<Args> args{};    // for an op with scalar arguments, the values to test it at: each a test of its own
  std::string name() const { return std::string(amp::policy_row(op).name) + (variant.empty() ? "" : " " + variant); }
};

// ---- references
Reference map1(std::function<double(double)> g) {
  return [g](const Values& v) {
    std::vector<double> out;
    for (double x : v[0]) out.push_back(g(x));
    return out;
  };
}
Reference map2(std::function<double(double, double)> g) {  // inputs of one shape
  return [g](const Values& v) {
    std::vector<double> out;
    for (size_t i = 0; i < v[0].size(); ++i) out.push_back(g(v[0][i], v[1][i]));
    return out;
  };
}
// g over each row of `cols` values, giving one value per row (or a row per row)
std::vector<double> per_row(const std::vector<double>& x, size_t cols, std::function<std::vector<double>(std::vector<double>)> g) {
  std::vector<double> out;
  for (size_t r = 0; r < x.size(); r += cols) {
    std::vector<double> y = g(std::vector<double>(x.begin() + r, x.begin() + r + cols));
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}
double total(const std::vector<double>& x) { double s = 0; for (double v : x) s += v; return s; }
double clamped(double x) { return std::clamp(x, -0.5, 0.5); }  // NaN stays NaN
// PyTorch's pow(x, e): x^±0.5 as sqrt and 1/sqrt (so pow(-inf, 0.5) is NaN, not inf)
double torch_pow(double x, double e) { return e == 0.5 ? std::sqrt(x) : e == -0.5 ? 1 / std::sqrt(x) : std::pow(x, e); }
std::optional<Scalar> bound(double b) { return std::isinf(b) ? std::nullopt : std::optional<Scalar>(b); }  // ±inf: none
// The index of max(x) (or min): the first NaN if there is one, as in PyTorch, else the first extreme.
size_t extreme(const std::vector<double>& x, bool is_min) {
  size_t best = 0;
  for (size_t i = 1; i < x.size() && !std::isnan(x[best]); ++i)
    if (std::isnan(x[i]) || (is_min ? x[i] < x[best] : x[i] > x[best])) best = i;
  return best;
}
double logsumexp(const std::vector<double>& x) {
  const double m = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (double v : x) s += std::exp(v - m);
  return m + std::log(s);
}
std::vector<double> softmax_row(std::vector<double> x, bool log) {
  const double lse = logsumexp(x);
  for (double& v : x) v = log ? v - lse : std::exp(v - lse);
  return x;
}
// x (rows, cols) as (cols, rows)
std::vector<double> transposed(const std::vector<double>& x, size_t rows, size_t cols) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out[c * rows + r] = x[r * cols + c];
  return out;
}
// a (M, K) · bᵀ where b is (N, K): the GEMM of matmul and linear
std::vector<double> gemm_nt(const std::vector<double>& a, const std::vector<double>& b, size_t M, size_t K) {
  const size_t N = b.size() / K;
  std::vector<double> out(M * N);
  for (size_t m = 0; m < M; ++m)
    for (size_t n = 0; n < N; ++n)
      for (size_t k = 0; k < K; ++k) out[m * N + n] += a[m * K + k] * b[n * K + k];
  return out;
}
double mean_of(const std::vector<double>& x) { return total(x) / double(x.size()); }
// B products a (M, K) · b (K, N), each operand's batch stride 0 where it broadcasts: matmul's ranks
std::vector<double> gemm_batched(const std::vector<double>& a, const std::vector<double>& b, size_t B, size_t M, size_t K, size_t N) {
  std::vector<double> out;
  for (size_t i = 0; i < B; ++i) {
    const size_t ai = a.size() > M * K ? i * M * K : 0, bi = b.size() > K * N ? i * K * N : 0;
    const std::vector<double> y = gemm_nt(std::vector(a.begin() + ai, a.begin() + ai + M * K), transposed(std::vector(b.begin() + bi, b.begin() + bi + K * N), K, N), M, K);
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

// conv2d of x (N, C, H, W) by w (O, C, kh, kw) with stride s, zero padding p and bias (O): each
// output a float64 sum over its window, in row-major (N, O, Ho, Wo) order; the padding's zeros
// multiply the weights too, as im2col's do and PyTorch's (0·inf is NaN). kw defaults to kh.
Reference convolution(size_t N, size_t C, size_t H, size_t W, size_t O, size_t kh, size_t s, size_t p, size_t kw = 0) {
  return [=](const Values& v) {
    const size_t kwd = kw ? kw : kh, Ho = (H + 2 * p - kh) / s + 1, Wo = (W + 2 * p - kwd) / s + 1;
    std::vector<double> out;
    for (size_t n = 0; n < N; ++n)
      for (size_t o = 0; o < O; ++o)
        for (size_t i = 0; i < Ho; ++i)
          for (size_t j = 0; j < Wo; ++j) {
            double acc = v[2][o];
            for (size_t c = 0; c < C; ++c)
              for (size_t a = 0; a < kh; ++a)
                for (size_t b = 0; b < kwd; ++b) {
                  const int64_t y = int64_t(i * s + a) - int64_t(p), x = int64_t(j * s + b) - int64_t(p);
                  const bool inside = y >= 0 && y < int64_t(H) && x >= 0 && x < int64_t(W);
                  acc += (inside ? v[0][((n * C + c) * H + size_t(y)) * W + size_t(x)] : 0.0) * v[1][((o * C + c) * kh + a) * kwd + b];
                }
            out.push_back(acc);
          }
    return out;
  };
}

// softmax(scale·q kᵀ) v for q (B, L, E), k (B, S, E), v (B, S, Ev), query i seeing keys 0..i
// where causal (top-left aligned, PyTorch's tril(ones(L, S))); the unseen keys' zero weights stay in
// the product, as in the GEMM: 0·inf is NaN. scale 0: the default 1/√E.
Reference attention(size_t B, size_t L, size_t S, size_t E, size_t Ev, bool causal, double scale = 0) {
  return [=](const Values& v) {
    const double sc = scale != 0 ? scale : 1 / std::sqrt(double(E));
    std::vector<double> out;
    for (size_t b = 0; b < B; ++b)
      for (size_t i = 0; i < L; ++i) {
        std::vector<double> s(causal ? std::min(i + 1, S) : S);
        for (size_t j = 0; j < s.size(); ++j) {
          for (size_t e = 0; e < E; ++e) s[j] += v[0][(b * L + i) * E + e] * v[1][(b * S + j) * E + e];
          s[j] *= sc;
        }
        std::vector<double> p = softmax_row(s, false);
        p.resize(S, 0.0);
        for (size_t c = 0; c < Ev; ++c) {
          double o = 0;
          for (size_t j = 0; j < S; ++j) o += p[j] * v[2][(b * S + j) * Ev + c];
          out.push_back(o);
        }
      }
    return out;
  };
}

// A constant tensor where x lives (targets, indices).
Tensor beside(const Tensor& x, const Tensor& t) { return t.to(x.device()); }
const std::vector<int64_t> kTargets = {0, 8, 3, 3};  // of (4, 9) logits: the first and last class, and a repeat

std::vector<OpInfo> op_infos() {
  return {
      // ---- elementwise: unary
      {.op = Op::neg, .inputs = {{{4, 6}}}, .f = [](In i) { return neg(i[0]); }, .reference = map1([](double x) { return -x; })},
      {.op = Op::exp, .inputs = {{{4, 6}, -2, 2}}, .f = [](In i) { return exp(i[0]); }, .reference = map1([](double x) { return std::exp(x); })},
      {.op = Op::log, .inputs = {{{4, 6}, 0.5, 2}}, .f = [](In i) { return log(i[0]); }, .reference = map1([](double x) { return std::log(x); })},
      {.op = Op::log1p, .inputs = {{{4, 6}, -0.5, 2}}, .f = [](In i) { return log1p(i[0]); }, .reference = map1([](double x) { return std::log1p(x); })},
      {.op = Op::sqrt, .inputs = {{{4, 6}, 0.5, 2}}, .f = [](In i) { return sqrt(i[0]); }, .reference = map1([](double x) { return std::sqrt(x); })},
      {.op = Op::abs, .inputs = {{{4, 6}}}, .f = [](In i) { return abs(i[0]); }, .reference = map1([](double x) { return std::abs(x); })},
      {.op = Op::tanh, .inputs = {{{4, 6}, -2, 2}}, .f = [](In i) { return tanh(i[0]); }, .reference = map1([](double x) { return std::tanh(x); })},
      {.op = Op::sigmoid, .inputs = {{{4, 6}, -3, 3}}, .f = [](In i) { return sigmoid(i[0]); }, .reference = map1([](double x) { return 1 / (1 + std::exp(-x)); })},
      {.op = Op::relu, .inputs = {{{4, 6}}}, .f = [](In i) { return relu(i[0]); }, .reference = map1([](double x) { return std::isnan(x) || x > 0 ? x : 0.0; })},
      {.op = Op::gelu, .inputs = {{{4, 6}, -3, 3}}, .f = [](In i) { return gelu(i[0]); }, .reference = map1([](double x) { return x * (1 + std::erf(x / std::sqrt(2.0))) / 2; })},
      // x·σ(x): σ(x) is rounded to the dtype before the product
      {.op = Op::silu, .inputs = {{{4, 6}, -3, 3}}, .f = [](In i) { return silu(i[0]); }, .reference = map1([](double x) { return x / (1 + std::exp(-x)); }), .rounded = 1},
      // PyTorch's leaky_relu: x > 0 ? x : x·slope, a NaN passing; slopes that zero, keep, flip
      {.op = Op::leaky_relu, .inputs = {{{4, 6}}}, .f = [](In i, const Args& a) { return leaky_relu(i[0], a[0]); },
       .reference = [](const Values& v, const Args& a) { return map1([s = a[0]](double x) { return x > 0 || std::isnan(x) ? x : x * s; })(v); },
       .args = {{0}, {0.01}, {1}, {-0.5}}},
      // x² exactly, x³, x¹; on positive x also the roots through sqrt, x^-0.5 and x^2.5
      {.op = Op::pow, .inputs = {{{4, 6}}}, .f = [](In i, const Args& a) { return pow(i[0], a[0]); },
       .reference = [](const Values& v, const Args& a) { return map1([e = a[0]](double x) { return torch_pow(x, e); })(v); }, .args = {{2}, {3}, {1}}},
      {.op = Op::pow, .variant = "of positive x", .inputs = {{{4, 6}, 0.5, 2}}, .f = [](In i, const Args& a) { return pow(i[0], a[0]); },
       .reference = [](const Values& v, const Args& a) { return map1([e = a[0]](double x) { return torch_pow(x, e); })(v); },
       .args = {{0.5}, {-0.5}, {2.5}}},
      // a bound of ±inf is none: clamp(x, 0, nullopt)
      {.op = Op::clamp, .inputs = {{{4, 6}}}, .f = [](In i, const Args& a) { return clamp(i[0], bound(a[0]), bound(a[1])); },
       .reference = [](const Values& v, const Args& a) { return map1([=](double x) { return std::clamp(x, a[0], a[1]); })(v); },
       .args = {{-0.5, 0.5}, {0, INFINITY}, {-INFINITY, -0.25}}},
      // ---- elementwise: binary (each also on the broadcast sample)
      {.op = Op::add, .inputs = {{{4, 6}}, {{4, 6}}}, .f = [](In i) { return add(i[0], i[1]); }, .reference = map2([](double a, double b) { return a + b; })},
      {.op = Op::sub, .inputs = {{{4, 6}}, {{4, 6}}}, .f = [](In i) { return sub(i[0], i[1]); }, .reference = map2([](double a, double b) { return a - b; })},
      {.op = Op::mul, .inputs = {{{4, 6}}, {{4, 6}}}, .f = [](In i) { return mul(i[0], i[1]); }, .reference = map2([](double a, double b) { return a * b; })},
      {.op = Op::div, .inputs = {{{4, 6}}, {{4, 6}, 0.5, 2}}, .f = [](In i) { return div(i[0], i[1]); }, .reference = map2([](double a, double b) { return a / b; })},
      // the operators with a number beside the tensor: six roundings, five before the last (x/4 and −x are exact)
      {.op = Op::add, .variant = "scalar operators", .inputs = {{{4, 6}, 0.5, 2}}, .f = [](In i) { return (2.0 - i[0]) * 3.0 + 1.5 / i[0] - i[0] / 4.0 + (-i[0]); },
       .reference = map1([](double x) { return (2 - x) * 3 + 1.5 / x - x / 4 - x; }), .rounded = 5},
      {.op = Op::where, .inputs = {{{4, 6}}, {{4, 6}}}, .f = [](In i) { return where(gt(i[0], i[1]), i[0], i[1]); }, .reference = map2([](double a, double b) { return a > b ? a : b; })},
      // comparisons: clamp makes ties for eq, le and ge (and a NaN is equal to nothing)
      {.op = Op::eq, .inputs = {{{4, 6}}}, .f = [](In i) { return eq(i[0], clamp(i[0], -0.5, 0.5)); }, .reference = map1([](double x) { return double(x == clamped(x)); }), .R = 0, .steps = 0, .differentiable = false},
      {.op = Op::ne, .inputs = {{{4, 6}}}, .f = [](In i) { return ne(i[0], clamp(i[0], -0.5, 0.5)); }, .reference = map1([](double x) { return double(x != clamped(x)); }), .R = 0, .steps = 0, .differentiable = false},
      {.op = Op::le, .inputs = {{{4, 6}}}, .f = [](In i) { return le(i[0], clamp(i[0], -0.5, 0.5)); }, .reference = map1([](double x) { return double(x <= clamped(x)); }), .R = 0, .steps = 0, .differentiable = false},
      {.op = Op::ge, .inputs = {{{4, 6}}}, .f = [](In i) { return ge(i[0], clamp(i[0], -0.5, 0.5)); }, .reference = map1([](double x) { return double(x >= clamped(x)); }), .R = 0, .steps = 0, .differentiable = false},
      {.op = Op::lt, .inputs = {{{4, 6}}, {{4, 6}}}, .f = [](In i) { return lt(i[0], i[1]); }, .reference = map2([](double a, double b) { return double(a < b); }), .R = 0, .steps = 0, .differentiable = false},
      {.op = Op::gt, .inputs = {{{4, 6}}, {{4, 6}}}, .f = [](In i) { return gt(i[0], i[1]); }, .reference = map2([](double a, double b) { return double(a > b); }), .R = 0, .steps = 0, .differentiable = false},
      // ---- reductions
      {.op = Op::sum, .variant = "all", .inputs = {{{5, 7}}}, .f = [](In i) { return sum(i[0]); }, .reference = [](const Values& v) { return std::vector{total(v[0])}; }, .R = 35},
      {.op = Op::sum, .variant = "dim 1", .inputs = {{{5, 7}}}, .f = [](In i) { return sum(i[0], {1}); },
       .reference = [](const Values& v) { return per_row(v[0], 7, [](auto r) { return std::vector{total(r)}; }); }, .R = 7},
      {.op = Op::sum, .variant = "dim 0 keepdim", .inputs = {{{5, 7}}}, .f = [](In i) { return sum(i[0], {0}, true); },
       .reference = [](const Values& v) { return per_row(transposed(v[0], 5, 7), 5, [](auto r) { return std::vector{total(r)}; }); }, .R = 5},
      {.op = Op::sum, .variant = "dims (0, 2)", .inputs = {{{3, 4, 5}}}, .f = [](In i) { return sum(i[0], {0, 2}); },
       .reference = [](const Values& v) {
         std::vector<double> out(4);
         for (size_t k = 0; k < v[0].size(); ++k) out[k / 5 % 4] += v[0][k];
         return out;
       }, .R = 15},
      {.op = Op::mean, .variant = "all", .inputs = {{{5, 7}}}, .f = [](In i) { return mean(i[0]); }, .reference = [](const Values& v) { return std::vector{mean_of(v[0])}; }, .R = 35},
      {.op = Op::mean, .variant = "dim 1 keepdim", .inputs = {{{5, 7}}}, .f = [](In i) { return mean(i[0], {1}, true); },
       .reference = [](const Values& v) { return per_row(v[0], 7, [](auto r) { return std::vector{mean_of(r)}; }); }, .R = 7},
      {.op = Op::max, .variant = "all", .inputs = {{{5, 7}}}, .f = [](In i) { return max(i[0]); }, .reference = [](const Values& v) { return std::vector{v[0][extreme(v[0], false)]}; }},
      {.op = Op::max, .variant = "dim 1", .inputs = {{{5, 7}}}, .f = [](In i) { return max(i[0], 1).first; },
       .reference = [](const Values& v) { return per_row(v[0], 7, [](auto r) { return std::vector{r[extreme(r, false)]}; }); }},
      {.op = Op::min, .variant = "all", .inputs = {{{5, 7}}}, .f = [](In i) { return min(i[0]); }, .reference = [](const Values& v) { return std::vector{v[0][extreme(v[0], true)]}; }},
      {.op = Op::min, .variant = "dim 0 keepdim", .inputs = {{{5, 7}}}, .f = [](In i) { return min(i[0], 0, true).first; },
       .reference = [](const Values& v) { return per_row(transposed(v[0], 5, 7), 5, [](auto r) { return std::vector{r[extreme(r, true)]}; }); }},
      // ties (likely in bfloat16) go to the first, as in PyTorch
      {.op = Op::max, .variant = "dim 1 indices", .inputs = {{{5, 7}}}, .f = [](In i) { return max(i[0], 1).second; },
       .reference = [](const Values& v) { return per_row(v[0], 7, [](auto r) { return std::vector{double(extreme(r, false))}; }); }, .R = 0, .steps = 0, .differentiable = false},
      {.op = Op::argmax, .variant = "all", .inputs = {{{5, 7}}}, .f = [](In i) { return argmax(i[0]); }, .reference = [](const Values& v) { return std::vector{double(extreme(v[0], false))}; }, .R = 0, .steps = 0, .differentiable = false},
      {.op = Op::argmax, .variant = "dim 1", .inputs = {{{5, 7}}}, .f = [](In i) { return argmax(i[0], 1); },
       .reference = [](const Values& v) { return per_row(v[0], 7, [](auto r) { return std::vector{double(extreme(r, false))}; }); }, .R = 0, .steps = 0, .differentiable = false},
      // ---- shape, views, copies
      {.op = Op::reshape, .inputs = {{{4, 6}}}, .f = [](In i) { return reshape(i[0], {3, -1}); }, .reference = map1([](double x) { return x; })},
      {.op = Op::view, .inputs = {{{4, 6}}}, .f = [](In i) { return view(i[0], {2, 2, 6}); }, .reference = map1([](double x) { return x; })},
      {.op = Op::flatten, .inputs = {{{2, 3, 4}}}, .f = [](In i) { return flatten(i[0], 1); }, .reference = map1([](double x) { return x; })},
      {.op = Op::unsqueeze, .inputs = {{{4, 6}}}, .f = [](In i) { return unsqueeze(i[0], 1); }, .reference = map1([](double x) { return x; })},
      {.op = Op::squeeze, .inputs = {{{4, 1, 6}}}, .f = [](In i) { return squeeze(i[0]); }, .reference = map1([](double x) { return x; })},
      {.op = Op::clone, .inputs = {{{4, 6}}}, .f = [](In i) { return clone(i[0]); }, .reference = map1([](double x) { return x; })},
      {.op = Op::transpose, .inputs = {{{4, 6}}}, .f = [](In i) { return transpose(i[0], 0, 1); }, .reference = [](const Values& v) { return transposed(v[0], 4, 6); }},
      {.op = Op::contiguous, .variant = "of a transpose", .inputs = {{{4, 6}}}, .f = [](In i) { return contiguous(transpose(i[0], 0, 1)); },
       .reference = [](const Values& v) { return transposed(v[0], 4, 6); }},
      {.op = Op::narrow, .inputs = {{{4, 6}}}, .f = [](In i) { return narrow(i[0], 1, 2, 3); },
       .reference = [](const Values& v) { return per_row(v[0], 6, [](auto r) { return std::vector(r.begin() + 2, r.begin() + 5); }); }},
      {.op = Op::select, .inputs = {{{4, 6}}}, .f = [](In i) { return select(i[0], 0, 2); }, .reference = [](const Values& v) { return std::vector(v[0].begin() + 12, v[0].begin() + 18); }},
      // column 5 twice: its gradient adds two terms
      {.op = Op::index_select, .inputs = {{{4, 6}}}, .f = [](In i) { return index_select(i[0], 1, beside(i[0], from_vector<int64_t>({5, 0, 5, 2}))); },
       .reference = [](const Values& v) { return per_row(v[0], 6, [](auto r) { return std::vector{r[5], r[0], r[5], r[2]}; }); }, .R = 2},
      {.op = Op::expand, .inputs = {{{4, 1}}}, .f = [](In i) { return expand(i[0], {4, 6}); },
       .reference = [](const Values& v) { return per_row(v[0], 1, [](auto r) { return std::vector(6, r[0]); }); }, .R = 6},
      {.op = Op::cat, .inputs = {{{2, 6}}, {{3, 6}}}, .f = [](In i) { return cat({i[0], i[1]}, 0); },
       .reference = [](const Values& v) { std::vector<double> out = v[0]; out.insert(out.end(), v[1].begin(), v[1].end()); return out; }},
      {.op = Op::stack, .inputs = {{{4, 6}}, {{4, 6}}}, .f = [](In i) { return stack({i[0], i[1]}); },
       .reference = [](const Values& v) { std::vector<double> out = v[0]; out.insert(out.end(), v[1].begin(), v[1].end()); return out; }},
      // ---- linear algebra (R: K in the forward, M or N in the backward's products)
      {.op = Op::matmul, .inputs = {{{5, 16}}, {{16, 7}}}, .f = [](In i) { return matmul(i[0], i[1]); },
       .reference = [](const Values& v) { return gemm_nt(v[0], transposed(v[1], 16, 7), 5, 16); }, .R = 16},
      {.op = Op::matmul, .variant = "dot", .inputs = {{{16}}, {{16}}}, .f = [](In i) { return matmul(i[0], i[1]); }, .reference = [](const Values& v) { return gemm_nt(v[0], v[1], 1, 16); }, .R = 16},
      {.op = Op::matmul, .variant = "(M, K)(K)", .inputs = {{{5, 16}}, {{16}}}, .f = [](In i) { return matmul(i[0], i[1]); }, .reference = [](const Values& v) { return gemm_nt(v[0], v[1], 5, 16); }, .R = 16},
      {.op = Op::matmul, .variant = "(K)(K, N)", .inputs = {{{16}}, {{16, 7}}}, .f = [](In i) { return matmul(i[0], i[1]); },
       .reference = [](const Values& v) { return gemm_nt(v[0], transposed(v[1], 16, 7), 1, 16); }, .R = 16},
      {.op = Op::matmul, .variant = "batched", .inputs = {{{3, 5, 16}}, {{3, 16, 7}}}, .f = [](In i) { return matmul(i[0], i[1]); },
       .reference = [](const Values& v) { return gemm_batched(v[0], v[1], 3, 5, 16, 7); }, .R = 16},
      {.op = Op::matmul, .variant = "batched (B, M, K)(K, N)", .inputs = {{{3, 5, 16}}, {{16, 7}}}, .f = [](In i) { return matmul(i[0], i[1]); },
       .reference = [](const Values& v) { return gemm_batched(v[0], v[1], 3, 5, 16, 7); }, .R = 16},  // K; b's gradient sums B·M = 15 products
      {.op = Op::matmul, .variant = "broadcast batch (1, M, K)(B, K, N)", .inputs = {{{1, 5, 16}}, {{3, 16, 7}}}, .f = [](In i) { return matmul(i[0], i[1]); },
       .reference = [](const Values& v) { return gemm_batched(v[0], v[1], 3, 5, 16, 7); }, .R = 21},  // a's gradient sums B·N products
      // every other column of a (5, 32): strides (32, 2), which a GEMM takes only as a copy
      {.op = Op::matmul, .variant = "of a strided view (copied)", .inputs = {{{5, 32}}, {{16, 7}}}, .f = [](In i) { return matmul(select(reshape(i[0], {5, 16, 2}), 2, 0), i[1]); },
       .reference = [](const Values& v) {
         std::vector<double> a;
         for (size_t k = 0; k < v[0].size(); k += 2) a.push_back(v[0][k]);
         return gemm_nt(a, transposed(v[1], 16, 7), 5, 16);
       }, .R = 16},
      // the bias is added in the GEMM's float32 epilogue, before the one rounding
      {.op = Op::linear, .inputs = {{{6, 16}}, {{5, 16}}, {{5}}}, .f = [](In i) { return linear(i[0], i[1], i[2]); },
       .reference = [](const Values& v) {
         std::vector<double> y = gemm_nt(v[0], v[1], 6, 16);
         for (size_t k = 0; k < y.size(); ++k) y[k] += v[2][k % 5];
         return y;
       }, .R = 16},
      // conv2d: im2col + one GEMM with the bias in its epilogue (R: C·kh·kw), the input's gradient
      // summed back in float32 and rounded once
      {.op = Op::conv2d, .inputs = {{{2, 3, 5, 5}}, {{4, 3, 3, 3}}, {{4}}}, .f = [](In i) { return conv2d(i[0], i[1], i[2]); },
       .reference = convolution(2, 3, 5, 5, 4, 3, 1, 0), .R = 27},
      {.op = Op::conv2d, .variant = "stride 2, padding 1", .inputs = {{{1, 2, 6, 5}}, {{3, 2, 3, 2}}, {{3}}},
       .f = [](In i) { return conv2d(i[0], i[1], i[2], 2, 1); }, .reference = convolution(1, 2, 6, 5, 3, 3, 2, 1, 2), .R = 12},
      // ---- attention (R: E, S or L, the GEMMs' sums; P is rounded to the dtype before P·V)
      {.op = Op::scaled_dot_product_attention, .variant = "causal, L < S", .inputs = {{{2, 5, 8}}, {{2, 7, 8}}, {{2, 7, 3}}},
       .f = [](In i) { return scaled_dot_product_attention(i[0], i[1], i[2]); }, .reference = attention(2, 5, 7, 8, 3, true), .R = 8, .rounded = 1},
      {.op = Op::scaled_dot_product_attention, .variant = "causal, heads, L > S", .inputs = {{{2, 2, 6, 4}}, {{2, 2, 3, 4}}, {{2, 2, 3, 5}}},
       .f = [](In i) { return scaled_dot_product_attention(i[0], i[1], i[2]); }, .reference = attention(4, 6, 3, 4, 5, true), .R = 6, .rounded = 1},
      {.op = Op::scaled_dot_product_attention, .variant = "not causal, scale -0.7", .inputs = {{{3, 4}}, {{5, 4}}, {{5, 2}}},
       .f = [](In i) { return scaled_dot_product_attention(i[0], i[1], i[2], false, -0.7); }, .reference = attention(1, 3, 5, 4, 2, false, -0.7), .R = 5, .rounded = 1},
      // ---- softmax and the losses, over (4, 9) logits
      {.op = Op::softmax, .inputs = {{{4, 9}, -3, 3}}, .f = [](In i) { return softmax(i[0], 1); },
       .reference = [](const Values& v) { return per_row(v[0], 9, [](auto r) { return softmax_row(r, false); }); }, .R = 9},
      {.op = Op::softmax, .variant = "dim 0", .inputs = {{{4, 9}, -3, 3}}, .f = [](In i) { return softmax(i[0], 0); },
       .reference = [](const Values& v) { return transposed(per_row(transposed(v[0], 4, 9), 4, [](auto r) { return softmax_row(r, false); }), 9, 4); }, .R = 4},
      {.op = Op::log_softmax, .inputs = {{{4, 9}, -3, 3}}, .f = [](In i) { return log_softmax(i[0], -1); },
       .reference = [](const Values& v) { return per_row(v[0], 9, [](auto r) { return softmax_row(r, true); }); }, .R = 9},
      {.op = Op::cross_entropy, .inputs = {{{4, 9}, -3, 3}}, .f = [](In i) { return cross_entropy(i[0], beside(i[0], from_vector<int64_t>(kTargets))); },
       .reference = [](const Values& v) {
         double loss = 0;
         for (size_t n = 0; n < 4; ++n) loss -= softmax_row(std::vector(v[0].begin() + 9 * n, v[0].begin() + 9 * n + 9), true)[kTargets[n]];
         return std::vector{loss / 4};
       }, .R = 9, .steps = 32, .rounded = 1},  // log_softmax is rounded to the dtype, then the loss is taken in float32
      {.op = Op::nll_loss, .inputs = {{{4, 9}, -3, 0}}, .f = [](In i) { return nll_loss(i[0], beside(i[0], from_vector<int64_t>(kTargets))); },
       .reference = [](const Values& v) {
         double loss = 0;
         for (size_t n = 0; n < 4; ++n) loss -= v[0][9 * n + kTargets[n]];
         return std::vector{loss / 4};
       }, .R = 4},
      {.op = Op::mse_loss, .inputs = {{{2, 3}}, {{2, 3}}}, .f = [](In i) { return mse_loss(i[0], i[1]); },
       .reference = [](const Values& v) { return std::vector{mean_of(map2([](double a, double b) { return (a - b) * (a - b); })(v))}; }, .R = 6, .steps = 16, .rounded = 2},  // a − b, then its square, rounded
      // input: probabilities away from 0 and 1; target: any probability
      {.op = Op::binary_cross_entropy, .inputs = {{{2, 3}, 0.1, 0.9}, {{2, 3}, 0, 1}}, .f = [](In i) { return binary_cross_entropy(i[0], i[1]); },
       .reference = [](const Values& v) {
         return std::vector{mean_of(map2([](double p, double t) { return -(t * std::log(p) + (1 - t) * std::log1p(-p)); })(v))};
       }, .R = 6, .steps = 32, .rounded = 0, .no_nonfinite = "its input must be a probability: the CPU refuses one outside [0, 1], NaN included, as PyTorch's CPU kernel does (test_ops.cpp)"},
      {.op = Op::binary_cross_entropy_with_logits, .inputs = {{{2, 3}, -3, 3}, {{2, 3}, 0, 1}}, .f = [](In i) { return binary_cross_entropy_with_logits(i[0], i[1]); },
       .reference = [](const Values& v) {  // (1 − t)·x + log(1 + e^−x), written stably: so x = inf gives inf, as in PyTorch, not inf − inf
         return std::vector{mean_of(map2([](double x, double t) { return (1 - t) * x + std::log1p(std::exp(-std::abs(x))) + std::max(-x, 0.0); })(v))};
       }, .R = 6, .steps = 32},
  };
}

// Ops whose tests need more than a row can say — options, running statistics, random masks,
// images — tested by hand in the files named. Each still shows it consults the policy table.
struct ByHand {
  Op op;
  const char* where;
  std::function<void(Device)> call;
  std::string nonfinite = "test_opinfo.cpp: ops tested by hand keep NaN and inf where PyTorch does";  // where its NaN/inf case is
};
std::vector<ByHand> by_hand() {
  auto x = [](Device d) { return randn({2, 3}).to(d); };
  auto img = [](Device d) { return randn({1, 1, 4, 4}).to(d); };
  return {
      {Op::permute, "test_ops.cpp: views and copies", [=](Device d) { (void)permute(x(d), {1, 0}); }},
      {Op::to, "test_tensor.cpp, test_autograd.cpp: casts between every dtype and device", [=](Device d) { (void)to(x(d), kFloat64); }},
      {Op::max_pool2d, "test_ops.cpp: conv2d and max_pool2d", [=](Device d) { (void)max_pool2d(img(d), 2); }},
      {Op::layer_norm, "test_ops.cpp: layer_norm and dropout", [=](Device d) { (void)layer_norm(x(d), {3}); }},
      {Op::batch_norm, "test_ops.cpp: batch_norm against PyTorch", [=](Device d) { (void)batch_norm(x(d), {}, {}, {}, {}, true); }},
      {Op::group_norm, "test_ops.cpp: group_norm against PyTorch", [=](Device d) { (void)group_norm(x(d), 1); }},
      {Op::dropout, "test_ops.cpp: layer_norm and dropout", [=](Device d) { (void)dropout(x(d), 0.5, true); }},
      {Op::embedding, "test_ops.cpp: embedding", [](Device d) { (void)embedding(from_vector<int64_t>({0, 3}).to(d), randn({4, 3}).to(d)); }},
  };
}

double max_abs(const std::vector<double>& v) {  // of the finite values: the scale of a tolerance
  double m = 0;
  for (double x : v)
    if (std::isfinite(x)) m = std::max(m, std::abs(x));
  return m;
}

// The samples every entry runs on (PyTorch's OpInfo calls them sample inputs):
//   finite     its inputs drawn in their domain, contiguous;
//   nonfinite  the same holding a NaN, an inf and a −inf each, at places that differ from one input
//              to the next (so a binary op also meets NaN against a number, and inf against −inf);
//   strided    the finite inputs handed to the op as non-contiguous views: column-major (the last
//              two dims transposed in memory), a 1-D input every other element;
//   broadcast  for an op that broadcasts (below) with two inputs or more: input k drawn with dim
//              k % rank of size 1, so the op broadcasts both, and its backward sums them back.
enum class Sample { finite, nonfinite, strided, broadcast };
const char* sample_name(Sample kind) {
  return kind == Sample::finite ? "" : kind == Sample::nonfinite ? ", inputs with NaN and ±inf" : kind == Sample::strided ? ", strided inputs" : ", broadcast inputs";
}

// The ops that broadcast their inputs against each other: tensor/ops.def's binary kernels, and where.
bool broadcasts(Op op) {
  return op == Op::where
#define BINARY_KERNEL(name, Functor, cuda, cpu) || op == Op::name
#include "tensor/ops.def"
      ;
}

bool applies(const OpInfo& info, Sample kind) {
  if (kind == Sample::nonfinite) return info.no_nonfinite.empty();
  if (kind == Sample::broadcast) return broadcasts(info.op) && info.inputs.size() >= 2;
  return true;
}

// The entry's inputs (the leaves a gradient is taken for): float64 values drawn on the host in
// their domain, as `dtype` on `dev`.
std::vector<Tensor> sample(const OpInfo& info, Device dev, DType dtype, bool requires_grad, Sample kind = Sample::finite) {
  std::vector<Tensor> in;
  for (size_t k = 0; k < info.inputs.size(); ++k) {
    const Input& i = info.inputs[k];
    Shape shape = i.shape;
    if (kind == Sample::broadcast) shape[k % shape.size()] = 1;
    Tensor t = rand(shape, kFloat64) * (i.hi - i.lo) + i.lo;
    if (kind == Sample::nonfinite) {
      std::vector<double> v = to_vector<double>(t);
      const size_t n = v.size();
      v[k % n] = NAN;
      v[(n / 2 + k) % n] = INFINITY;
      v[(n - 1 - k % n)] = -INFINITY;
      t = from_vector<double>(v).reshape(shape);
    }
    t = t.to(dtype).to(dev);
    in.push_back(requires_grad ? t.detach().requires_grad_() : t);
  }
  return in;
}

// The op as the sample hands it its inputs: the strided sample as non-contiguous views of the
// leaves (differentiable, so the gradient reaches the leaves), every other as they are.
std::function<Tensor(In)> op_on(const OpInfo& info, Sample kind) {
  if (kind != Sample::strided) return info.f;
  return [f = info.f](In in) {
    std::vector<Tensor> views;
    for (const Tensor& t : in)
      views.push_back(t.dim() >= 2 ? transpose(contiguous(transpose(t, -2, -1)), -2, -1) : t.dim() == 1 ? select(stack({t, t}, 1), 1, 0) : t);
    return f(views);
  };
}

// Element-wise |a − b| <= tol (or tol_at(a, b), per element), where NaN matches only NaN and an
// infinity only itself; names the first offender.
void check_close(const std::string& what, const std::vector<double>& a, const std::vector<double>& b, const std::function<double(double, double)>& tol_at) {
  REQUIRE_MESSAGE(a.size() == b.size(), what << ": " << a.size() << " values against " << b.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])) || std::abs(a[i] - b[i]) <= tol_at(a[i], b[i])) && bad++ == 0) first = i;
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << a.size() << " values differ by more than the tolerance (" << (bad ? tol_at(a[first], b[first]) : 0)
                               << " at value " << first << "): " << (bad ? a[first] : 0) << " against " << (bad ? b[first] : 0));
}
void check_close(const std::string& what, const std::vector<double>& a, const std::vector<double>& b, double tol) {
  check_close(what, a, b, [tol](double, double) { return tol; });
}

// Half the gap between a 16-bit value of magnitude about |v| and its neighbour: the most a
// single rounding to the dtype moves v (below the smallest normal, the subnormals' fixed gap).
double half_ulp(DType dtype, double v) {
  const int min_exponent = dtype == kFloat16 ? -14 : -126;
  return std::ldexp(eps(dtype), std::max(std::ilogb(std::abs(v)), min_exponent)) / 2;
}

// "Compute in float32, round once", checked on the CPU: a 16-bit output against the same op run
// on its inputs widened to float32 (exactly), rounded once to the dtype. An op that does this is
// bit for bit equal to it (NaN matching NaN). Two things loosen that, each by a derived bound:
//   - a float32 sum of R terms (sum, matmul, softmax's row) whose order, or float64 accumulator
//     in the float32 run, differs: its error is at most (R − 1)·eps(float32)·Σ|terms| <=
//     R²·eps(float32)·scale, which may move the rounding by a half ulp of the dtype;
//   - a composite that rounds to the dtype in between (`rounded` times: linear's product before
//     its bias, silu's σ): at most one ulp of the dtype each, eps(dtype)·scale.
//   |y − round(y32)| <= half_ulp(y) + R²·eps(float32)·scale + rounded·eps(dtype)·scale
// With neither (R = 1 and rounded = 0) the bound is 0: the bits must agree.
void check_rounded_once(const std::string& what, const OpInfo& info, Sample kind, DType dtype, const std::vector<Tensor>& in, const Tensor& out, double scale) {
  std::vector<Tensor> in32;
  for (const Tensor& t : in) in32.push_back(t.to(kFloat32));
  const Tensor y32 = op_on(info, kind)(in32);
  const std::vector<double> y = to_vector<double>(out), once = to_vector<double>(y32.is_floating_point() ? y32.to(dtype) : y32),
                            wide = to_vector<double>(y32);
  REQUIRE_MESSAGE(y.size() == once.size(), what << ": " << y.size() << " values against " << once.size());
  const bool exact = info.R == 1 && info.rounded == 0;
  const double loose = double(info.R * info.R) * eps(kFloat32) * scale + info.rounded * eps(dtype) * scale;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const bool same = (y[i] == once[i] && std::signbit(y[i]) == std::signbit(once[i])) || (std::isnan(y[i]) && std::isnan(once[i]));
    const bool ok = same || (!exact && std::abs(y[i] - wide[i]) <= half_ulp(dtype, std::max(std::abs(y[i]), std::abs(wide[i]))) + loose);
    if (!ok && bad++ == 0) first = i;
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << y.size() << " values are not float32's rounded once"
                               << std::string(exact ? " (bit for bit)" : "") << "; value " << first << ": " << (bad ? y[first] : 0) << " against "
                               << (bad ? once[first] : 0) << " (float32: " << (bad ? wide[first] : 0) << ")");
}

// The names of each op's scalar arguments, from tensor/ops.def: leaky_relu's {"negative_slope"}.
std::vector<std::string> arg_names(Op op) {
#define ARG(type, name, ...) #name,
#define UNARY(name, cuda, cpu, args, ...) if (op == Op::name) return {AMPGRAD_ARGS args};
#include "tensor/ops.def"
  return {};
}

// Each entry once per sample of its scalar arguments, the sample bound into its lambdas and named
// in its variant: "leaky_relu (negative_slope=0.01)".
std::vector<OpInfo> with_each_args(const std::vector<OpInfo>& infos) {
  std::vector<OpInfo> out;
  for (const OpInfo& info : infos) {
    if (info.args.empty()) out.push_back(info);
    for (const Args& a : info.args) {
      OpInfo e = info;
      std::ostringstream named;
      const std::vector<std::string> names = arg_names(info.op);
      for (size_t k = 0; k < a.size(); ++k) named << (k ? ", " : "(") << (k < names.size() ? names[k] : "?") << "=" << a[k];
      e.variant += (e.variant.empty() ? "" : " ") + named.str() + ")";
      e.f = [f = info.f, a](In in) { return f(in, a); };
      e.reference = [r = info.reference, a](const Values& v) { return r(v, a); };
      e.args = {a};
      out.push_back(e);
    }
  }
  return out;
}

const std::vector<OpInfo> kInfos = with_each_args(op_infos());

}  // namespace

// Each entry on each of its samples. On the NaN/inf one the output must be NaN exactly where the
// reference's is and ±inf where it is (NaN is never hidden; every entry takes this sample unless
// it says why not, which the completeness test below holds it to).
DEVICE_TEST_CASE("OpInfo: forward against the float64 reference, in every dtype, on each sample: finite, NaN/inf, strided, broadcast") {
  manual_seed(1);
  for (const OpInfo& info : kInfos)
    for (Sample kind : {Sample::finite, Sample::nonfinite, Sample::strided, Sample::broadcast})
      for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
        if (!applies(info, kind)) continue;
        const std::string what = info.name() + " in " + dtype_name(dtype) + sample_name(kind);
        std::vector<Tensor> in = sample(info, dev, dtype, false, kind);
        Values values;  // the inputs as rounded to the dtype, broadcast: the reference sees what the op sees
        double scale = 0;
        for (size_t k = 0; k < in.size(); ++k) {
          values.push_back(to_vector<double>(expand(in[k], info.inputs[k].shape)));
          scale = std::max(scale, max_abs(values.back()));
        }
        const Tensor out = op_on(info, kind)(in);
        const std::vector<double> ref = info.reference(values);
        CHECK_MESSAGE((!out.is_floating_point() || out.dtype() == dtype), what << ": gave " << std::string(dtype_name(out.dtype())));
        scale = std::max(scale, max_abs(ref));
        const double tol = out.is_floating_point() ? tolerance(dtype, info.steps, info.R, scale) : 0.0;  // bool, int64: exact
        check_close(what, to_vector<double>(out), ref, tol);
        if (dev.is_cpu() && is_half(dtype)) check_rounded_once(what, info, kind, dtype, in, out, scale);
      }
}

DEVICE_TEST_CASE("OpInfo: gradcheck and gradgradcheck in float64, on the finite, strided and broadcast samples") {
  manual_seed(2);
  for (const OpInfo& info : kInfos)
    for (Sample kind : {Sample::finite, Sample::strided, Sample::broadcast}) {
      if (!applies(info, kind)) continue;
      INFO(std::string(info.name() + sample_name(kind)));
      std::vector<Tensor> in = sample(info, dev, kFloat64, true, kind);
      if (!info.differentiable) {
        CHECK_FALSE(op_on(info, kind)(in).requires_grad());
        continue;
      }
      CHECK(gradcheck(op_on(info, kind), in));
      CHECK(gradgradcheck(op_on(info, kind), in));
    }
}

// The CPU is the reference here; both compute in float32 and round on store, so they differ
// only where their float32 intermediates do (libm against CUDA's, sums in another order). A
// 16-bit forward is held per element (tolerance.h's cpu_cuda_half_tolerance), the rest to the
// chain bound of tolerance().
TEST_CASE("OpInfo: the CPU and CUDA agree in float32, float16 and bfloat16, forward and backward, on the finite, strided and broadcast samples") {
  SKIP_WITHOUT_GPU();
  manual_seed(3);
  for (const OpInfo& info : kInfos)
    for (Sample kind : {Sample::finite, Sample::strided, Sample::broadcast})
      for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
        if (!applies(info, kind)) continue;
        const std::string what = info.name() + " in " + dtype_name(dtype) + sample_name(kind);
        const auto f = op_on(info, kind);
        std::vector<Tensor> on_cpu = sample(info, Device::cpu(), dtype, info.differentiable, kind), on_gpu;
        double scale = 0;
        for (const Tensor& t : on_cpu) {
          on_gpu.push_back(info.differentiable ? t.detach().to(Device::cuda()).requires_grad_() : t.to(Device::cuda()));
          scale = std::max(scale, max_abs(to_vector<double>(t)));
        }
        Tensor y_cpu = f(on_cpu), y_gpu = f(on_gpu);
        const std::vector<double> a = to_vector<double>(y_cpu), b = to_vector<double>(y_gpu);
        scale = std::max(scale, max_abs(a));
        const double tol = y_cpu.is_floating_point() ? tolerance(dtype, info.steps, info.R, scale) : 0.0;
        if (is_half(dtype) && y_cpu.is_floating_point())  // held per element: tolerance.h's cpu_cuda_half_tolerance
          check_close(what + ", forward", a, b, [&](double x, double y) { return cpu_cuda_half_tolerance(dtype, info.rounded, info.R, std::max(std::abs(x), std::abs(y)), scale); });
        else
          check_close(what + ", forward", a, b, tol);
        if (!info.differentiable) continue;
        Tensor v = rand(y_cpu.shape(), dtype);  // the cotangent, |v| < 1
        y_cpu.backward(v);
        y_gpu.backward(v.to(Device::cuda()));
        for (size_t k = 0; k < on_cpu.size(); ++k)
          check_close(what + ", gradient of input " + std::to_string(k), to_vector<double>(on_cpu[k].grad()), to_vector<double>(on_gpu[k].grad()), tol);
      }
}

// Under autocast each op runs as its row says (amp/policy.h): lower_precision in the autocast
// dtype, fp32 in float32, promote in the widest floating dtype of its inputs, input_dtype as
// without autocast; banned refuses. Inputs: all float32, all in the autocast dtype, and mixed.
DEVICE_TEST_CASE("OpInfo: the output dtype under autocast follows the policy table") {
  manual_seed(4);
  for (const OpInfo& info : kInfos)
    for (DType ac : {kFloat16, kBFloat16})
      for (int mix = 0; mix < 3; ++mix) {
        std::vector<Tensor> in = sample(info, dev, kFloat32, false);
        for (size_t k = 0; k < in.size(); ++k)
          if (mix == 1 || (mix == 2 && k == 0)) in[k] = in[k].to(ac);
        const CastPolicy cast = amp::cast_policy(info.op, dev.type);
        const std::string what = info.name() + " under " + dtype_name(ac) + " autocast, inputs " + (mix == 0 ? "float32" : mix == 1 ? "16-bit" : "mixed");
        DType widest = in[0].dtype();
        for (const Tensor& t : in) widest = promote_types(widest, t.dtype());
        const DType plain = cast == CastPolicy::input_dtype ? info.f(in).dtype() : kFloat64;  // the dtype without autocast
        amp::autocast on(dev.type, ac);
        if (cast == CastPolicy::banned) {
          CHECK_MESSAGE(error_of([&] { (void)info.f(in); }).find(std::string(amp::policy_row(info.op).name) + " is unsafe to autocast") == 0, what);
          continue;
        }
        const DType expected = cast == CastPolicy::lower_precision ? ac : cast == CastPolicy::fp32 ? kFloat32 : cast == CastPolicy::promote ? widest : plain;
        const DType got = info.f(in).dtype();
        CHECK_MESSAGE(got == expected, what << " (" << amp::policy_name(cast) << "): gave " << dtype_name(got) << ", expected " << dtype_name(expected));
      }
}

TEST_CASE("every op of tensor/ops.def has an OpInfo entry or is tested by hand elsewhere, not both") {
  const std::vector<ByHand> hand = by_hand();
  for (size_t i = 0; i < amp::kNumOps; ++i) {
    const Op op = Op(i);
    const auto entries = std::count_if(kInfos.begin(), kInfos.end(), [&](const OpInfo& e) { return e.op == op; });
    const auto by = std::count_if(hand.begin(), hand.end(), [&](const ByHand& h) { return h.op == op; });
    CHECK_MESSAGE(((entries > 0) != (by > 0) && by <= 1), amp::policy_row(op).name << ": " << entries << " OpInfo entries, " << by << " by hand");
  }
}

// An op with scalar arguments is tested at two samples of them at least, every entry passing all of them.
TEST_CASE("every op of tensor/ops.def with scalar arguments has OpInfo entries at two samples of them at least") {
  for (size_t i = 0; i < amp::kNumOps; ++i) {
    const Op op = Op(i);
    const size_t n = arg_names(op).size();
    if (n == 0) continue;
    std::vector<Args> samples;
    for (const OpInfo& e : kInfos)
      if (e.op == op) {
        CHECK_MESSAGE((e.args.size() == 1 && e.args[0].size() == n), e.name() << ": has " << n << " scalar arguments, but the entry gives no sample of them");
        samples.insert(samples.end(), e.args.begin(), e.args.end());
      }
    std::sort(samples.begin(), samples.end());
    CHECK_MESSAGE(std::unique(samples.begin(), samples.end()) - samples.begin() >= 2,
                  amp::policy_row(op).name << ": has scalar arguments, tested at fewer than two samples of them");
  }
}

// What ops.def's line gives an elementwise op beyond the op itself: its name in nn::functional and,
// for an activation (a line naming a Module), that nn::Module, each running the op itself. A name
// the expansion lost fails to compile, naming it; a Module running another op fails here.
// An op's scalar argument of `type` at a sample value, and a Module made with such values.
template <class T> T sample_arg() { return T(0.25); }
template <class M, class... V> Tensor module_forward(const Tensor& x, V... values) { return M(values...).forward(x); }

TEST_CASE("every elementwise op of tensor/ops.def is in nn::functional, and every activation is an nn::Module running it") {
  const Tensor x = from_vector<double>({-2, -0.5, 0, 0.5, 2}), y = from_vector<double>({1, -0.5, 3, 0.25, -2});
  auto same = [](const Tensor& a, const Tensor& b) {  // NaN (log of −2) matching NaN
    const std::vector<double> u = to_vector<double>(a), v = to_vector<double>(b);
    return std::equal(u.begin(), u.end(), v.begin(), v.end(), [](double p, double q) { return p == q || (std::isnan(p) && std::isnan(q)); });
  };
#define ARG(type, name, ...) , sample_arg<type>()
#define UNARY(name, cuda, cpu, args, ...)                                                                                             \
  CHECK_MESSAGE(same(nn::functional::name(x AMPGRAD_ARGS args), ampgrad::name(x AMPGRAD_ARGS args)), "nn::functional::" #name " is not " #name); \
  __VA_OPT__(CHECK_MESSAGE(same(module_forward<nn::__VA_ARGS__>(x AMPGRAD_ARGS args), ampgrad::name(x AMPGRAD_ARGS args)), "nn::" #__VA_ARGS__ " does not run " #name);)
#define BINARY_KERNEL(name, Functor, cuda, cpu) \
  CHECK_MESSAGE(same(nn::functional::name(x, y), ampgrad::name(x, y)), "nn::functional::" #name " is not " #name);
#include "tensor/ops.def"
  // printed as PyTorch prints them, each argument as given or its default
  auto printed = [](const auto& m) { std::ostringstream os; os << m; return os.str(); };
  CHECK(printed(nn::LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)");
  CHECK(printed(nn::LeakyReLU()) == "LeakyReLU(negative_slope=0.01)");
  CHECK(printed(nn::ReLU()) == "ReLU()");
}

// The NaN/inf sample is generated for every entry; one that opts out must say why in a sentence
// (a word or two is no reason), and so must an op tested by hand, naming where its NaN is tested.
TEST_CASE("every op takes the NaN/inf sample or says why not") {
  auto is_reason = [](const std::string& why) { return std::count(why.begin(), why.end(), ' ') >= 4; };
  for (const OpInfo& info : kInfos)
    CHECK_MESSAGE((info.no_nonfinite.empty() || is_reason(info.no_nonfinite)), info.name() << ": opts out of the NaN/inf sample without a reason");
  for (const ByHand& h : by_hand())
    CHECK_MESSAGE(is_reason(h.nonfinite), amp::policy_row(h.op).name << ": tested by hand, without saying where NaN and inf are tested");
}

DEVICE_TEST_CASE("every op of tensor/ops.def consults the policy table") {
  manual_seed(5);
  const std::vector<ByHand> hand = by_hand();
  for (size_t i = 0; i < amp::kNumOps; ++i) {
    const Op op = Op(i);
    amp::AutocastLog trace;
    amp::autocast on(dev.type, kFloat16);
    auto info = std::find_if(kInfos.begin(), kInfos.end(), [&](const OpInfo& e) { return e.op == op; });
    auto h = std::find_if(hand.begin(), hand.end(), [&](const ByHand& b) { return b.op == op; });
    (void)error_of([&] {  // a banned op consults, then refuses
      if (info != kInfos.end()) (void)info->f(sample(*info, dev, kFloat32, false));
      else if (h != hand.end()) h->call(dev);
    });
    const auto& events = trace.calls();
    CHECK_MESSAGE(std::any_of(events.begin(), events.end(), [&](const AutocastCall& e) { return std::string(e.op) == amp::policy_row(op).name; }),
                  "op never consulted the table: " << amp::policy_row(op).name);
  }
}

// The NaN/inf sample of the ops by_hand() tests elsewhere, each against what PyTorch gives: a NaN
// or inf reaches every output whose inputs hold it, and no other.
DEVICE_TEST_CASE("ops tested by hand keep NaN and inf where PyTorch does") {
  auto values = [](const Tensor& t) { return to_vector<double>(t); };
  auto nan_at = [](const std::vector<double>& v) {
    std::vector<bool> at;
    for (double x : v) at.push_back(std::isnan(x));
    return at;
  };
  // (2, 3): a NaN at (0, 1), inf at (1, 2)
  const Tensor x = from_vector<double>({1, NAN, 3, -4, 5, INFINITY}).reshape({2, 3}).to(dev);
  for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    INFO(std::string(dtype_name(dtype)));
    const Tensor xd = x.to(dtype);
    const std::vector<double> p = values(permute(xd, {1, 0}));
    CHECK((std::isnan(p[2]) && p[5] == INFINITY));  // (0, 1) moved to (1, 0), (1, 2) to (2, 1)
    for (DType to_dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      const std::vector<double> v = values(to(xd, to_dtype));
      CHECK((std::isnan(v[1]) && v[5] == INFINITY && v[0] == 1));
    }
    // layer_norm: the row holding the NaN is NaN, and so is the one holding inf (inf − inf); in
    // (2, 3) again with the NaN moved, a finite row stays finite
    CHECK(nan_at(values(layer_norm(xd, {3}))) == std::vector<bool>(6, true));
    const Tensor one_bad = from_vector<double>({1, 2, 3, -4, NAN, 6}).reshape({2, 3}).to(dev).to(dtype);
    CHECK(nan_at(values(layer_norm(one_bad, {3}))) == std::vector<bool>{false, false, false, true, true, true});
    // batch_norm over (N, C) = (2, 3): channel 1 holds the NaN, channel 2 the inf (its variance is inf − inf)
    CHECK(nan_at(values(batch_norm(xd, {}, {}, {}, {}, true))) == std::vector<bool>{false, true, true, false, true, true});
    // group_norm, 3 groups of one channel of (1, 3, 2): the NaN's group only
    const Tensor g = from_vector<double>({1, 2, NAN, 4, 5, 6}).reshape({1, 3, 2}).to(dev).to(dtype);
    CHECK(nan_at(values(group_norm(g, 3))) == std::vector<bool>{false, false, true, true, false, false});
    // dropout multiplies by its mask, so a dropped NaN stays NaN (NaN · 0), as in PyTorch
    CHECK(nan_at(values(dropout(one_bad, 0.5, true))) == std::vector<bool>{false, false, false, false, true, false});
    // embedding: the rows taken from the NaN's row
    const std::vector<double> e = values(embedding(from_vector<int64_t>({1, 0, 1}).to(dev), xd));
    CHECK(nan_at(e) == std::vector<bool>{false, false, false, false, true, false, false, false, false});
    // max_pool2d over (1, 1, 2, 4) in 2×2 windows: a NaN wins its window, then inf
    const Tensor img = from_vector<double>({1, NAN, 3, INFINITY, 5, 6, 7, 8}).reshape({1, 1, 2, 4}).to(dev).to(dtype);
    const std::vector<double> pooled = values(max_pool2d(img, 2));
    CHECK((std::isnan(pooled[0]) && pooled[1] == INFINITY));
    // conv2d with a 1×2 kernel of ones over (1, 1, 1, 4): the windows holding the NaN are NaN, the
    // one holding inf is inf (and −inf + inf would be NaN, as PyTorch's)
    const Tensor row = from_vector<double>({1, NAN, 3, INFINITY}).reshape({1, 1, 1, 4}).to(dev).to(dtype);
    const std::vector<double> c = values(conv2d(row, ones({1, 1, 1, 2}).to(dtype).to(dev)));
    CHECK((std::isnan(c[0]) && std::isnan(c[1]) && c[2] == INFINITY));
  }
}

// relu is PyTorch's clamp_min(x, 0), its backward threshold_backward(g, y, 0) = (y <= 0 ? 0 : g):
// a NaN input gives NaN and passes its gradient on. abs's backward is g·sgn(x), sgn(NaN) = sgn(0) =
// 0, so a NaN gradient at 0 stays NaN. The exact values PyTorch gives, in every dtype.
DEVICE_TEST_CASE("relu and abs: NaN passes forward, and backward gives PyTorch's gradient exactly") {
  for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    INFO(std::string(dtype_name(dtype)));
    auto tensor = [&](std::vector<double> v) { return from_vector<double>(v).to(dtype).to(dev); };
    auto same = [](const Tensor& t, std::vector<double> want) {
      const std::vector<double> got = to_vector<double>(t);
      for (size_t i = 0; i < want.size(); ++i)
        if (!(std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i])) return false;
      return got.size() == want.size();
    };
    Tensor x = tensor({NAN, -1, 0, 2, INFINITY, -INFINITY, -3}).requires_grad_();
    Tensor y = relu(x);
    CHECK(same(y, {NAN, 0, 0, 2, INFINITY, 0, 0}));
    y.backward(tensor({0.5, 0.25, 3, 0.75, 1.5, 2, NAN}));
    CHECK(same(x.grad(), {0.5, 0, 0, 0.75, 1.5, 0, 0}));  // the NaN's gradient passes; y <= 0 gives 0, even for a NaN g
    Tensor a = tensor({NAN, -1, 0, 2}).requires_grad_();
    abs(a).backward(tensor({0.5, 0.25, NAN, 0.75}));
    CHECK(same(a.grad(), {0, -0.25, NAN, 0.75}));
  }
}

// pow where the sign of a zero, an infinity or a NaN decides, against PyTorch (torch 1.13,
// float64): x^±0.5 go through sqrt as PyTorch's do, so -0 keeps its sign through them, forward
// and backward, and -inf becomes NaN. The values are exact in every dtype.
DEVICE_TEST_CASE("pow at ±0, ±inf and NaN: PyTorch's values and gradients, the sign of zero included") {
  const std::vector<double> x = {-0.0, 0.0, -INFINITY, INFINITY, NAN, -2};
  const std::vector<std::tuple<double, std::vector<double>, std::vector<double>>> cases = {
      {0.5, {-0.0, 0.0, NAN, INFINITY, NAN, NAN}, {-INFINITY, INFINITY, NAN, 0.0, NAN, NAN}},
      {-0.5, {-INFINITY, INFINITY, NAN, 0.0, NAN, NAN}, {-INFINITY, -INFINITY, -0.0, -0.0, NAN, NAN}},
      {2, {0.0, 0.0, INFINITY, INFINITY, NAN, 4}, {-0.0, 0.0, -INFINITY, INFINITY, NAN, -4}},
      {3, {-0.0, 0.0, -INFINITY, INFINITY, NAN, -8}, {0.0, 0.0, INFINITY, INFINITY, NAN, 12}},
  };
  auto bits_equal = [](const std::vector<double>& got, const std::vector<double>& want) {
    for (size_t i = 0; i < want.size(); ++i)
      if (!(std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i]))) return false;
    return got.size() == want.size();
  };
  for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16})
    for (const auto& c : cases) {
      const double e = std::get<0>(c);  // (clang before 16 cannot capture a structured binding)
      INFO(std::string(dtype_name(dtype)) << ", exponent " << e);
      Tensor t = from_vector<double>(x).to(dtype).to(dev).requires_grad_();
      Tensor y = pow(t, e);
      y.backward(ones_like(y));
      CHECK(bits_equal(to_vector<double>(y), std::get<1>(c)));
      CHECK(bits_equal(to_vector<double>(t.grad()), std::get<2>(c)));
    }
}
