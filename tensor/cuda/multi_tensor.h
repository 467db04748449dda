// multi_tensor.h — one kernel launch over a whole list of tensors, for the GradScaler's unscale
// (amp/amp_kernels.cu) and the fused optimizer steps (optim/*.cu): PyTorch's multi_tensor_apply,
// simplified. Leaves out vectorised loads and mixed dtypes (all float32 here); a thread keeps
// kIlp elements' loads in flight at once instead (for_each_ilp).
//
// The tensors' pointers travel by value in the kernel's parameters, up to the classic 4 KB a
// launch carries: no device array is built, uploaded, kept alive until the kernel ran, or waited
// for, so the launch costs the host nothing but the launch. A longer list takes one launch per
// pack. Each tensor is cut into chunks of kMultiTensorChunk elements and every block takes one
// chunk, so a 16M-element weight and a 10-element bias share a launch and no block idles.
//
//   for_each_pack(items, [&](const TensorPack<Item>& pack) {
//     my_kernel<<<pack.blocks(), kMultiTensorBlock, 0, stream()>>>(pack, ...);
//     AMPGRAD_CUDA_CHECK(cudaGetLastError());
//   });
//   // in my_kernel(const __grid_constant__ TensorPack<Item> pack, ...):
//   const BlockChunk c = chunk_at(pack, blockIdx.x);
//   for_each_ilp(c, [&](int u, int64_t i) { r[u] = x[i]; }, [&](int u, int64_t i) { x[i] = f(r[u]); });
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/host_device.h"

namespace ampgrad::cuda {

constexpr int kMultiTensorBlock = 256;        // threads per block
constexpr int64_t kMultiTensorChunk = 16384;  // elements per block: 64 per thread

// Item: one tensor's pointers and its element count `numel` (a POD the caller defines).
template <class Item> struct TensorPack {
  // What fits in 4 KB, keeping 256 bytes for the kernel's other parameters (and 16 for the
  // last first_chunk entry and count).
  static constexpr int capacity = int((4096 - 256 - 16) / (sizeof(Item) + sizeof(int64_t)));
  Item items[capacity];
  int64_t first_chunk[capacity + 1];  // item t owns blocks [first_chunk[t], first_chunk[t + 1])
  int count;
  // At least one block: a pack of empty tensors still launches, and that block finds no work.
  unsigned blocks() const { return unsigned(first_chunk[count] > 0 ? first_chunk[count] : 1); }
};

// Splits items into packs and calls launch(pack) for each, in order.
template <class Item, class Launch> void for_each_pack(const std::vector<Item>& items, Launch&& launch) {
  static_assert(sizeof(TensorPack<Item>) <= 4096 - 256, "a TensorPack must fit in a launch's parameters");
  TensorPack<Item> pack;
  pack.count = 0;
  pack.first_chunk[0] = 0;
  for (const Item& item : items) {
    pack.items[pack.count] = item;
    pack.first_chunk[pack.count + 1] = pack.first_chunk[pack.count] + (item.numel + kMultiTensorChunk - 1) / kMultiTensorChunk;
    if (++pack.count == TensorPack<Item>::capacity) {
      launch(pack);
      pack.count = 0;
    }
  }
  if (pack.count > 0) launch(pack);
}

// The item this block works on and its chunk's element range [begin, end).
struct BlockChunk {
  int item;
  int64_t begin, end;
};

// The chunk of block `block` (blockIdx.x in a kernel; the CPU tests call it too): a binary
// search for the last item whose chunks start at or before it (empty items own no blocks and
// are stepped over). In a kernel the pack must be a __grid_constant__ parameter, so indexing it
// reads parameter memory in place instead of copying 4 KB per thread.
template <class Item> AMPGRAD_HD inline BlockChunk chunk_at(const TensorPack<Item>& pack, int64_t block) {
  int lo = 0, hi = pack.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (pack.first_chunk[mid] <= block) lo = mid;
    else hi = mid - 1;
  }
  const int64_t begin = (block - pack.first_chunk[lo]) * kMultiTensorChunk;
  const int64_t end = begin + kMultiTensorChunk < pack.items[lo].numel ? begin + kMultiTensorChunk : pack.items[lo].numel;
  return {lo, begin, end};
}

#ifdef __CUDACC__
constexpr int kIlp = 4;  // elements a thread loads before it computes and stores any of them

// This thread's elements of chunk c, kIlp at a time, blockDim apart (so a warp's accesses stay
// coalesced): load(u, i) for each of the kIlp first, then update(u, i) for each, u being the
// slot in the caller's registers. The compiler would not hoist a later element's loads above an
// earlier one's stores itself, as far as it knows they may alias: with one element at a time a
// thread has one element's bytes in flight, and the step cannot fill the memory's bandwidth.
template <class Load, class Update> __device__ inline void for_each_ilp(const BlockChunk& c, Load load, Update update) {
  for (int64_t base = c.begin + threadIdx.x; base < c.end; base += kIlp * (int64_t)blockDim.x) {
#pragma unroll
    for (int u = 0; u < kIlp; ++u)
      if (base + u * (int64_t)blockDim.x < c.end) load(u, base + u * (int64_t)blockDim.x);
#pragma unroll
    for (int u = 0; u < kIlp; ++u)
      if (base + u * (int64_t)blockDim.x < c.end) update(u, base + u * (int64_t)blockDim.x);
  }
}
#endif

}  // namespace ampgrad::cuda
