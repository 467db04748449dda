// copy.cu — the device-side copy: dst = src converted to dst's dtype, any strides, src
// broadcast into dst. The one kernel compiled for every (dst, src) dtype pair, float8 included.
// Moving bytes between host and device, and choosing when a plain memcpy will do, is copy.cpp's job.
#include "tensor/cuda/loops.cuh"

namespace ampgrad::cuda {

// One dtype: each element moved as it is, every bit kept (NaN payloads too), as on the CPU.
template <class T> struct Move {
  static constexpr int kVector = vector_width<T>();
  template <int V> __device__ void apply(void* const* p, const int64_t* o) const { store_vec(p[0], o[0], load_vec<T, V>(p[1], o[1])); }
};
// Two dtypes: through src's math type, as on the CPU: float -> half rounds once (to nearest
// even); double -> half goes through float like Eigen::half(double).
struct Identity {
  template <class A> __device__ A operator()(A x) const { return x; }
};

void launch_copy(DType dst_dtype, DType src_dtype, const Loop<2>& loop) {
  if (dst_dtype == src_dtype)
    return dispatch_with_storage(dst_dtype, [&](auto tag) { launch_elementwise(loop, Move<typename decltype(tag)::type>{}); });
  dispatch_with_storage(dst_dtype, [&](auto dtag) {
    dispatch_with_storage(src_dtype, [&](auto stag) { map_into<typename decltype(dtag)::type, typename decltype(stag)::type>(loop, Identity{}); });
  });
}

}  // namespace ampgrad::cuda
