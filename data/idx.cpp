// idx.cpp — IDX reading (into memory, decompressed if gzip, checked field by field against the
// exact length its header gives, and read no further) and atomic writing of raw IDX files.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <memory>

#include "data/atomic_file.h"
#include "data/input_file.h"

namespace ampgrad::data {

constexpr uint32_t kImagesMagic = 0x00000803;  // 0x08: unsigned byte elements, 0x03: 3 dims
constexpr uint32_t kLabelsMagic = 0x00000801;  // 0x08: unsigned byte elements, 0x01: 1 dim

using GzFile = std::unique_ptr<gzFile_s, decltype(&gzclose)>;

// Reads on until `bytes` holds n bytes or the contents end. zlib passes a raw file through as it
// is and decompresses a gzip one (known by its first two bytes, whatever its name). The buffer
// grows as the data arrives, doubling from 64 KiB (1 GiB a read at most: gzread takes an int of
// bytes): n is what a header claims, not what the file holds.
static void read_to(gzFile gz, const std::string& path, std::vector<uint8_t>& bytes, uint64_t n) {
  while (bytes.size() < n) {
    const size_t old = bytes.size();
    bytes.resize(old + std::min<uint64_t>({std::max<uint64_t>(old, 1 << 16), uint64_t(1) << 30, n - old}));
    const int read = gzread(gz, bytes.data() + old, unsigned(bytes.size() - old));
    bytes.resize(old + std::max(read, 0));
    if (read > 0) continue;
    int err = Z_OK;
    std::string why = gzerror(gz, &err);
    if (why.starts_with(path + ": ")) why.erase(0, path.size() + 2);  // zlib names the file too
    // Z_BUF_ERROR is zlib's "the input ended in the middle of the gzip stream".
    AMPGRAD_CHECK(read == 0 && err != Z_BUF_ERROR, path << ": cannot decompress: " << why << " after " << bytes.size()
                                                        << " decompressed bytes (truncated or corrupt gzip file?)");
    return;  // the end of the contents
  }
}

static uint32_t read_be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
static void put_be32(std::vector<uint8_t>& out, uint64_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(v >> shift));
}

struct IdxContents {
  std::vector<uint64_t> dims;
  std::vector<uint8_t> bytes;  // the whole file, header included, decompressed
};

// Reads an IDX file and checks its magic number, dimensions and exact length. It reads no
// further than one byte past the length the header gives (enough to see a longer file), so a
// small gzip file that inflates to gigabytes stops there. `item` names one entry of dim 0
// ("image", "label") for messages.
static IdxContents read_idx(const std::string& path, uint32_t magic, const char* item) {
  const uint64_t file_size = input_file_size(path);
  GzFile gz(gzopen(path.c_str(), "rb"), &gzclose);
  AMPGRAD_CHECK(gz, path << ": cannot open: " << std::strerror(errno));
  const int ndims = magic & 0xff;
  const size_t header = 4 + 4 * size_t(ndims);
  IdxContents f;
  read_to(gz.get(), path, f.bytes, header);
  const bool gzip = file_size >= 2 && !gzdirect(gz.get());  // zlib cannot tell for a file too short to hold gzip's magic
  const char* kind = magic == kImagesMagic ? "images" : "labels";
  const char* decompressed = gzip ? " (decompressed)" : "";
  size_t found = f.bytes.size();
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
  // The body's length, and the sizes' product with a 0 counted as 1 (which a tensor of these
  // dimensions needs to fit int64, even when it holds no elements).
  for (int d = 0; d < ndims; ++d) f.dims.push_back(read_be32(f.bytes.data() + 4 + 4 * d));
  uint64_t body = 1, extent = 1;
  for (uint64_t size : f.dims)
    AMPGRAD_CHECK(!__builtin_mul_overflow(body, size, &body) && !__builtin_mul_overflow(extent, std::max<uint64_t>(size, 1), &extent) &&
                      extent <= uint64_t(INT64_MAX),
                  path << ": the dimensions at byte offsets 4-" << header - 1 << " are impossibly large ("
                       << shape_str({f.dims.begin(), f.dims.end()}) << ")");
  const uint64_t per_item = f.dims[0] == 0 ? 0 : body / f.dims[0], expected = header + body;
  read_to(gz.get(), path, f.bytes, expected + 1);
  found = f.bytes.size();
  std::ostringstream layout;  // e.g. "40 bytes (16-byte header + 3 images of 8 bytes)"
  layout << expected << " bytes" << decompressed << " (" << header << "-byte header + " << f.dims[0] << " " << item << "s of "
         << per_item << (per_item == 1 ? " byte)" : " bytes)");
  AMPGRAD_CHECK(found >= expected, path << ": truncated: expected " << layout.str() << ", found " << found << "; the data ends at byte offset "
                                        << found << ", inside " << item << " " << (found - header) / std::max<uint64_t>(per_item, 1));
  // A raw file's length is known; a gzip file's is not, as reading stopped a byte past the end.
  AMPGRAD_CHECK(found == expected, path << ": expected " << layout.str() << ", found "
                                        << (gzip ? "more:" : std::to_string(file_size) + ": " + std::to_string(file_size - expected))
                                        << " unexpected bytes from byte offset " << expected);
  return f;
}

