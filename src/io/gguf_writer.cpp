#include "llmcc/io/gguf_writer.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <type_traits>

#include "io/file_io.h"
#include "kernels/cpu/parallel.h"
#include "llmcc/error.h"

namespace llmcc {
namespace {

constexpr const char* kWhere = "gguf";
constexpr std::uint64_t kAlignment = 32;  // general.alignment's default; the file does not set it

// gguf_type values.
enum : std::uint32_t {
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
};

class Bytes {
 public:
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const char*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put<std::uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
  }
  void value(const GgufValue& v) {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::uint32_t>) {
            put(kUint32);
            put(x);
          } else if constexpr (std::is_same_v<T, std::int32_t>) {
            put(kInt32);
            put(x);
          } else if constexpr (std::is_same_v<T, float>) {
            put(kFloat32);
            put(x);
          } else if constexpr (std::is_same_v<T, bool>) {
            put(kBool);
            put<std::uint8_t>(x ? 1 : 0);
          } else if constexpr (std::is_same_v<T, std::string>) {
            put(kString);
            str(x);
          } else {
            put(kArray);
            using E = typename T::value_type;
            put(std::is_same_v<E, std::string> ? kString : std::is_same_v<E, float> ? kFloat32 : kInt32);
            put<std::uint64_t>(x.size());
            for (const E& e : x) {
              if constexpr (std::is_same_v<E, std::string>)
                str(e);
              else
                put(e);
            }
          }
        },
        v);
  }
  void pad_to(std::uint64_t alignment) {
    while (b_.size() % alignment != 0) b_.push_back(0);
  }
  const std::vector<char>& data() const { return b_; }

 private:
  std::vector<char> b_;
};

std::uint64_t align(std::uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// `rows` rows of `cols` values to the type's bytes. Rows are independent, and quantizing is the
// export's arithmetic, so it runs on every thread. (A function of its own: nothing in it throws.)
void quantize_rows(GgmlType type, const float* values, std::int64_t cols, std::int64_t rows, std::uint8_t* bytes) {
  const std::size_t row_bytes = ggml_row_bytes(type, cols);
  cpu::parallel_for(
      rows, rows * cols >= (std::int64_t{1} << 14),
      [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r)
          ggml_quantize_row(type, values + r * cols, cols, bytes + static_cast<std::size_t>(r) * row_bytes);
      },
      1);
}

// Where each tensor goes: computed, and checked, before the file is opened.
struct Layout {
  std::vector<std::uint64_t> offsets, sizes;  // in the data section, bytes
  std::vector<std::int64_t> rows;             // rows of ne[0] values
  std::string error;                          // what is wrong with the request; empty: nothing
};

// Collects the first problem instead of throwing from inside the loop: Debian 12's GCC 12 at -O3
// puts such throws in the function's cold part, and linked by LLD 14 (as scripts/test.sh links)
// an exception from there aborts the process instead of unwinding.
Layout plan(const std::vector<GgufTensor>& tensors) {
  Layout l;
  std::set<std::string> names;
  std::uint64_t data_bytes = 0;
  for (const GgufTensor& t : tensors) {
    if (t.name.empty()) {
      l.error = "a tensor has no name";
    } else if (!names.insert(t.name).second) {
      l.error = "tensor " + t.name + " is given twice";
    } else if (t.ne.empty() || t.ne.size() > 4) {
      l.error = "tensor " + t.name + " must have 1 to 4 dimensions";
    } else if (std::any_of(t.ne.begin(), t.ne.end(), [](std::int64_t n) { return n < 1; })) {
      l.error =
          "tensor " + t.name + " has a dimension of " + std::to_string(*std::min_element(t.ne.begin(), t.ne.end()));
    } else if (t.ne[0] % ggml_block_size(t.type) != 0) {
      l.error = "tensor " + t.name + ": a row of " + std::to_string(t.ne[0]) + " values cannot be stored as " +
                ggml_type_name(t.type) + " (blocks of " + std::to_string(ggml_block_size(t.type)) + ")";
    }
    if (!l.error.empty()) return l;
    std::int64_t rows = 1;
    for (std::size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    l.rows.push_back(rows);
    l.offsets.push_back(data_bytes);
    l.sizes.push_back(ggml_row_bytes(t.type, t.ne[0]) * static_cast<std::uint64_t>(rows));
    data_bytes = align(data_bytes + l.sizes.back());
  }
  return l;
}

}  // namespace

void GgufMetadata::set(std::string key, GgufValue value) {
  for (auto& [k, v] : entries)
    if (k == key) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(std::move(key), std::move(value));
}

void write_gguf(const std::string& path, const GgufMetadata& metadata, const std::vector<GgufTensor>& tensors) {
  const Layout layout = plan(tensors);
  if (!layout.error.empty()) fail(kWhere, layout.error);
  const std::vector<std::uint64_t>& offsets = layout.offsets;
  const std::vector<std::uint64_t>& sizes = layout.sizes;
  const std::vector<std::int64_t>& row_counts = layout.rows;

  Bytes head;
  head.put<std::uint32_t>(0x46554747u);  // "GGUF"
  head.put<std::uint32_t>(3);
  head.put<std::uint64_t>(tensors.size());
  head.put<std::uint64_t>(metadata.entries.size());
  for (const auto& [key, value] : metadata.entries) {
    head.str(key);
    head.value(value);
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensor& t = tensors[i];
    head.str(t.name);
    head.put<std::uint32_t>(static_cast<std::uint32_t>(t.ne.size()));
    for (std::int64_t n : t.ne) head.put<std::uint64_t>(static_cast<std::uint64_t>(n));
    head.put<std::uint32_t>(static_cast<std::uint32_t>(t.type));
    head.put<std::uint64_t>(offsets[i]);
  }
  head.pad_to(kAlignment);

  detail::AtomicFile out(path, kWhere);
  out.write(head.data().data(), head.data().size());
  std::vector<float> values;
  std::vector<std::uint8_t> bytes;
  static const char zeros[kAlignment] = {};
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensor& t = tensors[i];
    values.resize(static_cast<std::size_t>(t.ne[0] * row_counts[i]));
    bytes.resize(sizes[i]);
    t.fill(values.data());
    quantize_rows(t.type, values.data(), t.ne[0], row_counts[i], bytes.data());
    out.write(bytes.data(), bytes.size());
    out.write(zeros, align(sizes[i]) - sizes[i]);
  }
  out.commit();
}

}  // namespace llmcc
