// Sharded and narrowed safetensors (llmcc/io/safetensors.h): fp32 -> bf16/f16 rounding on every
// representable boundary, checkpoints split by model.safetensors.index.json read as one file in
// any mix of dtypes, every way an index and its shards can disagree refused by name, re-exports
// that switch layout leave no stale file, and a read tensor's file pages leave memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "llmcc/io/safetensors.h"
#include "temp_dir.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using llmcc::SafetensorsDType;
using llmcc::SafetensorsReader;
using llmcc::SafetensorsTensor;
using llmcc::test::TempDir;
using llmcc::test::throws_error;

float f32_of(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }

// Every finite fp16 value converts back to itself; each midpoint between neighbours rounds to the
// even one and one fp32 ulp either side of it to the nearer; NaN stays NaN; the overflow
// threshold is 65520 (the midpoint above 65504).
TEST(SafetensorsNarrowing, F16RoundsToNearestEvenAtEveryBoundary) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float x = llmcc::f16_to_f32(bits);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(llmcc::f16_to_f32(llmcc::f32_to_f16_bits(x)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(llmcc::f32_to_f16_bits(x), bits) << std::hex << h;
    if ((h & 0x7FFFu) >= 0x7BFFu) continue;  // the largest finite value and infinity: no upper neighbour
    const auto up = static_cast<std::uint16_t>(h + 1);
    const double mid = (static_cast<double>(x) + llmcc::f16_to_f32(up)) / 2;  // exact in fp32
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid);
    const std::uint16_t even = (h & 1u) ? up : bits;
    EXPECT_EQ(llmcc::f32_to_f16_bits(m), even) << std::hex << h;
    const bool neg = (h & 0x8000u) != 0;
    // One fp32 ulp towards x and towards its neighbour (by magnitude, so also for negatives).
    const float toward_x = f32_of(bits_of(m) - 1), toward_up = f32_of(bits_of(m) + 1);
    if (m != 0.0f) {
      EXPECT_EQ(llmcc::f32_to_f16_bits(toward_x), bits) << std::hex << h << (neg ? " (negative)" : "");
      EXPECT_EQ(llmcc::f32_to_f16_bits(toward_up), up) << std::hex << h;
    }
  }
  EXPECT_EQ(llmcc::f32_to_f16_bits(65519.996f), 0x7BFFu);
  EXPECT_EQ(llmcc::f32_to_f16_bits(65520.0f), 0x7C00u);
  EXPECT_EQ(llmcc::f32_to_f16_bits(-1e30f), 0xFC00u);
  EXPECT_EQ(llmcc::f32_to_f16_bits(std::numeric_limits<float>::denorm_min()), 0x0000u);
  EXPECT_EQ(llmcc::f32_to_f16_bits(-std::numeric_limits<float>::denorm_min()), 0x8000u);
  EXPECT_EQ(llmcc::f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000u);  // half the smallest subnormal: even
  EXPECT_EQ(llmcc::f32_to_f16_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001u);
  EXPECT_EQ(llmcc::f32_to_f16_bits(std::numeric_limits<float>::quiet_NaN()) & 0x7E00u, 0x7E00u);
}

// The same for bf16: every value back to itself, midpoints to even, NaN to 0x7FC0 as PyTorch.
TEST(SafetensorsNarrowing, Bf16RoundsToNearestEvenAtEveryBoundary) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float x = llmcc::bf16_bits_to_f32(bits);
    if (std::isnan(x)) {
      EXPECT_EQ(llmcc::f32_to_bf16_bits(x), 0x7FC0u) << std::hex << h;
      continue;
    }
    ASSERT_EQ(llmcc::f32_to_bf16_bits(x), bits) << std::hex << h;
    if ((h & 0x7FFFu) >= 0x7F7Fu) continue;                                 // the largest finite value and infinity
    const std::uint32_t m = static_cast<std::uint32_t>(h) << 16 | 0x8000u;  // the midpoint's fp32 bits
    const std::uint16_t up = static_cast<std::uint16_t>(h + 1), even = (h & 1u) ? up : bits;
    EXPECT_EQ(llmcc::f32_to_bf16_bits(f32_of(m)), even) << std::hex << h;
    EXPECT_EQ(llmcc::f32_to_bf16_bits(f32_of(m - 1)), bits) << std::hex << h;
    EXPECT_EQ(llmcc::f32_to_bf16_bits(f32_of(m + 1)), up) << std::hex << h;
  }
  EXPECT_EQ(llmcc::f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80u);  // rounds up to inf
}

