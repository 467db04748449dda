// idx.h — MNIST's IDX file format: unsigned-byte images (magic 0x00000803: count, rows, cols,
// then pixels) and labels (magic 0x00000801: count, then one byte each), integers big-endian.
// Reads raw or gzip files (recognised by their first two bytes, 1f 8b) and checks every field
// and the exact length (inflating no further than the header's length); writes raw files only,
// atomically. Other IDX element types are refused.
//
//   Dataset train = load_mnist_dir("data-cache/mnist", "train");  // images (N, 1, 28, 28) in [0, 1]
//   IdxImages raw = read_idx_images("t10k-images-idx3-ubyte.gz"); // the bytes, unconverted
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/loader.h"

namespace ampgrad::data {

struct IdxImages {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // (count, rows, cols), row-major
};

IdxImages read_idx_images(const std::string& path);
std::vector<uint8_t> read_idx_labels(const std::string& path);
void write_idx_images(const std::string& path, const IdxImages& images);
void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels);

// The image size a model takes, checked as the images load; 0 x 0 accepts any.
struct ImageSize {
  int64_t rows = 0, cols = 0;
};

// Images as float32 (N, 1, H, W) scaled to [0, 1], labels as int64 (N); the counts must match,
// and be above 0 (a data set to train or test on), and every label is one of MNIST's ten classes.
Dataset load_mnist(const std::string& images_path, const std::string& labels_path, ImageSize size = {});
// split "train" reads train-{images-idx3,labels-idx1}-ubyte[.gz], split "test" t10k-...;
// the raw file is preferred when both it and the .gz exist.
Dataset load_mnist_dir(const std::string& dir, const std::string& split, ImageSize size = {});

}  // namespace ampgrad::data
