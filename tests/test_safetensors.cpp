// test_safetensors.cpp — safetensors: bit-exact round trips of every dtype, a file checked
// against the format byte for byte, files from other writers, corrupt and truncated files, and
// atomic saving (a failed save leaves the old file as it was, and no temporary behind).
#include <doctest/doctest.h>

#include "skip.h"
#include "test_util.h"
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "autograd/ops.h"
#include "data/safetensors.h"

using namespace ampgrad;
using namespace ampgrad::data;
namespace fs = std::filesystem;

static void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}
static std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  const uint8_t* p = static_cast<const uint8_t*>(c.raw_data());
  return std::vector<uint8_t>(p, p + c.numel() * c.element_size());
}
static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_CASE("every dtype round-trips bit for bit, NaN payloads and signed zeros included") {
  TempDir dir;
  std::mt19937_64 rng(1);
  // Random bytes make every bit pattern likely: NaNs with payloads, infinities, subnormals, -0.
  auto random_tensor = [&](const Shape& shape, DType dtype) {
    std::vector<uint8_t> bytes(numel_of(shape) * itemsize(dtype));
    for (auto& b : bytes) b = dtype == kBool ? uint8_t(rng() & 1) : uint8_t(rng());
    return from_blob(bytes.data(), shape, dtype);
  };
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", random_tensor({3, 5}, kFloat32)},   {"f64", random_tensor({7}, kFloat64)},
      {"f16", random_tensor({2, 3, 4}, kFloat16)}, {"bf16", random_tensor({9}, kBFloat16)},
      {"i64", random_tensor({2, 2}, kInt64)},      {"bool", random_tensor({11}, kBool)},
      {"f8e4m3", random_tensor({2, 5}, kFloat8_e4m3fn)}, {"f8e5m2", random_tensor({6}, kFloat8_e5m2)},
      {"scalar", scalar_tensor(-0.0)},             {"empty", zeros({0, 3}, kFloat16)},
      {"transposed", arange(0.0, 6.0).reshape({2, 3}).t()},  // written in its logical (row-major) order
  };
  save_safetensors(dir / "all.safetensors", tensors, {{"step", "12"}, {"note", "héllo"}});
  SafeTensors loaded = load_safetensors(dir / "all.safetensors");

  REQUIRE(loaded.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].first;  // not a structured binding: CAPTURE captures it, which clang < 16 refuses
    const Tensor& expected = tensors[i].second;
    CAPTURE(name);
    CHECK(loaded.tensors[i].first == name);  // file order is save order
    const Tensor& got = loaded.at(name);
    CHECK(got.dtype() == expected.dtype());
    CHECK(got.shape() == expected.shape());
    CHECK(bytes_of(got) == bytes_of(expected));
  }
  CHECK(to_vector<float>(loaded.at("transposed")) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(loaded.metadata == std::map<std::string, std::string>{{"step", "12"}, {"note", "héllo"}});
  CHECK(has(error_of([&] { loaded.at("missing"); }), "no tensor named 'missing' (present: f32, f64, f16"));
}

TEST_CASE("a tiny file matches the safetensors layout byte for byte") {
  TempDir dir;
  save_safetensors(dir / "a.safetensors", {{"a", from_vector<float>({1.0f, -2.0f})}}, {{"k", "v"}});
  // The header is compact JSON, 79 bytes, padded with one space to 80 = 0x50, a multiple of 8.
  std::string json = R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} )";
  REQUIRE(json.size() == 80);
  std::vector<uint8_t> expected = {0x50, 0, 0, 0, 0, 0, 0, 0};  // header length, u64 little-endian
  expected.insert(expected.end(), json.begin(), json.end());
  for (uint8_t b : {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}) expected.push_back(b);  // 1.0f, -2.0f little-endian
  CHECK(file_bytes(dir / "a.safetensors") == expected);
}

// A file made by hand: the length of `json` as u64 little-endian, `json` as is (no padding
// added), then `data`.
static std::vector<uint8_t> hand_made(const std::string& json, const std::vector<uint8_t>& data) {
  uint64_t n = json.size();
  std::vector<uint8_t> file(8 + json.size() + data.size());
  std::memcpy(file.data(), &n, 8);
  std::copy(json.begin(), json.end(), file.begin() + 8);
  std::copy(data.begin(), data.end(), file.begin() + 8 + json.size());
  return file;
}

