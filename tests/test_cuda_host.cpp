// test_cuda_host.cpp — the CUDA backend's host-and-device code, run on the CPU against the CPU
// backend: the kernels' index math (which elements each thread of an elementwise loop, im2col,
// col2im, max_pool2d, gather / scatter_add, index_select / index_add and a multi-tensor launch
// reads and writes: tensor/cuda/indexing.h, tensor/cuda/multi_tensor.h, with the geometries
// tensor/cuda/loops.h builds), the layout of every cuBLAS GEMM (tensor/cuda/gemm.h), and the
// conversions every load and store goes through (tensor/cuda/dispatch.cuh). The kernels call
// exactly these functions, so this part of the CUDA backend is tested wherever it is built, GPU
// or not. The index cases run the 64-bit path beside the 32-bit one that every real launch takes.
#include <doctest/doctest.h>

#include "skip.h"

#ifdef AMPGRAD_WITH_CUDA
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tensor/cuda/dispatch.cuh"
#include "tensor/cuda/gemm.h"
#include "tensor/cuda/indexing.h"
#include "tensor/cuda/loops.h"
#include "tensor/cuda/multi_tensor.h"
#include "tensor/random.h"
#include "tensor/scalar_math.h"
#include "test_util.h"

using namespace ampgrad;
using namespace ampgrad::cuda;

