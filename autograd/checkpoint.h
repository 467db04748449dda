// checkpoint.h — activation checkpointing, as torch.utils.checkpoint: memory traded for compute.
// (Not the file kind of checkpoint; that is data/safetensors.h.)
//
// An ordinary forward keeps every activation its backward will read until backward() reaches
// it, so a deep model's step holds all of its layers' activations at once. A checkpointed region
// keeps none of them, only its inputs. When backward reaches the region, it runs the region's
// forward again, with grad on and with the autocast state and random numbers of the first run,
// and backpropagates through that fresh graph. The step then holds the activations of one region
// at a time, for the price of a second forward through every checkpointed region. The gradients
// are the ones an ordinary forward gives: bit for bit when each weight is read once, else up to
// the order in which its several gradients are summed.
//
//   Tensor h = checkpoint([block](const std::vector<Tensor>& in) { return block->forward(in[0]); }, {x});
//
// - fn runs again inside backward, so whatever it captures must outlive this call: capture by
//   value (shared_ptrs to modules, as above), never references to locals.
// - Tensors that fn reads without taking them as inputs, a module's weights say, get their
//   gradients too: the first run finds every leaf and earlier result its graph reads.
// - The rerun draws the first run's random numbers from every Generator the first run drew from
//   (on this thread: draws made by other threads meanwhile are not replayed), so a Generator a
//   region uses must live until its backward, as a Dropout's must anyway.
// - Under create_graph the rerun reads the inputs linked to the graph outside and records its
//   backward, so gradients through a region can be differentiated again (a gradient penalty of a
//   checkpointed model). Those gradients then hold every region's recomputed graph until they
//   are dropped, as in PyTorch: the one-region-at-a-time saving is a plain backward's.
// - Inputs and weights written in place between forward and backward raise the same error as
//   any saved tensor would (node.h); other tensors fn captures are not checked, as in PyTorch.
// - fn must compute the same from the same inputs: a rerun that reads other tensors or returns
//   another shape or dtype raises an error. So does a tensor kept from inside the region that
//   depends on an input needing a gradient, which would not reach the input; one that depends
//   only on weights or on inputs needing none gets its gradients, but keeps its part of the
//   region's graph, and so its memory.
#pragma once
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad {

using RegionFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;

// fn(inputs), keeping only `inputs` for backward. With grad mode off it is a plain call.
Tensor checkpoint(RegionFn fn, const std::vector<Tensor>& inputs);

}  // namespace ampgrad
