// elementwise.cpp — CPU maps and zips: unary, binary (broadcasting), where, copy/cast, fill.
// Each op is one functor of tensor/elementwise_ops.h over the math type A (float for half
// inputs), the same the CUDA kernels run, plus one call of for_each_run; the load converts to A
// and the store rounds once (round-to-nearest-even). Arguments are checked in tensor/kernels.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

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

// 16-bit operands in contiguous memory go a tile at a time: widened in one vectorised pass
// (half_convert.h) into float32 on the stack, run through the float32 functor, the result
// narrowed once. Bit-identical to converting element by element (the math is float32 either
// way), several times faster than scalar conversions, and with no float32 copy of a whole
// tensor. Operand k's element for output e is in[k][e % period[k]]: the output's size for an
// operand of its shape, a row's for one repeated over rows (a bias). A row shorter than a tile
// is widened once per thread, repeated to a tile and a row, and each tile reads it from its
// offset; a longer one is widened with the tile, and a tile ends where a row does.
constexpr int64_t kTile = 512;  // 2 KiB of float32 per operand: the tiles stay in L1

template <class Out, class T, size_t K, class F>
static void widened_tiles(Out* out, std::array<const T*, K> in, std::array<int64_t, K> period, int64_t n, F f) {
  parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    // A short row repeats; an operand as long as the output (y itself, in y += x) goes with the tiles.
    const auto repeats = [&](size_t k) { return period[k] < kTile && period[k] < n; };
    float tile[K][kTile], repeated[K][2 * kTile];
    for (size_t k = 0; k < K; ++k)
      if (repeats(k)) {
        convert_contiguous(repeated[k], in[k], period[k]);
        for (int64_t j = period[k]; j < kTile + period[k]; ++j) repeated[k][j] = repeated[k][j - period[k]];
      }
    std::conditional_t<std::is_same_v<Out, bool>, bool, float> r[kTile];
    for (int64_t i = begin; i < end;) {
      int64_t m = std::min(kTile, end - i);
      for (size_t k = 0; k < K; ++k)
        if (!repeats(k)) m = std::min(m, period[k] - i % period[k]);
      const float* x[K];
      for (size_t k = 0; k < K; ++k) {
        if (repeats(k)) {
          x[k] = repeated[k] + i % period[k];
        } else {
          convert_contiguous(tile[k], in[k] + i % period[k], m);
          x[k] = tile[k];
        }
      }
      for (int64_t j = 0; j < m; ++j) {
        if constexpr (K == 1) r[j] = f(x[0][j]);
        else r[j] = f(x[0][j], x[1][j]);
      }
      if constexpr (std::is_same_v<Out, bool>) std::copy(r, r + m, out + i);
      else convert_contiguous(out + i, r, m);
      i += m;
    }
  });
}

static bool is_contiguous_half(const Tensor& t) { return is_half(t.dtype()) && t.is_contiguous(); }

// Whether x, contiguous, is y's shape or y's trailing dims (repeated over y's leading ones).
static bool repeats_over_rows(const Tensor& x, const Tensor& y) {
  if (!x.is_contiguous() || x.numel() == 0) return false;
  Shape xs = x.shape();
  while (!xs.empty() && xs.front() == 1) xs.erase(xs.begin());
  return xs.size() <= y.shape().size() && std::equal(xs.begin(), xs.end(), y.shape().end() - xs.size());
}

Tensor unary(Unary op, const Tensor& x, const ScalarArgs& scalars) {
  Tensor out = empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    with_unary<A>(op, scalars, [&](auto f) {
      if constexpr (defined_for<decltype(f), T, A>) {
        if constexpr (has_convert_contiguous<float, T>) {
          if (x.is_contiguous()) return widened_tiles((T*)out.raw_data(), std::array{(const T*)x.raw_data()}, {x.numel()}, x.numel(), f);
        }
        map_into<T, T>(out, x, [f](T v) { return T(f(A(v))); });
      }
    });
  });
  return out;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  Tensor out = empty(broadcast_shapes(binary_name(op), a.shape(), b.shape()), is_comparison_op(op) ? kBool : a.dtype());
  const bool tiled = is_contiguous_half(a) && is_contiguous_half(b) && a.shape() == b.shape();
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    with_binary(op, [&](auto f) {
      using F = decltype(f);
      if constexpr (is_comparison<F> || defined_for<F, T, A>) {
        using Out = std::conditional_t<is_comparison<F>, bool, T>;
        if constexpr (has_convert_contiguous<float, T>) {
          if (tiled)
            return widened_tiles((Out*)out.raw_data(), std::array{(const T*)a.raw_data(), (const T*)b.raw_data()}, {a.numel(), a.numel()},
                                 a.numel(), f);
        }
        zip_into<Out, T>(out, a, b, [f](T x, T y) { return Out(f(A(x), A(y))); });
      }
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
  dispatch_with_storage(dst.dtype(), [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    dispatch_with_storage(src.dtype(), [&](auto stag) {
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
        else if constexpr (std::is_same_v<D, int64_t> && !std::is_integral_v<opmath_t<S>>) return math::to_int64(static_cast<opmath_t<S>>(v));
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
  dispatch_with_storage(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = static_cast<T>(static_cast<opmath_t<T>>(value));
    for_each_run<1>(dst.shape(), {(char*)dst.raw_data()}, {sizeof(T)}, {dst.strides()},
                    [v](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
                      if constexpr (sizeof(T) == 2) {  // as its bits: Eigen's 16-bit classes keep the loop scalar
                        uint16_t bits;
                        std::memcpy(&bits, &v, 2);
                        if (s[0] == 1) return (void)std::fill_n((uint16_t*)p[0], n, bits);
                      }
                      for (int64_t i = 0; i < n; ++i) ((T*)p[0])[i * s[0]] = v;
                    });
  });
}

void add_(const Tensor& y, const Tensor& x, double alpha) {  // arguments checked in tensor/kernels.cpp
  dispatch(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) {
      const Axpy<A> f{A(alpha)};
      if constexpr (has_convert_contiguous<float, T>) {
        // One number: held outside the loop, as the float32 loop holds it (so GCC hoists α·x and
        // adds it, where a loaded x fuses into a multiply-add), for the float32 op's bits.
        if (y.is_contiguous() && x.numel() == 1)
          return widened_tiles((T*)y.raw_data(), std::array{(const T*)y.raw_data()}, {y.numel()}, y.numel(),
                               [f, b = float(*(const T*)x.raw_data())](float a) { return f(a, b); });
        if (y.is_contiguous() && repeats_over_rows(x, y))  // a linear's 16-bit bias add
          return widened_tiles((T*)y.raw_data(), std::array{(const T*)y.raw_data(), (const T*)x.raw_data()}, {y.numel(), x.numel()},
                               y.numel(), f);
      }
      zip_into<T, T>(y, y, x, [f](T a, T b) { return T(f(A(a), A(b))); });
    }
  });
}

void mul_(const Tensor& y, double factor) {
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
