// write_seeds.cpp — the fuzzers' seed corpora, written by the library itself so that every seed
// is a file the loaders accept: `fuzz_write_seeds DIR` fills DIR/idx, DIR/safetensors and
// DIR/training_state.
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "data/safetensors.h"
#include "data/idx.h"
#include "tiny_run.h"
#include "training_state.h"

using namespace ampgrad;
namespace fs = std::filesystem;

static void gzip_copy(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gzFile gz = gzopen(to.c_str(), "wb9");
  AMPGRAD_CHECK(gz && gzwrite(gz, bytes.data(), unsigned(bytes.size())) == int(bytes.size()) && gzclose(gz) == Z_OK, to << ": cannot write");
}

static void idx_seeds(const fs::path& dir) {
  data::IdxImages images{3, 2, 4, {}};  // three 2x4 images
  for (int i = 0; i < 24; ++i) images.pixels.push_back(uint8_t(i * 11));
  data::write_idx_images(dir / "images-idx3-ubyte", images);
  data::write_idx_labels(dir / "labels-idx1-ubyte", {1, 0, 9});
  data::write_idx_images(dir / "empty-images-idx3-ubyte", {0, 28, 28, {}});
  for (const char* name : {"images-idx3-ubyte", "labels-idx1-ubyte"}) gzip_copy(dir / name, dir / (std::string(name) + ".gz"));
}

static void safetensors_seeds(const fs::path& dir) {
  const Tensor f32 = arange(0.0, 6.0).reshape({2, 3});
  data::save_safetensors(dir / "mixed.safetensors",
                         {{"weight", f32}, {"half", f32.to(kFloat16)}, {"brain", f32.to(kBFloat16).t()}, {"double", f32.to(kFloat64)},
                          {"ids", arange(0.0, 4.0).to(kInt64)}, {"mask", gt(f32, scalar_tensor(2.0))}, {"scalar", scalar_tensor(-0.0)},
                          {"none", zeros({0, 3})}},
                         {{"step", "12"}, {"format", "pt"}});
  data::save_safetensors(dir / "bare.safetensors", {{"x", ones({1})}});
}

static void training_seeds(const fs::path& dir) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    fuzz::TinyRun run(optimizer);
    for (int i = 0; i < 3; ++i) run.step();
    examples::save_training_state(dir / (std::string(optimizer) + ".safetensors"), *run.model, *run.opt, run.scaler, run.schedule.get(),
                                       {{"step", "3"}, {"optimizer", optimizer}, {"seed", "0"}, {"batch_size", "2"}});
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " DIR  (writes DIR/idx, DIR/safetensors, DIR/training_state)\n";
    return 2;
  }
  const fs::path root = argv[1];
  for (const char* sub : {"idx", "safetensors", "training_state"}) fs::create_directories(root / sub);
  idx_seeds(root / "idx");
  safetensors_seeds(root / "safetensors");
  training_seeds(root / "training_state");
  std::cout << "seeds written under " << root << "\n";
  return 0;
}
