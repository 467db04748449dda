// checkpoint.h — checkpoint_sequential: a Sequential run with its activations recomputed in
// backward, as torch.utils.checkpoint.checkpoint_sequential. Activation checkpointing itself
// (one region) is autograd/checkpoint.h; this only splits a Sequential into such regions.
//
//   Tensor logits = nn::checkpoint_sequential(*net, 2, x);   // keeps half the activations
#pragma once
#include "autograd/checkpoint.h"
#include "nn/container.h"

namespace ampgrad::nn {

// Splits `seq` into `segments` runs of size() / segments modules (the last takes the rest) and
// checkpoints all but the last, which backward reaches first and would only rerun at once. The
// step then keeps the segments' inputs and one segment's activations at a time.
inline Tensor checkpoint_sequential(const Sequential& seq, int64_t segments, const Tensor& x) {
  const int64_t n = int64_t(seq.size());
  AMPGRAD_CHECK(segments >= 1 && segments <= std::max<int64_t>(n, 1),
                "checkpoint_sequential: segments must be in [1, " << n << "] for " << n << " modules, got " << segments);
  const std::vector<std::shared_ptr<Module>> mods = seq.children();
  auto run = [mods](int64_t begin, int64_t end, Tensor y) {
    for (int64_t i = begin; i < end; ++i) y = mods[i]->forward(y);
    return y;
  };
  const int64_t size = n / segments;
  Tensor y = x;
  for (int64_t s = 0; s + 1 < segments; ++s)
    y = checkpoint([run, s, size](const std::vector<Tensor>& in) { return run(s * size, (s + 1) * size, in[0]); }, {y});
  return run((segments - 1) * size, n, y);
}

}  // namespace ampgrad::nn