TEST(SafetensorsNarrowing, DtypeNamesParse) {
  SafetensorsDType d{};
  for (const char* name : {"f32", "FP32", "float32", "F32"}) {
    ASSERT_TRUE(llmcc::parse_safetensors_dtype(name, &d)) << name;
    EXPECT_EQ(d, SafetensorsDType::F32);
  }
  for (const char* name : {"bf16", "BF16", "bfloat16"}) {
    ASSERT_TRUE(llmcc::parse_safetensors_dtype(name, &d)) << name;
    EXPECT_EQ(d, SafetensorsDType::BF16);
  }
  for (const char* name : {"f16", "fp16", "float16", "F16"}) {
    ASSERT_TRUE(llmcc::parse_safetensors_dtype(name, &d)) << name;
    EXPECT_EQ(d, SafetensorsDType::F16);
  }
  for (const char* name : {"", "f64", "int8", "bf 16"}) EXPECT_FALSE(llmcc::parse_safetensors_dtype(name, &d)) << name;
}

// Tensors of sizes 6, 40, 24, 3, 64 and 1 elements, of values that are not exact in 16 bits.
struct Model {
  std::vector<std::string> names = {"embed", "layers.0.w", "layers.0.b", "layers.1.w", "layers.1.big", "norm"};
  std::vector<llmcc::TensorShape> shapes = {{2, 3}, {5, 8}, {24}, {3}, {8, 8}, {}};
  std::vector<std::vector<float>> values;
  Model() {
    for (std::size_t i = 0; i < names.size(); ++i) {
      std::int64_t n = 1;
      for (const std::int64_t d : shapes[i]) n *= d;
      values.push_back(llmcc::test::random_vector<float>(static_cast<std::size_t>(n), 100 + static_cast<int>(i)));
      for (float& v : values.back()) v = v * 3.0f + 1.0f / 3.0f;
    }
  }
  std::vector<SafetensorsTensor> tensors() const {
    std::vector<SafetensorsTensor> out;
    for (std::size_t i = 0; i < names.size(); ++i)
      out.push_back(llmcc::safetensors_tensor(names[i], shapes[i], values[i].data()));
    return out;
  }
};

float narrowed(float x, SafetensorsDType d) {
  if (d == SafetensorsDType::BF16) return llmcc::bf16_bits_to_f32(llmcc::f32_to_bf16_bits(x));
  if (d == SafetensorsDType::F16) return llmcc::f16_to_f32(llmcc::f32_to_f16_bits(x));
  return x;
}

// Every tensor of `m` read back through `path` equals its values rounded to `d`.
void expect_model(const std::string& path, const Model& m, SafetensorsDType d) {
  const SafetensorsReader r(path);
  ASSERT_EQ(r.tensors().size(), m.names.size());
  for (std::size_t i = 0; i < m.names.size(); ++i) {
    llmcc::TensorShape shape;
    const std::vector<float> got = r.read_f32(m.names[i], &shape);
    ASSERT_EQ(shape, m.shapes[i]) << m.names[i];
    for (std::size_t k = 0; k < got.size(); ++k)
      ASSERT_EQ(bits_of(got[k]), bits_of(narrowed(m.values[i][k], d))) << m.names[i] << "[" << k << "]";
  }
  EXPECT_TRUE(r.unread().empty());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SafetensorsShards, ShardsSplitGreedilyAndReadBackAsOneFile) {
  const Model m;
  for (const SafetensorsDType d : {SafetensorsDType::F32, SafetensorsDType::BF16, SafetensorsDType::F16}) {
    SCOPED_TRACE(llmcc::dtype_name(d));
    TempDir dir;
    const std::uint64_t e = d == SafetensorsDType::F32 ? 4 : 2;
    // Limit 46 elements: {embed 6, layers.0.w 40} | {layers.0.b 24, layers.1.w 3} | {layers.1.big 64
    // (larger than the limit: alone)} | {norm 1}.
    const std::vector<std::string> written =
        llmcc::write_safetensors_model(dir.path.string(), m.tensors(), {{"format", "pt"}}, {d, 46 * e});
    const std::vector<std::string> shards = {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                             "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors"};
    ASSERT_EQ(written.size(), 5u);
    for (std::size_t i = 0; i < shards.size(); ++i) EXPECT_EQ(written[i], dir.file(shards[i]));
    EXPECT_EQ(written[4], dir.file("model.safetensors.index.json"));
    std::vector<std::string> expect_files = shards;
    expect_files.push_back("model.safetensors.index.json");
    std::sort(expect_files.begin(), expect_files.end());
    EXPECT_EQ(files_in(dir.path.string()), expect_files);
    EXPECT_EQ(SafetensorsReader(dir.file(shards[2])).tensors().size(), 1u);
    EXPECT_EQ(SafetensorsReader(dir.file(shards[2])).tensors()[0].dtype, llmcc::dtype_name(d));

    const llmcc::SafetensorsIndex index = llmcc::read_safetensors_index(written[4]);
    EXPECT_EQ(index.shards, shards);
    ASSERT_EQ(index.weight_map.size(), m.names.size());
    // save_pretrained's layout: total_size in metadata, the map sorted by tensor name.
    const std::string text = read_text(written[4]);
    EXPECT_NE(text.find("\"total_size\": " + std::to_string(138 * e)), std::string::npos) << text;
    EXPECT_LT(text.find("\"embed\""), text.find("\"layers.0.b\"")) << text;
    EXPECT_LT(text.find("\"layers.1.w\""), text.find("\"norm\"")) << text;

    expect_model(written[4], m, d);
    const SafetensorsReader r(written[4]);
    EXPECT_EQ(r.path(), written[4]);
    EXPECT_EQ(r.file_of(*r.find("layers.1.w")), dir.file(shards[1]));
    ASSERT_EQ(r.metadata().size(), 1u);
    EXPECT_EQ(r.metadata()[0].second, "pt");
  }
}

