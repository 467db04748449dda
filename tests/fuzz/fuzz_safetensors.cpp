// fuzz_safetensors.cpp — libFuzzer harness for the safetensors loader (data/safetensors.h). A file
// that loads must also save and load again to the same names, dtypes, shapes, bits and metadata:
// whatever the reader accepts, the writer must be able to write.
#include <cstring>

#include "data/safetensors.h"
#include "fuzz_input.h"

using namespace ampgrad;

static bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const size_t n = size_t(a.numel()) * a.element_size();
  return n == 0 || std::memcmp(a.raw_data(), b.raw_data(), n) == 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_path("in.safetensors"), again = fuzz::scratch_path("again.safetensors");
  fuzz::new_input(path, data, size);
  data::SafeTensors loaded;
  if (fuzz::refused([&] { loaded = data::load_safetensors(path); })) return 0;
  data::save_safetensors(again, loaded.tensors, loaded.metadata);
  const data::SafeTensors reloaded = data::load_safetensors(again);
  if (reloaded.metadata != loaded.metadata || reloaded.tensors.size() != loaded.tensors.size()) std::abort();
  for (const auto& [name, t] : loaded.tensors)
    if (!same_bits(reloaded.at(name), t)) std::abort();
  return 0;
}
