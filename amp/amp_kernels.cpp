// amp_kernels.cpp — the GradScaler kernels: argument checks, then the CPU loops here (plain
// loops over float32 storage with the scalar rules of scale_math.h) or, for tensors on a GPU,
// the launchers of amp_kernels.cu, which read nothing back to the host.
#include "amp/amp_kernels.h"

#include "amp/scale_math.h"
#ifdef AMPGRAD_WITH_CUDA
#include "amp/amp_kernels_cuda.h"
#include "tensor/cuda/runtime.h"  // DeviceGuard
#endif

namespace ampgrad::amp {

static void require_scalar(const char* op, const Tensor& t, DType dtype, Device device) {
  AMPGRAD_CHECK(t.numel() == 1 && t.dtype() == dtype, op << ": expected a one-element " << dtype_name(dtype) << " tensor, got "
                                                          << dtype_name(t.dtype()) << " " << shape_str(t.shape()));
  AMPGRAD_CHECK(t.device() == device, op << ": expected every tensor on " << device.str() << ", got one on " << t.device().str());
}

void non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  const Device device = found_inf.device();
  require_scalar("non_finite_check_and_unscale_", found_inf, kFloat32, device);
  require_scalar("non_finite_check_and_unscale_", inv_scale, kFloat32, device);
  for (const Tensor& g : grads)
    AMPGRAD_CHECK(g.dtype() == kFloat32 && g.is_contiguous() && g.device() == device,
                  "non_finite_check_and_unscale_: gradients must be contiguous float32 on " << device.str() << ", got "
                                                                                             << dtype_name(g.dtype()) << " on " << g.device().str());
  for (const Tensor& t : grads) t.bump_version();  // written in place, as by any in-place op
  found_inf.bump_version();
#ifdef AMPGRAD_WITH_CUDA
  if (device.is_cuda()) {
    std::vector<cuda::GradSpan> spans;
    for (const Tensor& g : grads) spans.push_back({g.data_ptr<float>(), g.numel()});
    cuda::DeviceGuard guard(device.index);
    return cuda::amp_non_finite_check_and_unscale_(spans, found_inf.data_ptr<float>(), inv_scale.data_ptr<float>());
  }
#endif
  // exercise 1.3: non_finite_check_and_unscale — multiply every gradient by inv_scale (unscale_value); found_inf = 1 if any became inf/NaN
  const float inv = *inv_scale.data_ptr<float>();
  int any = 0;  // an int: GCC vectorises an OR-reduction into an int, not into a bool
  for (const Tensor& g : grads)
    for (float *p = g.data_ptr<float>(), *end = p + g.numel(); p != end; ++p) any |= unscale_value(*p, inv);
  if (any) *found_inf.data_ptr<float>() = 1.f;
  // end exercise 1.3
}

void update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                   double backoff_factor, int64_t growth_interval) {
  const Device device = scale.device();
  require_scalar("update_scale_", scale, kFloat32, device);
  require_scalar("update_scale_", growth_tracker, kInt64, device);
  require_scalar("update_scale_", found_inf, kFloat32, device);
  scale.bump_version();  // written in place: a graph that saved the scale (scaler.scale's mul) sees it
  growth_tracker.bump_version();
#ifdef AMPGRAD_WITH_CUDA
  if (device.is_cuda()) {
    cuda::DeviceGuard guard(device.index);
    return cuda::amp_update_scale_(scale.data_ptr<float>(), growth_tracker.data_ptr<int64_t>(), found_inf.data_ptr<float>(),
                                   growth_factor, backoff_factor, growth_interval);
  }
#endif
  grow_or_back_off(*scale.data_ptr<float>(), *growth_tracker.data_ptr<int64_t>(), *found_inf.data_ptr<float>() != 0.f, growth_factor,
               backoff_factor, growth_interval);
}

}  // namespace ampgrad::amp
