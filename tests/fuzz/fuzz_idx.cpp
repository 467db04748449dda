// fuzz_idx.cpp — libFuzzer harness for the IDX reader (data/idx.h): the input, raw or gzip, is
// read as an images file and as a labels file; images that pass are loaded as a data set (with
// labels made to match their count), which converts them to tensors.
#include "data/idx.h"
#include "fuzz_input.h"

using namespace ampgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string images = fuzz::scratch_path("images.idx"), labels = fuzz::scratch_path("labels.idx");
  fuzz::new_input(images, data, size);
  fuzz::refused([&] { data::read_idx_labels(images); });
  data::IdxImages parsed;
  if (fuzz::refused([&] { parsed = data::read_idx_images(images); })) return 0;
  // Counts above this need a file of as many bytes (unless an image is empty, which load_mnist
  // must then handle); the cap keeps the labels file small.
  if (parsed.count > (1 << 16)) return 0;
  data::write_idx_labels(labels, std::vector<uint8_t>(size_t(parsed.count), 7));
  fuzz::refused([&] { data::load_mnist(images, labels); });
  return 0;
}