namespace {

template <class T = double> std::vector<T> values(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

// Every element holds its own storage position, so reading a view of it through the CPU's copy
// says where each element of the view lives.
Tensor positions(const Shape& shape) { return arange(0, double(numel_of(shape)), 1, TensorOptions(kFloat64)).view(shape); }

// Walks make_loop's geometry with loop_offsets, as elementwise_kernel does: element i of operand
// k must sit where the CPU reads it, the storage position held by element i of that operand
// broadcast to `shape`. The same loop, said to be too long for 32-bit indices, must give the
// same offsets through the 64-bit path.
template <int N> void check_loop(const Shape& shape, std::array<const Tensor*, N> ts) {
  const Loop<N> loop = make_loop<N>("test", shape, ts);
  Loop<N> wide = loop;
  wide.numel = int64_t(UINT32_MAX) + 1;
  std::array<std::vector<double>, N> expected;
  for (int k = 0; k < N; ++k) {
    Tensor read = empty(shape, kFloat64);
    read.copy_(*ts[k]);
    expected[k] = values(read);
  }
  for (int64_t i = 0; i < loop.numel; ++i) {
    int64_t off[N], off_wide[N];
    loop_offsets(loop, i, off);
    loop_offsets(wide, i, off_wide);
    for (int k = 0; k < N; ++k) {
      REQUIRE(double(ts[k]->storage_offset() + off[k]) == expected[k][i]);
      REQUIRE(off_wide[k] == off[k]);
    }
  }
}

struct ImageCase {
  int64_t N, C, H, W, kh, kw, stride, pad;
};
// Square and not, stride 1 to 3, padding 0 to 2, a window as large as the image, a 1x1 one, and
// windows narrower than their stride (pixels no window reads).
const ImageCase image_cases[] = {{2, 3, 5, 6, 3, 3, 1, 1}, {1, 2, 7, 5, 2, 3, 2, 0}, {2, 1, 6, 7, 3, 2, 3, 2},
                                 {1, 1, 4, 4, 4, 4, 1, 0}, {1, 2, 3, 3, 1, 1, 1, 0}, {1, 1, 5, 5, 3, 3, 2, 2}};
// max_pool2d's: square windows, no padding; strides 1 to 3, windows that tile, overlap and skip.
const ImageCase pool_cases[] = {{2, 3, 6, 6, 2, 2, 2, 0}, {1, 2, 7, 5, 3, 3, 2, 0}, {1, 1, 5, 5, 2, 2, 1, 0},
                                {2, 1, 9, 7, 2, 2, 3, 0}, {1, 1, 4, 4, 4, 4, 1, 0}};

struct Span {  // a multi-tensor item: which tensor, how long
  int id;
  int64_t numel;
};

template <class Half> uint16_t bits16(Half h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint32_t bits32(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Every 16-bit pattern, and the values the CPU widens them to in dtype (float16 or bfloat16).
std::vector<uint16_t> all_patterns() {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t b = 0; b < 0x10000; ++b) all[b] = uint16_t(b);
  return all;
}
std::vector<float> cpu_widened(const std::vector<uint16_t>& patterns, DType dtype) {
  const Tensor wide = from_blob(patterns.data(), {(int64_t)patterns.size()}, dtype).to(kFloat32);
  return values<float>(wide);
}

// Every float a store into dtype must handle: each dtype value, the floats next to it, the
// midpoint to the next value (a tie: round to even), the infinities, and NaNs of both signs,
// quiet and signalling, with and without payload bits.
std::vector<float> store_inputs(DType dtype) {
  const std::vector<float> v = cpu_widened(all_patterns(), dtype);
  std::vector<float> in;
  for (size_t b = 0; b < v.size(); ++b) {
    if (v[b] != v[b]) continue;
    in.insert(in.end(), {v[b], std::nextafter(v[b], INFINITY), std::nextafter(v[b], -INFINITY)});
    if (b + 1 < v.size() && std::isfinite(v[b + 1])) in.push_back(float((double(v[b]) + v[b + 1]) / 2));  // exact in float
  }
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FC12345u, 0xFFA00F00u}) in.push_back(from_bits(nan));
  return in;
}

// Runs the cuBLAS call `g` describes as cuBLAS documents it, on the CPU, in double: column-major
// matrices, op(X) = X or Xᵀ read with leading dimension ldX, C_p = op(A_p) · op(B_p) for each p
// of the batch, X_p starting strideX elements after X_{p-1}. First the argument rules cuBLAS
// enforces (it refuses a call that breaks them), then the product.
void replay_gemm(const GemmArgs& g) {
  REQUIRE(g.m >= 0);
  REQUIRE(g.n >= 0);
  REQUIRE(g.k >= 0);
  REQUIRE(g.batch >= 1);
  REQUIRE(g.lda >= std::max(1, g.transa == CUBLAS_OP_N ? g.m : g.k));
  REQUIRE(g.ldb >= std::max(1, g.transb == CUBLAS_OP_N ? g.k : g.n));
  REQUIRE(g.ldc >= std::max(1, g.m));
  auto at = [](const double* X, cublasOperation_t op, int ld, int64_t row, int64_t col) {
    return op == CUBLAS_OP_N ? X[row + col * ld] : X[col + row * ld];
  };
  for (int p = 0; p < g.batch; ++p) {
    const double* A = static_cast<const double*>(g.A) + p * g.strideA;
    const double* B = static_cast<const double*>(g.B) + p * g.strideB;
    double* C = static_cast<double*>(g.C) + p * g.strideC;
    for (int i = 0; i < g.m; ++i)
      for (int j = 0; j < g.n; ++j) {
        double acc = 0;
        for (int l = 0; l < g.k; ++l) acc += at(A, g.transa, g.lda, i, l) * at(B, g.transb, g.ldb, l, j);
        C[i + int64_t(j) * g.ldc] = acc;
      }
  }
}

// Small integers: every product and sum is exact, so the replay must equal the CPU's matmul bit
// for bit whatever order either sums in.
Tensor small_ints(const Shape& shape, uint64_t seed) {
  manual_seed(seed);
  return randint(-4, 5, shape).to(kFloat64);
}

// The CPU's bits for `in` stored as dtype: its real copy path (vectorised chunks and all).
template <class T> std::vector<uint16_t> cpu_store(const std::vector<T>& in, DType dtype) {
  const Tensor stored = from_blob(in.data(), {(int64_t)in.size()}, dtype_of<T>()).to(dtype);
  std::vector<uint16_t> out(in.size());
  std::memcpy(out.data(), stored.raw_data(), 2 * in.size());
  return out;
}

// Checks cast<Device>(x) against the CPU's store of x into dtype, for every x of `in`.
template <class Device, class T> void check_stores(const std::vector<T>& in, DType dtype) {
  const std::vector<uint16_t> want = cpu_store(in, dtype);
  for (size_t i = 0; i < in.size(); ++i) {
    INFO(dtype_name(dtype) << " from " << dtype_name(dtype_of<T>()) << ": " << double(in[i]));
    REQUIRE(bits16(cast<Device>(in[i])) == want[i]);
  }
}

}  // namespace