TEST_CASE("files from other writers: unpadded header, any key order, no metadata") {
  TempDir dir;
  // b's bytes come first in the data, though a comes first in the header.
  std::string json = R"({"a":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]},"b":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})";
  write_bytes(dir / "other.safetensors", hand_made(json, {5, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x3f}));
  SafeTensors loaded = load_safetensors(dir / "other.safetensors");
  REQUIRE(loaded.tensors.size() == 2);
  CHECK(loaded.tensors[0].first == "b");  // in data order
  CHECK(loaded.at("b").item<int64_t>() == 5);
  CHECK(loaded.at("a").item<float>() == 1.0f);  // bf16 0x3f80
  CHECK(loaded.metadata.empty());
}

TEST_CASE("corrupt and truncated files raise errors naming the file, the tensor and the byte offset") {
  TempDir dir;
  std::string path = dir / "bad.safetensors";
  auto load_error = [&](const std::vector<uint8_t>& file) {
    write_bytes(path, file);
    return error_of([&] { load_safetensors(path); });
  };
  // Two tensors: a (F32 [2], bytes 0-8 of the data) and b (I64 [1], bytes 8-16).
  auto header = [](const std::string& a, const std::string& b) {
    return R"({"a":{"dtype":"F32","shape":[2],"data_offsets":)" + a + R"(},"b":{"dtype":"I64","shape":[1],"data_offsets":)" + b + "}}";
  };
  std::string good = header("[0,8]", "[8,16]");
  const std::vector<uint8_t> data16(16, 0);
  uint64_t data_start = 8 + good.size();
  auto at = [&](uint64_t relative) { return std::to_string(data_start + relative); };
  REQUIRE(load_error(hand_made(good, data16)) == "");

  std::string msg;
  msg = load_error({1, 2, 3, 4});
  CHECK_MESSAGE(msg == path + ": 4 bytes, too short for the 8-byte header length", msg);

  std::vector<uint8_t> file = hand_made(good, data16);
  file[0] = 0xe8, file[1] = 0x03;  // header length 1000
  msg = load_error(file);
  CHECK_MESSAGE(has(msg, path + ": header length 1000 (bytes 0-7) runs past the end of the file (" + std::to_string(file.size()) + " bytes)"), msg);
  file[5] = 1;  // 2^40 + 1000
  CHECK(has(load_error(file), "exceeds the 100000000-byte limit"));

  std::string array = good;
  array[0] = '[';
  msg = load_error(hand_made(array, data16));
  CHECK_MESSAGE(has(msg, "the header at byte offset 8 must start with '{', found '['"), msg);

  std::string broken = good;
  broken.insert(broken.find(",\"shape\""), ",");  // a doubled comma
  msg = load_error(hand_made(broken, data16));
  CHECK_MESSAGE(has(msg, path + ": the JSON header is invalid at byte offset " + std::to_string(8 + broken.find(",,") + 1)), msg);

  std::string u8 = good;
  u8.replace(u8.find("F32"), 3, "U8");
  msg = load_error(hand_made(u8, data16));
  CHECK_MESSAGE(has(msg, path + ": tensor 'a': dtype \"U8\" is not one ampgrad holds"), msg);

  msg = load_error(hand_made(header("[0,4]", "[4,12]"), std::vector<uint8_t>(12)));
  CHECK_MESSAGE(has(msg, "tensor 'a': data_offsets [0,4] span 4 bytes, but F32 [2] needs 8"), msg);
  msg = load_error(hand_made(header("[8,0]", "[8,16]"), data16));
  CHECK_MESSAGE(has(msg, "span a negative number of bytes"), msg);

  std::string negative = good;
  negative.replace(negative.find("[2]"), 3, "[-2]");
  CHECK(has(load_error(hand_made(negative, data16)), "tensor 'a': shape [-2] holds a value that is not a size"));

  std::string overlap = header("[0,8]", "[4,12]");
  data_start = 8 + overlap.size();
  msg = load_error(hand_made(overlap, std::vector<uint8_t>(12)));
  CHECK_MESSAGE(has(msg, "tensor 'b' (bytes " + at(4) + "-" + at(12) + " of the file) overlaps tensor 'a', which ends at byte offset " + at(8)), msg);

  std::string gap = header("[0,8]", "[12,20]");
  data_start = 8 + gap.size();
  msg = load_error(hand_made(gap, std::vector<uint8_t>(20)));
  CHECK_MESSAGE(has(msg, "tensor 'b' starts at byte offset " + at(12) + ", leaving bytes " + at(8) + "-" + at(12) + " unused"), msg);

  data_start = 8 + good.size();
  msg = load_error(hand_made(good, std::vector<uint8_t>(12)));  // truncated: b's last 4 bytes missing
  CHECK_MESSAGE(has(msg, path + ": tensor 'b' ends at byte offset " + at(16) + ", past the end of the file (" + at(12) + " bytes): truncated?"), msg);
  msg = load_error(hand_made(good, std::vector<uint8_t>(19)));
  CHECK_MESSAGE(has(msg, path + ": 3 bytes after the last tensor, from byte offset " + at(16)), msg);

  std::string flags = R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
  data_start = 8 + flags.size();
  msg = load_error(hand_made(flags, {1, 0, 2}));
  CHECK_MESSAGE(has(msg, "tensor 'm': byte offset " + at(2) + " holds 2, not a BOOL (0 or 1)"), msg);

  msg = load_error(hand_made(R"({"__metadata__":{"step":3},)" + good.substr(1), data16));
  CHECK_MESSAGE(has(msg, "__metadata__ 'step' must be a string, found 3"), msg);
  msg = load_error(hand_made(R"({"a":{"dtype":"F32","shape":[2]}})", std::vector<uint8_t>(8)));
  CHECK_MESSAGE(has(msg, "tensor 'a': expected an object with dtype, shape and data_offsets"), msg);
}