IdxImages read_idx_images(const std::string& path) {
  IdxContents f = read_idx(path, kImagesMagic, "image");
  IdxImages out{int64_t(f.dims[0]), int64_t(f.dims[1]), int64_t(f.dims[2]), {}};
  out.pixels.assign(f.bytes.begin() + 16, f.bytes.end());
  return out;
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  IdxContents f = read_idx(path, kLabelsMagic, "label");
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

Dataset load_mnist(const std::string& images_path, const std::string& labels_path, ImageSize size) {
  IdxImages images = read_idx_images(images_path);
  AMPGRAD_CHECK(size.rows == 0 || (images.rows == size.rows && images.cols == size.cols),
                images_path << ": images of " << images.rows << "x" << images.cols << " pixels (byte offsets 8-15); the model takes "
                            << size.rows << "x" << size.cols);
  std::vector<uint8_t> labels = read_idx_labels(labels_path);
  // Checked here, not when a batch reaches the loss an epoch later.
  const auto bad_label = std::find_if(labels.begin(), labels.end(), [](uint8_t l) { return l > 9; });
  AMPGRAD_CHECK(bad_label == labels.end(), labels_path << ": label " << bad_label - labels.begin() << " (byte offset " << 8 + (bad_label - labels.begin())
                                                        << ") is " << int(*bad_label) << ", not a class 0-9");
  AMPGRAD_CHECK(images.count == (int64_t)labels.size(), "load_mnist: " << images_path << " holds " << images.count
                    << " images but " << labels_path << " holds " << labels.size() << " labels");
  // An empty set would train on nothing and report NaN means.
  AMPGRAD_CHECK(images.count > 0, "load_mnist: " << images_path << " holds no images (its count, at byte offset 4, is 0)");
  Dataset d{empty({images.count, 1, images.rows, images.cols}, kFloat32), empty({images.count}, kInt64)};
  float* x = d.images.data_ptr<float>();
  for (size_t i = 0; i < images.pixels.size(); ++i) x[i] = images.pixels[i] / 255.0f;
  int64_t* y = d.labels.data_ptr<int64_t>();
  for (size_t i = 0; i < labels.size(); ++i) y[i] = labels[i];
  return d;
}

Dataset load_mnist_dir(const std::string& dir, const std::string& split, ImageSize size) {
  AMPGRAD_CHECK(split == "train" || split == "test", "load_mnist_dir: split must be \"train\" or \"test\", got \"" << split << "\"");
  AMPGRAD_CHECK(std::filesystem::is_directory(dir), "load_mnist_dir: " << dir << " is not a directory");
  std::string prefix = split == "train" ? "train" : "t10k";
  auto find = [&](const std::string& kind, const std::string& suffix) {
    std::string raw = (std::filesystem::path(dir) / (prefix + "-" + kind + suffix)).string(), gz = raw + ".gz";
    if (std::filesystem::exists(raw)) return raw;
    AMPGRAD_CHECK(std::filesystem::exists(gz), "load_mnist_dir: no " << split << " " << kind << " in " << dir << ": looked for "
                                                 << raw << " and " << gz << " (scripts/get-data.sh fetches the default MNIST digits)");
    return gz;
  };
  std::string images = find("images", "-idx3-ubyte");  // images first: the message names the first missing file
  return load_mnist(images, find("labels", "-idx1-ubyte"), size);
}

}  // namespace ampgrad::data
