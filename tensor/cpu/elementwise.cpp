// elementwise.cpp — CPU maps and zips: unary, binary (broadcasting), where, copy/cast, fill.
// Each op is one functor of tensor/elementwise_ops.h over the math type A (float for half
// inputs), the same the CUDA kernels run, plus one call of for_each_run; the load converts to A
// and the store rounds once (round-to-nearest-even). Arguments are checked in tensor/kernels.cpp.
#include <cmath>

#include "tensor/cpu/half_convert.h"
#include "tensor/cpu/loops.h"
#include "tensor/elementwise_ops.h"

namespace ampgrad::cpu {

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    AMPGRAD_CHECK(da == db || da == 1 || db == 1,
                  op << ": shapes " << shape_str(a) << " and " << shape_str(b) << " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& out) {
  AMPGRAD_CHECK(t.dim() <= (int64_t)out.size(), "cannot broadcast shape " << shape_str(t.shape()) << " to " << shape_str(out));
  Shape s(out.size(), 0);
  size_t lead = out.size() - t.dim();
  for (size_t i = 0; i < (size_t)t.dim(); ++i) s[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return s;
}

// out[i] = f(x[i]) for tensors of any geometry; Out and In are storage types.
template <class Out, class In, class F>
static void map_into(const Tensor& out, const Tensor& x, F f) {
  for_each_run<2>(out.shape(), {(char*)out.raw_data(), (char*)x.raw_data()}, {sizeof(Out), sizeof(In)},
                  {out.strides(), broadcast_strides(x, out.shape())},
                  [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
                    Out* o = (Out*)p[0];
                    const In* a = (const In*)p[1];
                    if (s[0] == 1 && s[1] == 1)
                      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
                    else
                      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = f(a[i * s[1]]);
                  });
}

template <class Out, class In, class F>
static void zip_into(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  for_each_run<3>(out.shape(), {(char*)out.raw_data(), (char*)a.raw_data(), (char*)b.raw_data()},
                  {sizeof(Out), sizeof(In), sizeof(In)},
                  {out.strides(), broadcast_strides(a, out.shape()), broadcast_strides(b, out.shape())},
                  [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
                    Out* o = (Out*)p[0];
                    const In* x = (const In*)p[1];
                    const In* y = (const In*)p[2];
                    if (s[0] == 1 && s[1] == 1 && s[2] == 1)
                      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
                    else if (s[0] == 1 && s[1] == 1 && s[2] == 0)
                      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[0]);
                    else
                      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = f(x[i * s[1]], y[i * s[2]]);
                  });
}

}  // namespace ampgrad::cpu

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

// Half inputs in contiguous memory: widen them in one vectorised pass (half_convert.h), run
// the float32 kernel, narrow the result once. Bit-identical to converting element by element
// (the math was float32 either way), and several times faster than scalar conversions.
static bool widen_first(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (!is_half(t->dtype()) || !t->is_contiguous() || t->shape() != (*ts.begin())->shape()) return false;
  return true;
}
static Tensor narrowed(const Tensor& f, DType dtype) {
  return f.dtype() == kFloat32 ? contiguous_copy(f, dtype) : f;  // comparisons are already bool
}

Tensor unary(Unary op, const Tensor& x) {
  if (widen_first({&x})) return narrowed(cpu::unary(op, contiguous_copy(x, kFloat32)), x.dtype());
  Tensor out = empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    with_unary(op, [&](auto f) {
      if constexpr (defined_for<decltype(f), T, A>) map_into<T, T>(out, x, [f](T v) { return T(f(A(v))); });
    });
  });
  return out;
}

