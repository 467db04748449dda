// output_files.h — the files a program reads and writes, checked before any work: every output
// is absent or a regular file (never a directory, a device or a FIFO) and writable, and no file
// serves in two roles (--resume X --metrics X would truncate the saved state before reading it).
// Outputs are written atomically (data/atomic_file.h), each write checked: a full disk fails
// naming the file and leaves the old one, never a short or empty file and exit status 0.
//
//   check_paths({{"--save", c.save_path, "--resume"}, {"--metrics", c.metrics_path}}, {{"--resume", c.resume_path}});
//   TextOutput metrics(c.metrics_path, "epoch,loss\n");   // written now, header only
//   metrics.append("1,0.25\n");                           // the whole file rewritten, atomically
#pragma once
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "data/atomic_file.h"
#include "data/input_file.h"

namespace ampgrad::examples {

struct PathRole {
  const char* flag;                  // "--save"
  std::string path;                  // "" for none
  const char* may_replace = nullptr;  // an input's flag this output may name too: --save goes on writing the --resume file
};

// What makes two paths one file: its device and inode once it exists (a link or another spelling
// reaches the same one), else the absolute path it will be created at.
inline std::string file_identity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return "inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  return "path " + std::filesystem::weakly_canonical(std::filesystem::absolute(path)).string();
}

// Empty paths are skipped. Errors name the flag and the path.
inline void check_paths(const std::vector<PathRole>& outputs, const std::vector<PathRole>& inputs = {}) {
  std::vector<std::pair<std::string, const PathRole*>> seen;  // identity, role
  auto claim = [&](const PathRole& role) {
    const std::string id = file_identity(role.path);
    for (const auto& [other_id, other] : seen)
      AMPGRAD_CHECK(other_id != id || (role.may_replace && role.may_replace == std::string(other->flag)), role.flag << " " << role.path << " is the file " << other->flag << " " << other->path
                                              << " names: one file cannot serve two roles");
    seen.emplace_back(id, &role);
  };
  for (const PathRole& in : inputs)
    if (!in.path.empty()) claim(in);
  for (const PathRole& out : outputs) {
    if (out.path.empty()) continue;
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::status(out.path, ec);  // of the target, through links
    AMPGRAD_CHECK(!std::filesystem::exists(status) || std::filesystem::is_regular_file(status),
                  out.flag << " " << out.path << ": is " << data::special_file_kind(status) << ", not a regular file; outputs are written only to regular files");
    claim(out);
    try {
      data::AtomicFile probe(out.path);  // never committed: its destructor removes it
    } catch (const Error& e) {
      throw Error(std::string(out.flag) + " " + e.what());
    }
  }
}

// `text` as the whole contents of `path`, atomically.
inline void write_text_file(const std::string& path, const std::string& text) {
  data::AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

// A small output that grows line by line (a CSV of epochs): each append rewrites it whole and
// atomically, so after every line the file is complete. An empty path writes nothing.
class TextOutput {
 public:
  TextOutput(std::string path, std::string header) : path_(std::move(path)), text_(std::move(header)) { flush(); }
  void append(const std::string& lines) {
    text_ += lines;
    flush();
  }

 private:
  void flush() const {
    if (!path_.empty()) write_text_file(path_, text_);
  }
  std::string path_, text_;
};

}  // namespace ampgrad::examples
