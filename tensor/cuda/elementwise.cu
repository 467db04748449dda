// elementwise.cu — CUDA maps and zips: unary, binary (broadcasting), where, fill,
// axpy, scale. Each op is one functor of tensor/elementwise_ops.h over the math type A (float
// for half inputs), the same the CPU runs, driven by the generic kernel of loops.cuh; the load
// widens to A and the store rounds once. Copies and casts are in copy.cu; output allocation in
// elementwise.cpp, argument checks in tensor/kernels.cpp.
#include "tensor/cuda/loops.cuh"
#include "tensor/elementwise_ops.h"

namespace ampgrad::cuda {
using namespace ampgrad::kernels;

// Stores that are not a function of loaded values: where picks, fill writes a constant.
template <class T> struct Where {
  static constexpr int kVector = vector_width<T>();
  template <int V> __device__ void apply(void* const* p, const int64_t* o) const {
    const Vec<bool, V> c = load_vec<bool, V>(p[1], o[1]);
    const Vec<T, V> a = load_vec<T, V>(p[2], o[2]), b = load_vec<T, V>(p[3], o[3]);
    Vec<T, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = c.v[j] ? a.v[j] : b.v[j];
    store_vec(p[0], o[0], y);
  }
};
template <class T> struct Fill {
  T value;
  static constexpr int kVector = vector_width<T>();
  template <int V> __device__ void apply(void* const* p, const int64_t* o) const {
    Vec<T, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = value;
    store_vec(p[0], o[0], y);
  }
};

// ---- launchers ----
void launch_unary(Unary op, const ScalarArgs& scalars, DType dtype, const Loop<2>& loop) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_unary<opmath_t<T>>(op, scalars, [&](auto f) {
      if constexpr (defined_for<decltype(f), T, opmath_t<T>>) map_into<T, T>(loop, f);
    });
  });
}

void launch_binary(Binary op, DType dtype, const Loop<3>& loop) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_binary(op, [&](auto f) {
      using F = decltype(f);
      if constexpr (is_comparison<F>) zip_into<bool, T>(loop, f);
      else if constexpr (defined_for<F, T, opmath_t<T>>) zip_into<T, T>(loop, f);
    });
  });
}

void launch_where(DType dtype, const Loop<4>& loop) {
  dispatch(dtype, [&](auto tag) { launch_elementwise(loop, Where<typename decltype(tag)::type>{}); });
}

void launch_fill(DType dtype, const Loop<1>& loop, double value) {
  dispatch_with_storage(dtype, [&](auto tag) {
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
