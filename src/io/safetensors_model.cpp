// A model's safetensors as Hugging Face lays them out: one model.safetensors, or shards with
// model.safetensors.index.json (llmcc/io/safetensors.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "file_io.h"
#include "io/json_reader.h"
#include "llmcc/error.h"
#include "llmcc/io/safetensors.h"
#include "safetensors_file.h"

namespace llmcc {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "safetensors";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
// An index names tensors and files; one of 100 MB is corrupt, not big (as for headers).
constexpr std::size_t kMaxIndexBytes = 100'000'000;

std::int64_t numel(const TensorShape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

// The shards an existing index in dir names, or none when there is no index or it cannot be read
// (then only the index itself is replaced).
std::vector<std::string> listed_shards(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / kIndexFile, ec)) return {};
  try {
    return read_safetensors_index((dir / kIndexFile).string()).shards;
  } catch (const Error&) {
    return {};
  }
}

void remove_file(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) fail(kWhere, path.string() + ": cannot remove: " + ec.message());
}

// "model-00002-of-00003.safetensors", as save_pretrained names shards.
std::string shard_name(std::size_t i, std::size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return name;
}

}  // namespace

bool is_safetensors_index(const std::string& path) {
  return fs::path(path).filename().string().ends_with(".index.json");
}

SafetensorsIndex read_safetensors_index(const std::string& path) {
  const detail::MappedFile file(path, kWhere);
  auto bad = [&](const std::string& what) { fail(kWhere, path + ": " + what); };
  if (file.size() > kMaxIndexBytes) bad(std::to_string(file.size()) + " bytes, over the 100 MB limit of an index");
  const JsonValue json =
      parse_json(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), path, kWhere);
  if (json.kind != JsonValue::Kind::Object) {
    bad("is " + std::string(json.kind_name()) + ", expected a JSON object with a weight_map (a shard index)");
  }
  const JsonValue* metadata = json.find("metadata");
  if (metadata != nullptr && metadata->kind != JsonValue::Kind::Object && metadata->kind != JsonValue::Kind::Null) {
    bad("metadata is " + std::string(metadata->kind_name()) + ", expected an object");
  }
  const JsonValue* map = json.find("weight_map");
  if (map == nullptr || map->kind != JsonValue::Kind::Object) {
    bad(map == nullptr ? "has no weight_map (expected {\"weight_map\": {\"<tensor>\": \"<shard file>\", ...}})"
                       : "weight_map is " + std::string(map->kind_name()) + ", expected an object");
  }
  if (map->object.empty()) bad("weight_map maps no tensors");
  std::set<std::string> files;
  for (const auto& [tensor, file_name] : map->object) {
    const std::string t = "weight_map['" + tensor + "']: ";
    if (tensor.empty()) bad("weight_map holds an empty tensor name");
    if (file_name.kind != JsonValue::Kind::String) bad(t + "is " + file_name.kind_name() + ", expected a file name");
    const std::string& f = file_name.string;
    // A shard lives beside its index: a path elsewhere (absolute, "../x", "a/b") is refused, so a
    // downloaded index cannot make llmcc open files outside its folder.
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
        f.find('\0') != std::string::npos) {
      bad(t + "'" + f + "' is not a plain file name (shards must be in the index's directory)");
    }
    files.insert(f);
  }
  SafetensorsIndex index;
  index.shards.assign(files.begin(), files.end());
  for (const auto& [tensor, file_name] : map->object) {
    const auto at = std::lower_bound(index.shards.begin(), index.shards.end(), file_name.string);
    index.weight_map.emplace_back(tensor, static_cast<std::uint32_t>(at - index.shards.begin()));
  }
  return index;
}

std::vector<std::string> write_safetensors_model(const std::string& dir_name,
                                                 const std::vector<SafetensorsTensor>& tensors,
                                                 const std::vector<std::pair<std::string, std::string>>& metadata,
                                                 const SafetensorsModelOptions& options) {
  const fs::path dir(dir_name);
  const std::uint64_t element_bytes = options.dtype == SafetensorsDType::F32 ? 4 : 2;
  // Greedy as save_pretrained: a tensor that would take the shard past the limit starts the next.
  std::vector<std::vector<const SafetensorsTensor*>> shards(1);
  std::uint64_t in_shard = 0, total = 0;
  for (const SafetensorsTensor& t : tensors) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(numel(t.shape)) * element_bytes;
    if (options.max_shard_bytes > 0 && !shards.back().empty() && in_shard + bytes > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += bytes;
    total += bytes;
  }
  const std::vector<std::string> old_shards = listed_shards(dir);
  std::error_code ec;

  if (shards.size() == 1) {
    const std::string path = (dir / kSingleFile).string();
    detail::AtomicFile out(path, kWhere);
    detail::write_safetensors_file(out, shards[0], metadata, options.dtype);
    out.commit();
    // Readers take model.safetensors before an index, so the new file is what they read from here
    // on; the sharded layout it replaces goes.
    if (fs::exists(dir / kIndexFile, ec)) remove_file(dir / kIndexFile);
    for (const std::string& s : old_shards) remove_file(dir / s);
    detail::sync_parent_dir(path);
    return {path};
  }

  // Every shard is written to its temporary file first. Then the old index goes before any shard
  // takes its final name (a shard of the old checkpoint may have the same name), the shards are
  // renamed into place and the new index written: at no moment does an index name a mix of old
  // and new shards.
  std::vector<std::unique_ptr<detail::AtomicFile>> files;
  std::vector<std::string> written;
  std::map<std::string, std::string> weight_map;  // sorted by tensor name, as save_pretrained writes it
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_name(i, shards.size());
    written.push_back((dir / name).string());
    files.push_back(std::make_unique<detail::AtomicFile>(written.back(), kWhere));
    detail::write_safetensors_file(*files.back(), shards[i], metadata, options.dtype);
    for (const SafetensorsTensor* t : shards[i]) weight_map[t->name] = name;
  }
  if (fs::exists(dir / kIndexFile, ec)) remove_file(dir / kIndexFile);
  for (auto& f : files) f->commit();
  std::string index = "{\n  \"metadata\": {\n    \"total_size\": " + std::to_string(total) + "\n  },\n";
  index += "  \"weight_map\": {\n";
  std::size_t i = 0;
  for (const auto& [tensor, file] : weight_map) {
    index += "    " + json_quote(tensor) + ": " + json_quote(file) + (++i < weight_map.size() ? ",\n" : "\n");
  }
  index += "  }\n}\n";
  written.push_back((dir / kIndexFile).string());
  detail::AtomicFile out(written.back(), kWhere);
  out.write(index.data(), index.size());
  out.commit();
  // The files of the layout replaced: a model.safetensors (which readers would take first) and
  // the old index's shards that the new one does not name.
  if (fs::exists(dir / kSingleFile, ec)) remove_file(dir / kSingleFile);
  for (const std::string& s : old_shards) {
    if (std::find(written.begin(), written.end(), (dir / s).string()) == written.end()) remove_file(dir / s);
  }
  detail::sync_parent_dir(written.back());
  return written;
}

}  // namespace llmcc
