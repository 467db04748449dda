// float8.cpp — FP8 training's three pieces, forward and backward side by side: narrowing with
// a per-tensor scale, the scaled GEMM, and the linear built from both. See float8.h.
#include "autograd/float8.h"

#include "autograd/op_support.h"
#include "tensor/observer.h"

namespace ampgrad {

static double float8_max(DType t) { return t == kFloat8_e4m3fn ? Float8E4M3Format::max_finite : Float8E5M2Format::max_finite; }

// x in dtype on its device: x itself if it is in it, else a converted copy. A transposed matrix
// (the g8ᵀ of dW = g8ᵀ x8) is converted in its memory order and handed back transposed, so the
// copy runs over contiguous memory and the GEMM reads it in place, as it would have read x.
static Tensor as_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  if (x.dim() == 2 && !x.is_contiguous() && x.t().is_contiguous()) return as_dtype(x.t(), dtype).t();
  Tensor c = empty(x.shape(), TensorOptions(dtype).device(x.device()));
  kernels::copy_(c, x);
  return c;
}

Float8Tensor to_float8(const Tensor& x, DType float8_dtype) {
  AMPGRAD_CHECK(is_float8(float8_dtype), "to_float8: the target must be a float8 dtype, got " << dtype_name(float8_dtype));
  AMPGRAD_CHECK(x.defined() && x.is_floating_point() && !is_float8(x.dtype()),
                "to_float8: expected a float32, float64, float16 or bfloat16 tensor, got " << (x.defined() ? dtype_name(x.dtype()) : "an undefined one"));
  MadeBy named("to_float8");  // its result and scales, for a MemoryHistory
  const TensorOptions f32 = TensorOptions(kFloat32).device(x.device());
  // Two passes over x, each a kernel (tensor/float8.h has their per-element rules); the scales
  // are 0-d tensors on x's device, so nothing waits for the host.
  const Tensor amax = kernels::abs_max(x);
  const Tensor scale = kernels::binary(kernels::Binary::div, full({}, float8_max(float8_dtype), f32), kernels::unary(kernels::Unary::clamp, amax, {1e-12, INFINITY}));
  return {kernels::scaled_cast(x, scale, float8_dtype), kernels::binary(kernels::Binary::div, full({}, 1.0, f32), scale)};
}

Tensor scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b, DType out_dtype) {
  AMPGRAD_CHECK(a.defined() && b.defined() && is_float8(a.dtype()) && is_float8(b.dtype()),
                "scaled_mm: expected float8 operands, got " << (a.defined() ? dtype_name(a.dtype()) : "undefined") << " and "
                                                            << (b.defined() ? dtype_name(b.dtype()) : "undefined"));
  AMPGRAD_CHECK(!(a.dtype() == kFloat8_e5m2 && b.dtype() == kFloat8_e5m2), "scaled_mm: float8_e5m2 × float8_e5m2 is not supported (as cuBLASLt's FP8 GEMM)");
  AMPGRAD_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
                "scaled_mm: cannot multiply shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
  for (const Tensor* s : {&scale_a, &scale_b})
    AMPGRAD_CHECK(s->defined() && s->dtype() == kFloat32 && s->numel() == 1,
                  "scaled_mm: scales must be float32 tensors of one element, got "
                      << (s->defined() ? std::string(dtype_name(s->dtype())) + " " + shape_str(s->shape()) : "an undefined one"));
  AMPGRAD_CHECK(is_floating_point(out_dtype) && !is_float8(out_dtype), "scaled_mm: out_dtype must be a compute floating dtype, got " << dtype_name(out_dtype));
  // Every float8 value is exact in bfloat16 (at most 4 significant bits, exponents 2^-16 to
  // 2^15), every product of two exact in float32 (4 × 4 bits), and the sums are float32's: a
  // bfloat16 GEMM with a float32 output is cuBLASLt's FP8 GEMM with float32 accumulation, before
  // one scaling and one rounding; it runs on bfloat16 dot products where the CPU has them, on a
  // GPU's bfloat16 tensor cores, and otherwise widens. (Hopper's FP8 tensor cores are reported to
  // keep fewer bits in their accumulators.) No product or sum is a float32 subnormal: all are
  // multiples of the smallest product, 2^-25, which the instruction's flush to zero never meets.
  Tensor acc = kernels::gemm(as_dtype(a, kBFloat16), as_dtype(b, kBFloat16), {}, kFloat32);
  const Tensor both = kernels::binary(kernels::Binary::mul, scale_a.reshape({}), scale_b.reshape({}));
  return as_dtype(kernels::binary(kernels::Binary::mul, acc, both), out_dtype);
}