TEST_CASE("elementwise loops: each operand's offsets are where the CPU reads it, in any geometry") {
  // Same-shape contiguous operands merge into one dense dim: the kernels' fast path.
  Tensor a = positions({2, 3, 4}), b = positions({2, 3, 4}), out = positions({2, 3, 4});
  CHECK(make_loop<3>("add", {2, 3, 4}, {&out, &a, &b}).contiguous);
  check_loop<3>({2, 3, 4}, {&out, &a, &b});
  // A strided output, a transposed input, one broadcast along two dims.
  Tensor out_t = positions({4, 3, 2}).permute({2, 1, 0}), a_t = positions({3, 2, 4}).transpose(0, 1), b_col = positions({3, 1});
  check_loop<3>({2, 3, 4}, {&out_t, &a_t, &b_col});
  // Narrowed and selected views (storage offsets), a 0-d operand, a size-1 dim in between.
  Tensor a_n = positions({5, 6, 7}).narrow(1, 1, 3).narrow(2, 2, 4), zero_d = positions({}), out_p = positions({4, 3, 5}).permute({2, 1, 0});
  check_loop<3>({5, 3, 4}, {&out_p, &a_n, &zero_d});
  Tensor out4 = positions({2, 4, 3, 5}), sel = positions({3, 4, 5}).select(0, 2).unsqueeze(1), c = positions({4, 1, 5});
  check_loop<3>({2, 4, 3, 5}, {&out4, &sel, &c});
  Tensor expanded = positions({1, 3, 1, 4}).expand({2, 3, 5, 4}), out_e = positions({2, 3, 5, 4});
  check_loop<2>({2, 3, 5, 4}, {&out_e, &expanded});
  // Eight dims that cannot merge are the most a kernel indexes; a ninth is refused by name.
  Tensor rev8 = positions(Shape(8, 2)).permute({7, 6, 5, 4, 3, 2, 1, 0}), out8 = positions(Shape(8, 2));
  CHECK(make_loop<2>("copy_", Shape(8, 2), {&out8, &rev8}).ndim == 8);
  check_loop<2>(Shape(8, 2), {&out8, &rev8});
  Tensor rev9 = positions(Shape(9, 2)).permute({8, 7, 6, 5, 4, 3, 2, 1, 0}), out9 = positions(Shape(9, 2));
  CHECK(error_of([&] { make_loop<2>("copy_", Shape(9, 2), {&out9, &rev9}); }) ==
        "copy_: CUDA kernels index at most 8 dims (after merging dense ones), got shape [2, 2, 2, 2, 2, 2, 2, 2, 2]");
}

TEST_CASE("elementwise loops move runs of neighbours only where every operand is dense along the last dim and aligned") {
  Tensor a = positions({4, 8}), b = positions({4, 8}), out = positions({4, 8}), bias = positions({8});
  CHECK(moves_in_runs(make_loop<3>("add", {4, 8}, {&out, &a, &b}), 4));      // contiguous: one dense dim
  CHECK(moves_in_runs(make_loop<3>("add", {4, 8}, {&out, &a, &bias}), 4));   // a bias broadcast down the rows
  CHECK(moves_in_runs(make_loop<3>("add", {4, 8}, {&out, &a, &bias}), 8));
  CHECK_FALSE(moves_in_runs(make_loop<3>("add", {4, 8}, {&out, &a, &bias}), 16));  // rows of 8 hold no run of 16
  CHECK_FALSE(moves_in_runs(make_loop<3>("add", {4, 8}, {&out, &a, &b}), 1));
  Tensor column = positions({4, 1}), a_t = positions({8, 4}).t();
  CHECK_FALSE(moves_in_runs(make_loop<3>("add", {4, 8}, {&out, &a, &column}), 4));  // stride 0 along the last dim
  CHECK_FALSE(moves_in_runs(make_loop<3>("add", {4, 8}, {&out, &a_t, &b}), 4));     // stride 4 along it
  // Views: rows 12 apart keep every run aligned, rows 10 apart do not; nor does a start 8 bytes in.
  Tensor rows12 = positions({4, 12}).narrow(1, 0, 8), rows10 = positions({4, 10}).narrow(1, 0, 8), shifted = positions({4, 10}).narrow(1, 1, 8);
  CHECK(moves_in_runs(make_loop<2>("copy_", {4, 8}, {&out, &rows12}), 4));
  CHECK(moves_in_runs(make_loop<2>("copy_", {4, 8}, {&out, &rows10}), 2));
  CHECK_FALSE(moves_in_runs(make_loop<2>("copy_", {4, 8}, {&out, &rows10}), 4));
  CHECK_FALSE(moves_in_runs(make_loop<2>("copy_", {4, 8}, {&out, &shifted}), 2));
  // A contiguous loop takes runs whatever its length (the tail goes one by one), if it holds one.
  Tensor ten = positions({10}), ten_out = positions({10}), three = positions({3}), three_out = positions({3});
  CHECK(moves_in_runs(make_loop<2>("neg", {10}, {&ten_out, &ten}), 4));
  CHECK_FALSE(moves_in_runs(make_loop<2>("neg", {3}, {&three_out, &three}), 4));
}

