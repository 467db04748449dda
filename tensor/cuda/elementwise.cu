// elementwise.cu — CUDA maps and zips: unary, pow, clamp, binary (broadcasting), where, fill,
// axpy, scale. Each op is one functor over the math type A (float for half inputs) run by the
// generic kernel of loops.cuh; the load widens to A and the store rounds once. Copies and casts
// are in copy.cu; checks and output allocation in elementwise.cpp.
#include <cmath>

#include "tensor/cuda/loops.cuh"
#include "tensor/scalar_math.h"

namespace ampgrad::cuda {
using kernels::Binary;
using kernels::Unary;

// ---- functors (the same math as tensor/cpu/elementwise.cpp) ----
struct Neg { template <class A> __device__ A operator()(A x) const { return -x; } };
struct Exp { template <class A> __device__ A operator()(A x) const { return std::exp(x); } };
struct Log { template <class A> __device__ A operator()(A x) const { return std::log(x); } };
struct Sqrt { template <class A> __device__ A operator()(A x) const { return std::sqrt(x); } };
struct Abs { template <class A> __device__ A operator()(A x) const { return std::abs(x); } };
struct Tanh { template <class A> __device__ A operator()(A x) const { return std::tanh(x); } };
struct Sigmoid { template <class A> __device__ A operator()(A x) const { return math::sigmoid(x); } };
struct Relu { template <class A> __device__ A operator()(A x) const { return math::relu(x); } };
struct Gelu { template <class A> __device__ A operator()(A x) const { return math::gelu(x); } };
// int64 tensors reach only these (unary() checks), so only these are compiled for int64
template <class F> constexpr bool signed_int_ok = std::is_same_v<F, Neg> || std::is_same_v<F, Abs> || std::is_same_v<F, Relu>;

struct Square { template <class A> __device__ A operator()(A x) const { return x * x; } };  // pow 2: exact and common
template <class A> struct Pow {
  A e;
  __device__ A operator()(A x) const { return std::pow(x, e); }
};
template <class A> struct Clamp {
  A lo, hi;
  bool has_lo, has_hi;
  __device__ A operator()(A x) const {
    if (x != x) return x;  // NaN passes through, as in PyTorch
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return x;
  }
};

struct Add { template <class A> __device__ A operator()(A x, A y) const { return x + y; } };
struct Sub { template <class A> __device__ A operator()(A x, A y) const { return x - y; } };
struct Mul { template <class A> __device__ A operator()(A x, A y) const { return x * y; } };
struct Div { template <class A> __device__ A operator()(A x, A y) const { return x / y; } };
struct ReluBackward { template <class A> __device__ A operator()(A g, A x) const { return x > A(0) ? g : A(0); } };
struct GeluBackward { template <class A> __device__ A operator()(A g, A x) const { return g * math::gelu_grad(x); } };
struct Eq { template <class A> __device__ bool operator()(A x, A y) const { return x == y; } };
struct Ne { template <class A> __device__ bool operator()(A x, A y) const { return x != y; } };
struct Lt { template <class A> __device__ bool operator()(A x, A y) const { return x < y; } };
struct Le { template <class A> __device__ bool operator()(A x, A y) const { return x <= y; } };
struct Gt { template <class A> __device__ bool operator()(A x, A y) const { return x > y; } };
struct Ge { template <class A> __device__ bool operator()(A x, A y) const { return x >= y; } };
template <class F> constexpr bool is_comparison = std::is_same_v<F, Eq> || std::is_same_v<F, Ne> || std::is_same_v<F, Lt> ||
                                                  std::is_same_v<F, Le> || std::is_same_v<F, Gt> || std::is_same_v<F, Ge>;
// int64 also adds, subtracts and multiplies (binary() checks); bool only compares
template <class F> constexpr bool integer_ok = is_comparison<F> || std::is_same_v<F, Add> || std::is_same_v<F, Sub> || std::is_same_v<F, Mul>;

template <class A> struct Axpy {
  A alpha;
  __device__ A operator()(A y, A x) const { return y + alpha * x; }
};
template <class A> struct Scale {
  A factor;
  __device__ A operator()(A y) const { return y * factor; }
};

// Stores that are not a function of loaded values: where picks, fill writes a constant.
template <class T> struct Where {
  __device__ void operator()(void* const* p, const int64_t* o) const {
    const bool c = static_cast<const bool*>(p[1])[o[1]];
    static_cast<T*>(p[0])[o[0]] = static_cast<const T*>(c ? p[2] : p[3])[c ? o[2] : o[3]];
  }
};
template <class T> struct Fill {
  T value;
  __device__ void operator()(void* const* p, const int64_t* o) const { static_cast<T*>(p[0])[o[0]] = value; }
};

// Calls body(f) with the functor of `op`: one switch per launch, none per element.
template <class Body> static void with_unary(Unary op, Body body) {
  switch (op) {
    case Unary::neg: return body(Neg{});
    case Unary::exp: return body(Exp{});
    case Unary::log: return body(Log{});
    case Unary::sqrt: return body(Sqrt{});
    case Unary::abs: return body(Abs{});
    case Unary::tanh: return body(Tanh{});
    case Unary::sigmoid: return body(Sigmoid{});
    case Unary::relu: return body(Relu{});
    case Unary::gelu: return body(Gelu{});
  }
}
template <class Body> static void with_binary(Binary op, Body body) {
  switch (op) {
    case Binary::add: return body(Add{});
    case Binary::sub: return body(Sub{});
    case Binary::mul: return body(Mul{});
    case Binary::div: return body(Div{});
    case Binary::relu_backward: return body(ReluBackward{});
    case Binary::gelu_backward: return body(GeluBackward{});
    case Binary::eq: return body(Eq{});
    case Binary::ne: return body(Ne{});
    case Binary::lt: return body(Lt{});
    case Binary::le: return body(Le{});
    case Binary::gt: return body(Gt{});
    case Binary::ge: return body(Ge{});
  }
}

// ---- launchers ----
void launch_unary(Unary op, DType dtype, const Loop<2>& loop) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_unary(op, [&](auto f) {
      using F = decltype(f);
      if constexpr (std::is_floating_point_v<opmath_t<T>> || (std::is_same_v<T, int64_t> && signed_int_ok<F>))
        map_into<T, T>(loop, f);
    });
  });
}

