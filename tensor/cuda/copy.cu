// copy.cu — the device-side copy: dst = src converted to dst's dtype, any strides, src
// broadcast into dst. The one kernel compiled for every (dst, src) dtype pair. Moving bytes
// between host and device, and choosing when a plain memcpy will do, is copy.cpp's job.
#include "tensor/cuda/loops.cuh"

namespace ampgrad::cuda {

// Through src's math type, as on the CPU: half -> float -> half keeps the bits; float -> half
// rounds once (to nearest even); double -> half goes through float like Eigen::half(double).
struct Identity {
  template <class A> __device__ A operator()(A x) const { return x; }
};

void launch_copy(DType dst_dtype, DType src_dtype, const Loop<2>& loop) {
  dispatch(dst_dtype, [&](auto dtag) {
    dispatch(src_dtype, [&](auto stag) { map_into<typename decltype(dtag)::type, typename decltype(stag)::type>(loop, Identity{}); });
  });
}

}  // namespace ampgrad::cuda