TEST_CASE("elementwise loops: past 2^32 elements the offsets divide in 64 bits") {
  // A column-major (3, 2^31 + 5) operand; position 2 * cols + 7 is (2, 7), at 2 + 7 * 3.
  const int64_t cols = (int64_t(1) << 31) + 5;
  Loop<1> loop{};
  loop.numel = 3 * cols;
  loop.ndim = 2;
  loop.shape[0] = 3;
  loop.shape[1] = cols;
  loop.strides[0][0] = 1;
  loop.strides[0][1] = 3;
  int64_t off[1];
  loop_offsets(loop, 2 * cols + 7, off);
  CHECK(off[0] == 23);
  int64_t wrapped[1] = {0};  // what 32-bit division would find there: position 17, at 51
  add_offsets(loop, uint32_t(2 * cols + 7), wrapped);
  CHECK(wrapped[0] == 51);
}

TEST_CASE("im2col and col2im: each thread reads the CPU kernels' elements, and col2im sums in their order, rounding once") {
  for (const ImageCase& c : image_cases) {
    INFO("image " << c.H << "x" << c.W << ", window " << c.kh << "x" << c.kw << ", stride " << c.stride << ", pad " << c.pad);
    const Shape x_shape{c.N, c.C, c.H, c.W};
    const ImageGeometry g = image_geometry(x_shape, c.kh, c.kw, c.stride, c.pad);
    manual_seed(3);
    Tensor x = randn(x_shape, TensorOptions(kFloat64));
    const std::vector<double> xv = values(x), want = values(kernels::im2col(x, c.kh, c.kw, c.stride, c.pad));
    REQUIRE((int64_t)want.size() == g.N * g.Ho * g.Wo * g.C * g.kh * g.kw);
    for (int64_t e = 0; e < (int64_t)want.size(); ++e) {  // im2col_kernel, thread e
      const int64_t src = im2col_source(g, uint32_t(e));
      REQUIRE(im2col_source(g, e) == src);
      REQUIRE((src >= 0 ? xv[src] : 0.0) == want[e]);
    }
    // col2im of random columns, bit for bit: the kernel's sum in the math type, rounded once (the
    // device's rounding of float to the 16-bit types is the CPU's, checked below).
    auto check_col2im = [&](auto zero) {
      using T = decltype(zero);
      using A = ampgrad::opmath_t<T>;
      Tensor cols = randn({g.N * g.Ho * g.Wo, g.C * g.kh * g.kw}, TensorOptions(dtype_of<T>()));
      const std::vector<T> cv = values<T>(cols), cpu = values<T>(kernels::col2im(cols, x_shape, c.kh, c.kw, c.stride, c.pad));
      for (int64_t e = 0; e < (int64_t)cpu.size(); ++e) {  // col2im_kernel, thread e
        const PixelSources src = col2im_sources(g, uint32_t(e)), src64 = col2im_sources(g, e);
        REQUIRE(std::memcmp(&src, &src64, sizeof src) == 0);
        A acc = 0;
        for (int64_t oh = src.oh_begin; oh < src.oh_end; ++oh)
          for (int64_t ow = src.ow_begin; ow < src.ow_end; ++ow) acc += A(cv[src.at(g, oh, ow)]);
        const T sum = T(acc);
        REQUIRE(std::memcmp(&sum, &cpu[e], sizeof sum) == 0);
      }
    };
    check_col2im(0.0);
    check_col2im(0.f);
    check_col2im(ampgrad::half(0));
    check_col2im(ampgrad::bfloat16(0));
  }
}

