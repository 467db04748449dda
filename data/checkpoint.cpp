// checkpoint.cpp — safetensors writing (header JSON, space padding, raw bytes, atomic rename)
// and reading (every header field checked before a byte of data is trusted).
#include "data/checkpoint.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/atomic_file.h"
#include "tensor/kernels.h"

namespace ampgrad::data {

// Tensor bytes are written as they lie in memory; the format says little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

// The reference implementation refuses larger headers, so that a corrupt length cannot make a
// reader allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

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

static Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& v) {
  std::string where = data_key(path, name);
  AMPGRAD_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                where << ": expected an object with dtype, shape and data_offsets, found " << v.dump());
  Entry e{name, kFloat32, {}, 0, 0};
  const auto& dtype = v["dtype"];
  AMPGRAD_CHECK(dtype.is_string(), where << ": dtype must be a string, found " << dtype.dump());
  auto known = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames), [&](auto& p) { return dtype == p.second; });
  AMPGRAD_CHECK(known != std::end(kDTypeNames), where << ": dtype " << dtype.dump() << " is not one ampgrad holds (F32, F64, F16, BF16, I64, BOOL, F8_E4M3, F8_E5M2)");
  e.dtype = known->first;
  const auto& shape = v["shape"];
  AMPGRAD_CHECK(shape.is_array(), where << ": shape must be an array, found " << shape.dump());
  uint64_t nbytes = itemsize(e.dtype);
  for (const auto& d : shape) {
    AMPGRAD_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(INT64_MAX), where << ": shape " << shape.dump() << " holds a value that is not a size");
    AMPGRAD_CHECK(!__builtin_mul_overflow(nbytes, d.get<uint64_t>(), &nbytes), where << ": shape " << shape.dump() << " is impossibly large");
    e.shape.push_back(d.get<int64_t>());
  }
  const auto& offsets = v["data_offsets"];
  AMPGRAD_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
                where << ": data_offsets must be [begin, end], found " << offsets.dump());
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  AMPGRAD_CHECK(e.begin <= e.end && e.end - e.begin == nbytes, where << ": data_offsets " << offsets.dump() << " span "
                  << (e.begin <= e.end ? std::to_string(e.end - e.begin) : "a negative number of") << " bytes, but "
                  << dtype.get<std::string>() << " " << shape_str(e.shape) << " needs " << nbytes);
  return e;
}

SafeTensors load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  AMPGRAD_CHECK(in, path << ": cannot open: " << std::strerror(errno));
  uint64_t file_size = std::filesystem::file_size(path), header_len = 0;
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
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path + ": the JSON header is invalid at byte offset " + std::to_string(8 + e.byte - 1) + ": " + e.what());
  }
  AMPGRAD_CHECK(header.is_object(), path << ": the JSON header must be an object");

  SafeTensors out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key != "__metadata__") {
      entries.push_back(parse_entry(path, key, value));
      continue;
    }
    AMPGRAD_CHECK(value.is_object(), path << ": __metadata__ must be an object of strings, found " << value.dump());
    for (const auto& [k, v] : value.items()) {
      AMPGRAD_CHECK(v.is_string(), path << ": __metadata__ '" << k << "' must be a string, found " << v.dump());
      out.metadata[k] = v.get<std::string>();
    }
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
