// elementwise.cpp — arithmetic, activations, where and comparisons, each as
//   1. cast_inputs (policy row)  2. kernel  3. record the backward, written right below.
// Mixed dtypes promote (PyTorch's rule) through differentiable casts before the kernel, so
// each gradient comes back in its input's dtype; broadcast gradients are summed back to the
// input's shape by the engine.
#include <cmath>
#include <numbers>

#include "autograd/op_support.h"

namespace ampgrad {
using kernels::Binary;
using kernels::Unary;

// PyTorch's result_type for two tensors: a 0-d tensor beside a dimensioned one counts only when
// it is of a higher category (bool < integer < floating), so ones({2}, f16) + scalar_tensor(1.0)
// stays float16 while arange(2) + scalar_tensor(0.5) becomes float32.
static DType result_type(const Tensor& a, const Tensor& b) {
  if ((a.dim() == 0) == (b.dim() == 0)) return promote_types(a.dtype(), b.dtype());
  const DType dim = a.dim() == 0 ? b.dtype() : a.dtype(), zero = a.dim() == 0 ? a.dtype() : b.dtype();
  auto category = [](DType t) { return ampgrad::is_floating_point(t) ? 2 : t == kBool ? 0 : 1; };
  return category(zero) > category(dim) ? promote_types(dim, zero) : dim;
}

// A binary op's operands: autocast (the op's policy row), then promoted to the result type.
static std::pair<Tensor, Tensor> cast_and_promote(Op op, const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = cast_inputs(op, a_in, b_in);
  DType t = result_type(a, b);
  return {autograd::cast(a, t), autograd::cast(b, t)};
}

Tensor scalar_like(Scalar s, const Tensor& like) {
  const DType t = like.is_floating_point() ? like.dtype() : s.integral ? kInt64 : kFloat32;
  return scalar_tensor(s.value, TensorOptions(t).device(like.device()));
}

// ---- binary arithmetic: d(a+b) = (g, g); d(a-b) = (g, -g); d(ab) = (g b, g a); d(a/b) = (g/b, -g a/b²)

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = cast_and_promote(Op::add, a_in, b_in);
  Tensor out = kernels::binary(Binary::add, a, b);
  record("add", out, {a, b}, [](const Tensor& g, const Needs&) { return grads(g, g); });
  return out;
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = cast_and_promote(Op::sub, a_in, b_in);
  Tensor out = kernels::binary(Binary::sub, a, b);
  record("sub", out, {a, b}, [](const Tensor& g, const Needs& need) { return grads(g, need[1] ? -g : Tensor()); });
  return out;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = cast_and_promote(Op::mul, a_in, b_in);
  Tensor out = kernels::binary(Binary::mul, a, b);
  record("mul", out, {a, b}, [a = save_if(b.requires_grad(), a), b = save_if(a.requires_grad(), b)](const Tensor& g, const Needs& need) {
    return grads(need[0] ? g * b : Tensor(), need[1] ? g * a : Tensor());
  });
  return out;
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = cast_and_promote(Op::div, a_in, b_in);
  if (!a.is_floating_point()) { a = autograd::cast(a, kFloat32); b = autograd::cast(b, kFloat32); }  // true division
  Tensor out = kernels::binary(Binary::div, a, b);
  record("div", out, {a, b}, [b = Saved(b), out = save_if(b.requires_grad(), out)](const Tensor& g, const Needs& need) {
    Tensor ga = g / b;
    return grads(ga, need[1] ? -ga * out : Tensor());  // -g a / b² = -(g / b) * (a / b)
  });
  return out;
}

// ---- unary ops: y = f(x); each saves the one tensor its derivative reads (input, output or
// none), and backward(g, saved) gives dL/dx

enum class Save { input, output, nothing };

// exp, log, sqrt, tanh and sigmoid of an integer or bool tensor are float32, as in PyTorch.
static Tensor as_float(const Tensor& x) { return x.is_floating_point() ? x : autograd::cast(x, kFloat32); }

template <class Backward>
static Tensor unary_op(Op op, Unary k, const Tensor& x_in, Save what, Backward backward, const kernels::ScalarArgs& scalars = {}) {
  auto [x] = cast_inputs(op, x_in);
  Tensor out = kernels::unary(k, x, scalars);
  record(kernels::unary_name(k), out, {x}, [saved = Saved(what == Save::input ? x : what == Save::output ? out : Tensor()), backward](const Tensor& g, const Needs&) {
    return grads(backward(g, saved));
  });
  return out;
}