TEST_CASE("hostile headers: deep nesting, numbers out of range, huge empty shapes, and paths that are not files") {
  TempDir dir;
  std::string path = dir / "bad.safetensors";
  auto load_error = [&](const std::string& json) {
    write_bytes(path, hand_made(json, {}));
    return error_of([&] { load_safetensors(path); });
  };
  // 100,000 nested arrays overflowed the stack when the value was dumped into a message. The
  // 129th bracket, the first too deep, is '[' number 128 of the run that starts at index 5.
  const int n = 100'000;
  std::string msg = load_error(R"({"a":)" + std::string(n, '[') + std::string(n, ']') + "}");
  CHECK(msg == path + ": the JSON header nests deeper than 128 levels at byte offset " + std::to_string(8 + 5 + 127));
  // A bracket inside a string (an escaped quote before it) is not nesting.
  CHECK(load_error(R"({"__metadata__":{"k":"\")" + std::string(200, '[') + R"("}})") == "");

  // 1e999 is valid JSON, but no double: nlohmann raised out_of_range, which escaped uncaught.
  msg = load_error(R"({"__metadata__":{"k":"v"},"a":1e999})");
  CHECK(msg == path + ": the JSON header at byte offset 8 is invalid: [json.exception.out_of_range.406] number overflow parsing '1e999'");

  // No elements, but strides that overflow int64: refused here, naming the tensor, before the
  // tensor is made (tensor.cpp's numel_of refuses it too, test_tensor.cpp).
  msg = load_error(R"({"t":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})");
  CHECK(msg == path + ": tensor 't': shape [0,4611686018427387904,4611686018427387904] is impossibly large");

  // A long value is quoted cut short in the message.
  msg = load_error(R"({"t":{"dtype":")" + std::string(1000, 'x') + R"(","shape":[],"data_offsets":[0,0]}})");
  CHECK(msg == path + ": tensor 't': dtype \"" + std::string(76, 'x') + "... is not one ampgrad holds (F32, F64, F16, BF16, I64, BOOL, F8_E4M3, F8_E5M2)");

  CHECK(error_of([&] { load_safetensors(dir.path.string()); }) == dir.path.string() + ": cannot read it as a file: it is a directory");
  CHECK(error_of([] { load_safetensors("/dev/null"); }) == "/dev/null: cannot read it as a file: it is a device or other special file");
  CHECK(error_of([&] { load_safetensors(dir / "missing"); }) == (dir / "missing") + ": cannot open: No such file or directory");
}

