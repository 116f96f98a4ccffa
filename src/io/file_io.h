// File I/O shared by token files and checkpoints (private to src/train).
//
// AtomicFile: write a file so that readers see either the old contents or the complete new ones.
//
// Bytes go to "<path>.tmp"; commit() flushes, fsyncs it, renames it over <path> and fsyncs the
// directory, so a crash at any point leaves <path> as it was (at worst a stale .tmp remains,
// which the next write to the same path replaces). Destroying an uncommitted AtomicFile removes
// the .tmp. Errors throw llmcc::Error("[<component>] <path>: ...") with the OS reason.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace llmcc::detail {

class AtomicFile {
 public:
  AtomicFile(std::string path, std::string component);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Buffered; large writes go straight through.
  void write(const void* data, std::size_t n);
  std::size_t bytes_written() const { return written_; }
  void commit();

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_; }

 private:
  void flush();
  [[noreturn]] void fail_os(const std::string& what) const;

  std::string path_, tmp_, component_;
  int fd_ = -1;
  bool committed_ = false;
  std::size_t written_ = 0;
  std::vector<char> buffer_;
};

// MappedFile: a whole file mapped read-only (an empty file maps to no bytes). Throws
// llmcc::Error("[<component>] <path>: cannot open ...: <reason>") when it cannot.
class MappedFile {
 public:
  MappedFile(const std::string& path, const std::string& component);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the whole pages inside [begin, begin + n) from memory (they are read again from the file
  // if touched later): a reader done with a large range keeps the process's resident size down.
  void release(const unsigned char* begin, std::size_t n) const;

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

// fsyncs the directory holding `path` (makes a rename or unlink durable). Best effort.
void sync_parent_dir(const std::string& path);

}  // namespace llmcc::detail
