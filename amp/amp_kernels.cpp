// amp_kernels.cpp — CPU versions of the GradScaler kernels: plain loops over the gradients'
// float32 storage, with the scalar rules from scale_math.h.
#include "amp/amp_kernels.h"

#include "amp/scale_math.h"

namespace ampgrad::amp {

static void require_cpu_scalar(const char* op, const Tensor& t, DType dtype) {
  AMPGRAD_CHECK(t.device().is_cpu(), op << ": tensors on " << t.device().str() << " need the CUDA backend, which was not built");
  AMPGRAD_CHECK(t.numel() == 1 && t.dtype() == dtype, op << ": expected a one-element " << dtype_name(dtype) << " tensor, got "
                                                          << dtype_name(t.dtype()) << " " << shape_str(t.shape()));
}

void non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  require_cpu_scalar("non_finite_check_and_unscale_", found_inf, kFloat32);
  require_cpu_scalar("non_finite_check_and_unscale_", inv_scale, kFloat32);
  const float inv = *inv_scale.data_ptr<float>();
  bool any = false;
  for (const Tensor& g : grads) {
    AMPGRAD_CHECK(g.dtype() == kFloat32 && g.is_contiguous() && g.device().is_cpu(),
                  "non_finite_check_and_unscale_: gradients must be contiguous float32 on the CPU, got " << dtype_name(g.dtype()));
    float* p = g.data_ptr<float>();
    bool bad = false;
    for (int64_t i = 0, n = g.numel(); i < n; ++i) bad |= unscale_value(p[i], inv);
    any |= bad;
  }
  if (any) *found_inf.data_ptr<float>() = 1.f;
}

void update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                   double backoff_factor, int64_t growth_interval) {
  require_cpu_scalar("update_scale_", scale, kFloat32);
  require_cpu_scalar("update_scale_", growth_tracker, kInt64);
  require_cpu_scalar("update_scale_", found_inf, kFloat32);
  update_scale(*scale.data_ptr<float>(), *growth_tracker.data_ptr<int64_t>(), *found_inf.data_ptr<float>() != 0.f,
               growth_factor, backoff_factor, growth_interval);
}

}  // namespace ampgrad::amp
