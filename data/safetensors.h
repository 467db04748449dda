// safetensors.h — tensors to and from safetensors files, the format Hugging Face reads:
//   8 bytes    N, the header length, unsigned little-endian
//   N bytes    JSON: {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}, ...}
//              padded with spaces to a multiple of 8 bytes, so the data that follows is aligned
//   the rest   each tensor's bytes, little-endian, row-major; offsets count from the end of the header
// Holds ampgrad's dtypes (F32 F64 F16 BF16 I64 BOOL, and the float8 F8_E4M3 F8_E5M2); files with
// others (U8, I32, F8_E8M0, ...) are refused. No memory mapping: load reads every tensor into a
// fresh CPU tensor.
//
//   save_safetensors("mlp.safetensors", {{"fc1.weight", w}, {"fc1.bias", b}}, {{"step", "1000"}});
//   SafeTensors ckpt = load_safetensors("mlp.safetensors");
//   Tensor w2 = ckpt.at("fc1.weight");          // same dtype, shape and bits as w, on the CPU
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::data {

struct SafeTensors {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order (by data offset)
  std::map<std::string, std::string> metadata;
  const Tensor& at(const std::string& name) const;      // raises, listing the names present
};

// Writes atomically: a temporary file in the same directory, flushed, then renamed over `path`,
// so a failure at any point leaves an existing file at `path` as it was. Tensors may live on any
// device and have any strides; names must be unique and not "__metadata__".
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Checks the header length against the file, the JSON (at most 128 levels deep), every dtype and
// shape, and that the tensors' byte ranges tile the data exactly (no gap, no overlap, nothing
// after the last), as the reference implementation does; errors name the file, the tensor and
// the byte offset.
SafeTensors load_safetensors(const std::string& path);

}  // namespace ampgrad::data
