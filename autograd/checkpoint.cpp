// checkpoint.cpp — a region run twice: once to find what its graph reads from outside, which
// becomes one node's edges, and again inside that node's backward, for the gradients.
#include "autograd/checkpoint.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>

#include "amp/autocast.h"
#include "autograd/node.h"
#include "tensor/random.h"

namespace ampgrad {

using namespace autograd;

namespace {

// Something a region's graph reads from outside it: one of fn's inputs, or a leaf (a weight) or
// a node recorded before the region (an earlier result fn captured).
struct Target {
  int input = -1;                // fn's input number, or -1 and
  const void* other = nullptr;   // the leaf's TensorImpl or the node
  bool operator==(const Target&) const = default;
};

// The region's edges out, found by walking its graph from the output, each with the key the
// engine catches its gradient by and the shape the reading node gave it.
struct Boundary {
  std::vector<Target> targets;
  std::vector<Edge> edges;
  std::vector<const void*> keys;
  std::vector<Shape> shapes;
};

Boundary boundary_of(const Tensor& out, uint64_t first, const std::vector<Tensor>& inputs) {
  Boundary b;
  std::unordered_set<Node*> seen{out.grad_fn().get()};
  std::vector<Node*> stack{out.grad_fn().get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (size_t j = 0; j < n->edges.size(); ++j) {
      const Edge& e = n->edges[j];
      if (e.fn && e.fn->sequence_nr >= first) {  // recorded inside the region: walk on
        if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
        continue;
      }
      if (!e) continue;
      const void* key = e.fn ? (const void*)e.fn.get() : e.leaf.get();
      Target t{-1, key};
      for (size_t k = 0; k < inputs.size(); ++k)  // a region input: a leaf of its own, or (create_graph) a view's node
        if (inputs[k].defined() && (inputs[k].impl_ptr().get() == key || inputs[k].grad_fn().get() == key)) t = {int(k), nullptr};
      if (std::find(b.targets.begin(), b.targets.end(), t) != b.targets.end()) continue;
      b.targets.push_back(t);
      b.edges.push_back(e);
      b.keys.push_back(key);
      b.shapes.push_back(n->input_shapes[j]);
    }
  }
  return b;
}

// fn's inputs as the region sees them: detached, each requiring grad as the original does, so
// the region's graph ends at them and their gradients can be caught there. Under create_graph
// (`linked`) those that require grad are views of the linked inputs instead: the gradients are
// caught at the views' nodes, and the graph recorded for them reaches the real inputs.
std::vector<Tensor> region_inputs(const std::vector<Tensor>& xs, const std::vector<bool>& requires_grad, bool linked = false) {
  std::vector<Tensor> d;
  for (size_t k = 0; k < xs.size(); ++k) {
    if (!xs[k].defined()) d.push_back(xs[k]);
    else if (linked && requires_grad[k] && xs[k].requires_grad()) d.push_back(xs[k].view(xs[k].shape()));  // (frozen since: a constant)
    else d.push_back(xs[k].detach().requires_grad_(requires_grad[k]));
  }
  return d;
}

// What the rerun needs of the first run.
struct Region {
  RegionFn fn;
  std::vector<Saved> inputs;       // version-checked, as every saved tensor
  std::vector<bool> requires_grad;  // of each input
  std::vector<Saved> leaves;       // the weights it read: checked, so a step in between raises
  std::vector<Target> targets;     // the first run's boundary, which the rerun must match
  bool autocast_on[2];             // CPU, CUDA
  DType autocast_dtype[2];
  amp::LinearRoute linear_route[2];  // a dispatch hook's (an 8-bit GEMM's), if one was on
  DrawRecorder::Drawn draws;       // each generator it drew from, as it was before (dropout masks)
  Shape out_shape;                 // what it returned, which the rerun must match
  DType out_dtype;
  Device out_device;
};

// Puts each generator the first run drew from where it was then, and back on exit.
struct ReplayDraws {
  DrawRecorder::Drawn now;
  explicit ReplayDraws(const DrawRecorder::Drawn& first) {
    for (const auto& [gen, state] : first) {
      now.emplace_back(gen, gen->get_state());
      gen->set_state(state);
    }
  }
  ~ReplayDraws() {
    for (const auto& [gen, state] : now) gen->set_state(state);
  }
};

std::string describe(const Shape& shape, DType dtype, Device device) {
  return std::string(dtype_name(dtype)) + " " + shape_str(shape) + " on " + device.str();
}
std::string describe(const Tensor& t) { return describe(t.shape(), t.dtype(), t.device()); }

// The region's gradients, from a second forward and a backward through it. Under create_graph
// (the engine records this node's backward) that backward is recorded too, from inputs linked
// to the graph outside (Saved::get), so the gradients can be differentiated again.
Grads rerun(const Region& r, const Tensor& grad_out) {
  const bool recorded = recording_backward();
  std::vector<Tensor> saved;
  for (const Saved& s : r.inputs) saved.push_back(s.get());
  for (const Saved& s : r.leaves) s.get();
  Tensor out;
  std::vector<Tensor> inputs;
  uint64_t first;
  {
    EnableGradGuard grad_on;  // a plain backward runs with grad off: this is a forward
    inputs = region_inputs(saved, r.requires_grad, recorded);
    first = next_sequence_nr();
    // exercise 4.2: rerun_region — out = fn(inputs) as the first run ran it: its autocast state, linear routes and random draws
    amp::cache_scope own_casts;
    amp::autocast cpu(DeviceType::CPU, r.autocast_dtype[0], r.autocast_on[0]);
    amp::autocast gpu(DeviceType::CUDA, r.autocast_dtype[1], r.autocast_on[1]);
    amp::LinearRouteGuard cpu_route(DeviceType::CPU, r.linear_route[0]);
    amp::LinearRouteGuard gpu_route(DeviceType::CUDA, r.linear_route[1]);
    ReplayDraws same_draws(r.draws);
    ForwardRerunGuard rerun;  // batch norm leaves its running statistics alone (grad_mode.h)
    out = r.fn(inputs);
    // end exercise 4.2
  }
  AMPGRAD_CHECK(out.defined() && out.shape() == r.out_shape && out.dtype() == r.out_dtype && out.device() == r.out_device,
                "checkpoint: the region's rerun in backward returned " << (out.defined() ? describe(out) : "an undefined tensor")
                    << ", its first run " << describe(r.out_shape, r.out_dtype, r.out_device)
                    << "; a checkpointed function must compute the same from the same inputs");
  Boundary b;
  if (out.grad_fn() && out.grad_fn()->sequence_nr >= first) b = boundary_of(out, first, inputs);
  AMPGRAD_CHECK(b.targets == r.targets && !b.targets.empty(),
                "checkpoint: the region's rerun in backward read other tensors than its first run; a checkpointed "
                "function must build the same graph from the same inputs (does it branch on something that changed?)");
  Caught caught;
  for (const void* key : b.keys) caught[key] = Tensor();
  run_backward({out}, {grad_out}, /*retain_graph=*/recorded, {.stop_at = &caught}, /*create_graph=*/recorded);
  Grads gs;
  for (const void* key : b.keys) gs.push_back(caught[key]);
  return gs;
}

}  // namespace

Tensor checkpoint(RegionFn fn, const std::vector<Tensor>& inputs) {
  AMPGRAD_CHECK(fn, "checkpoint: the function is empty");
  if (!is_grad_enabled()) return fn(inputs);  // no graph, so nothing to keep
  auto r = std::make_shared<Region>();
  for (const Tensor& x : inputs) {
    r->inputs.emplace_back(x);
    r->requires_grad.push_back(x.defined() && x.requires_grad());
  }
  for (DeviceType d : {DeviceType::CPU, DeviceType::CUDA}) {
    r->autocast_on[int(d)] = amp::is_enabled(d);
    r->autocast_dtype[int(d)] = amp::get_dtype(d);
    r->linear_route[int(d)] = amp::linear_route(d);
  }
  const std::vector<Tensor> region_in = region_inputs(inputs, r->requires_grad);
  const uint64_t first = next_sequence_nr();
  Tensor out;
  {
    amp::cache_scope own_casts;
    DrawRecorder draws;
    out = fn(region_in);
    r->draws = draws.drawn();
  }
  AMPGRAD_CHECK(out.defined(), "checkpoint: the function returned an undefined tensor");
  Tensor result;
  if (!out.grad_fn() || out.grad_fn()->sequence_nr < first) {
    // The region recorded nothing for its output: it handed back an input, or a tensor from
    // outside, or nothing it read needs a gradient.
    result = out;
    for (size_t k = 0; k < inputs.size(); ++k)
      if (out.impl_ptr() == region_in[k].impl_ptr()) result = inputs[k];
  } else {
    // One node for the whole region: its edges are the boundary's, the inputs' edges taken
    // from the inputs themselves (the region saw detached copies).
    Boundary b = boundary_of(out, first, region_in);
    auto node = std::make_shared<Node>();
    node->name = "checkpoint";
    for (size_t i = 0; i < b.targets.size(); ++i) {
      const Target& t = b.targets[i];
      node->edges.push_back(t.input >= 0 ? edge_to(inputs[t.input]) : b.edges[i]);
      node->input_shapes.push_back(b.shapes[i]);
      if (t.input < 0 && b.edges[i].leaf) r->leaves.emplace_back(Tensor(b.edges[i].leaf));
    }
    r->fn = std::move(fn);
    r->targets = std::move(b.targets);
    r->out_shape = out.shape();
    r->out_dtype = out.dtype();
    r->out_device = out.device();
    node->backward = [r](const Tensor& g, const Needs&) { return rerun(*r, g); };
    result = out.detach();
    attach(result, std::move(node));
  }

  // Now the region's graph, and with it its activations, goes. A tensor the function kept from
  // inside the region (an auxiliary output, stashed) would keep part of it, and a gradient that
  // came through it would stop at a region input instead of reaching the input it stands for.
  out = Tensor();
  for (size_t k = 0; k < region_in.size(); ++k)
    AMPGRAD_CHECK(!region_in[k].defined() || region_in[k].impl_ptr().use_count() == 1,
                  "checkpoint: a tensor computed inside the region from input " << k << " outlives the region (did the function "
                  "keep one?); its gradient could not reach the input, and the region's memory would not be freed. Return it "
                  "from a region of its own, or compute it outside");
  return result;
}

}  // namespace ampgrad
