// idx.cpp — IDX reading (the whole file into memory, decompressed if gzip, then checked field
// by field against its exact expected length) and atomic writing of raw IDX files.
#include "data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>

#include "data/atomic_file.h"

namespace ampgrad::data {

constexpr uint32_t kImagesMagic = 0x00000803;  // 0x08: unsigned byte elements, 0x03: 3 dims
constexpr uint32_t kLabelsMagic = 0x00000801;  // 0x08: unsigned byte elements, 0x01: 1 dim

struct FileBytes {
  std::vector<uint8_t> bytes;
  bool gzip = false;  // bytes are the decompressed contents
};

static FileBytes read_gzip(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  AMPGRAD_CHECK(gz, path << ": cannot open: " << std::strerror(errno));
  FileBytes f{{}, true};
  constexpr unsigned kChunk = 1 << 20;
  int read = 0;
  do {
    size_t old = f.bytes.size();
    f.bytes.resize(old + kChunk);
    read = gzread(gz, f.bytes.data() + old, kChunk);
    f.bytes.resize(old + std::max(read, 0));
  } while (read > 0);
  int err = Z_OK;
  std::string why = gzerror(gz, &err);
  gzclose(gz);
  if (why.starts_with(path + ": ")) why.erase(0, path.size() + 2);  // zlib names the file too
  // Z_BUF_ERROR is zlib's "the input ended in the middle of the gzip stream".
  AMPGRAD_CHECK(read == 0 && err != Z_BUF_ERROR, path << ": cannot decompress: " << why << " after "
                  << f.bytes.size() << " decompressed bytes (truncated or corrupt gzip file?)");
  return f;
}

// The whole file; decompressed when it starts with gzip's magic bytes, whatever its name.
static FileBytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  AMPGRAD_CHECK(in, path << ": cannot open: " << std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  if (in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b) return read_gzip(path);
  FileBytes f;
  f.bytes.resize(std::filesystem::file_size(path));
  in.clear();
  in.seekg(0);
  in.read(reinterpret_cast<char*>(f.bytes.data()), std::streamsize(f.bytes.size()));
  AMPGRAD_CHECK(in.gcount() == std::streamsize(f.bytes.size()), path << ": read " << in.gcount() << " of " << f.bytes.size() << " bytes");
  return f;
}

static uint32_t read_be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
static void put_be32(std::vector<uint8_t>& out, uint64_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(v >> shift));
}

// Checks magic number and exact length; returns the dimensions. `item` names one entry of
// dim 0 ("image", "label") for messages.
static std::vector<uint64_t> parse_header(const std::string& path, const FileBytes& f, uint32_t magic, const char* item) {
  int ndims = magic & 0xff;
  size_t header = 4 + 4 * size_t(ndims), found = f.bytes.size();
  const char* kind = magic == kImagesMagic ? "images" : "labels";
  const char* decompressed = f.gzip ? " (decompressed)" : "";
  AMPGRAD_CHECK(found >= 4, path << ": " << found << " bytes" << decompressed << ", too short for an IDX magic number");
  uint32_t found_magic = read_be32(f.bytes.data());
  std::string hint = found_magic == kImagesMagic ? " (an IDX images file: wrong file?)"
                     : found_magic == kLabelsMagic ? " (an IDX labels file: wrong file?)"
                     : found_magic >> 16 != 0     ? " (not an IDX file)"
                                                  : "";
  AMPGRAD_CHECK(found_magic == magic, path << ": magic number at byte offset 0 is 0x" << std::hex << std::setw(8) << std::setfill('0')
                                           << found_magic << ", expected 0x" << std::setw(8) << magic << " for IDX " << kind << hint);
  AMPGRAD_CHECK(found >= header, path << ": " << found << " bytes" << decompressed << ", too short for the "
                                      << header << "-byte header of an IDX " << kind << " file");
  std::vector<uint64_t> dims(ndims);
  uint64_t body = 1;
  for (int d = 0; d < ndims; ++d) {
    dims[d] = read_be32(f.bytes.data() + 4 + 4 * d);
    AMPGRAD_CHECK(!__builtin_mul_overflow(body, dims[d], &body), path << ": dimensions in the header are impossibly large");
  }
  uint64_t per_item = dims[0] == 0 ? 0 : body / dims[0], expected = header + body;
  std::ostringstream layout;  // e.g. "40 bytes (16-byte header + 3 images of 8 bytes)"
  layout << expected << " bytes" << decompressed << " (" << header << "-byte header + " << dims[0] << " " << item << "s of "
         << per_item << (per_item == 1 ? " byte)" : " bytes)");
  AMPGRAD_CHECK(found >= expected, path << ": truncated: expected " << layout.str() << ", found " << found << "; the data ends at byte offset "
                                        << found << ", inside " << item << " " << (found - header) / std::max<uint64_t>(per_item, 1));
  AMPGRAD_CHECK(found == expected, path << ": expected " << layout.str() << ", found " << found << ": "
                                        << found - expected << " unexpected bytes from byte offset " << expected);
  return dims;
}

