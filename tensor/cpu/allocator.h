// allocator.h — host memory for CPU tensors. Blocks of 64 KiB and more are cached when freed
// and handed out again for the same size class, so a training step's steady state makes no large
// malloc and, above all, takes none of the page faults that fresh zeroed pages cost (a tenth of
// a CNN epoch before this). The cache holds at most the program's largest allocated total, the
// least recently freed blocks going first. Small blocks go straight to malloc, fast for them.
#pragma once
#include <cstddef>

#include "tensor/memory_stats.h"

namespace ampgrad::cpu {

void* allocate(size_t nbytes);               // 64-byte aligned, never null (raises on failure)
void deallocate(void* ptr, size_t nbytes);   // nbytes as passed to allocate
size_t rounded_block_size(size_t nbytes);    // what a block of nbytes takes: 64-byte steps, a size class from 64 KiB
size_t cached_bytes();                       // held in the free lists
size_t cache_cap();                          // the most they hold: max(64 MiB, the largest total ever allocated)
void empty_cache();                          // returns every cached block to the system
MemoryStats memory_stats();                  // every block, small ones too
void reset_peak_memory_stats();

}  // namespace ampgrad::cpu
