// safetensors.cpp — safetensors writing (header JSON, space padding, raw bytes, atomic rename)
// and reading (every header field checked before a byte of data is trusted).
#include "data/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/atomic_file.h"
#include "data/input_file.h"
#include "tensor/kernels.h"

namespace ampgrad::data {

// Tensor bytes are written as they lie in memory; the format says little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

// The reference implementation refuses larger headers, so that a corrupt length cannot make a
// reader allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A safetensors header nests 3 deep ({name: {"data_offsets": [...]}}). nlohmann parses
// iteratively but copies, compares and dumps recursively, so a header 100,000 levels deep would
// overflow the stack; serde_json, which the reference reader uses, stops at 128.
constexpr int kMaxHeaderDepth = 128;

static const std::pair<DType, const char*> kDTypeNames[] = {
    {kFloat32, "F32"}, {kFloat64, "F64"}, {kFloat16, "F16"}, {kBFloat16, "BF16"}, {kInt64, "I64"}, {kBool, "BOOL"},
    {kFloat8_e4m3fn, "F8_E4M3"}, {kFloat8_e5m2, "F8_E5M2"},
};
static const char* safetensors_name(DType t) {
  for (auto& [dtype, name] : kDTypeNames)
    if (dtype == t) return name;
  __builtin_unreachable();  // the table lists every DType
}

const Tensor& SafeTensors::at(const std::string& name) const {
  std::string present;
  for (auto& [n, t] : tensors) {
    if (n == name) return t;
    present += (present.empty() ? "" : ", ") + n;
  }
  throw Error("SafeTensors::at: no tensor named '" + name + "' (present: " + present + ")");
}

// ---- save ----

// The tensor's values as one dense run of bytes in host memory.
static Tensor contiguous_host(const Tensor& t) {
  if (t.device().is_cpu() && t.is_contiguous()) return t;
  Tensor host = empty(t.shape(), TensorOptions(t.dtype()));
  kernels::copy_(host, t);
  return host;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Everything that can be refused is refused before the temporary file exists.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;  // omitted when empty, like the reference writer
  std::vector<Tensor> hosts;
  uint64_t offset = 0;
  for (auto& [name, t] : tensors) {
    AMPGRAD_CHECK(name != "__metadata__", path << ": '__metadata__' is reserved and cannot name a tensor");
    AMPGRAD_CHECK(!header.contains(name), path << ": two tensors are named '" << name << "'");
    AMPGRAD_CHECK(t.defined(), path << ": tensor '" << name << "' is undefined");
    hosts.push_back(contiguous_host(t));
    uint64_t nbytes = uint64_t(t.numel()) * t.element_size();
    header[name] = {{"dtype", safetensors_name(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string json;
  try {
    json = header.dump();  // compact, as the reference writes it
  } catch (const nlohmann::json::exception& e) {  // e.g. a name that is not valid UTF-8
    throw Error(path + ": cannot write the header: " + e.what());
  }
  json.append((8 - json.size() % 8) % 8, ' ');
  uint64_t header_len = json.size();

  AtomicFile file(path);
  file.write(&header_len, 8);
  file.write(json.data(), json.size());
  for (const Tensor& h : hosts) file.write(h.raw_data(), h.numel() * h.element_size());
  file.commit();
}

// ---- load ----

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;  // relative to the start of the data
};

static std::string data_key(const std::string& path, const std::string& name) { return path + ": tensor '" + name + "'"; }

// A value of the header as messages quote it: its JSON, cut short (it may be megabytes long).
static std::string excerpt(const nlohmann::json& v) {
  std::string text = v.dump();
  return text.size() <= 80 ? text : text.substr(0, 77) + "...";
}

// The byte offset (in the file) of the first bracket nested deeper than kMaxHeaderDepth, or 0.
static uint64_t too_deep_at(const std::string& json) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;  // an escaped character, perhaps a quote
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxHeaderDepth) return 8 + i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return 0;
}

static Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& v) {
  std::string where = data_key(path, name);
  AMPGRAD_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                where << ": expected an object with dtype, shape and data_offsets, found " << excerpt(v));
  Entry e{name, kFloat32, {}, 0, 0};
  const auto& dtype = v["dtype"];
  AMPGRAD_CHECK(dtype.is_string(), where << ": dtype must be a string, found " << excerpt(dtype));
  auto known = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames), [&](auto& p) { return dtype == p.second; });
  AMPGRAD_CHECK(known != std::end(kDTypeNames), where << ": dtype " << excerpt(dtype) << " is not one ampgrad holds (F32, F64, F16, BF16, I64, BOOL, F8_E4M3, F8_E5M2)");
  e.dtype = known->first;
  const auto& shape = v["shape"];
  AMPGRAD_CHECK(shape.is_array(), where << ": shape must be an array, found " << excerpt(shape));
  // extent: the sizes' product with a 0 counted as 1, which must fit int64 even for a tensor
  // with no elements (tensor.cpp's numel_of)
  uint64_t nbytes = itemsize(e.dtype), extent = 1;
  for (const auto& d : shape) {
    AMPGRAD_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(INT64_MAX), where << ": shape " << excerpt(shape) << " holds a value that is not a size");
    const uint64_t size = d.get<uint64_t>();
    AMPGRAD_CHECK(!__builtin_mul_overflow(nbytes, size, &nbytes) && !__builtin_mul_overflow(extent, std::max<uint64_t>(size, 1), &extent) &&
                      extent <= uint64_t(INT64_MAX),
                  where << ": shape " << excerpt(shape) << " is impossibly large");
    e.shape.push_back(int64_t(size));
  }
  const auto& offsets = v["data_offsets"];
  AMPGRAD_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
                where << ": data_offsets must be [begin, end], found " << excerpt(offsets));
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  AMPGRAD_CHECK(e.begin <= e.end && e.end - e.begin == nbytes, where << ": data_offsets " << excerpt(offsets) << " span "
                  << (e.begin <= e.end ? std::to_string(e.end - e.begin) : "a negative number of") << " bytes, but "
                  << dtype.get<std::string>() << " " << shape_str(e.shape) << " needs " << nbytes);
  return e;
}

