// elementwise_ops.h — every elementwise kernel of tensor/ops.def as a functor over its math type
// A (float for half inputs), written once for both backends (AMPGRAD_HD): tensor/cpu/elementwise.cpp
// runs them in its strided loops and tensor/cuda/elementwise.cu in its kernels, so the CPU tests
// check the arithmetic the GPU does. Loads, stores and rounding are the backends' own. An op with
// scalar arguments (ops.def's ARG) is a template over A whose members are those arguments.
//
//   with_unary<A>(Unary::exp, {}, [&](auto f) { ... out[i] = T(f(A(x[i]))) ... });              // f is an Exp
//   with_unary<A>(Unary::leaky_relu, {0.2}, [&](auto f) { ... });  // f is a LeakyRelu<A>{0.2 in A}
#pragma once
#include <cmath>
#include <type_traits>
#include <utility>

#include "tensor/op_enum.h"
#include "tensor/scalar_math.h"

namespace ampgrad::kernels {

// ---- unary ----
struct Neg { template <class A> AMPGRAD_HD A operator()(A x) const { return -x; } };
struct Exp { template <class A> AMPGRAD_HD A operator()(A x) const { return math::exp(x); } };
struct Log { template <class A> AMPGRAD_HD A operator()(A x) const { return math::log(x); } };
struct Log1p { template <class A> AMPGRAD_HD A operator()(A x) const { return math::log1p(x); } };  // log(1 + x), exact for tiny x
struct Sqrt { template <class A> AMPGRAD_HD A operator()(A x) const { return std::sqrt(x); } };
struct Abs { template <class A> AMPGRAD_HD A operator()(A x) const { return std::abs(x); } };
struct Tanh { template <class A> AMPGRAD_HD A operator()(A x) const { return math::tanh(x); } };
struct Sigmoid { template <class A> AMPGRAD_HD A operator()(A x) const { return math::sigmoid(x); } };
struct Relu { template <class A> AMPGRAD_HD A operator()(A x) const { return math::relu(x); } };
struct Gelu { template <class A> AMPGRAD_HD A operator()(A x) const { return math::gelu(x); } };

// ---- unary, with scalar arguments
template <class A> struct LeakyRelu {  // PyTorch's: x > 0 ? x : x·negative_slope (a NaN passes)
  A negative_slope;
  AMPGRAD_HD A operator()(A x) const { return x > A(0) ? x : x * negative_slope; }
};
// As PyTorch's pow: x² exactly, x^±0.5 through sqrt (so pow(-inf, 0.5) is NaN, not inf, and
// pow(-0, -0.5) is -inf), the rest std::pow.
template <class A> struct Pow {
  A exponent;
  AMPGRAD_HD A operator()(A x) const {
    return exponent == A(2) ? x * x : exponent == A(0.5) ? std::sqrt(x) : exponent == A(-0.5) ? A(1) / std::sqrt(x) : std::pow(x, exponent);
  }
};
template <class A> struct Clamp {  // a bound left out is ∓inf (for int64 its extreme): no bound
  A min, max;
  AMPGRAD_HD A operator()(A x) const {
    if (x != x) return x;  // NaN passes through, as in PyTorch
    if (x < min) x = min;
    if (x > max) x = max;
    return x;
  }
};
template <class A> struct Scale {  // mul_
  A factor;
  AMPGRAD_HD A operator()(A y) const { return y * factor; }
};

// ---- binary ----
struct Add { template <class A> AMPGRAD_HD A operator()(A x, A y) const { return x + y; } };
struct Sub { template <class A> AMPGRAD_HD A operator()(A x, A y) const { return x - y; } };
struct Mul { template <class A> AMPGRAD_HD A operator()(A x, A y) const { return x * y; } };
struct Div { template <class A> AMPGRAD_HD A operator()(A x, A y) const { return x / y; } };
struct ReluBackward { template <class A> AMPGRAD_HD A operator()(A g, A y) const { return y <= A(0) ? A(0) : g; } };  // PyTorch's threshold_backward: a NaN y passes g
struct GeluBackward { template <class A> AMPGRAD_HD A operator()(A g, A x) const { return g * math::gelu_grad(x); } };
struct Eq { template <class A> AMPGRAD_HD bool operator()(A x, A y) const { return x == y; } };
struct Ne { template <class A> AMPGRAD_HD bool operator()(A x, A y) const { return x != y; } };
struct Lt { template <class A> AMPGRAD_HD bool operator()(A x, A y) const { return x < y; } };
struct Le { template <class A> AMPGRAD_HD bool operator()(A x, A y) const { return x <= y; } };
struct Gt { template <class A> AMPGRAD_HD bool operator()(A x, A y) const { return x > y; } };
struct Ge { template <class A> AMPGRAD_HD bool operator()(A x, A y) const { return x >= y; } };
template <class A> struct Axpy {  // add_: y + alpha * x
  A alpha;
  AMPGRAD_HD A operator()(A y, A x) const { return y + alpha * x; }
};

// Which (op, dtype) pairs exist: floating dtypes take every op; int64 the sign-safe unaries,
// add, sub, mul and the comparisons; bool only the comparisons. T is the storage type, A its
// math type. tensor/kernels.cpp refuses the other pairs by name before any backend sees them,
// and the backends compile no kernel for them.
// A comparison is a binary functor whose value is bool (the op's output dtype, whatever its inputs').
template <class F, class = void> constexpr bool is_comparison = false;
template <class F> constexpr bool is_comparison<F, std::enable_if_t<std::is_same_v<std::invoke_result_t<F, float, float>, bool>>> = true;
template <class F> constexpr bool int64_ok = is_comparison<F> || std::is_same_v<F, Neg> || std::is_same_v<F, Abs> || std::is_same_v<F, Relu> ||
                                             std::is_same_v<F, Add> || std::is_same_v<F, Sub> || std::is_same_v<F, Mul>;
template <class F, class T, class A> constexpr bool defined_for =
    std::is_floating_point_v<A> || is_comparison<F> || (std::is_same_v<T, int64_t> && (int64_ok<F> || std::is_same_v<F, Clamp<A>>));

// An op's scalar arguments, float64 on the host (ScalarArgs, op_enum.h), reach its functor in the
// math type A: rounded once to a floating A, saturated into int64 (math::to_int64).
template <class A> A arg_as(double v) { return std::is_integral_v<A> ? A(math::to_int64(v)) : A(v); }
// The functor of an op without arguments, and Functor<A>{args[0], ..., args[N-1]} of one with N.
template <class F, class A, size_t... I> F make_functor(const ScalarArgs&, std::index_sequence<I...>) { return F{}; }
template <template <class> class F, class A, size_t... I> F<A> make_functor(const ScalarArgs& args, std::index_sequence<I...>) {
  return F<A>{arg_as<A>(args[I])...};
}

// Calls body(f) with the functor of `op` in math type A: one switch per call, none per element.
// Generated from tensor/ops.def: a kernel registered there with no functor here fails to compile, naming it.
template <class A, class Body> void with_unary(Unary op, const ScalarArgs& scalars, Body&& body) {
  switch (op) {
#define ARG(type, name, ...) +1
#define UNARY_KERNEL(name, Functor, cuda, cpu, args, ...) \
  case Unary::name: return body(make_functor<Functor, A>(scalars, std::make_index_sequence<0 AMPGRAD_ARGS args>{}));
#include "tensor/ops.def"
  }
}
template <class Body> void with_binary(Binary op, Body&& body) {
  switch (op) {
#define BINARY_KERNEL(name, Functor, cuda, cpu) case Binary::name: return body(Functor{});
#define BACKWARD_KERNEL(name, Functor) case Binary::name: return body(Functor{});
#include "tensor/ops.def"
  }
}
// A functor of the wrong arity, or a comparison that does not return bool, fails here, naming its
// op, not deep inside a backend's loop.
#define ARG(type, name, ...) +1
#define UNARY_KERNEL(name, Functor, cuda, cpu, args, ...)                                                                          \
  static_assert(std::is_invocable_v<decltype(make_functor<Functor, float>({}, std::make_index_sequence<0 AMPGRAD_ARGS args>{})), float>, \
                "Unary::" #name ": " #Functor " must take one value");
#define BINARY_KERNEL(name, Functor, cuda, cpu) static_assert(std::is_invocable_v<Functor, float, float>, "Binary::" #name ": " #Functor " must take two values");
#define BACKWARD_KERNEL(name, Functor) BINARY_KERNEL(name, Functor, , )
#define COMPARE_KERNEL(name, Functor, cuda, cpu) static_assert(is_comparison<Functor>, "Binary::" #name ": a comparison's " #Functor " must return bool");
#include "tensor/ops.def"

}  // namespace ampgrad::kernels