TEST_CASE("max_pool2d: each thread's window and index are the CPU's, with ties and NaN") {
  for (const ImageCase& c : pool_cases) {
    INFO("image " << c.H << "x" << c.W << ", window " << c.kh << ", stride " << c.stride);
    const Shape x_shape{c.N, c.C, c.H, c.W};
    const ImageGeometry g = image_geometry(x_shape, c.kh, c.kw, c.stride, 0);
    manual_seed(5);
    Tensor x = randint(0, 3, x_shape).to(kFloat64);  // three values: ties everywhere
    double* xp = x.data_ptr<double>();
    xp[c.W + 1] = NAN;  // in the first plane's second row, and the last element of all
    xp[x.numel() - 1] = NAN;
    auto [out, idx] = kernels::max_pool2d(x, c.kh, c.stride);
    const std::vector<int64_t> want = values<int64_t>(idx);
    for (int64_t e = 0; e < (int64_t)want.size(); ++e) {  // max_pool2d_kernel, thread e
      const PoolWindow win = pool_window(g, uint32_t(e)), win64 = pool_window(g, e);
      REQUIRE(std::memcmp(&win, &win64, sizeof win) == 0);
      const double* plane = xp + win.plane;
      int64_t best = win.at(0, 0);
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j)
          if (math::pool_beats(plane[win.at(i, j)], plane[best])) best = win.at(i, j);
      REQUIRE(best == want[e]);
    }
  }
}

TEST_CASE("gather and scatter_add: each index entry addresses the CPU's element") {
  const Shape shape{3, 4, 5};
  Tensor x = positions(shape);
  for (int64_t dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    Shape index_shape{2, 3, 4};  // smaller than x outside dim, longer than x along it
    index_shape[dim] = 7;
    manual_seed(dim);
    Tensor index = randint(0, shape[dim], index_shape), src = randn(index_shape, TensorOptions(kFloat64));
    const std::vector<int64_t> iv = values<int64_t>(index);
    const std::vector<double> at = values(kernels::gather(x, dim, index)), sv = values(src);
    const IndexGeometry g = index_geometry("gather", shape, dim, index);
    std::vector<double> scattered(numel_of(shape), 0.0);
    for (int64_t k = 0; k < g.numel; ++k) {  // gather_kernel and scatter_add_kernel, thread k
      const int64_t pos = indexed_position(g, uint32_t(k), iv[k]);
      REQUIRE(indexed_position(g, k, iv[k]) == pos);
      REQUIRE(double(pos) == at[k]);
      scattered[pos] += sv[k];  // in k order, as the CPU adds
    }
    CHECK(values(kernels::scatter_add(shape, dim, index, src)) == scattered);
  }
  const Tensor index9 = zeros(Shape(9, 1), kInt64);
  CHECK(error_of([&] { index_geometry("gather", Shape(9, 2), 0, index9); }) ==
        "gather: CUDA kernels index at most 8 dims, got shape [2, 2, 2, 2, 2, 2, 2, 2, 2]");
}

TEST_CASE("index_select and index_add: each element of a selected slice addresses the CPU's element") {
  const Shape shape{3, 4, 5};
  Tensor x = positions(shape);
  for (int64_t dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    manual_seed(dim);
    Tensor index = randint(0, shape[dim], {7});  // more slices than there are: some twice
    Shape selected = shape;
    selected[dim] = 7;
    Tensor src = randn(selected, TensorOptions(kFloat64));
    const std::vector<int64_t> iv = values<int64_t>(index);
    const std::vector<double> at = values(kernels::index_select(x, dim, index)), sv = values(src);
    const SliceGeometry g = slice_geometry(shape, dim, 7);
    std::vector<double> added(numel_of(shape), 0.0);
    for (int64_t k = 0; k < numel_of(selected); ++k) {  // index_select_kernel and index_add_kernel, thread k
      const int64_t s = iv[slice_of(g, uint32_t(k))];
      REQUIRE(iv[slice_of(g, k)] == s);
      const int64_t pos = slice_position(g, uint32_t(k), s);
      REQUIRE(slice_position(g, k, s) == pos);
      REQUIRE(double(pos) == at[k]);
      added[pos] += sv[k];
    }
    CHECK(values(kernels::index_add(shape, dim, index, src)) == added);
  }
}