IdxImages read_idx_images(const std::string& path) {
  FileBytes f = read_file(path);
  std::vector<uint64_t> dims = parse_header(path, f, kImagesMagic, "image");
  IdxImages out{int64_t(dims[0]), int64_t(dims[1]), int64_t(dims[2]), {}};
  out.pixels.assign(f.bytes.begin() + 16, f.bytes.end());
  return out;
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  FileBytes f = read_file(path);
  parse_header(path, f, kLabelsMagic, "label");
  return std::vector<uint8_t>(f.bytes.begin() + 8, f.bytes.end());
}

static void write_idx(const std::string& path, uint32_t magic, const std::vector<uint64_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> header;
  put_be32(header, magic);
  for (uint64_t d : dims) {
    AMPGRAD_CHECK(d <= UINT32_MAX, path << ": dimension " << d << " does not fit the IDX header's 32 bits");
    put_be32(header, d);
  }
  AtomicFile file(path);
  file.write(header.data(), header.size());
  file.write(data.data(), data.size());
  file.commit();
}

void write_idx_images(const std::string& path, const IdxImages& images) {
  AMPGRAD_CHECK(images.count >= 0 && images.rows >= 0 && images.cols >= 0 &&
                    (int64_t)images.pixels.size() == images.count * images.rows * images.cols,
                path << ": cannot write " << images.pixels.size() << " pixels as " << images.count << " images of "
                     << images.rows << "x" << images.cols);
  write_idx(path, kImagesMagic, {uint64_t(images.count), uint64_t(images.rows), uint64_t(images.cols)}, images.pixels);
}

void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels) {
  write_idx(path, kLabelsMagic, {labels.size()}, labels);
}

Dataset load_mnist(const std::string& images_path, const std::string& labels_path) {
  IdxImages images = read_idx_images(images_path);
  std::vector<uint8_t> labels = read_idx_labels(labels_path);
  AMPGRAD_CHECK(images.count == (int64_t)labels.size(), "load_mnist: " << images_path << " holds " << images.count
                    << " images but " << labels_path << " holds " << labels.size() << " labels");
  Dataset d{empty({images.count, 1, images.rows, images.cols}, kFloat32), empty({images.count}, kInt64)};
  float* x = d.images.data_ptr<float>();
  for (size_t i = 0; i < images.pixels.size(); ++i) x[i] = images.pixels[i] / 255.0f;
  int64_t* y = d.labels.data_ptr<int64_t>();
  for (size_t i = 0; i < labels.size(); ++i) y[i] = labels[i];
  return d;
}

Dataset load_mnist_dir(const std::string& dir, const std::string& split) {
  AMPGRAD_CHECK(split == "train" || split == "test", "load_mnist_dir: split must be \"train\" or \"test\", got \"" << split << "\"");
  std::string prefix = split == "train" ? "train" : "t10k";
  auto find = [&](const std::string& kind, const std::string& suffix) {
    std::string raw = (std::filesystem::path(dir) / (prefix + "-" + kind + suffix)).string(), gz = raw + ".gz";
    if (std::filesystem::exists(raw)) return raw;
    AMPGRAD_CHECK(std::filesystem::exists(gz), "load_mnist_dir: no " << split << " " << kind << " in " << dir << ": looked for "
                                                 << raw << " and " << gz << " (scripts/get-data.sh fetches the default MNIST digits)");
    return gz;
  };
  std::string images = find("images", "-idx3-ubyte");  // images first: the message names the first missing file
  return load_mnist(images, find("labels", "-idx1-ubyte"));
}

}  // namespace ampgrad::data
