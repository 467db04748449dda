// loader.cpp — epoch orders (seeded Fisher–Yates via randperm) and batch gathering.
#include "data/loader.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "tensor/random.h"

namespace ampgrad::data {

DataLoader::DataLoader(Dataset dataset, DataLoaderOptions options) : dataset_(std::move(dataset)), options_(options) {
  const Tensor &images = dataset_.images, &labels = dataset_.labels;
  AMPGRAD_CHECK(images.defined() && labels.defined(), "DataLoader: the dataset needs both images and labels");
  AMPGRAD_CHECK(images.dtype() == kFloat32 && images.dim() >= 1 && images.device().is_cpu(),
                "DataLoader: images must be a float32 CPU tensor (N, ...), got " << dtype_name(images.dtype()) << " " << shape_str(images.shape()));
  AMPGRAD_CHECK(labels.dtype() == kInt64 && labels.dim() == 1 && labels.device().is_cpu(),
                "DataLoader: labels must be an int64 CPU tensor (N), got " << dtype_name(labels.dtype()) << " " << shape_str(labels.shape()));
  AMPGRAD_CHECK(images.size(0) == labels.size(0), "DataLoader: " << images.size(0) << " images but " << labels.size(0) << " labels");
  AMPGRAD_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be positive, got " << options_.batch_size);
  AMPGRAD_CHECK(options_.std > 0, "DataLoader: std must be positive, got " << options_.std);
  // Batches copy rows with memcpy, which needs each sample's values to be one dense run.
  dataset_.images = images.detach().contiguous();
  dataset_.labels = labels.detach().contiguous();
}

int64_t DataLoader::size() const {
  int64_t n = dataset_.size(), b = options_.batch_size;
  return options_.drop_last || n % b == 0 ? n / b : n / b + 1;  // not (n + b - 1) / b, which overflows for a huge b
}

// splitmix64's finaliser: turns (seed, epoch) pairs that differ by one bit into unrelated seeds.
static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

std::vector<int64_t> DataLoader::order(int64_t epoch) const {
  if (!options_.shuffle) {
    std::vector<int64_t> identity(dataset_.size());
    std::iota(identity.begin(), identity.end(), 0);
    return identity;
  }
  Generator gen(mix(options_.seed ^ mix(uint64_t(epoch))));
  return to_vector<int64_t>(randperm(dataset_.size(), &gen));
}

Batch DataLoader::batch(const std::vector<int64_t>& order, int64_t i) const {
  AMPGRAD_CHECK(i >= 0 && i < size(), "DataLoader: batch " << i << " out of range for " << size() << " batches");
  AMPGRAD_CHECK((int64_t)order.size() == dataset_.size(), "DataLoader: an order of " << order.size() << " indices for " << dataset_.size() << " samples");
  int64_t first = i * options_.batch_size;
  int64_t count = std::min(options_.batch_size, dataset_.size() - first);
  Shape x_shape = dataset_.images.shape();
  x_shape[0] = count;
  int64_t row = dataset_.images.numel() / std::max<int64_t>(dataset_.size(), 1);  // C*H*W

  Batch b{empty(x_shape, kFloat32), empty({count}, kInt64)};
  const float* images = dataset_.images.data_ptr<float>();
  const int64_t* labels = dataset_.labels.data_ptr<int64_t>();
  float* x = b.x.data_ptr<float>();
  int64_t* y = b.y.data_ptr<int64_t>();
  bool identity = options_.mean == 0.0 && options_.std == 1.0;
  float mean = float(options_.mean), inv_std = float(1.0 / options_.std);
  for (int64_t j = 0; j < count; ++j) {
    int64_t sample = order[first + j];
    AMPGRAD_CHECK(sample >= 0 && sample < dataset_.size(), "DataLoader: sample index " << sample << " out of range for " << dataset_.size() << " samples");
    const float* src = images + sample * row;
    float* dst = x + j * row;
    if (identity) std::memcpy(dst, src, row * sizeof(float));
    else for (int64_t k = 0; k < row; ++k) dst[k] = (src[k] - mean) * inv_std;
    y[j] = labels[sample];
  }
  return b;
}

DataLoader::Iterator DataLoader::begin() {
  auto epoch_order = std::make_shared<const std::vector<int64_t>>(order(next_epoch_++));
  return Iterator(this, std::move(epoch_order), 0);
}

}  // namespace ampgrad::data