TEST_CASE("multi-tensor launches: every element of every tensor is one block's, and no block idles") {
  // Sizes around the 16384-element chunk, empty tensors, and 400 of them: several packs.
  const int64_t sizes[] = {1, 7, 16383, 16384, 16385, 100003, 0, 3};
  std::vector<Span> items;
  for (int t = 0; t < 400; ++t) items.push_back({t, sizes[t % 8]});
  std::vector<std::vector<int>> seen(items.size());
  for (const Span& s : items) seen[s.id].assign(s.numel, 0);
  int packs = 0;
  for_each_pack(items, [&](const TensorPack<Span>& pack) {
    ++packs;
    int64_t chunks = 0;
    for (int t = 0; t < pack.count; ++t) chunks += (pack.items[t].numel + kMultiTensorChunk - 1) / kMultiTensorChunk;
    REQUIRE(pack.blocks() == chunks);
    for (int64_t block = 0; block < chunks; ++block) {  // blockIdx.x of one launch
      const BlockChunk c = chunk_at(pack, block);
      const Span& s = pack.items[c.item];
      REQUIRE(0 <= c.begin);
      REQUIRE(c.begin < c.end);  // no block without work
      REQUIRE(c.end <= s.numel);
      for (int64_t i = c.begin; i < c.end; ++i) ++seen[s.id][i];
    }
  });
  CHECK(packs == (400 + TensorPack<Span>::capacity - 1) / TensorPack<Span>::capacity);
  for (const Span& s : items)
    for (int64_t i = 0; i < s.numel; ++i) REQUIRE(seen[s.id][i] == 1);
  // A list of empty tensors still launches one block, which finds nothing to do.
  for_each_pack(std::vector<Span>{{0, 0}, {1, 0}}, [&](const TensorPack<Span>& pack) {
    CHECK(pack.blocks() == 1);
    const BlockChunk c = chunk_at(pack, 0);
    CHECK(c.begin == c.end);
  });
}
TEST_CASE("cuBLAS GEMM layout: transposed, sliced, broadcast and batched operands give the CPU's matmul") {
  struct Case {
    const char* what;
    Tensor a, b;
  };
  const Tensor wide = small_ints({5, 9}, 1);
  std::vector<Case> cases = {
      {"contiguous", small_ints({3, 4}, 2), small_ints({4, 5}, 3)},
      {"a transposed", small_ints({4, 3}, 4).t(), small_ints({4, 5}, 5)},
      {"b transposed (x · wᵀ, every Linear)", small_ints({3, 4}, 6), small_ints({5, 4}, 7).t()},
      {"both transposed", small_ints({4, 3}, 8).t(), small_ints({5, 4}, 9).t()},
      {"sliced columns (ld > width)", wide.narrow(1, 2, 4).narrow(0, 0, 3), small_ints({4, 5}, 10)},
      {"a row read from a column", wide.narrow(1, 3, 1).narrow(0, 0, 4).t(), small_ints({4, 5}, 11)},
      {"b a single column", small_ints({3, 5}, 12), wide.narrow(1, 6, 1)},
      {"every other column: copied first", wide.as_strided({3, 4}, {9, 2}, 0), small_ints({4, 5}, 13)},
      {"a broadcast row: copied first", small_ints({1, 4}, 14).expand({3, 4}), small_ints({4, 5}, 15)},
      {"batched", small_ints({2, 3, 4}, 16), small_ints({2, 4, 5}, 17)},
      {"batched, a transposed", small_ints({2, 4, 3}, 18).transpose(1, 2), small_ints({2, 4, 5}, 19)},
      {"batched, batches interleaved", small_ints({3, 2, 4}, 20).permute({1, 0, 2}), small_ints({2, 4, 5}, 21)},
      {"batched, b broadcast over the batch", small_ints({2, 3, 4}, 22), small_ints({4, 5}, 23).unsqueeze(0).expand({2, 4, 5})},
  };
  for (const Case& c : cases) {
    INFO(c.what << ": " << shape_str(c.a.shape()) << " · " << shape_str(c.b.shape()));
    const Tensor want = kernels::gemm(c.a, c.b, {}, c.a.dtype());
    Tensor out = zeros(want.shape(), kFloat64), a_copy, b_copy;
    replay_gemm(gemm_args(c.a, c.b, out, a_copy, b_copy));
    CHECK(values(out) == values(want));
  }
}

