#include "llmcc/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <string_view>
#include <unordered_map>

#include "file_io.h"
#include "safetensors_file.h"
#include "llmcc/error.h"
#include "io/json_reader.h"

namespace llmcc {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian port needs byte swaps here");

namespace {

constexpr const char* kWhere = "safetensors";
// The reference implementation refuses headers over 100 MB; a larger one is corrupt, not big.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeInfo {
  const char* name;
  std::uint64_t bits;
};
// Every dtype the format defines (bits per element), so any valid file validates even when it
// holds tensors we do not read.
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 8},  {"U8", 8},   {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"I16", 16}, {"U16", 16}, {"F16", 16},
    {"BF16", 16}, {"I32", 32}, {"U32", 32}, {"F32", 32},    {"F64", 64},    {"I64", 64}, {"U64", 64},
};

const DTypeInfo* find_dtype(std::string_view name) {
  for (const DTypeInfo& d : kDTypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string known_dtypes() {
  std::string s;
  for (const DTypeInfo& d : kDTypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

std::string range_str(std::uint64_t b, std::uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
}

// numel(shape) * bits / 8, or false when it overflows 64 bits.
bool byte_size(const TensorShape& shape, std::uint64_t bits, std::uint64_t* out) {
  std::uint64_t n = 1;
  for (const std::int64_t d : shape) {
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && n > std::numeric_limits<std::uint64_t>::max() / u) return false;
    n *= u;
  }
  if (n > std::numeric_limits<std::uint64_t>::max() / bits) return false;
  *out = n * bits / 8;
  return true;
}

std::int64_t numel(const TensorShape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::string shape_str(const TensorShape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

float bf16_bits_to_f32(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0x1F) {  // inf or NaN (payload kept)
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {  // normal: rebias 15 -> 127
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {  // signed zero
    bits = sign;
  } else {        // subnormal m * 2^-24: normalise
    int e = 113;  // exponent field of 2^-14 in fp32 is 113
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (static_cast<std::uint32_t>(e) << 23) | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

namespace {

// One file's validated header.
struct ParsedFile {
  std::vector<SafetensorsEntry> entries;  // in header order
  std::vector<std::pair<std::string, std::string>> metadata;
  const unsigned char* data = nullptr;  // start of the data section
};

ParsedFile parse_file(const detail::MappedFile& f) {
  ParsedFile out;
  auto bad = [&](const std::string& what) { fail(kWhere, f.path() + ": " + what); };
  if (f.size() < 8) {
    bad("truncated: " + std::to_string(f.size()) +
        " bytes, a safetensors file starts with an 8-byte header length (is this a safetensors file?)");
  }
  std::uint64_t n = 0;
  std::memcpy(&n, f.data(), 8);
  if (n > f.size() - 8) {
    bad("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(f.size()) +
        " bytes); the file is truncated or not a safetensors file");
  }
  if (n > kMaxHeaderBytes) bad("header length " + std::to_string(n) + " is over the 100 MB limit; the file is corrupt");
  if (n < 2 || f.data()[8] != '{') {
    bad("the header does not start with '{' (a JSON object); the file is not a safetensors file");
  }
  const std::string_view text(reinterpret_cast<const char*>(f.data()) + 8, n);
  const JsonValue header = parse_json(text, f.path() + " (header)", kWhere);
  if (header.kind != JsonValue::Kind::Object)
    bad("the header is " + std::string(header.kind_name()) + ", expected a JSON object");
  const std::uint64_t data_bytes = f.size() - 8 - n;
  out.data = f.data() + 8 + n;

  for (const auto& [name, v] : header.object) {
    if (name == "__metadata__") {
      if (v.kind != JsonValue::Kind::Object)
        bad("__metadata__ is " + std::string(v.kind_name()) + ", expected an object");
      for (const auto& [k, mv] : v.object) {
        if (mv.kind != JsonValue::Kind::String) {
          bad("__metadata__ '" + k + "' is " + mv.kind_name() + ", expected a string (metadata is string -> string)");
        }
        out.metadata.emplace_back(k, mv.string);
      }
      continue;
    }
    const std::string t = "tensor '" + name + "': ";
    if (name.empty()) bad("a tensor has an empty name");
    if (v.kind != JsonValue::Kind::Object) {
      bad(t + "is " + v.kind_name() + ", expected an object with dtype, shape and data_offsets");
    }
    for (const auto& [k, unused] : v.object) {
      if (k != "dtype" && k != "shape" && k != "data_offsets") {
        bad(t + "unexpected key '" + k + "' (expected only dtype, shape and data_offsets)");
      }
    }
    SafetensorsEntry e;
    e.name = name;
    const JsonValue* dtype = v.find("dtype");
    if (dtype == nullptr || dtype->kind != JsonValue::Kind::String) bad(t + "has no string 'dtype'");
    const DTypeInfo* info = find_dtype(dtype->string);
    if (info == nullptr) bad(t + "unknown dtype '" + dtype->string + "'; known: " + known_dtypes());
    e.dtype = dtype->string;
    const JsonValue* shape = v.find("shape");
    if (shape == nullptr || shape->kind != JsonValue::Kind::Array) bad(t + "has no array 'shape'");
    for (const JsonValue& d : shape->array) {
      if (!d.is_integer || d.integer < 0) bad(t + "shape holds a value that is not a non-negative integer");
      e.shape.push_back(d.integer);
    }
    const JsonValue* offs = v.find("data_offsets");
    if (offs == nullptr || offs->kind != JsonValue::Kind::Array || offs->array.size() != 2 ||
        !offs->array[0].is_integer || !offs->array[1].is_integer || offs->array[0].integer < 0 ||
        offs->array[1].integer < 0) {
      bad(t + "'data_offsets' must be [begin, end], two non-negative integers");
    }
    e.begin = static_cast<std::uint64_t>(offs->array[0].integer);
    e.end = static_cast<std::uint64_t>(offs->array[1].integer);
    if (e.begin > e.end) bad(t + "data_offsets " + range_str(e.begin, e.end) + " end before they begin");
    if (e.end > data_bytes) {
      bad(t + "data_offsets " + range_str(e.begin, e.end) + " run past the data section (" +
          std::to_string(data_bytes) + " bytes); the file is truncated or the header is corrupt");
    }
    std::uint64_t need = 0;
    const bool fits = byte_size(e.shape, info->bits, &need);
    if (!fits || need != e.end - e.begin) {
      bad(t + "data_offsets " + range_str(e.begin, e.end) + " hold " + std::to_string(e.end - e.begin) +
          " bytes, but " + e.dtype + " " + shape_str(e.shape) + " needs " +
          (fits ? std::to_string(need) : std::string("more than 2^64")));
    }
    out.entries.push_back(std::move(e));
  }

  // The tensors must tile the data section: sorted by offset, each starts where the last ended.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const SafetensorsEntry& e : out.entries) by_offset.push_back(&e);
  // Equal ranges keep header order (the pointers' order), so an overlap names the earlier tensor.
  // std::sort with that last key, not std::stable_sort: libstdc++ 12's stable_sort calls the
  // deprecated get_temporary_buffer, which Clang reports under -Werror.
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    if (a->begin != b->begin) return a->begin < b->begin;
    if (a->end != b->end) return a->end < b->end;
    return a < b;
  });
  std::uint64_t covered = 0;
  const SafetensorsEntry* last = nullptr;
  for (const SafetensorsEntry* e : by_offset) {
    if (e->begin < covered) {
      bad("tensor '" + e->name + "' data_offsets " + range_str(e->begin, e->end) + " overlap tensor '" + last->name +
          "' " + range_str(last->begin, last->end));
    }
    if (e->begin > covered) {
      bad("data bytes " + range_str(covered, e->begin) + " belong to no tensor (a hole before tensor '" + e->name +
          "'); the header is corrupt");
    }
    covered = e->end;
    if (e->end > e->begin) last = e;
  }
  if (covered != data_bytes) {
    bad("data bytes " + range_str(covered, data_bytes) + " after the last tensor belong to no tensor; the file has " +
        std::to_string(data_bytes - covered) + " bytes too many");
  }
  return out;
}

}  // namespace

struct SafetensorsReader::Mapping {
  std::string path;                        // the file, or the index of the shards
  std::vector<detail::MappedFile> files;   // one, or every shard in the index's order
  std::vector<const unsigned char*> data;  // per file: the start of its data section
  std::vector<std::uint32_t> file_of;      // per entry: its file
  // Tensor name -> position in entries_ (the names are entries_'s strings, which stay put:
  // entries_ is complete before this is filled and moves with it).
  std::unordered_map<std::string_view, std::size_t> by_name;
};

SafetensorsReader::SafetensorsReader(const std::string& path) : map_(std::make_unique<Mapping>()) {
  map_->path = path;
  if (is_safetensors_index(path)) {
    open_shards(path);
  } else {
    map_->files.emplace_back(path, kWhere);
    ParsedFile parsed = parse_file(map_->files.back());
    map_->data.push_back(parsed.data);
    entries_ = std::move(parsed.entries);
    metadata_ = std::move(parsed.metadata);
    map_->file_of.assign(entries_.size(), 0);
  }
  read_.assign(entries_.size(), 0);
  map_->by_name.reserve(entries_.size());
  for (std::size_t i = 0; i < entries_.size(); ++i) map_->by_name.emplace(entries_[i].name, i);
}

// Every shard the index names, each validated as a file of its own; each tensor must be in the
// shard the index maps it to, and every mapped tensor must be there.
void SafetensorsReader::open_shards(const std::string& index_path) {
  const SafetensorsIndex index = read_safetensors_index(index_path);
  const std::filesystem::path dir = std::filesystem::path(index_path).parent_path();
  std::unordered_map<std::string_view, std::uint32_t> shard_of;  // tensor -> shard, from the index
  for (const auto& [tensor, shard] : index.weight_map) shard_of.emplace(tensor, shard);
  for (std::uint32_t s = 0; s < index.shards.size(); ++s) {
    const detail::MappedFile& file = map_->files.emplace_back((dir / index.shards[s]).string(), kWhere);
    ParsedFile parsed = parse_file(file);
    map_->data.push_back(parsed.data);
    if (s == 0) metadata_ = std::move(parsed.metadata);
    for (SafetensorsEntry& e : parsed.entries) {
      const auto it = shard_of.find(e.name);
      if (it == shard_of.end()) {
        fail(kWhere, file.path() + ": tensor '" + e.name + "' is not in the index " + index_path +
                         " (the shard and the index are not from one checkpoint)");
      }
      if (it->second != s) {
        fail(kWhere, file.path() + ": holds tensor '" + e.name + "', which the index " + index_path + " places in " +
                         index.shards[it->second] + " (the shard and the index are not from one checkpoint)");
      }
      entries_.push_back(std::move(e));
      map_->file_of.push_back(s);
    }
  }
  // Names are unique within the index and within each shard, and each tensor is in its own
  // shard: equal counts mean every mapped tensor was found.
  if (entries_.size() == index.weight_map.size()) return;
  std::unordered_map<std::string_view, std::size_t> found;
  for (std::size_t i = 0; i < entries_.size(); ++i) found.emplace(entries_[i].name, i);
  for (const auto& [tensor, shard] : index.weight_map) {
    if (found.count(tensor) == 0) {
      fail(kWhere, index_path + ": maps tensor '" + tensor + "' to " + index.shards[shard] +
                       ", which holds no tensor of that name (a shard from another checkpoint?)");
    }
  }
}

SafetensorsReader::~SafetensorsReader() = default;
SafetensorsReader::SafetensorsReader(SafetensorsReader&&) noexcept = default;
SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&&) noexcept = default;

const std::string& SafetensorsReader::path() const { return map_->path; }

const std::string& SafetensorsReader::file_of(const SafetensorsEntry& e) const {
  return map_->files[map_->file_of[static_cast<std::size_t>(&e - entries_.data())]].path();
}

const SafetensorsEntry* SafetensorsReader::find(std::string_view name) const {
  const auto it = map_->by_name.find(name);
  return it == map_->by_name.end() ? nullptr : &entries_[it->second];
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) {
    std::string some;
    for (std::size_t i = 0; i < entries_.size() && i < 3; ++i) some += (i ? ", '" : "'") + entries_[i].name + "'";
    fail(kWhere, path() + ": no tensor '" + name + "' (" +
                     (map_->files.size() > 1 ? "the shards have " : "the file has ") + std::to_string(entries_.size()) +
                     " tensors" + (some.empty() ? "" : ", e.g. " + some) + ")");
  }
  return *e;
}

void SafetensorsReader::read_f32(const std::string& name, const TensorShape& shape, float* out) const {
  const SafetensorsEntry& e = entry(name);
  const std::size_t index = static_cast<std::size_t>(&e - entries_.data());
  const detail::MappedFile& file = map_->files[map_->file_of[index]];
  const std::string t = file.path() + ": tensor '" + name + "': ";
  if (e.shape != shape) fail(kWhere, t + "shape " + shape_str(e.shape) + ", expected " + shape_str(shape));
  const unsigned char* src = map_->data[map_->file_of[index]] + e.begin;
  const auto n = static_cast<std::size_t>(numel(e.shape));
  if (e.dtype == "F32") {
    if (n > 0) std::memcpy(out, src, n * sizeof(float));  // an empty tensor's out may be null
  } else if (e.dtype == "BF16" || e.dtype == "F16") {
    const bool bf16 = e.dtype == "BF16";
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      out[i] = bf16 ? bf16_bits_to_f32(v) : f16_to_f32(v);
    }
  } else {
    fail(kWhere, t + "dtype " + e.dtype + ", expected F32, BF16 or F16 (floating-point weights)");
  }
  // The converted copy is the caller's now: the file's pages of this tensor leave memory, so a
  // model loaded tensor by tensor never holds the file and its fp32 weights in full at once.
  file.release(src, e.end - e.begin);
  read_[index] = 1;
}

std::vector<float> SafetensorsReader::read_f32(const std::string& name, TensorShape* shape) const {
  const SafetensorsEntry& e = entry(name);
  std::vector<float> out(static_cast<std::size_t>(numel(e.shape)));
  read_f32(name, e.shape, out.data());
  if (shape != nullptr) *shape = e.shape;
  return out;
}

std::vector<std::string> SafetensorsReader::unread() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (!read_[i]) out.push_back(entries_[i].name);
  }
  return out;
}

void SafetensorsReader::skip(const std::string& name) const {
  read_[static_cast<std::size_t>(&entry(name) - entries_.data())] = 1;
}

SafetensorsTensor safetensors_tensor(std::string name, TensorShape shape, const float* data) {
  const auto n = static_cast<std::size_t>(numel(shape));
  return {std::move(name), std::move(shape), [data, n](float* out) {
            if (n != 0) std::memcpy(out, data, n * sizeof(float));
          }};
}

std::uint16_t f32_to_bf16_bits(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;  // NaN
  // Round to nearest even on the 16 bits that go; a carry into the exponent is the right result
  // (up to infinity).
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

std::uint16_t f32_to_f16_bits(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;   // NaN
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // |x| >= 65520, the midpoint above fp16's max: inf
  if (a >= 0x38800000u) {                       // |x| >= 2^-14: normal in fp16
    // Rebias the exponent (127 -> 15) and round to nearest even on the 13 bits that go.
    return sign | static_cast<std::uint16_t>((a - 0x38000000u + 0xFFFu + ((a >> 13) & 1u)) >> 13);
  }
  // Subnormal in fp16 (or zero): the result is round(|x| / 2^-24), |x| = m * 2^(e - 150).
  const std::uint32_t e = a >> 23;
  const std::uint32_t shift = 126 - e;  // >= 14
  if (shift > 24) return sign;          // below half the smallest subnormal (fp32 subnormals too)
  const std::uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  std::uint32_t q = m >> shift;
  const std::uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;  // may carry into the smallest normal: right
  return sign | static_cast<std::uint16_t>(q);
}

const char* dtype_name(SafetensorsDType d) {
  switch (d) {
    case SafetensorsDType::F32:
      return "F32";
    case SafetensorsDType::BF16:
      return "BF16";
    case SafetensorsDType::F16:
      return "F16";
  }
  return "?";
}

bool parse_safetensors_dtype(std::string_view name, SafetensorsDType* out) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "f32" || lower == "fp32" || lower == "float32") {
    *out = SafetensorsDType::F32;
  } else if (lower == "bf16" || lower == "bfloat16") {
    *out = SafetensorsDType::BF16;
  } else if (lower == "f16" || lower == "fp16" || lower == "float16") {
    *out = SafetensorsDType::F16;
  } else {
    return false;
  }
  return true;
}