Tensor pow_scalar(const Tensor& x, double p) {
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating("pow", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    auto apply = [&](auto f) { map_into<T, T>(out, x, [f](T v) { return T(f(A(v))); }); };
    if (p == 2) apply(Square{});
    else apply(Pow<A>{A(p)});
  });
  return out;
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  Tensor out = empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    const Clamp<A> f{lo ? A(*lo) : A(0), hi ? A(*hi) : A(0), lo.has_value(), hi.has_value()};
    map_into<T, T>(out, x, [f](T v) { return T(f(A(v))); });
  });
  return out;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  if (widen_first({&a, &b})) return narrowed(cpu::binary(op, contiguous_copy(a, kFloat32), contiguous_copy(b, kFloat32)), a.dtype());
  Tensor out = empty(broadcast_shapes(binary_name(op), a.shape(), b.shape()), is_comparison_op(op) ? kBool : a.dtype());
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    with_binary(op, [&](auto f) {
      using F = decltype(f);
      if constexpr (is_comparison<F>) zip_into<bool, T>(out, a, b, [f](T x, T y) { return f(A(x), A(y)); });
      else if constexpr (defined_for<F, T, A>) zip_into<T, T>(out, a, b, [f](T x, T y) { return T(f(A(x), A(y))); });
    });
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Shape shape = broadcast_shapes("where", cond.shape(), broadcast_shapes("where", a.shape(), b.shape()));
  Tensor out = empty(shape, a.dtype());
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_run<4>(shape, {(char*)out.raw_data(), (char*)cond.raw_data(), (char*)a.raw_data(), (char*)b.raw_data()},
                    {sizeof(T), 1, sizeof(T), sizeof(T)},
                    {out.strides(), broadcast_strides(cond, shape), broadcast_strides(a, shape), broadcast_strides(b, shape)},
                    [](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
                      for (int64_t i = 0; i < n; ++i)
                        ((T*)p[0])[i * s[0]] = ((const bool*)p[1])[i * s[1]] ? ((const T*)p[2])[i * s[2]] : ((const T*)p[3])[i * s[3]];
                    });
  });
  return out;
}

void copy_(const Tensor& dst, const Tensor& src) {  // shapes checked in tensor/kernels.cpp
  // Contiguous float32 <-> 16-bit casts (every autocast cast, every half GEMM's widening) take
  // the vectorised path of half_convert.h.
  const bool contiguous_pair = dst.shape() == src.shape() && dst.is_contiguous() && src.is_contiguous();
  dispatch_with_float8(dst.dtype(), [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    dispatch_with_float8(src.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      if constexpr (has_convert_contiguous<D, S>) {
        if (contiguous_pair)
          return parallel_for(dst.numel(), 1, [&](int64_t begin, int64_t end) {
            convert_contiguous((D*)dst.raw_data() + begin, (const S*)src.raw_data() + begin, end - begin);
          });
      }
      // One dtype: the elements as they are, every bit kept (NaN payloads too). Else through the
      // wider math type, so that float -> half rounds once.
      map_into<D, S>(dst, src, [](S v) {
        if constexpr (std::is_same_v<D, S>) return v;
        else return static_cast<D>(static_cast<opmath_t<S>>(v));
      });
    });
  });
}

Tensor contiguous_copy(const Tensor& x, DType dtype) {
  if (x.is_contiguous() && x.dtype() == dtype) return x;
  Tensor c = empty(x.shape(), dtype);
  cpu::copy_(c, x);
  return c;
}

void fill_(const Tensor& dst, double value) {
  dispatch_with_float8(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = static_cast<T>(static_cast<opmath_t<T>>(value));
    for_each_run<1>(dst.shape(), {(char*)dst.raw_data()}, {sizeof(T)}, {dst.strides()},
                    [v](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
                      for (int64_t i = 0; i < n; ++i) ((T*)p[0])[i * s[0]] = v;
                    });
  });
}

void axpy_(const Tensor& y, const Tensor& x, double alpha) {  // arguments checked in tensor/kernels.cpp
  if (widen_first({&y}) && x.is_contiguous()) {  // as unary and binary do (a linear's half bias add)
    Tensor yf = contiguous_copy(y, kFloat32);
    cpu::axpy_(yf, contiguous_copy(x, kFloat32), alpha);
    return cpu::copy_(y, yf);
  }
  dispatch(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) {
      const Axpy<A> f{A(alpha)};
      zip_into<T, T>(y, y, x, [f](T a, T b) { return T(f(A(a), A(b))); });
    }
  });
}

void scale_(const Tensor& y, double factor) {
  dispatch(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) {
      const Scale<A> f{A(factor)};
      map_into<T, T>(y, y, [f](T a) { return T(f(A(a))); });
    }
  });
}

}  // namespace ampgrad::cpu
