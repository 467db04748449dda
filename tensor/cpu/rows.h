// rows.h — what the CPU's row kernels (softmax, layer_norm) share: a row in its math type A (the
// row itself for float and double; for a 16-bit row, a buffer widened once on the way in and
// narrowed once on the way out), and Eigen's vectorised reductions over it (max, sum).
#pragma once
#include <Eigen/Core>
#include <type_traits>
#include <vector>

#include "tensor/cpu/half_convert.h"

namespace ampgrad::cpu {

// One thread's row of T in A = opmath_t<T>, read or written n elements at a time.
template <class T> class RowBuffer {
 public:
  using A = opmath_t<T>;
  static constexpr bool in_place = std::is_same_v<T, A>;
  explicit RowBuffer(int64_t n) : buf_(in_place ? 0 : n), n_(n) {}
  const A* read(const T* p) {  // the row at p: p itself, or widened into the buffer
    if constexpr (in_place) {
      return p;
    } else {
      convert_contiguous(buf_.data(), p, n_);
      return buf_.data();
    }
  }
  A* write(T* p) {  // where to put the row bound for p: p itself, or the buffer, which done() narrows into p
    out_ = p;
    if constexpr (in_place) return p;
    else return buf_.data();
  }
  void done() {
    if constexpr (!in_place) convert_contiguous(out_, buf_.data(), n_);
  }

 private:
  WidenedBuffer<A> buf_;
  int64_t n_;
  T* out_ = nullptr;
};

// n values at p as an Eigen array, for its maximum (.maxCoeff(): exact, in any order).
template <class A> auto as_array(const A* p, int64_t n) { return Eigen::Map<const Eigen::Array<A, Eigen::Dynamic, 1>>(p, n); }

// Σ f(j) over j < n in 8 lanes (one vector), combined in one fixed order. Not Eigen's .sum(): it
// starts its vectors at the first aligned element, so its order, and the bits, move with the
// row's address, and a rerun in the same process (other buffers, other addresses) differs.
template <class A, class F> A lane_sum(int64_t n, F f) {
  A lane[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) lane[k] += f(j + k);
  for (int k = 0; j < n; ++j, ++k) lane[k] += f(j);
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

}  // namespace ampgrad::cpu