TEST(SafetensorsShards, WithoutALimitOrWhenEverythingFitsOneFileIsWritten) {
  const Model m;
  for (const std::uint64_t limit : {std::uint64_t{0}, std::uint64_t{1} << 20}) {
    TempDir dir;
    const std::vector<std::string> written =
        llmcc::write_safetensors_model(dir.path.string(), m.tensors(), {}, {SafetensorsDType::BF16, limit});
    ASSERT_EQ(written.size(), 1u);
    EXPECT_EQ(written[0], dir.file("model.safetensors"));
    EXPECT_EQ(files_in(dir.path.string()), std::vector<std::string>{"model.safetensors"});
    expect_model(written[0], m, SafetensorsDType::BF16);
  }
}

// A downloaded checkpoint may mix dtypes across (and within) shards: each tensor converts on its own.
TEST(SafetensorsShards, ShardsOfDifferentDtypesReadTogether) {
  const Model m;
  TempDir dir;
  std::vector<SafetensorsTensor> all = m.tensors();
  const std::vector<SafetensorsTensor> first(all.begin(), all.begin() + 2), second(all.begin() + 2, all.end());
  llmcc::write_safetensors(dir.file("a.safetensors"), first, {}, SafetensorsDType::F32);
  llmcc::write_safetensors(dir.file("b.safetensors"), second, {}, SafetensorsDType::BF16);
  std::string index = "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {";
  for (std::size_t i = 0; i < m.names.size(); ++i)
    index += (i ? ", \"" : "\"") + m.names[i] + "\": \"" + (i < 2 ? "a" : "b") + ".safetensors\"";
  std::ofstream(dir.file("model.safetensors.index.json")) << index << "}}";
  const SafetensorsReader r(dir.file("model.safetensors.index.json"));
  for (std::size_t i = 0; i < m.names.size(); ++i) {
    const std::vector<float> got = r.read_f32(m.names[i]);
    const SafetensorsDType d = i < 2 ? SafetensorsDType::F32 : SafetensorsDType::BF16;
    for (std::size_t k = 0; k < got.size(); ++k)
      ASSERT_EQ(bits_of(got[k]), bits_of(narrowed(m.values[i][k], d))) << m.names[i];
  }
}

TEST(SafetensorsShards, IndexAndShardsThatDisagreeAreRefusedByName) {
  const Model m;
  TempDir dir;
  std::vector<SafetensorsTensor> all = m.tensors();
  llmcc::write_safetensors(dir.file("a.safetensors"), {all[0], all[1]});
  llmcc::write_safetensors(dir.file("b.safetensors"), {all[2]});
  const std::string index = dir.file("model.safetensors.index.json");
  auto with_index = [&](const std::string& text) {
    std::ofstream(index, std::ios::trunc) << text;
    return [&] { SafetensorsReader r(index); };
  };
  const std::string ok_map =
      R"("embed": "a.safetensors", "layers.0.w": "a.safetensors", "layers.0.b": "b.safetensors")";
  EXPECT_NO_THROW(with_index("{\"weight_map\": {" + ok_map + "}}")());
  // A tensor of a shard the index does not list; one it places in another shard; a listed one
  // missing from its shard; a shard that does not exist.
  EXPECT_TRUE(throws_error(with_index(R"({"weight_map": {"embed": "a.safetensors", "layers.0.b": "b.safetensors"}})"),
                           {"a.safetensors: tensor 'layers.0.w' is not in the index", "not from one checkpoint"}));
  EXPECT_TRUE(throws_error(
      with_index(
          R"({"weight_map": {"embed": "a.safetensors", "layers.0.w": "b.safetensors", "layers.0.b": "b.safetensors"}})"),
      {"a.safetensors: holds tensor 'layers.0.w', which the index", "places in b.safetensors"}));
  EXPECT_TRUE(
      throws_error(with_index("{\"weight_map\": {" + ok_map + R"(, "norm": "b.safetensors"}})"),
                   {"model.safetensors.index.json: maps tensor 'norm' to b.safetensors, which holds no tensor"}));
  EXPECT_TRUE(throws_error(with_index("{\"weight_map\": {" + ok_map + R"(, "norm": "c.safetensors"}})"),
                           {"c.safetensors: cannot open"}));
  // The index itself.
  EXPECT_TRUE(
      throws_error(with_index("[1, 2]"), {"model.safetensors.index.json: is an array, expected a JSON object"}));
  EXPECT_TRUE(throws_error(with_index(R"({"metadata": {}})"), {"has no weight_map"}));
  EXPECT_TRUE(throws_error(with_index(R"({"weight_map": []})"), {"weight_map is an array, expected an object"}));
  EXPECT_TRUE(throws_error(with_index(R"({"weight_map": {}})"), {"weight_map maps no tensors"}));
  EXPECT_TRUE(throws_error(with_index(R"({"weight_map": {"embed": 3}})"), {"weight_map['embed']: is a number"}));
  EXPECT_TRUE(
      throws_error(with_index(R"({"weight_map": {"embed": "a.safetensors",)"), {"model.safetensors.index.json:"}));
  for (const char* path : {"../a.safetensors", "/tmp/a.safetensors", "sub/a.safetensors", "..", ""}) {
    EXPECT_TRUE(throws_error(with_index(std::string(R"({"weight_map": {"embed": ")") + path + "\"}}"),
                             {"is not a plain file name (shards must be in the index's directory)"}))
        << path;
  }
}