TEST_CASE("half stores round like the CPU's: every value, the ties between them, inf and NaN, from float, double and int64") {
  const std::vector<float> f16 = store_inputs(kFloat16), bf16 = store_inputs(kBFloat16);
  check_stores<__half>(f16, kFloat16);
  check_stores<__nv_bfloat16>(bf16, kBFloat16);
  // double and int64 go through float first, on both backends: a double just off a tie lands
  // on it in float, then rounds to even.
  std::vector<double> d(f16.begin(), f16.end());
  for (float f : f16)
    if (std::isfinite(f) && f != 0) d.push_back(double(f) * (1 + 0x1p-40));
  check_stores<__half>(d, kFloat16);
  check_stores<__nv_bfloat16>(std::vector<double>(bf16.begin(), bf16.end()), kBFloat16);
  std::vector<int64_t> ints;
  for (int64_t v = -70000; v <= 70000; v += 7) ints.push_back(v);
  for (int64_t v : {2049ll, 2051ll, 65519ll, 65520ll, 1ll << 40, -(1ll << 62) - 1}) ints.push_back(v);
  check_stores<__half>(ints, kFloat16);
  check_stores<__nv_bfloat16>(ints, kBFloat16);
}

TEST_CASE("half loads widen like the CPU's: every float16 and bfloat16 bit pattern") {
  const std::vector<uint16_t> all = all_patterns();
  for (DType dtype : {kFloat16, kBFloat16}) {
    const std::vector<float> want = cpu_widened(all, dtype);
    for (uint16_t b : all) {
      INFO(dtype_name(dtype) << " bits " << b);
      const float got = dtype == kFloat16 ? load(__ushort_as_half(b)) : load(__ushort_as_bfloat16(b));
      REQUIRE(bits32(got) == bits32(want[b]));
    }
  }
}
TEST_CASE("the caching allocator rounds below 1 MiB to 512 B, above to eighths of the power of two") {
  CHECK(cuda::rounded_block_size(1) == 512);
  CHECK(cuda::rounded_block_size(1000) == 1024);
  CHECK(cuda::rounded_block_size((1 << 20) - 1) == (1 << 20));
  CHECK(cuda::rounded_block_size(1 << 20) == (1 << 20));                   // a 1 MiB tensor takes 1 MiB
  CHECK(cuda::rounded_block_size((1 << 20) + 1) == (1 << 20) + (1 << 17));  // steps of 128 KiB up to 2 MiB
  CHECK(cuda::rounded_block_size((2 << 20) - 1) == (2 << 20));
  CHECK(cuda::rounded_block_size((3 << 20) + 1) == (13 << 18));            // steps of 256 KiB up to 4 MiB
  CHECK(cuda::rounded_block_size((size_t(100) << 20) + 1) == (size_t(104) << 20));  // steps of 8 MiB up to 128 MiB
  CHECK(cuda::rounded_block_size(SIZE_MAX) == SIZE_MAX);  // kept, not wrapped to 0: cudaMalloc reports it
  for (size_t n : {size_t(1) << 20, (size_t(5) << 20) + 3, (size_t(3) << 29) - 1, (size_t(1) << 33) + 12345}) {
    const size_t r = cuda::rounded_block_size(n);
    CHECK(r >= n);
    CHECK(double(r - n) <= double(n) / 8);    // at most an eighth wasted
    CHECK(cuda::rounded_block_size(r) == r);  // a rounded size is its own free list's
  }
}
// tensor/cuda/cublas_lazy.cpp: nothing loads libcublas at start (its constructors took 0.4 s of every
// process); the first cuBLAS call does, and then answers from the real library, GPU or none.
TEST_CASE("cuBLAS is loaded by its first call, not at program start") {
  auto cublas_mapped = [] {
    std::ifstream maps("/proc/self/maps");
    return std::string(std::istreambuf_iterator<char>(maps), {}).find("libcublas") != std::string::npos;
  };
  REQUIRE_FALSE(cublas_mapped());
  CHECK(std::string(cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)) == "the library was not initialized");
  CHECK(std::string(cublasGetStatusString(CUBLAS_STATUS_ARCH_MISMATCH)) ==
        "the function requires an architectural feature absent from the device");
  CHECK(cublas_mapped());
}

#else
TEST_CASE("CUDA index math") { SKIP_TEST_IF(true, "built without the CUDA backend"); }
#endif
