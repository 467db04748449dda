// host_device.h — AMPGRAD_HD marks a function written once for the CPU and the GPU: under nvcc
// it compiles for both (__host__ __device__), under g++ it is an ordinary function. That is how
// the CPU tests cover arithmetic and index math the CUDA kernels run.
#pragma once

#ifdef __CUDACC__
#define AMPGRAD_HD __host__ __device__
#else
#define AMPGRAD_HD
#endif
