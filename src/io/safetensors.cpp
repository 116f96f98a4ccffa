#include "llmcc/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <unordered_map>

#include "file_io.h"
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

struct SafetensorsReader::Mapping {
  detail::MappedFile file;
  // Tensor name -> position in entries_ (the names are entries_'s strings, which stay put:
  // entries_ is complete before this is filled and moves with it).
  std::unordered_map<std::string_view, std::size_t> by_name;
};

SafetensorsReader::SafetensorsReader(const std::string& path)
    : map_(std::make_unique<Mapping>(Mapping{detail::MappedFile(path, kWhere), {}})) {
  const detail::MappedFile& f = map_->file;
  auto bad = [&](const std::string& what) { fail(kWhere, path + ": " + what); };
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
  const JsonValue header = parse_json(text, path + " (header)", kWhere);
  if (header.kind != JsonValue::Kind::Object)
    bad("the header is " + std::string(header.kind_name()) + ", expected a JSON object");
  const std::uint64_t data_bytes = f.size() - 8 - n;
  data_ = f.data() + 8 + n;

  for (const auto& [name, v] : header.object) {
    if (name == "__metadata__") {
      if (v.kind != JsonValue::Kind::Object)
        bad("__metadata__ is " + std::string(v.kind_name()) + ", expected an object");
      for (const auto& [k, mv] : v.object) {
        if (mv.kind != JsonValue::Kind::String) {
          bad("__metadata__ '" + k + "' is " + mv.kind_name() + ", expected a string (metadata is string -> string)");
        }
        metadata_.emplace_back(k, mv.string);
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
    entries_.push_back(std::move(e));
  }

  // The tensors must tile the data section: sorted by offset, each starts where the last ended.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const SafetensorsEntry& e : entries_) by_offset.push_back(&e);
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
  read_.assign(entries_.size(), 0);
  map_->by_name.reserve(entries_.size());
  for (std::size_t i = 0; i < entries_.size(); ++i) map_->by_name.emplace(entries_[i].name, i);
}

SafetensorsReader::~SafetensorsReader() = default;
SafetensorsReader::SafetensorsReader(SafetensorsReader&&) noexcept = default;
SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&&) noexcept = default;

const std::string& SafetensorsReader::path() const { return map_->file.path(); }

const SafetensorsEntry* SafetensorsReader::find(std::string_view name) const {
  const auto it = map_->by_name.find(name);
  return it == map_->by_name.end() ? nullptr : &entries_[it->second];
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) {
    std::string some;
    for (std::size_t i = 0; i < entries_.size() && i < 3; ++i) some += (i ? ", '" : "'") + entries_[i].name + "'";
    fail(kWhere, path() + ": no tensor '" + name + "' (the file has " + std::to_string(entries_.size()) + " tensors" +
                     (some.empty() ? "" : ", e.g. " + some) + ")");
  }
  return *e;
}

void SafetensorsReader::read_f32(const std::string& name, const TensorShape& shape, float* out) const {
  const SafetensorsEntry& e = entry(name);
  const std::string t = path() + ": tensor '" + name + "': ";
  if (e.shape != shape) fail(kWhere, t + "shape " + shape_str(e.shape) + ", expected " + shape_str(shape));
  const unsigned char* src = data_ + e.begin;
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
  read_[static_cast<std::size_t>(&e - entries_.data())] = 1;
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

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::vector<std::pair<std::string, std::string>>& metadata) {
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
  for (const SafetensorsTensor& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") fail(kWhere, path + ": invalid tensor name '" + t.name + "'");
    if (!names.insert(t.name).second) fail(kWhere, path + ": tensor '" + t.name + "' given twice");
    for (const std::int64_t d : t.shape) {
      if (d < 0) fail(kWhere, path + ": tensor '" + t.name + "' has a negative dimension " + shape_str(t.shape));
    }
    LLMCC_ASSERT(t.fill != nullptr, "a safetensors tensor needs a fill function");
    const auto n = static_cast<std::uint64_t>(numel(t.shape));
    max_numel = std::max(max_numel, static_cast<std::size_t>(n));
    std::string shape;
    for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
    header += (header.size() > 1 ? "," : "") + json_quote(t.name) + ":{\"dtype\":\"F32\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + 4 * n) + "]}";
    offset += 4 * n;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // data starts 8-byte aligned

  detail::AtomicFile out(path, kWhere);
  const std::uint64_t n = header.size();
  out.write(&n, 8);
  out.write(header.data(), header.size());
  std::vector<float> buffer(max_numel);
  for (const SafetensorsTensor& t : tensors) {
    const auto count = static_cast<std::size_t>(numel(t.shape));
    t.fill(buffer.data());
    out.write(buffer.data(), count * sizeof(float));
  }
  out.commit();
}

}  // namespace llmcc
