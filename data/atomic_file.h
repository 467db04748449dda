// atomic_file.h — write a file so that readers see either the old contents or the new, never
// a mix: bytes go to a temporary file in the same directory, which is flushed to disk and then
// renamed over the target. Holds no format knowledge; idx.cpp and safetensors.cpp use it.
//
//   AtomicFile f("ckpt.safetensors");   // creates ckpt.safetensors.tmp.<pid>.<n> (and removes those
//                                        // of processes that died saving it)
//   f.write(bytes, n);                   // any number of times
//   f.commit();                          // fsync, rename over the target, fsync the directory
//   // leaving scope without commit() (an exception) deletes the temporary; the target is untouched
#pragma once
#include <cstddef>
#include <string>

namespace ampgrad::data {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* bytes, size_t n);
  void commit();

 private:
  std::string path_, temp_path_;
  int fd_ = -1;
};

}  // namespace ampgrad::data
