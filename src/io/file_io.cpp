#include "file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "llmcc/error.h"

namespace llmcc::detail {
namespace {
constexpr std::size_t kBufferBytes = 1 << 20;
}

AtomicFile::AtomicFile(std::string path, std::string component)
    : path_(std::move(path)), tmp_(path_ + ".tmp"), component_(std::move(component)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_os("cannot create " + tmp_);
  buffer_.reserve(kBufferBytes);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::fail_os(const std::string& what) const {
  const std::string reason = std::strerror(errno);
  fail(component_,
       path_ + ": " + what + ": " + reason + " (is the directory there and writable, and the disk not full?)");
}

void AtomicFile::write(const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  written_ += n;
  if (buffer_.size() + n <= kBufferBytes) {
    buffer_.insert(buffer_.end(), p, p + n);
    return;
  }
  flush();
  if (n < kBufferBytes) {
    buffer_.insert(buffer_.end(), p, p + n);
    return;
  }
  while (n > 0) {
    const ssize_t k = ::write(fd_, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) fail_os("write to " + tmp_ + " failed");
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}

void AtomicFile::flush() {
  const char* p = buffer_.data();
  std::size_t n = buffer_.size();
  while (n > 0) {
    const ssize_t k = ::write(fd_, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) fail_os("write to " + tmp_ + " failed");
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  buffer_.clear();
}

void AtomicFile::commit() {
  flush();
  if (::fsync(fd_) != 0) fail_os("fsync of " + tmp_ + " failed");
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail_os("close of " + tmp_ + " failed");
  }
  fd_ = -1;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail_os("rename of " + tmp_ + " failed");
  committed_ = true;
  sync_parent_dir(path_);
}

MappedFile::MappedFile(const std::string& path, const std::string& component) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail(component, path + ": cannot open: " + std::strerror(errno) + " (check the path)");
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(component, path + ": not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      fail(component, path + ": cannot map " + std::to_string(size_) + " bytes: " + reason);
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping stays valid
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void MappedFile::release(const unsigned char* begin, std::size_t n) const {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = (reinterpret_cast<std::uintptr_t>(begin) + page - 1) / page * page;
  const auto last = (reinterpret_cast<std::uintptr_t>(begin) + n) / page * page;
  // The mapping is private and never written, so its pages can always be dropped; a failure only
  // leaves them resident.
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void sync_parent_dir(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace llmcc::detail
