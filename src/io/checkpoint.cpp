#include "llmcc/io/checkpoint.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "crc32.h"
#include "file_io.h"
#include "llmcc/error.h"

namespace llmcc {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are little-endian; a big-endian port needs byte swaps here");

namespace {

namespace fs = std::filesystem;
constexpr const char* kWhere = "checkpoint";
// Blob sections holding files a run carries (TrainState::files): "file.tokenizer.model".
constexpr std::string_view kFilePrefix = "file.";
constexpr char kMagic[8] = {'L', 'L', 'M', 'C', 'C', 'K', 'P', 'T'};
constexpr char kEndMagic[4] = {'K', 'E', 'N', 'D'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 32;  // magic, version, sections, file size, table size
constexpr std::size_t kTrailerBytes = 8;  // crc32, "KEND"
constexpr std::size_t kAlign = 64;        // section and tensor data offsets
constexpr std::uint32_t kKindTensors = 1, kKindBlob = 2;
constexpr std::uint32_t kDtypeF32 = 0;
constexpr std::uint32_t kMaxName = 4096;

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

void put_u32(std::string& s, std::uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& s, std::uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
void put_name(std::string& s, const std::string& name) {
  put_u32(s, static_cast<std::uint32_t>(name.size()));
  s += name;
}

// Bounds-checked reads from the mapped file; a read past `end` is a corrupt-file error.
struct Cursor {
  const unsigned char* base;
  std::size_t pos, end;
  const std::string* path;
  const char* what;

  [[noreturn]] void corrupt(const std::string& detail) const {
    fail(kWhere, *path + ": corrupt " + what + ": " + detail + "; the file is damaged, use an older checkpoint");
  }
  const unsigned char* take(std::size_t n) {
    if (n > end - pos) corrupt("needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos));
    const unsigned char* p = base + pos;
    pos += n;
    return p;
  }
  std::uint32_t u32() {
    std::uint32_t v;
    std::memcpy(&v, take(4), 4);
    return v;
  }
  std::uint64_t u64() {
    std::uint64_t v;
    std::memcpy(&v, take(8), 8);
    return v;
  }
  std::string name() {
    const std::uint32_t n = u32();
    if (n == 0 || n > kMaxName) corrupt("name length " + std::to_string(n));
    const unsigned char* p = take(n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
};

struct TensorEntry {
  std::string name;
  Shape shape;
  std::size_t data_offset = 0;  // absolute, in bytes
};

// A byte range [begin, end) of the file and what it holds, for the overlap check.
struct Extent {
  std::size_t begin, end;
  std::string what;
};

// Fails when two of the extents share a byte. The writer lays every part out once, in order;
// overlapping parts are a crafted or damaged file that the CRC alone does not reveal.
void check_disjoint(std::vector<Extent> extents, const Cursor& at) {
  std::erase_if(extents, [](const Extent& e) { return e.begin == e.end; });
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].begin < extents[i - 1].end) {
      at.corrupt(extents[i - 1].what + " (bytes " + std::to_string(extents[i - 1].begin) + ".." +
                 std::to_string(extents[i - 1].end) + ") overlaps " + extents[i].what + " (bytes " +
                 std::to_string(extents[i].begin) + ".." + std::to_string(extents[i].end) + ")");
    }
  }
}

struct SectionEntry {
  std::uint32_t kind = 0;
  std::string name;
  std::size_t offset = 0, size = 0;
  std::vector<TensorEntry> tensors;  // kind == tensors
};

}  // namespace

// ---- key=value text -----------------------------------------------------------------------

std::string format_key_values(const KeyValues& kv) {
  std::string out;
  for (const auto& [key, value] : kv) {
    if (key.empty() || key.find_first_of("=\n") != std::string::npos) {
      fail(kWhere, "config key '" + key + "' is empty or holds '=' or a newline");
    }
    if (value.find('\n') != std::string::npos) {
      fail(kWhere, "config value of '" + key + "' holds a newline");
    }
    out += key + "=" + value + "\n";
  }
  return out;
}

KeyValues parse_key_values(const std::string& text, const std::string& where) {
  KeyValues kv;
  std::size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    ++line_no;
    start = end + 1;
    if (line.empty()) continue;
    const std::size_t eq = line.find('=');
    if (eq == 0 || eq == std::string::npos) {
      fail(kWhere, where + ": line " + std::to_string(line_no) + " is not key=value: '" + line + "'");
    }
    kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

// ---- writer -------------------------------------------------------------------------------

void CheckpointWriter::add_tensors(const std::string& section, const ParameterStore& store) {
  Section s;
  s.name = section;
  s.store = &store;
  sections_.push_back(std::move(s));
}

void CheckpointWriter::add_blob(const std::string& section, std::string bytes) {
  Section s;
  s.name = section;
  s.blob = std::move(bytes);
  sections_.push_back(std::move(s));
}

void CheckpointWriter::save(const std::string& path) const {
  for (std::size_t i = 0; i < sections_.size(); ++i) {
    if (sections_[i].name.empty() || sections_[i].name.size() > kMaxName) {
      fail(kWhere, path + ": section " + std::to_string(i) + " has an empty or too long name");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (sections_[j].name == sections_[i].name) {
        fail(kWhere, path + ": section '" + sections_[i].name + "' added twice");
      }
    }
  }
  // Lay out: header, table, then each section at a 64-byte boundary; inside a tensor section
  // the descriptors, then each tensor's data at a 64-byte boundary; then the trailer.
  std::size_t table_bytes = 0;
  for (const Section& s : sections_) table_bytes += 4 + 4 + s.name.size() + 8 + 8;
  std::size_t pos = align_up(kHeaderBytes + table_bytes);
  std::vector<std::size_t> offsets, sizes;
  std::vector<std::string> descriptors(sections_.size());
  std::vector<std::vector<std::size_t>> data_offsets(sections_.size());
  for (std::size_t k = 0; k < sections_.size(); ++k) {
    const Section& s = sections_[k];
    offsets.push_back(pos);
    if (s.store == nullptr) {
      sizes.push_back(s.blob.size());
      pos = align_up(pos + s.blob.size());
      continue;
    }
    const ParameterStore& st = *s.store;
    std::size_t desc_bytes = 4;
    for (std::size_t i = 0; i < st.count(); ++i) {
      desc_bytes += 4 + st.name(i).size() + 4 + 4 + 8 * static_cast<std::size_t>(st.shape(i).ndim()) + 8;
    }
    std::size_t data = align_up(pos + desc_bytes);
    std::size_t end = pos + desc_bytes;
    std::string& d = descriptors[k];
    put_u32(d, static_cast<std::uint32_t>(st.count()));
    for (std::size_t i = 0; i < st.count(); ++i) {
      put_name(d, st.name(i));
      put_u32(d, static_cast<std::uint32_t>(st.shape(i).ndim()));
      put_u32(d, kDtypeF32);
      for (int j = 0; j < st.shape(i).ndim(); ++j) put_u64(d, static_cast<std::uint64_t>(st.shape(i)[j]));
      put_u64(d, data);
      data_offsets[k].push_back(data);
      end = data + static_cast<std::size_t>(st.shape(i).numel()) * sizeof(float);
      data = align_up(end);
    }
    LLMCC_ASSERT(d.size() == desc_bytes, "checkpoint descriptor size");
    sizes.push_back(end - pos);
    pos = align_up(end);
  }
  const std::size_t file_size = pos + kTrailerBytes;

  std::string head;
  head.append(kMagic, 8);
  put_u32(head, kVersion);
  put_u32(head, static_cast<std::uint32_t>(sections_.size()));
  put_u64(head, file_size);
  put_u64(head, table_bytes);
  for (std::size_t k = 0; k < sections_.size(); ++k) {
    put_u32(head, sections_[k].store ? kKindTensors : kKindBlob);
    put_name(head, sections_[k].name);
    put_u64(head, offsets[k]);
    put_u64(head, sizes[k]);
  }

  detail::AtomicFile out(path, kWhere);
  detail::Crc32 crc;
  std::size_t at = 0;
  const auto put = [&](const void* p, std::size_t n) {
    out.write(p, n);
    crc.update(p, n);
    at += n;
  };
  const auto pad_to = [&](std::size_t target) {
    static const char zeros[kAlign] = {};
    LLMCC_ASSERT(target >= at && target - at < kAlign, "checkpoint padding");
    put(zeros, target - at);
  };
  put(head.data(), head.size());
  for (std::size_t k = 0; k < sections_.size(); ++k) {
    pad_to(offsets[k]);
    const Section& s = sections_[k];
    if (s.store == nullptr) {
      put(s.blob.data(), s.blob.size());
      continue;
    }
    put(descriptors[k].data(), descriptors[k].size());
    for (std::size_t i = 0; i < s.store->count(); ++i) {
      pad_to(data_offsets[k][i]);
      put(s.store->data() + s.store->offset(i), static_cast<std::size_t>(s.store->shape(i).numel()) * sizeof(float));
    }
  }
  pad_to(file_size - kTrailerBytes);
  const std::uint32_t sum = crc.value();
  out.write(&sum, 4);
  out.write(kEndMagic, 4);
  out.commit();
}

// ---- reader -------------------------------------------------------------------------------

struct CheckpointReader::Impl {
  detail::MappedFile file;
  std::vector<SectionEntry> sections;

  const SectionEntry& find(const std::string& name) const {
    for (const SectionEntry& s : sections) {
      if (s.name == name) return s;
    }
    std::string have;
    for (const SectionEntry& s : sections) have += (have.empty() ? "" : ", ") + s.name;
    fail(kWhere, file.path() + ": no section '" + name + "' (it has: " + have + ")");
  }
};

CheckpointReader::CheckpointReader(const std::string& path)
    : impl_(std::make_unique<Impl>(Impl{detail::MappedFile(path, kWhere), {}})) {
  const unsigned char* base = impl_->file.data();
  const std::size_t size = impl_->file.size();
  if (size < kHeaderBytes + kTrailerBytes) {
    fail(kWhere, path + ": truncated: " + std::to_string(size) +
                     " bytes, less than an empty checkpoint; use an older checkpoint");
  }
  if (std::memcmp(base, kMagic, 8) != 0) {
    fail(kWhere, path +
                     ": bad magic: not an llmcc checkpoint (llm.c's gpt2_124M.bin needs the "
                     "llm.c import instead)");
  }
  Cursor head{base, 8, kHeaderBytes, &path, "header"};
  const std::uint32_t version = head.u32();
  const std::uint32_t count = head.u32();
  const std::uint64_t file_size = head.u64();
  const std::uint64_t table_bytes = head.u64();
  if (version != kVersion) {
    fail(kWhere,
         path + ": version " + std::to_string(version) + ", this llmcc reads version " + std::to_string(kVersion));
  }
  if (file_size != size) {
    fail(kWhere, path + (size < file_size ? ": truncated: " : ": has trailing bytes: ") + "the header says " +
                     std::to_string(file_size) + " bytes, the file has " + std::to_string(size) +
                     "; use an older checkpoint");
  }
  if (std::memcmp(base + size - 4, kEndMagic, 4) != 0) {
    fail(kWhere, path + ": corrupt: the end marker is missing; use an older checkpoint");
  }
  std::uint32_t stored = 0;
  std::memcpy(&stored, base + size - kTrailerBytes, 4);
  const std::uint32_t actual = detail::crc32(base, size - kTrailerBytes);
  if (stored != actual) {
    fail(kWhere, path + ": corrupt: checksum mismatch (CRC-32 stored " + std::to_string(stored) + ", computed " +
                     std::to_string(actual) + "); use an older checkpoint");
  }
  // The checksum matched, but parse defensively anyway: never trust an offset unchecked.
  const std::size_t payload_end = size - kTrailerBytes;
  if (table_bytes > payload_end - kHeaderBytes) {
    Cursor{base, 0, 0, &path, "header"}.corrupt("table size " + std::to_string(table_bytes));
  }
  Cursor table{base, kHeaderBytes, kHeaderBytes + table_bytes, &path, "section table"};
  std::vector<Extent> file_parts{{0, kHeaderBytes + table_bytes, "the header and section table"}};
  std::unordered_set<std::string> section_names;
  for (std::uint32_t k = 0; k < count; ++k) {
    SectionEntry s;
    s.kind = table.u32();
    s.name = table.name();
    s.offset = table.u64();
    s.size = table.u64();
    if (s.kind != kKindTensors && s.kind != kKindBlob) table.corrupt("section kind " + std::to_string(s.kind));
    if (s.offset > payload_end || s.size > payload_end - s.offset) {
      table.corrupt("section '" + s.name + "' lies outside the file");
    }
    if (s.kind == kKindTensors) {
      Cursor c{base, s.offset, s.offset + s.size, &path, "tensor table"};
      const std::uint32_t n = c.u32();
      std::vector<Extent> section_parts;
      std::unordered_set<std::string> tensor_names;
      for (std::uint32_t i = 0; i < n; ++i) {
        TensorEntry t;
        t.name = c.name();
        const std::uint32_t ndim = c.u32();
        const std::uint32_t dtype = c.u32();
        if (ndim < 1 || ndim > static_cast<std::uint32_t>(Shape::kMaxDims) || dtype != kDtypeF32) {
          c.corrupt("tensor '" + t.name + "' has ndim " + std::to_string(ndim) + ", dtype " + std::to_string(dtype));
        }
        std::int64_t dims[Shape::kMaxDims] = {1, 1, 1, 1};
        std::uint64_t numel = 1;
        for (std::uint32_t j = 0; j < ndim; ++j) {
          const std::uint64_t d = c.u64();
          if (d == 0 || d > (std::uint64_t{1} << 40) || numel > (std::uint64_t{1} << 40) / d) {
            c.corrupt("tensor '" + t.name + "' has dimension " + std::to_string(d));
          }
          dims[j] = static_cast<std::int64_t>(d);
          numel *= d;
        }
        switch (ndim) {
          case 1:
            t.shape = Shape{dims[0]};
            break;
          case 2:
            t.shape = Shape{dims[0], dims[1]};
            break;
          case 3:
            t.shape = Shape{dims[0], dims[1], dims[2]};
            break;
          default:
            t.shape = Shape{dims[0], dims[1], dims[2], dims[3]};
            break;
        }
        t.data_offset = c.u64();
        const std::size_t section_end = s.offset + s.size;
        if (t.data_offset < c.pos || t.data_offset > section_end ||
            numel * sizeof(float) > section_end - t.data_offset) {
          c.corrupt("data of tensor '" + t.name + "' lies outside its section");
        }
        if (!tensor_names.insert(t.name).second) {
          c.corrupt("tensor '" + t.name + "' appears twice in section '" + s.name + "'");
        }
        section_parts.push_back(
            {t.data_offset, t.data_offset + numel * sizeof(float), "the data of tensor '" + t.name + "'"});
        s.tensors.push_back(std::move(t));
      }
      // The descriptors end where the cursor stopped; no tensor's data may start inside them.
      section_parts.push_back({s.offset, c.pos, "the tensor descriptors of section '" + s.name + "'"});
      check_disjoint(std::move(section_parts), c);
    }
    if (!section_names.insert(s.name).second) {
      table.corrupt("section '" + s.name + "' appears twice");
    }
    file_parts.push_back({s.offset, s.offset + s.size, "section '" + s.name + "'"});
    impl_->sections.push_back(std::move(s));
  }
  check_disjoint(std::move(file_parts), table);
}

CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;

const std::string& CheckpointReader::path() const { return impl_->file.path(); }

std::vector<std::string> CheckpointReader::sections() const {
  std::vector<std::string> names;
  for (const SectionEntry& s : impl_->sections) names.push_back(s.name);
  return names;
}

bool CheckpointReader::has(const std::string& section) const {
  for (const SectionEntry& s : impl_->sections) {
    if (s.name == section) return true;
  }
  return false;
}

std::vector<CheckpointTensorInfo> CheckpointReader::tensors(const std::string& section) const {
  const SectionEntry& s = impl_->find(section);
  if (s.kind != kKindTensors) fail(kWhere, path() + ": section '" + section + "' holds no tensors");
  std::vector<CheckpointTensorInfo> out;
  for (const TensorEntry& t : s.tensors) out.push_back({t.name, t.shape});
  return out;
}

namespace {

// The checkpoint tensor for each store tensor, by name; throws naming the first mismatch.
std::vector<const TensorEntry*> match_tensors(const std::string& path, const std::string& section,
                                              const SectionEntry& s, const ParameterStore& into) {
  std::unordered_map<std::string, const TensorEntry*> by_name;
  for (const TensorEntry& t : s.tensors) by_name[t.name] = &t;
  std::vector<const TensorEntry*> source(into.count());
  for (std::size_t i = 0; i < into.count(); ++i) {
    const auto it = by_name.find(into.name(i));
    if (it == by_name.end()) {
      // Name a checkpoint tensor the model lacks too: a renamed or re-laid-out tensor (say
      // h.0.attn.q.weight where the model has h.0.attn.c_attn.weight) then shows at a glance.
      std::string extra;
      for (const TensorEntry& t : s.tensors) {
        bool known = false;
        for (std::size_t j = 0; j < into.count() && !known; ++j) known = into.name(j) == t.name;
        if (!known) {
          extra = "; it has " + t.name + ", which the model has not";
          break;
        }
      }
      fail(kWhere, path + ": " + into.name(i) + " of the model is not in the checkpoint's '" + section + "' (" +
                       std::to_string(s.tensors.size()) + " tensors" + extra +
                       "); was it saved from another model or an older llmcc?");
    }
    if (it->second->shape != into.shape(i)) {
      fail(kWhere, path + ": " + into.name(i) + " has shape " + it->second->shape.str() + " in the checkpoint, " +
                       into.shape(i).str() + " in the model");
    }
    source[i] = it->second;
    by_name.erase(it);
  }
  // Report the first unused tensor in file order, for a stable message.
  for (const TensorEntry& t : s.tensors) {
    if (by_name.count(t.name)) {
      fail(kWhere, path + ": " + t.name + " in the checkpoint's '" + section + "' has no counterpart in the model (" +
                       std::to_string(into.count()) + " tensors); was it saved from another model?");
    }
  }
  return source;
}

}  // namespace

void CheckpointReader::check_tensors(const std::string& section, const ParameterStore& like) const {
  const SectionEntry& s = impl_->find(section);
  if (s.kind != kKindTensors) fail(kWhere, path() + ": section '" + section + "' holds no tensors");
  (void)match_tensors(path(), section, s, like);
}

void CheckpointReader::read_tensors(const std::string& section, ParameterStore& into) const {
  const SectionEntry& s = impl_->find(section);
  if (s.kind != kKindTensors) fail(kWhere, path() + ": section '" + section + "' holds no tensors");
  const std::vector<const TensorEntry*> source = match_tensors(path(), section, s, into);
  const unsigned char* base = impl_->file.data();
  for (std::size_t i = 0; i < into.count(); ++i) {
    std::memcpy(into.data() + into.offset(i), base + source[i]->data_offset,
                static_cast<std::size_t>(into.shape(i).numel()) * sizeof(float));
  }
}

std::string CheckpointReader::blob(const std::string& section) const {
  const SectionEntry& s = impl_->find(section);
  if (s.kind != kKindBlob) fail(kWhere, path() + ": section '" + section + "' is not a blob");
  return std::string(reinterpret_cast<const char*>(impl_->file.data() + s.offset), s.size);
}

// ---- the trainer's checkpoint -------------------------------------------------------------

void save_checkpoint(const std::string& path, const ParameterStore& params, const AdamW* opt, const TrainState& state) {
  KeyValues kv;
  kv["step"] = std::to_string(state.step);
  kv["data"] = state.data.to_string();
  for (const auto& [name, s] : state.rngs) kv["rng." + name] = std::to_string(s);
  if (state.val_loss) {
    if (!std::isfinite(*state.val_loss)) fail(kWhere, path + ": the state's validation loss is not finite");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(*state.val_loss));  // round-trips a float
    kv["val_loss"] = buf;
  }
  CheckpointWriter w;
  w.add_tensors("params", params);
  if (opt != nullptr) {
    check_same_layout(params, opt->m(), kWhere, "params", "adamw.m");
    w.add_tensors("adamw.m", opt->m());
    w.add_tensors("adamw.v", opt->v());
    kv["adamw.t"] = std::to_string(opt->t());
  }
  w.add_blob("state", format_key_values(kv));
  w.add_blob("config", format_key_values(state.config));
  for (const auto& [name, bytes] : state.files) {
    if (name.empty()) fail(kWhere, path + ": a carried file has an empty name");
    w.add_blob(std::string(kFilePrefix) + name, bytes);
  }
  w.save(path);
}

TrainState load_checkpoint(const std::string& path, ParameterStore& params, AdamW* opt) {
  const CheckpointReader r(path);
  const KeyValues kv = parse_key_values(r.blob("state"), path + " section 'state'");
  const auto get = [&](const std::string& key) -> const std::string& {
    const auto it = kv.find(key);
    if (it == kv.end()) fail(kWhere, path + ": section 'state' lacks '" + key + "'");
    return it->second;
  };
  const auto to_u64 = [&](const std::string& key, const std::string& v) {
    std::size_t used = 0;
    std::uint64_t x = 0;
    try {
      x = std::stoull(v, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (v.empty() || used != v.size() || v[0] == '-') {
      fail(kWhere, path + ": state '" + key + "' has bad value '" + v + "'");
    }
    return x;
  };
  TrainState state;
  state.step = static_cast<std::int64_t>(to_u64("step", get("step")));
  state.data = DataLoaderState::parse(get("data"));
  for (const auto& [key, value] : kv) {
    if (key.rfind("rng.", 0) == 0) state.rngs[key.substr(4)] = to_u64(key, value);
  }
  if (const auto it = kv.find("val_loss"); it != kv.end()) {
    char* end = nullptr;
    const float v = std::strtof(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !std::isfinite(v))
      fail(kWhere, path + ": state 'val_loss' has bad value '" + it->second + "'");
    state.val_loss = v;
  }
  state.config = parse_key_values(r.blob("config"), path + " section 'config'");
  for (const std::string& section : r.sections())
    if (section.rfind(kFilePrefix, 0) == 0) state.files[section.substr(kFilePrefix.size())] = r.blob(section);
  if (opt != nullptr && !r.has("adamw.m")) {
    fail(kWhere, path +
                     ": holds weights only (no AdamW moments), so training cannot resume "
                     "from it; start a new run initialised from it instead");
  }
  // Validate everything before changing anything, so a failed load leaves the model as it was.
  r.check_tensors("params", params);
  if (opt != nullptr) {
    check_same_layout(params, opt->m(), kWhere, "params", "AdamW's m");
    (void)to_u64("adamw.t", get("adamw.t"));
    r.check_tensors("adamw.m", opt->m());
    r.check_tensors("adamw.v", opt->v());
  }
  r.read_tensors("params", params);
  if (opt != nullptr) {
    r.read_tensors("adamw.m", opt->m());
    r.read_tensors("adamw.v", opt->v());
    opt->set_t(static_cast<std::int64_t>(to_u64("adamw.t", get("adamw.t"))));
  }
  return state;
}

// ---- a directory of checkpoints -----------------------------------------------------------

std::string checkpoint_path(const std::string& dir, std::int64_t step) {
  if (step < 0) fail(kWhere, "step must be >= 0, got " + std::to_string(step));
  char name[40];
  std::snprintf(name, sizeof(name), "ckpt_%06lld.bin", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

namespace {

// The write order of a directory's checkpoints lives in dir/checkpoints.txt (their file names,
// oldest written first; an unconfirmed one is marked: "ckpt_000100.bin unconfirmed"), not in the
// checkpoints: a checkpoint's bytes stay a function of the training state alone, so a resumed
// run's files equal an uninterrupted run's, and the order is a property of the directory (a
// copied checkpoint carries no stale position with it). The list is replaced atomically after the
// checkpoint is in place; a crash between the two leaves every checkpoint intact, the new one
// merely keeps its old place in the order (or ranks as unlisted), so --resume auto may take the
// one written before it. A name alone is confirmed, as every checkpoint of an llmcc before
// statuses was taken to be.
constexpr const char* kOrderFile = "checkpoints.txt";
// The digits of a name "ckpt_<digits>.bin", or an empty view when the name is not of that form.
std::string_view checkpoint_digits(std::string_view name) {
  constexpr std::string_view prefix = "ckpt_", suffix = ".bin";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) return {};
  const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const bool all_digits = std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  return all_digits ? digits : std::string_view{};
}

// The step of a checkpoint's file name "ckpt_<1 to 18 digits>.bin", or -1 for any other name
// (18 digits always fit an int64).
std::int64_t checkpoint_name_step(std::string_view name) {
  const std::string_view digits = checkpoint_digits(name);
  if (digits.empty() || digits.size() > 18) return -1;
  std::int64_t step = 0;
  for (const char c : digits) step = step * 10 + (c - '0');
  return step;
}

// A temporary name of the writes below: "ckpt_<digits>.bin.tmp" or "checkpoints.txt.tmp".
bool is_temporary_name(std::string_view name) {
  constexpr std::string_view tmp = ".tmp";
  if (!name.ends_with(tmp)) return false;
  name.remove_suffix(tmp.size());
  return name == kOrderFile || !checkpoint_digits(name).empty();
}

struct Listed {
  std::string name;
  CheckpointStatus status = CheckpointStatus::confirmed;
};

// The listed names that look like checkpoints, without repeats (a later entry wins).
std::vector<Listed> read_write_order(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kOrderFile);
  std::vector<Listed> listed;
  std::string line;
  while (std::getline(in, line)) {
    // "<checkpoint name>" or "<checkpoint name> unconfirmed"; anything else is skipped.
    constexpr std::string_view unconfirmed = " unconfirmed";
    const bool marked = std::string_view(line).ends_with(unconfirmed);
    const std::string name = marked ? line.substr(0, line.size() - unconfirmed.size()) : line;
    if (checkpoint_name_step(name) < 0) continue;
    std::erase_if(listed, [&](const Listed& l) { return l.name == name; });
    listed.push_back({name, marked ? CheckpointStatus::unconfirmed : CheckpointStatus::confirmed});
  }
  return listed;
}

void write_write_order(const std::string& dir, const std::vector<Listed>& listed) {
  std::string text;
  for (const Listed& l : listed)
    text += l.name + (l.status == CheckpointStatus::unconfirmed ? " unconfirmed" : "") + "\n";
  detail::AtomicFile f((fs::path(dir) / kOrderFile).string(), kWhere);
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace

bool usable(CheckpointStatus s) { return s != CheckpointStatus::unconfirmed; }

std::vector<CheckpointEntry> list_checkpoint_entries(const std::string& dir) {
  std::vector<CheckpointEntry> unlisted;
  std::map<std::string, std::pair<std::int64_t, std::string>> found;  // by file name
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return unlisted;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::int64_t step = checkpoint_name_step(name);
    if (step >= 0 && e.is_regular_file(ec)) {
      found[name] = {step, e.path().string()};
    }
  }
  std::vector<CheckpointEntry> listed;
  for (const Listed& l : read_write_order(dir)) {
    const auto it = found.find(l.name);
    if (it == found.end()) continue;  // deleted since
    listed.push_back({it->second.first, it->second.second, l.status});
    found.erase(it);
  }
  // Unlisted ones (written by an llmcc without the list, or copied in) are older, by step.
  for (auto& [name, entry] : found)
    unlisted.push_back({entry.first, std::move(entry.second), CheckpointStatus::unlisted});
  std::sort(unlisted.begin(), unlisted.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  unlisted.insert(unlisted.end(), listed.begin(), listed.end());
  return unlisted;
}

std::vector<std::pair<std::int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  for (CheckpointEntry& e : list_checkpoint_entries(dir)) out.emplace_back(e.step, std::move(e.path));
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  auto all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

std::optional<std::string> latest_usable_checkpoint(const std::string& dir) {
  const auto all = list_checkpoint_entries(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (usable(it->status)) return it->path;
  return std::nullopt;
}

CheckpointStatus checkpoint_status(const std::string& path) {
  const fs::path p(path);
  const std::string name = p.filename().string();
  for (const Listed& l : read_write_order(p.parent_path().empty() ? "." : p.parent_path().string()))
    if (l.name == name) return l.status;
  return CheckpointStatus::unlisted;
}

void prune_checkpoints(const std::string& dir, int keep_last) {
  if (keep_last < 1) fail(kWhere, "keep_last must be >= 1, got " + std::to_string(keep_last));
  const auto all = list_checkpoint_entries(dir);
  std::error_code ec;
  const std::size_t keep = static_cast<std::size_t>(keep_last);
  const std::size_t drop = all.size() > keep ? all.size() - keep : 0;
  // The newest usable checkpoint stays, however many unconfirmed ones were written after it: it
  // is what a rollback, the guard's error and --resume auto return to.
  std::size_t newest_usable = all.size();
  for (std::size_t i = all.size(); i-- > 0;)
    if (usable(all[i].status)) {
      newest_usable = i;
      break;
    }
  std::vector<std::string> kept_names;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i < drop && i != newest_usable)
      fs::remove(all[i].path, ec);
    else
      kept_names.push_back(fs::path(all[i].path).filename().string());
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (is_temporary_name(e.path().filename().string())) fs::remove(e.path(), ec);
  }
  // Keep the list to the kept files it names, in their order.
  const std::vector<Listed> order = read_write_order(dir);
  std::vector<Listed> kept;
  for (const Listed& l : order)
    if (std::find(kept_names.begin(), kept_names.end(), l.name) != kept_names.end()) kept.push_back(l);
  if (kept.size() != order.size()) write_write_order(dir, kept);
  detail::sync_parent_dir((fs::path(dir) / "x").string());
}

std::string save_checkpoint_in_dir(const std::string& dir, int keep_last, const ParameterStore& params,
                                   const AdamW* opt, const TrainState& state, bool confirmed) {
  if (keep_last < 1) fail(kWhere, "keep_last must be >= 1, got " + std::to_string(keep_last));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(kWhere, dir + ": cannot create the checkpoint directory: " + ec.message());
  const std::string path = checkpoint_path(dir, state.step);
  save_checkpoint(path, params, opt, state);
  // Newest written, whatever its step (a resumed branch writes lower steps than the abandoned
  // one), so pruning keeps it and --resume auto finds it.
  std::vector<Listed> order = read_write_order(dir);
  const std::string name = fs::path(path).filename().string();
  std::erase_if(order, [&](const Listed& l) { return l.name == name; });
  order.push_back({name, confirmed ? CheckpointStatus::confirmed : CheckpointStatus::unconfirmed});
  write_write_order(dir, order);
  prune_checkpoints(dir, keep_last);
  LLMCC_ASSERT(fs::exists(path), "pruning deleted the checkpoint just written");
  return path;
}

}  // namespace llmcc