// Re-exporting into a directory replaces the layout there: no file of the old checkpoint is left
// for a reader to take (model.safetensors is read before an index), files of others stay.
TEST(SafetensorsShards, ReExportsThatSwitchLayoutLeaveNoStaleFiles) {
  const Model m;
  TempDir dir;
  const std::string d = dir.path.string();
  std::ofstream(dir.file("config.json")) << "{}";
  const std::vector<std::string> three = {"config.json", "model-00001-of-00003.safetensors",
                                          "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                                          "model.safetensors.index.json"};
  llmcc::write_safetensors_model(d, m.tensors(), {}, {SafetensorsDType::F32, 0});
  EXPECT_EQ(files_in(d), (std::vector<std::string>{"config.json", "model.safetensors"}));
  llmcc::write_safetensors_model(d, m.tensors(), {}, {SafetensorsDType::F32, 66 * 4});  // 46 | 27 | 65 elements
  EXPECT_EQ(files_in(d), three);
  expect_model(dir.file("model.safetensors.index.json"), m, SafetensorsDType::F32);
  llmcc::write_safetensors_model(d, m.tensors(), {}, {SafetensorsDType::BF16, 100 * 2});  // 73 | 65 elements
  EXPECT_EQ(files_in(d),
            (std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                      "model-00002-of-00002.safetensors", "model.safetensors.index.json"}));
  expect_model(dir.file("model.safetensors.index.json"), m, SafetensorsDType::BF16);
  llmcc::write_safetensors_model(d, m.tensors(), {}, {SafetensorsDType::F16, 0});
  EXPECT_EQ(files_in(d), (std::vector<std::string>{"config.json", "model.safetensors"}));
  expect_model(dir.file("model.safetensors"), m, SafetensorsDType::F16);
}

// Resident file-backed memory of this process, in bytes (RssFile in /proc/self/status).
std::int64_t rss_file_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8)) * 1024;
  }
  return -1;
}

// Loading converts tensor by tensor: a 64 MB bf16 tensor read into fp32 leaves none of the file's
// pages resident, so a model's load peaks at its fp32 size plus about one tensor of the file.
TEST(SafetensorsShards, ReadTensorsLeaveNoFilePagesResident) {
  if (rss_file_bytes() < 0) GTEST_SKIP() << "no RssFile in /proc/self/status: cannot measure resident file pages";
  TempDir dir;
  const std::size_t n = std::size_t{32} << 20;  // 32M elements: 64 MB in bf16
  std::vector<float> values(n, 1.5f);
  llmcc::write_safetensors(dir.file("big.safetensors"),
                           {llmcc::safetensors_tensor("w", {std::int64_t(n)}, values.data())}, {},
                           SafetensorsDType::BF16);
  const SafetensorsReader r(dir.file("big.safetensors"));
  std::fill(values.begin(), values.end(), 0.0f);
  const std::int64_t before = rss_file_bytes();
  r.read_f32("w", {std::int64_t(n)}, values.data());
  const std::int64_t after = rss_file_bytes();
  EXPECT_EQ(values[n / 2], 1.5f);
  EXPECT_LT(after - before, std::int64_t{4} << 20) << "file pages resident after the read: " << (after - before);
}

}  // namespace