TEST_CASE("save refuses bad input before touching the old file, and leaves no temporary") {
  TempDir dir;
  std::string path = dir / "ckpt.safetensors";
  save_safetensors(path, {{"w", ones({3})}});
  const std::vector<uint8_t> before = file_bytes(path);

  CHECK(has(error_of([&] { save_safetensors(path, {{"w", ones({2})}, {"b", Tensor()}}); }), path + ": tensor 'b' is undefined"));
  CHECK(has(error_of([&] { save_safetensors(path, {{"w", ones({2})}, {"w", ones({2})}}); }), "two tensors are named 'w'"));
  CHECK(has(error_of([&] { save_safetensors(path, {{"__metadata__", ones({2})}}); }), "'__metadata__' is reserved"));
  CHECK(has(error_of([&] { save_safetensors(path, {{"\xff", ones({2})}}); }), "cannot write the header"));  // not UTF-8
  CHECK(file_bytes(path) == before);
  CHECK(dir.entries() == 1);

  std::string elsewhere = dir / "no-such-dir/ckpt.safetensors";
  CHECK(has(error_of([&] { save_safetensors(elsewhere, {{"w", ones({2})}}); }), elsewhere + ": cannot create the temporary file"));

  save_safetensors(path, {{"w", zeros({5})}});  // a successful save replaces the file
  CHECK(load_safetensors(path).at("w").numel() == 5);
  CHECK(dir.entries() == 1);
}

// Lowers the file-size limit so that write() fails with EFBIG past `bytes`, as it fails with
// ENOSPC on a full disk; SIGXFSZ, which would kill the process instead, is ignored meanwhile.
struct FileSizeLimit {
  rlimit old_limit{};
  void (*old_handler)(int);
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_limit);
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lower{bytes, old_limit.rlim_max};
    setrlimit(RLIMIT_FSIZE, &lower);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
  }
};

TEST_CASE("a save that fails midway (disk full) leaves the old file as it was") {
  TempDir dir;
  std::string path = dir / "ckpt.safetensors";
  save_safetensors(path, {{"w", ones({3})}});
  const std::vector<uint8_t> before = file_bytes(path);
  std::string msg;
  {
    FileSizeLimit limit(4096);
    msg = error_of([&] { save_safetensors(path, {{"w", zeros({1 << 16})}}); });  // 256 KiB
  }
  CHECK_MESSAGE(has(msg, path + ": writing " + path + ".tmp."), msg);
  CHECK_MESSAGE(has(msg, "File too large"), msg);
  CHECK(file_bytes(path) == before);
  CHECK(dir.entries() == 1);
}

TEST_CASE("a save into a read-only directory fails and leaves the old file as it was") {
  SKIP_TEST_IF(geteuid() == 0, "running as root, which writes into read-only directories anyway");
  TempDir dir;
  std::string path = dir / "ckpt.safetensors";
  save_safetensors(path, {{"w", ones({3})}});
  const std::vector<uint8_t> before = file_bytes(path);
  fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
  std::string msg = error_of([&] { save_safetensors(path, {{"w", zeros({3})}}); });
  fs::permissions(dir.path, fs::perms::owner_all);
  CHECK_MESSAGE(has(msg, path + ": cannot create the temporary file"), msg);
  CHECK(file_bytes(path) == before);
}

// A pid that existed and no longer does: a child that exited and was reaped.
static pid_t dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

TEST_CASE("a save removes the temporaries that killed saves of the same path left, and only those") {
  TempDir dir;
  std::string path = dir / "ckpt.safetensors";
  const std::string dead = path + ".tmp." + std::to_string(dead_pid()) + ".0";
  const std::string live = path + ".tmp." + std::to_string(getppid()) + ".3";  // a save in progress elsewhere
  const std::string other = dir / "other.safetensors.tmp." + std::to_string(dead_pid()) + ".0";  // another file's
  const std::string unlike = path + ".tmp.notapid.0";
  for (const std::string& p : {dead, live, other, unlike}) write_bytes(p, {1, 2, 3});
  save_safetensors(path, {{"w", ones({2})}});
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other));
  CHECK(fs::exists(unlike));
  CHECK(dir.entries() == 4);  // the saved state and the three kept
}