SafeTensors load_safetensors(const std::string& path) {
  uint64_t file_size = input_file_size(path), header_len = 0;
  std::ifstream in(path, std::ios::binary);
  AMPGRAD_CHECK(in, path << ": cannot open: " << std::strerror(errno));
  AMPGRAD_CHECK(file_size >= 8, path << ": " << file_size << " bytes, too short for the 8-byte header length");
  in.read(reinterpret_cast<char*>(&header_len), 8);
  AMPGRAD_CHECK(header_len <= kMaxHeaderBytes, path << ": header length " << header_len << " (bytes 0-7) exceeds the "
                                                     << kMaxHeaderBytes << "-byte limit of the format; not a safetensors file?");
  AMPGRAD_CHECK(header_len <= file_size - 8, path << ": header length " << header_len << " (bytes 0-7) runs past the end of the file ("
                                                  << file_size << " bytes): truncated?");
  std::string json(header_len, '\0');
  in.read(json.data(), std::streamsize(header_len));
  AMPGRAD_CHECK(!json.empty() && json[0] == '{', path << ": the header at byte offset 8 must start with '{', found "
                                                      << (json.empty() ? std::string("nothing") : "'" + json.substr(0, 1) + "'"));
  const uint64_t deep = too_deep_at(json);
  AMPGRAD_CHECK(deep == 0, path << ": the JSON header nests deeper than " << kMaxHeaderDepth << " levels at byte offset " << deep);

  SafeTensors out;
  std::vector<Entry> entries;
  try {  // nlohmann raises parse_error for bad syntax, out_of_range for a number such as 1e999
    const nlohmann::json header = nlohmann::json::parse(json);
    AMPGRAD_CHECK(header.is_object(), path << ": the JSON header must be an object");
    for (const auto& [key, value] : header.items()) {
      if (key != "__metadata__") {
        entries.push_back(parse_entry(path, key, value));
        continue;
      }
      AMPGRAD_CHECK(value.is_object(), path << ": __metadata__ must be an object of strings, found " << excerpt(value));
      for (const auto& [k, v] : value.items()) {
        AMPGRAD_CHECK(v.is_string(), path << ": __metadata__ '" << k << "' must be a string, found " << excerpt(v));
        out.metadata[k] = v.get<std::string>();
      }
    }
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path + ": the JSON header is invalid at byte offset " + std::to_string(8 + e.byte - 1) + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": the JSON header at byte offset 8 is invalid: " + e.what());
  }

  // The byte ranges, sorted, must tile [0, data_size) exactly.
  uint64_t data_start = 8 + header_len, data_size = file_size - data_start, covered = 0;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    std::string where = data_key(path, e.name);
    AMPGRAD_CHECK(e.begin >= covered, where << " (bytes " << data_start + e.begin << "-" << data_start + e.end
                                            << " of the file) overlaps tensor '" << previous->name << "', which ends at byte offset " << data_start + covered);
    AMPGRAD_CHECK(e.begin == covered, where << " starts at byte offset " << data_start + e.begin << ", leaving bytes "
                                            << data_start + covered << "-" << data_start + e.begin << " unused");
    AMPGRAD_CHECK(e.end <= data_size, where << " ends at byte offset " << data_start + e.end << ", past the end of the file ("
                                            << file_size << " bytes): truncated?");
    covered = e.end;
    previous = &e;
  }
  AMPGRAD_CHECK(covered == data_size, path << ": " << data_size - covered << " bytes after the last tensor, from byte offset " << data_start + covered);

  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, TensorOptions(e.dtype));
    in.seekg(std::streamoff(data_start + e.begin));
    in.read(static_cast<char*>(t.raw_data()), std::streamsize(e.end - e.begin));
    AMPGRAD_CHECK(in, data_key(path, e.name) << ": read failed at byte offset " << data_start + e.begin);
    if (e.dtype == kBool) {  // any byte but 0 or 1 would be an invalid C++ bool
      const uint8_t* b = static_cast<const uint8_t*>(t.raw_data());
      for (uint64_t i = 0; i < e.end - e.begin; ++i)
        AMPGRAD_CHECK(b[i] <= 1, data_key(path, e.name) << ": byte offset " << data_start + e.begin + i << " holds " << int(b[i]) << ", not a BOOL (0 or 1)");
    }
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

}  // namespace ampgrad::data