void launch_pow_scalar(DType dtype, const Loop<2>& loop, double exponent) {
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    if (exponent == 2) map_into<T, T>(loop, Square{});
    else map_into<T, T>(loop, Pow<A>{A(exponent)});
  });
}

void launch_clamp(DType dtype, const Loop<2>& loop, bool has_lo, double lo, bool has_hi, double hi) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    map_into<T, T>(loop, Clamp<A>{has_lo ? A(lo) : A(0), has_hi ? A(hi) : A(0), has_lo, has_hi});
  });
}

void launch_binary(Binary op, DType dtype, const Loop<3>& loop) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_binary(op, [&](auto f) {
      using F = decltype(f);
      if constexpr (is_comparison<F>) zip_into<bool, T>(loop, f);
      else if constexpr (std::is_floating_point_v<opmath_t<T>> || (std::is_same_v<T, int64_t> && integer_ok<F>))
        zip_into<T, T>(loop, f);
    });
  });
}

void launch_where(DType dtype, const Loop<4>& loop) {
  dispatch(dtype, [&](auto tag) { launch_elementwise(loop, Where<typename decltype(tag)::type>{}); });
}

void launch_fill(DType dtype, const Loop<1>& loop, double value) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(loop, Fill<T>{cast<T>(static_cast<opmath_t<T>>(value))});
  });
}

// bool never gets here: tensor/kernels.cpp refuses it for every backend
void launch_axpy(DType dtype, const Loop<3>& loop, double alpha) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) zip_into<T, T>(loop, Axpy<A>{A(alpha)});
  });
}

void launch_scale(DType dtype, const Loop<2>& loop, double factor) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) map_into<T, T>(loop, Scale<A>{A(factor)});
  });
}

}  // namespace ampgrad::cuda