Tensor neg(const Tensor& x) {
  return unary_op(Op::neg, Unary::neg, x, Save::nothing, [](const Tensor& g, const Tensor&) { return -g; });
}
Tensor exp(const Tensor& x) {  // d/dx e^x = e^x = y
  return unary_op(Op::exp, Unary::exp, as_float(x), Save::output, [](const Tensor& g, const Tensor& y) { return g * y; });
}
Tensor log(const Tensor& x) {  // d/dx ln x = 1/x
  return unary_op(Op::log, Unary::log, as_float(x), Save::input, [](const Tensor& g, const Tensor& x) { return g / x; });
}
Tensor log1p(const Tensor& x) {  // d/dx ln(1 + x) = 1/(1 + x)
  return unary_op(Op::log1p, Unary::log1p, as_float(x), Save::input, [](const Tensor& g, const Tensor& x) { return g / (x + 1.0); });
}
Tensor sqrt(const Tensor& x) {  // d/dx √x = 1 / (2√x) = 1 / (2y)
  return unary_op(Op::sqrt, Unary::sqrt, as_float(x), Save::output, [](const Tensor& g, const Tensor& y) { return g / (y * 2.0); });
}
Tensor abs(const Tensor& x) {  // d/dx |x| = sign(x), 0 at 0 (and at NaN) as in PyTorch
  return unary_op(Op::abs, Unary::abs, x, Save::input, [](const Tensor& g, const Tensor& x) {
    Tensor zero = scalar_like(0, g);  // g·0, not 0, where the sign is 0: PyTorch's g·sgn(x) keeps a NaN g
    return where(gt(x, zero), g, where(lt(x, zero), -g, g * 0.0));
  });
}
Tensor tanh(const Tensor& x) {  // d/dx tanh x = 1 - y²
  return unary_op(Op::tanh, Unary::tanh, as_float(x), Save::output, [](const Tensor& g, const Tensor& y) { return g * (1.0 - y * y); });
}
Tensor sigmoid(const Tensor& x) {  // d/dx σ(x) = y (1 - y)
  return unary_op(Op::sigmoid, Unary::sigmoid, as_float(x), Save::output, [](const Tensor& g, const Tensor& y) { return g * y * (1.0 - y); });
}
// The backwards of relu and gelu are fused kernels, recorded as ops of their own so that a
// create_graph backward can differentiate them again.
//   relu_backward(g, y) = (y <= 0 ? 0 : g), PyTorch's threshold_backward: linear in g, flat in y (almost everywhere)
static Tensor relu_backward(const Tensor& g, const Tensor& y) {
  Tensor out = kernels::binary(Binary::relu_backward, g, y);
  record("relu_backward", out, {g}, [y = Saved(y)](const Tensor& gg, const Needs&) { return grads(relu_backward(gg, y)); });
  return out;
}
//   gelu_backward(g, x) = g·gelu'(x), and gelu''(x) = φ(x)(2 − x²), φ(x) = e^(−x²/2) / √(2π)
static Tensor gelu_backward(const Tensor& g, const Tensor& x) {
  Tensor out = kernels::binary(Binary::gelu_backward, g, x);
  record("gelu_backward", out, {g, x}, [g = save_if(x.requires_grad(), g), x = Saved(x)](const Tensor& gg, const Needs& need) {
    auto second = [](const Tensor& x) { Tensor x2 = x * x; return exp(x2 * -0.5) * (2.0 - x2) * (1 / std::sqrt(2 * std::numbers::pi)); };
    return grads(need[0] ? gelu_backward(gg, x) : Tensor(), need[1] ? gg * g * second(x) : Tensor());
  });
  return out;
}

// 1 where x > 0 (0 at 0, as PyTorch), which is where the output is > 0 or NaN: saving the output, as
// PyTorch does, keeps nothing of ReLU's own, for the next layer saves that tensor anyway.
Tensor relu(const Tensor& x) { return unary_op(Op::relu, Unary::relu, x, Save::output, relu_backward); }
Tensor gelu(const Tensor& x) { return unary_op(Op::gelu, Unary::gelu, x, Save::input, gelu_backward); }  // Φ(x) + x φ(x): tensor/scalar_math.h

// silu(x) = x·σ(x), PyTorch's nn.functional.silu: a composite of two kernels, no kernel of its
// own. Its derivative, d/dx x·σ(x) = σ(x)(1 + x(1 − σ(x))), is written here, so backward keeps x alone.
Tensor silu(const Tensor& x_in) {
  auto [x] = cast_inputs(Op::silu, as_float(x_in));
  Tensor out = kernels::binary(Binary::mul, x, kernels::unary(Unary::sigmoid, x, {}));
  record("silu", out, {x}, [x = Saved(x)](const Tensor& g, const Needs&) {
    Tensor s = sigmoid(x);
    return grads(g * s * (1.0 + x * (1.0 - s)));
  });
  return out;
}