namespace detail {

void write_safetensors_file(AtomicFile& out, const std::vector<const SafetensorsTensor*>& tensors,
                            const std::vector<std::pair<std::string, std::string>>& metadata, SafetensorsDType dtype) {
  const std::string& path = out.path();
  const std::uint64_t bytes = dtype == SafetensorsDType::F32 ? 4 : 2;
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (std::size_t i = 0; i < metadata.size(); ++i) {
      header += (i ? "," : "") + json_quote(metadata[i].first) + ":" + json_quote(metadata[i].second);
    }
    header += "}";
  }
  std::set<std::string_view> names;
  std::uint64_t offset = 0;
  std::size_t max_numel = 0;
  for (const SafetensorsTensor* t : tensors) {
    if (t->name.empty() || t->name == "__metadata__") fail(kWhere, path + ": invalid tensor name '" + t->name + "'");
    if (!names.insert(t->name).second) fail(kWhere, path + ": tensor '" + t->name + "' given twice");
    for (const std::int64_t d : t->shape) {
      if (d < 0) fail(kWhere, path + ": tensor '" + t->name + "' has a negative dimension " + shape_str(t->shape));
    }
    LLMCC_ASSERT(t->fill != nullptr, "a safetensors tensor needs a fill function");
    const auto n = static_cast<std::uint64_t>(numel(t->shape));
    max_numel = std::max(max_numel, static_cast<std::size_t>(n));
    std::string shape;
    for (std::size_t i = 0; i < t->shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t->shape[i]);
    header += (header.size() > 1 ? "," : "") + json_quote(t->name) + ":{\"dtype\":\"" + dtype_name(dtype) +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes * n) + "]}";
    offset += bytes * n;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // data starts 8-byte aligned

