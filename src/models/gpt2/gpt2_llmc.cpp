// llm.c's GPT-2 model file: import and export (layout in gpt2_llmc.h).
#include "models/gpt2/gpt2_llmc.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "llmcc/error.h"
#include "io/file_io.h"

namespace llmcc::models {

static_assert(std::endian::native == std::endian::little,
              "llm.c model files are little-endian; a big-endian host needs byte swapping here");

namespace {

constexpr const char* kWhere = "llm.c model";

// One run of consecutive floats in the file and where they live in the model.
struct Segment {
  float* data;
  std::int64_t count;
};

// The model's tensors in llm.c's file order. wte_rows rows of wte are in the file (the model
// may have more: padding added on import).
std::vector<Segment> llmc_order(const Gpt2& m, std::int64_t wte_rows) {
  const std::int64_t C = m.cfg.n_embd;
  std::vector<Segment> out;
  auto add = [&](const Tensor& t) { out.push_back({t.f32(), t.numel()}); };
  auto each_layer = [&](auto&& pick) {
    for (const Gpt2Block& b : m.h) pick(b);
  };
  out.push_back({m.wte.f32(), wte_rows * C});                     // (Vp, C)
  add(m.wpe);                                                     // (maxT, C)
  each_layer([&](const Gpt2Block& b) { add(b.ln_1.w); });         // ln1w (L, C)
  each_layer([&](const Gpt2Block& b) { add(b.ln_1.b); });         // ln1b (L, C)
  each_layer([&](const Gpt2Block& b) { add(b.attn.c_attn.w); });  // qkvw (L, 3C, C)
  each_layer([&](const Gpt2Block& b) { add(b.attn.c_attn.b); });  // qkvb (L, 3C)
  each_layer([&](const Gpt2Block& b) { add(b.attn.c_proj.w); });  // attprojw (L, C, C)
  each_layer([&](const Gpt2Block& b) { add(b.attn.c_proj.b); });  // attprojb (L, C)
  each_layer([&](const Gpt2Block& b) { add(b.ln_2.w); });         // ln2w (L, C)
  each_layer([&](const Gpt2Block& b) { add(b.ln_2.b); });         // ln2b (L, C)
  each_layer([&](const Gpt2Block& b) { add(b.mlp.c_fc.w); });     // fcw (L, 4C, C)
  each_layer([&](const Gpt2Block& b) { add(b.mlp.c_fc.b); });     // fcb (L, 4C)
  each_layer([&](const Gpt2Block& b) { add(b.mlp.c_proj.w); });   // fcprojw (L, C, 4C)
  each_layer([&](const Gpt2Block& b) { add(b.mlp.c_proj.b); });   // fcprojb (L, C)
  add(m.ln_f.w);                                                  // lnfw (C)
  add(m.ln_f.b);                                                  // lnfb (C)
  return out;
}

std::size_t element_bytes(LlmcDType dtype) { return dtype == LlmcDType::F32 ? 4 : 2; }
const char* dtype_label(LlmcDType dtype) { return dtype == LlmcDType::F32 ? "fp32" : "bf16"; }

std::string magic_hint(std::int32_t magic) {
  const std::string name = llmc_magic_name(magic);
  return name.empty() ? "" : " (that magic is " + name + ")";
}

LlmcHeader parse_header(const std::string& path, const unsigned char* bytes, std::size_t size) {
  if (size < 4) {
    fail(kWhere, path + ": not an llm.c GPT-2 model file (" + std::to_string(size) +
                     " bytes, shorter than its 1024-byte header)");
  }
  std::int32_t h[256] = {};
  std::memcpy(h, bytes, std::min(size, kLlmcHeaderBytes));
  if (h[0] != kLlmcModelMagic) {
    fail(kWhere, path + ": not an llm.c GPT-2 model file (magic " + std::to_string(h[0]) + ", expected " +
                     std::to_string(kLlmcModelMagic) + ")" + magic_hint(h[0]));
  }
  if (size < kLlmcHeaderBytes) {
    fail(kWhere, path + ": truncated: " + std::to_string(size) + " bytes, shorter than the 1024-byte header");
  }
  LlmcHeader out;
  out.version = h[1];
  if (h[1] == kLlmcVersionF32) {
    out.dtype = LlmcDType::F32;
  } else if (h[1] == kLlmcVersionBF16) {
    out.dtype = LlmcDType::BF16;
  } else {
    const std::string old = (h[1] == 1 || h[1] == 2)
                                ? "; versions 1 and 2 are llm.c's older layouts without the padded "
                                  "vocabulary: re-export with llm.c's current train_gpt2.py"
                                : "";
    fail(kWhere,
         path + ": unknown version " + std::to_string(h[1]) + " (expected 3 = fp32 or " + "5 = bf16 weights)" + old);
  }
  // Generous bounds: they only keep the size arithmetic below far from overflow and reject
  // garbage; the file size check then decides.
  auto field = [&](int index, const char* name, std::int64_t lo, std::int64_t hi) {
    const std::int64_t v = h[index];
    if (v < lo || v > hi) {
      fail(kWhere, path + ": header value " + name + " (int " + std::to_string(index) + ") is " + std::to_string(v) +
                       ", expected " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    return static_cast<int>(v);
  };
  Gpt2Config& c = out.config;
  c.max_seq_len = field(2, "maxT", 1, 1 << 20);
  c.vocab_size = field(3, "V", 1, 1 << 24);
  c.n_layer = field(4, "L", 1, 1 << 12);
  c.n_head = field(5, "NH", 1, 1 << 12);
  c.n_embd = field(6, "C", 1, 1 << 16);
  c.padded_vocab_size = field(7, "Vp", c.vocab_size, 1 << 24);
  if (c.n_embd % c.n_head != 0) {
    fail(kWhere, path + ": header value C = " + std::to_string(c.n_embd) +
                     " is not a multiple of NH = " + std::to_string(c.n_head));
  }
  return out;
}

}  // namespace

std::string llmc_magic_name(std::int32_t magic) {
  switch (magic) {
    case 20240326:
      return "llm.c's GPT-2 model file";
    case 20240520:
      return "llm.c's token file: pass it as data, not as a model";
    case 20240327:
      return "llm.c's debug state file (gpt2_124M_debug_state.bin)";
    case 20240328:
      return "llm.c's tokenizer file (gpt2_tokenizer.bin)";
    case 20240803:
      return "llm.c's Llama 3 model file, not GPT-2";
    default:
      return "";
  }
}

std::uint16_t f32_to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  // NaN: keep the sign and make sure a mantissa bit survives the truncation (quiet NaN).
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate.
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

float bf16_to_f32(std::uint16_t x) { return std::bit_cast<float>(static_cast<std::uint32_t>(x) << 16); }

bool is_llmc_model_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::int32_t magic = 0;
  const bool ok = std::fread(&magic, sizeof magic, 1, f) == 1;
  std::fclose(f);
  return ok && magic == kLlmcModelMagic;
}

LlmcHeader read_llmc_header(const std::string& path) {
  const detail::MappedFile file(path, kWhere);
  return parse_header(path, file.data(), file.size());
}

Gpt2Weights load_gpt2_llmc(const std::string& path) {
  const detail::MappedFile file(path, kWhere);
  const LlmcHeader header = parse_header(path, file.data(), file.size());
  const Gpt2Config& stored = header.config;
  const std::size_t es = element_bytes(header.dtype);
  const std::int64_t n = stored.parameter_count();  // with the file's own Vp
  const std::uint64_t expected = kLlmcHeaderBytes + static_cast<std::uint64_t>(n) * es;
  if (file.size() != expected) {
    fail(kWhere, path + (file.size() < expected ? ": truncated: " : ": has trailing bytes: ") + "expected " +
                     std::to_string(expected) + " bytes (header + " + std::to_string(n) + " " +
                     dtype_label(header.dtype) + " parameters of " + stored.str() + "), the file has " +
                     std::to_string(file.size()));
  }

  // An unpadded vocabulary (Vp == V) gets llm.c's padding; the extra rows stay zero.
  Gpt2Config config = stored;
  if (config.padded_vocab_size == config.vocab_size) config.padded_vocab_size = padded_vocab(config.vocab_size);
  Gpt2Weights w = make_gpt2(config);  // the header checks above make this config valid

  const unsigned char* p = file.data() + kLlmcHeaderBytes;
  for (const Segment& s : llmc_order(w.model, stored.padded_vocab_size)) {
    const std::size_t count = static_cast<std::size_t>(s.count);
    if (header.dtype == LlmcDType::F32) {
      std::memcpy(s.data, p, count * 4);
    } else {
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        s.data[i] = bf16_to_f32(b);
      }
    }
    p += count * es;
  }
  LLMCC_ASSERT(p == file.data() + file.size(), "llm.c import: segments do not cover the file");
  return w;
}

void save_gpt2_llmc(const Gpt2& model, const std::string& path, LlmcDType dtype) {
  const Gpt2Config& c = model.cfg;
  for (const Tensor* t : {&model.wte, &model.wpe, &model.ln_f.w})
    if (!t->defined()) fail(kWhere, "save " + path + ": the model has no storage (make_gpt2 binds it)");
  std::int32_t h[256] = {};
  h[0] = kLlmcModelMagic;
  h[1] = dtype == LlmcDType::F32 ? kLlmcVersionF32 : kLlmcVersionBF16;
  h[2] = c.max_seq_len;
  h[3] = c.vocab_size;
  h[4] = c.n_layer;
  h[5] = c.n_head;
  h[6] = c.n_embd;
  h[7] = c.padded_vocab_size;
  detail::AtomicFile out(path, kWhere);
  out.write(h, sizeof h);
  std::vector<std::uint16_t> buffer;
  for (const Segment& s : llmc_order(model, c.padded_vocab_size)) {
    const std::size_t count = static_cast<std::size_t>(s.count);
    if (dtype == LlmcDType::F32) {
      out.write(s.data, count * sizeof(float));
      continue;
    }
    buffer.resize(count);
    for (std::size_t i = 0; i < count; ++i) buffer[i] = f32_to_bf16(s.data[i]);
    out.write(buffer.data(), count * sizeof(std::uint16_t));
  }
  out.commit();
}

}  // namespace llmcc::models