// ---- unary ops with scalar arguments: the kernel's functor holds them (tensor/elementwise_ops.h)

// leaky_relu(x) = x > 0 ? x : x·negative_slope; its derivative is 1 where x > 0, the slope
// elsewhere (a NaN x included, as PyTorch's), applied to g in float32 (Tensor * Scalar).
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return unary_op(Op::leaky_relu, Unary::leaky_relu, x, Save::input, [negative_slope](const Tensor& g, const Tensor& x) {
    return where(gt(x, scalar_like(0, x)), g, g * negative_slope);
  }, {negative_slope});
}

Tensor pow(const Tensor& x, double p) {  // d/dx x^p = p x^(p-1)
  return unary_op(Op::pow, Unary::pow, x, Save::input, [p](const Tensor& g, const Tensor& x) {
    if (p == 0) return zeros_like(g);  // x^0 = 1 everywhere, 0^-1 must not make a NaN
    return p == 2 ? g * x * 2.0 : g * pow(x, p - 1) * p;
  }, {p});
}

// A bound left out is no bound: ∓inf to the kernel, and no test in the gradient (a NaN x passes its
// gradient where it meets no bound, as PyTorch's clamp_backward).
Tensor clamp(const Tensor& x_in, std::optional<Scalar> min, std::optional<Scalar> max) {
  // a bound written as a float makes an integer x float32 (PyTorch's result_type): clamp(i, 2.0)
  auto is_float = [](const std::optional<Scalar>& b) { return b && !b->integral; };
  const Tensor x = x_in.is_floating_point() || !(is_float(min) || is_float(max)) ? x_in : as_float(x_in);
  const std::optional<double> lo = min ? std::optional(min->value) : std::nullopt, hi = max ? std::optional(max->value) : std::nullopt;
  return unary_op(Op::clamp, Unary::clamp, x, Save::input, [lo, hi](const Tensor& g, const Tensor& x) {
    Tensor zero = scalar_like(0, g), gx = g;  // gradient passes where lo <= x <= hi
    if (lo) gx = where(ge(x, scalar_like(*lo, x)), gx, zero);
    if (hi) gx = where(le(x, scalar_like(*hi, x)), gx, zero);
    return gx;
  }, {lo.value_or(-INFINITY), hi.value_or(INFINITY)});
}

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = cast_and_promote(Op::where, a_in, b_in);
  Tensor out = kernels::where(cond, a, b);
  record("where", out, {a, b}, [cond = Saved(cond)](const Tensor& g, const Needs& need) {
    Tensor zero = scalar_like(0, g);
    return grads(need[0] ? where(cond, g, zero) : Tensor(), need[1] ? where(cond, zero, g) : Tensor());
  });
  return out;
}

// ---- comparisons: bool results, no gradient
static Tensor compare(Op op, Binary k, const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = cast_and_promote(op, a_in, b_in);
  return kernels::binary(k, a, b);
}
// eq, ne, lt, le, gt, ge: one line each in tensor/ops.def
#define COMPARE_KERNEL(name, Functor, cuda, cpu) Tensor name(const Tensor& a, const Tensor& b) { return compare(Op::name, Binary::name, a, b); }
#include "tensor/ops.def"

// ---- operators
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, scalar_like(b, a)); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, scalar_like(b, a)); }
// A number multiplies or divides a float16/bfloat16 tensor in float32, and the result is rounded
// once, as in PyTorch: first rounded to float16, 1e-8 would be 0 and 70000 inf.
template <class F> static Tensor in_float32(const Tensor& x, F op) { return is_half(x.dtype()) ? to(op(to(x, kFloat32)), x.dtype()) : op(x); }
Tensor operator*(const Tensor& a, Scalar b) { return in_float32(a, [&](const Tensor& x) { return mul(x, scalar_like(b, x)); }); }
Tensor operator/(const Tensor& a, Scalar b) {  // as a float: true division
  return in_float32(a, [&](const Tensor& x) { return div(x, scalar_like(b.value, x)); });
}
Tensor operator+(Scalar a, const Tensor& b) { return add(scalar_like(a, b), b); }
Tensor operator-(Scalar a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator*(Scalar a, const Tensor& b) { return in_float32(b, [&](const Tensor& x) { return mul(scalar_like(a, x), x); }); }
Tensor operator/(Scalar a, const Tensor& b) { return div(scalar_like(a.value, b), b); }

}  // namespace ampgrad