// y = x Wᵀ + b for checked operands, x (N, Din).
static Tensor float8_linear_2d(const Tensor& x, const Tensor& w, const Tensor& b, const Float8Recipe& recipe, DType out_dtype) {
  const Float8Tensor x8 = to_float8(x, recipe.forward), w8 = to_float8(w, recipe.forward);
  Tensor out = scaled_mm(x8.data, w8.data.t(), x8.inv_scale, w8.inv_scale, out_dtype);
  if (b.defined()) kernels::add_(out, as_dtype(b, out_dtype), 1.0);  // bias broadcast over rows
  // Each operand is kept for the other's gradient only, and kept in float8: saved activations
  // take a byte an element.
  const Float8Tensor keep_x = w.requires_grad() ? x8 : Float8Tensor{}, keep_w = x.requires_grad() ? w8 : Float8Tensor{};
  record("float8_linear", out, {x, w, b},
         [x8 = keep_x, w8 = keep_w, recipe, dx_dtype = x.dtype(), dw_dtype = w.dtype(), db_dtype = b.defined() ? b.dtype() : kFloat32](const Tensor& g, const Needs& need) {
           const Float8Tensor g8 = to_float8(g, recipe.backward);
           return grads(need[0] ? scaled_mm(g8.data, w8.data, g8.inv_scale, w8.inv_scale, dx_dtype) : Tensor(),        // dx = G W    (N, Din)
                        need[1] ? scaled_mm(g8.data.t(), x8.data, g8.inv_scale, x8.inv_scale, dw_dtype) : Tensor(),  // dW = Gᵀ x   (Dout, Din)
                        need[2] ? as_dtype(kernels::sum(g, {0}, false), db_dtype) : Tensor());                      // db = Σ_n G  (Dout)
         },
         autograd::once_differentiable);
  return out;
}

Tensor float8_linear(const Tensor& x, const Tensor& w, const Tensor& b, const Float8Recipe& recipe) {
  check_linear_shapes("float8_linear", x, w, b);
  const DeviceType dev = x.device().type;
  // As autocast would give linear's output, float64 left alone.
  const bool autocast_output = amp::is_enabled(dev) && x.dtype() != kFloat64 && w.dtype() != kFloat64;
  const DType out_dtype = autocast_output ? amp::get_dtype(dev) : promote_types(x.dtype(), w.dtype());
  if (autograd::autocast_observed()) {
    AutocastCall ev{"linear", amp::is_enabled(dev) ? "lower_precision" : "(autocast off)", {x.dtype(), w.dtype()}, recipe.forward};
    if (b.defined()) ev.input_dtypes.push_back(b.dtype());
    announce([&](Observer& o) { o.on_autocast(ev); });
  }
  amp::suspend own_steps;  // the narrowing and the views below are this op's own steps, not op calls
  return over_rows(x, [&](const Tensor& rows) { return float8_linear_2d(rows, w, b, recipe, out_dtype); });
}

// The recipe checked once, where the guard is made, and the route that runs float8_linear with it.
static amp::LinearRoute float8_route(Float8Recipe recipe, bool enabled) {
  if (!enabled) return {};
  // Forward GEMMs multiply two recipe.forward operands, and no FP8 GEMM takes e5m2 × e5m2.
  AMPGRAD_CHECK(recipe.forward == kFloat8_e4m3fn && is_float8(recipe.backward),
                "float8_autocast: the recipe must be {float8_e4m3fn, float8_e4m3fn or float8_e5m2}, got {"
                    << dtype_name(recipe.forward) << ", " << dtype_name(recipe.backward) << "}");
  return [recipe](const Tensor& x, const Tensor& w, const Tensor& b) { return float8_linear(x, w, b, recipe); };
}
float8_autocast::float8_autocast(DeviceType device, Float8Recipe recipe, bool enabled) : route_(device, float8_route(recipe, enabled)) {}

}  // namespace ampgrad
