// device.h — where a tensor's bytes live. Kernels dispatch on this first, then on dtype.
//   Tensor x = zeros({2, 3}, TensorOptions().device(Device::cuda()));
#pragma once
#include <cstdint>
#include <string>

namespace ampgrad {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

const char* device_type_name(DeviceType t);  // "cpu" / "cuda"

namespace cuda {
bool is_available();  // built with CUDA and a GPU is present
int device_count();
std::string unavailable_reason();  // why is_available() is false ("" when it is true)
std::string device_name(int device = 0);  // "NVIDIA H200", as torch.cuda.get_device_name; an error without that device
}  // namespace cuda

}  // namespace ampgrad
