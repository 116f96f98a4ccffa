// JSON reading as llmcc uses it, with the readers it was chosen among timed in the same run:
//   llmcc          llmcc's parse_json / parse_json_int_object: nlohmann-json's SAX parser
//                  building llmcc's JsonValue, with repeated keys rejected and positions in errors
//   nlohmann_dom   nlohmann::json::parse (a std::map per object: repeated keys silently merged)
//   simdjson_dom   simdjson::dom::parser (the text copied into a padded_string first)
// on two inputs:
//   encoder        GPT-2's encoder.json (50,257 string -> id pairs) into (token, id) pairs
//   header/N       a safetensors header of N tensors into name -> dtype, shape, offsets, then
//                  every tensor looked up by name through a hash map.
//
//   cmake --build build --target bench_json && build/bench/bench_json
// encoder.json is found as the tokenizer finds it (LLMCC_GPT2_TOKENIZER_DIR or the shared data).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <simdjson.h>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/data_files.h"
#include "llmcc/text/tokenizer.h"
#include "io/json_reader.h"

namespace {

enum class Reader { Llmcc, NlohmannDom, SimdjsonDom };

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;  // (ndim)
  std::uint64_t begin = 0, end = 0;
};

std::string encoder_text() {
  std::string path;
  if (const char* dir = std::getenv("LLMCC_GPT2_TOKENIZER_DIR")) {
    path = std::string(dir) + "/encoder.json";
  } else if (const auto found = llmcc::find_data_file("gpt2/encoder.json")) {
    path = found->string();
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string tensor_name(int i) {
  static constexpr const char* kParts[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                           "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                           "mlp.down_proj",    "input_layernorm"};
  return "model.layers." + std::to_string(i / 8) + "." + kParts[i % 8] + ".weight";
}

// A header like a large checkpoint's: 8 tensors per layer, F32 (64, 64) each, tiling the data.
std::string header_text(int n) {
  std::string h = R"({"__metadata__":{"format":"pt"})";
  for (int i = 0; i < n; ++i) {
    const std::uint64_t b = 16384ull * static_cast<std::uint64_t>(i);
    h += ",\"" + tensor_name(i) + "\":{\"dtype\":\"F32\",\"shape\":[64,64],\"data_offsets\":[" + std::to_string(b) +
         "," + std::to_string(b + 16384) + "]}";
  }
  return h + "}";
}

Entry entry_from(std::string name, const llmcc::JsonValue& v) {
  Entry e;
  e.name = std::move(name);
  e.dtype = v.find("dtype")->string;
  for (const auto& d : v.find("shape")->array) e.shape.push_back(d.integer);
  const auto& offs = v.find("data_offsets")->array;
  e.begin = static_cast<std::uint64_t>(offs[0].integer);
  e.end = static_cast<std::uint64_t>(offs[1].integer);
  return e;
}

std::vector<Entry> read_header(Reader reader, const std::string& text) {
  std::vector<Entry> out;
  switch (reader) {
    case Reader::Llmcc: {
      const auto h = llmcc::parse_json(text, "header", "bench");
      for (const auto& [name, v] : h.object) {
        if (name != "__metadata__") out.push_back(entry_from(name, v));
      }
      break;
    }
    case Reader::NlohmannDom: {
      const auto h = nlohmann::json::parse(text);
      for (const auto& [name, v] : h.items()) {
        if (name == "__metadata__") continue;
        Entry e;
        e.name = name;
        e.dtype = v.at("dtype").get<std::string>();
        for (const auto& d : v.at("shape")) e.shape.push_back(d.get<std::int64_t>());
        e.begin = v.at("data_offsets")[0].get<std::uint64_t>();
        e.end = v.at("data_offsets")[1].get<std::uint64_t>();
        out.push_back(std::move(e));
      }
      break;
    }
    case Reader::SimdjsonDom: {
      simdjson::dom::parser parser;
      const simdjson::padded_string padded(text);
      const simdjson::dom::object h = parser.parse(padded).get_object();
      for (const auto field : h) {
        if (field.key == "__metadata__") continue;
        Entry e;
        e.name = std::string(field.key);
        e.dtype = std::string(std::string_view(field.value["dtype"]));
        for (const auto d : field.value["shape"].get_array()) e.shape.push_back(int64_t(d));
        const simdjson::dom::array offs = field.value["data_offsets"].get_array();
        e.begin = uint64_t(offs.at(0));
        e.end = uint64_t(offs.at(1));
        out.push_back(std::move(e));
      }
      break;
    }
  }
  return out;
}

void header(benchmark::State& state, Reader reader) {
  const int n = static_cast<int>(state.range(0));
  const std::string text = header_text(n);
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(tensor_name(i));
  for (auto _ : state) {
    const std::vector<Entry> entries = read_header(reader, text);
    std::uint64_t sum = 0;
    std::unordered_map<std::string_view, std::size_t> by_name;
    by_name.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (!by_name.emplace(entries[i].name, i).second) state.SkipWithError("repeated tensor name");
    }
    for (const std::string& name : names) sum += entries[by_name.at(name)].begin;
    const std::uint64_t want = 16384ull * static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(n - 1) / 2;
    if (entries.size() != static_cast<std::size_t>(n) || sum != want) state.SkipWithError("wrong entries");
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["header_MB"] = static_cast<double>(text.size()) / 1e6;
}

void encoder(benchmark::State& state, Reader reader) {
  const std::string text = encoder_text();
  if (text.empty()) {
    state.SkipWithError("encoder.json not found (set LLMCC_GPT2_TOKENIZER_DIR)");
    return;
  }
  for (auto _ : state) {
    std::vector<std::pair<std::string, std::int64_t>> out;
    switch (reader) {
      case Reader::Llmcc:
        out = llmcc::parse_json_int_object(text, "encoder.json", "bench");
        break;
      case Reader::NlohmannDom: {
        const nlohmann::json j = nlohmann::json::parse(text);
        for (const auto& [k, v] : j.items()) out.emplace_back(k, v.get<std::int64_t>());
        break;
      }
      case Reader::SimdjsonDom: {
        simdjson::dom::parser parser;
        const simdjson::padded_string padded(text);
        for (const auto field : parser.parse(padded).get_object()) out.emplace_back(field.key, int64_t(field.value));
        break;
      }
    }
    if (out.size() != 50257) state.SkipWithError("expected 50257 tokens");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}

BENCHMARK_CAPTURE(encoder, llmcc, Reader::Llmcc)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encoder, nlohmann_dom, Reader::NlohmannDom)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encoder, simdjson_dom, Reader::SimdjsonDom)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(header, llmcc, Reader::Llmcc)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(header, nlohmann_dom, Reader::NlohmannDom)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(header, simdjson_dom, Reader::SimdjsonDom)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