  const std::uint64_t n = header.size();
  out.write(&n, 8);
  out.write(header.data(), header.size());
  std::vector<float> buffer(max_numel);
  std::vector<std::uint16_t> narrow(dtype == SafetensorsDType::F32 ? 0 : max_numel);
  for (const SafetensorsTensor* t : tensors) {
    const auto count = static_cast<std::size_t>(numel(t->shape));
    t->fill(buffer.data());
    if (dtype == SafetensorsDType::F32) {
      out.write(buffer.data(), count * sizeof(float));
      continue;
    }
    const bool bf16 = dtype == SafetensorsDType::BF16;
    for (std::size_t i = 0; i < count; ++i) narrow[i] = bf16 ? f32_to_bf16_bits(buffer[i]) : f32_to_f16_bits(buffer[i]);
    out.write(narrow.data(), count * sizeof(std::uint16_t));
  }
}

}  // namespace detail

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::vector<std::pair<std::string, std::string>>& metadata, SafetensorsDType dtype) {
  std::vector<const SafetensorsTensor*> all;
  for (const SafetensorsTensor& t : tensors) all.push_back(&t);
  detail::AtomicFile out(path, kWhere);
  detail::write_safetensors_file(out, all, metadata, dtype);
  out.commit();
}

}  // namespace llmcc
