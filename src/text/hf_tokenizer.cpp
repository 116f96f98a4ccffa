// tokenizer.json (llmcc/text/hf_tokenizer.h): the pipeline of Hugging Face's `tokenizers` for
// byte-level BPE. Split regexes run in PCRE2 (JIT, Unicode properties); NFC is ICU's.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "llmcc/text/hf_tokenizer.h"

#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <queue>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "io/json_reader.h"
#include "llmcc/error.h"

namespace llmcc {

namespace {

constexpr const char* kWhere = "hf_tokenizer";

// GPT-2's ByteLevel pre-tokenizer pattern (use_regex: true).
constexpr std::string_view kGpt2Pattern = kGpt2SplitPattern;

// Ids a file may leave unused below its largest (every known vocabulary leaves none).
constexpr std::int64_t kMaxIdGap = 65536;

// Pieces in the cache before it is emptied (a long text has far fewer distinct pieces).
constexpr std::size_t kCacheLimit = 200'000;

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The UTF-8 character starting at s[i] (its code point and length), or a length of 0 when the
// bytes there are not one.
std::pair<std::uint32_t, std::size_t> next_char(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return {b, 1};
  std::size_t n = b >= 0xF0 && b < 0xF5 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 && b < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return {0, 0};
  std::uint32_t cp = b & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return {0, 0};
    cp = cp << 6 | (c & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0, 0};
  return {cp, n};
}

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = next_char(s, i).second;
    if (n == 0) return false;
    i += n;
  }
  return true;
}

struct Pcre2Code {
  pcre2_code* code = nullptr;
  ~Pcre2Code() { pcre2_code_free(code); }
};

}  // namespace

struct HfTokenizer::Impl {
  std::string path, json;
  bool nfc = false;
  std::unique_ptr<Pcre2Code> split;  // the pre-tokenizer's pattern
  std::string split_pattern;         // its source
  bool ignore_merges = false;
  std::unordered_map<std::string, std::int32_t> vocab;
  std::vector<std::string> id_to_token;  // by id: vocab entries and added tokens ("" for a gap)
  std::vector<char> is_added;            // by id
  // Merges: (left id, right id) -> (rank, merged id).
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges;
  std::array<std::int32_t, 256> byte_id{};                     // the vocab id of each byte's ByteLevel character
  std::array<std::string, 256> byte_char;                      // each byte's ByteLevel character (UTF-8)
  std::unordered_map<std::uint32_t, unsigned char> char_byte;  // its inverse
  struct Added {
    std::string content;
    std::int32_t id;
    bool special;
  };
  std::vector<Added> added;                              // longest content first
  std::array<std::vector<std::uint32_t>, 256> added_at;  // by first byte: positions in `added`, in its order

  // SentencePiece-style models (Metaspace): spaces become `replacement`, which a piece starts
  // with; BPE runs over characters, and a character the vocabulary lacks becomes its bytes'
  // <0xXX> tokens (byte_fallback) or unk.
  bool metaspace = false;
  std::string replacement;  // UTF-8, "▁" in every known model
  enum class Prepend { Always, First, Never } prepend = Prepend::Always;
  bool prepend_unconditionally = false;  // the normalizer Prepend: even before a replacement
  bool meta_split = true;                // pieces start at each replacement
  bool byte_fallback = false;
  std::array<std::int32_t, 256> fallback_id{};  // the id of "<0xXX>", -1 when absent
  std::int32_t unk_id = -1;
  bool fuse_unk = false;
  // The decoder of a Metaspace model: steps on the list of token strings, as `tokenizers` applies them.
  struct DecodeStep {
    enum class Kind { Metaspace, ByteFallback, Fuse, Replace, Strip } kind;
    std::string from, to;      // Replace; Strip: `from` is the character
    int start = 0, stop = 0;   // Strip
    bool first_drops = false;  // Metaspace: the first token's replacements are dropped, not spaces
  };
  std::vector<DecodeStep> decode_steps;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>> cache;

  [[noreturn]] void bad(const std::string& what) const { fail(kWhere, path + ": " + what); }
  void parse();
  void parse_metaspace(const JsonValue& root);
  void parse_byte_level(const JsonValue& root);
  void parse_model(const JsonValue& root, const JsonValue& model);
  // The ids of one piece: its symbols (ByteLevel characters of its bytes, or a Metaspace model's
  // characters with byte fallback) merged by rank.
  void bpe(std::string_view piece, std::vector<std::int32_t>& out) const;
  std::vector<std::int32_t> symbols(std::string_view piece) const;
  void encode_text(std::string_view text, bool at_start, std::vector<std::int32_t>& out) const;
  void encode_metaspace(std::string_view text, bool at_start, std::vector<std::int32_t>& out) const;
  std::string_view nfc_of(std::string_view text, std::string& storage) const;
  std::string decode_metaspace(std::span<const std::int32_t> ids) const;
};

namespace {

[[noreturn]] void bad_at(const std::string& file, const std::string& what) { fail(kWhere, file + ": " + what); }

const JsonValue& member(const JsonValue& o, std::string_view key, JsonValue::Kind kind, const std::string& where,
                        const std::string& file) {
  const JsonValue* v = o.find(key);
  if (v == nullptr || v->kind != kind) {
    const char* kinds[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    bad_at(file, where + std::string(key) + " is " + (v == nullptr ? "missing" : v->kind_name()) + ", expected " +
                     kinds[static_cast<int>(kind)]);
  }
  return *v;
}

bool flag(const JsonValue& o, std::string_view key) {
  const JsonValue* v = o.find(key);
  return v != nullptr && v->kind == JsonValue::Kind::Bool && v->boolean;
}

// Every bit of a part that changes the output must be one llmcc implements: `allowed` lists the
// members that may appear, with the value each may have (a value "" allows any).
void check_members(const JsonValue& o, const std::string& where,
                   std::initializer_list<std::pair<std::string_view, std::string_view>> allowed,
                   const std::string& file) {
  for (const auto& [key, value] : o.object) {
    const auto it = std::find_if(allowed.begin(), allowed.end(), [&](const auto& a) { return a.first == key; });
    if (it == allowed.end()) bad_at(file, where + key + " is a setting llmcc does not implement");
    if (it->second.empty()) continue;
    std::string text;
    if (value.kind == JsonValue::Kind::Bool) text = value.boolean ? "true" : "false";
    if (value.kind == JsonValue::Kind::String) text = value.string;
    if (value.kind == JsonValue::Kind::Null) text = "null";
    if (text != it->second) {
      bad_at(file, where + key + " is " + (text.empty() ? std::string(value.kind_name()) : text) +
                       "; llmcc implements " + std::string(it->second));
    }
  }
}

}  // namespace

void HfTokenizer::Impl::parse() {
  const JsonValue root = parse_json(json, path, kWhere);
  if (root.kind != JsonValue::Kind::Object) bad("is " + std::string(root.kind_name()) + ", expected a JSON object");

  // A SentencePiece-style model: a Metaspace pre-tokenizer, or none after the normalizers
  // Prepend and Replace (the form of converted Llama 2 files).
  const JsonValue* pre_v = root.find("pre_tokenizer");
  const JsonValue* norm_v = root.find("normalizer");
  const bool no_pre = pre_v == nullptr || pre_v->kind == JsonValue::Kind::Null;
  const JsonValue* pre_type_v = no_pre ? nullptr : pre_v->find("type");
  metaspace =
      (pre_type_v != nullptr && pre_type_v->kind == JsonValue::Kind::String && pre_type_v->string == "Metaspace") ||
      (no_pre && norm_v != nullptr && norm_v->kind == JsonValue::Kind::Object);
  if (metaspace) parse_metaspace(root);

  // normalizer
  if (const JsonValue* n = root.find("normalizer"); !metaspace && n != nullptr && n->kind != JsonValue::Kind::Null) {
    const std::string type = member(*n, "type", JsonValue::Kind::String, "normalizer.", path).string;
    if (type != "NFC") bad("normalizer.type is " + type + "; llmcc implements null and NFC");
    nfc = true;
  }

  // pre_tokenizer: ByteLevel(use_regex) or Sequence[Split(Regex, Isolated), ByteLevel(no regex)]
  if (!metaspace) parse_byte_level(root);

  // model
  const JsonValue& model = member(root, "model", JsonValue::Kind::Object, "", path);
  const std::string model_type = member(model, "type", JsonValue::Kind::String, "model.", path).string;
  if (model_type != "BPE") bad("model.type is " + model_type + "; llmcc implements BPE");
  check_members(model, "model.",
                {{"type", ""},
                 {"dropout", "null"},
                 {"unk_token", metaspace ? "" : "null"},
                 {"continuing_subword_prefix", ""},
                 {"end_of_word_suffix", ""},
                 {"fuse_unk", ""},
                 {"byte_fallback", metaspace ? "" : "false"},
                 {"ignore_merges", ""},
                 {"vocab", ""},
                 {"merges", ""}},
                path);
  parse_model(root, model);
}

// Metaspace models: the normalizer (none, NFC, or Llama 2's Prepend then Replace of " "), the
// Metaspace pre-tokenizer (or none after that normalizer) and the decoder steps.
void HfTokenizer::Impl::parse_metaspace(const JsonValue& root) {
  // The members of a Metaspace pre-tokenizer or decoder (add_prefix_space and str_rep: files
  // written before prepend_scheme).
  const auto check_metaspace_members = [&](const JsonValue& v, const std::string& where) {
    check_members(v, where,
                  {{"type", ""},
                   {"replacement", ""},
                   {"prepend_scheme", ""},
                   {"split", ""},
                   {"add_prefix_space", ""},
                   {"str_rep", ""}},
                  path);
  };
  const auto one_char = [&](const JsonValue& v, const std::string& what) {
    if (v.kind != JsonValue::Kind::String || v.string.empty() || next_char(v.string, 0).second != v.string.size())
      bad(what + " is not one character");
    return v.string;
  };
  const JsonValue* n = root.find("normalizer");
  const JsonValue* pre = root.find("pre_tokenizer");
  if (pre == nullptr || pre->kind == JsonValue::Kind::Null) {
    // normalizer Sequence[Prepend(R), Replace(" " -> R)], no pre-tokenizer: each text between added
    // tokens is one piece, R before it and R for each space.
    const std::string w = "normalizer.";
    if (member(*n, "type", JsonValue::Kind::String, w, path).string != "Sequence")
      bad("normalizer.type is " + n->find("type")->string +
          " with no pre_tokenizer; llmcc implements null, NFC, "
          "and Sequence[Prepend, Replace] before a Metaspace-style model");
    const JsonValue& list = member(*n, "normalizers", JsonValue::Kind::Array, w, path);
    const auto type_of = [&](std::size_t i) {
      const JsonValue* t = list.array[i].find("type");
      return t != nullptr && t->kind == JsonValue::Kind::String ? t->string : std::string("?");
    };
    if (list.array.size() != 2 || type_of(0) != "Prepend" || type_of(1) != "Replace")
      bad("normalizer.normalizers: llmcc implements [Prepend, Replace] (Llama 2's) with no pre_tokenizer");
    check_members(list.array[0], w + "normalizers[0].", {{"type", ""}, {"prepend", ""}}, path);
    replacement = one_char(member(list.array[0], "prepend", JsonValue::Kind::String, w + "normalizers[0].", path),
                           w + "normalizers[0].prepend");
    const JsonValue& r = list.array[1];
    check_members(r, w + "normalizers[1].", {{"type", ""}, {"pattern", ""}, {"content", ""}}, path);
    const JsonValue& pat = member(r, "pattern", JsonValue::Kind::Object, w + "normalizers[1].", path);
    const JsonValue* str = pat.find("String");
    if (str == nullptr || str->kind != JsonValue::Kind::String || str->string != " " ||
        member(r, "content", JsonValue::Kind::String, w + "normalizers[1].", path).string != replacement)
      bad("normalizer.normalizers[1]: llmcc implements Replace of the String \" \" by the prepended character");
    prepend_unconditionally = true;
    meta_split = false;
  } else {
    if (n != nullptr && n->kind != JsonValue::Kind::Null) {
      const std::string type = member(*n, "type", JsonValue::Kind::String, "normalizer.", path).string;
      if (type != "NFC") bad("normalizer.type is " + type + "; llmcc implements null and NFC before Metaspace");
      nfc = true;
    }
    const std::string w = "pre_tokenizer.";
    check_metaspace_members(*pre, w);
    replacement = one_char(member(*pre, "replacement", JsonValue::Kind::String, w, path), w + "replacement");
    if (const JsonValue* ps = pre->find("prepend_scheme"); ps != nullptr && ps->kind == JsonValue::Kind::String) {
      if (ps->string == "always")
        prepend = Prepend::Always;
      else if (ps->string == "first")
        prepend = Prepend::First;
      else if (ps->string == "never")
        prepend = Prepend::Never;
      else
        bad(w + "prepend_scheme is " + ps->string + "; expected always, first or never");
    } else if (const JsonValue* aps = pre->find("add_prefix_space"); aps != nullptr) {
      prepend = flag(*pre, "add_prefix_space") ? Prepend::Always : Prepend::Never;  // files before prepend_scheme
    }
    meta_split = pre->find("split") == nullptr || flag(*pre, "split");
  }

  // decoder: Metaspace, or a Sequence of Metaspace, ByteFallback, Fuse, Replace and Strip steps
  const JsonValue* d = root.find("decoder");
  if (d == nullptr || d->kind == JsonValue::Kind::Null) bad("decoder is missing; a Metaspace model needs one");
  std::vector<std::pair<const JsonValue*, std::string>> steps;
  if (member(*d, "type", JsonValue::Kind::String, "decoder.", path).string == "Sequence") {
    const JsonValue& list = member(*d, "decoders", JsonValue::Kind::Array, "decoder.", path);
    for (std::size_t i = 0; i < list.array.size(); ++i)
      steps.emplace_back(&list.array[i], "decoder.decoders[" + std::to_string(i) + "].");
  } else {
    steps.emplace_back(d, "decoder.");
  }
  for (const auto& [step, w] : steps) {
    const std::string type = member(*step, "type", JsonValue::Kind::String, w, path).string;
    DecodeStep ds{};
    if (type == "Metaspace") {
      check_metaspace_members(*step, w);
      ds.kind = DecodeStep::Kind::Metaspace;
      ds.from = one_char(member(*step, "replacement", JsonValue::Kind::String, w, path), w + "replacement");
      const JsonValue* ps = step->find("prepend_scheme");
      ds.first_drops = ps != nullptr && ps->kind == JsonValue::Kind::String
                           ? ps->string != "never"
                           : step->find("add_prefix_space") == nullptr || flag(*step, "add_prefix_space");
    } else if (type == "ByteFallback" || type == "Fuse") {
      check_members(*step, w, {{"type", ""}}, path);
      ds.kind = type == "Fuse" ? DecodeStep::Kind::Fuse : DecodeStep::Kind::ByteFallback;
    } else if (type == "Replace") {
      check_members(*step, w, {{"type", ""}, {"pattern", ""}, {"content", ""}}, path);
      const JsonValue* str = member(*step, "pattern", JsonValue::Kind::Object, w, path).find("String");
      if (str == nullptr || str->kind != JsonValue::Kind::String || str->string.empty())
        bad(w + "pattern: llmcc implements Replace of a String");
      ds.kind = DecodeStep::Kind::Replace;
      ds.from = str->string;
      ds.to = member(*step, "content", JsonValue::Kind::String, w, path).string;
    } else if (type == "Strip") {
      check_members(*step, w, {{"type", ""}, {"content", ""}, {"start", ""}, {"stop", ""}}, path);
      ds.kind = DecodeStep::Kind::Strip;
      ds.from = one_char(member(*step, "content", JsonValue::Kind::String, w, path), w + "content");
      const JsonValue& a = member(*step, "start", JsonValue::Kind::Number, w, path);
      const JsonValue& z = member(*step, "stop", JsonValue::Kind::Number, w, path);
      if (!a.is_integer || !z.is_integer || a.integer < 0 || z.integer < 0 || a.integer > 64 || z.integer > 64)
        bad(w + "start and stop are not small counts");
      ds.start = static_cast<int>(a.integer);
      ds.stop = static_cast<int>(z.integer);
    } else {
      bad(w + "type is " + type + "; llmcc implements Metaspace, ByteFallback, Fuse, Replace and Strip there");
    }
    decode_steps.push_back(std::move(ds));
  }
}

void HfTokenizer::Impl::parse_byte_level(const JsonValue& root) {
  const JsonValue& pre = member(root, "pre_tokenizer", JsonValue::Kind::Object, "", path);
  const std::string pre_type = member(pre, "type", JsonValue::Kind::String, "pre_tokenizer.", path).string;
  std::string pattern;
  auto byte_level = [&](const JsonValue& b, const std::string& where, bool regex_allowed) {
    check_members(b, where, {{"type", ""}, {"add_prefix_space", "false"}, {"trim_offsets", ""}, {"use_regex", ""}},
                  path);
    const bool use_regex = b.find("use_regex") == nullptr || flag(b, "use_regex");
    if (use_regex && !regex_allowed) bad(where + "use_regex is true after a Split; llmcc implements false there");
    if (use_regex) pattern = kGpt2Pattern;
  };
  if (pre_type == "ByteLevel") {
    byte_level(pre, "pre_tokenizer.", true);
    if (pattern.empty()) bad("pre_tokenizer: a ByteLevel without use_regex splits nothing; llmcc implements use_regex");
  } else if (pre_type == "Sequence") {
    const JsonValue& list = member(pre, "pretokenizers", JsonValue::Kind::Array, "pre_tokenizer.", path);
    if (list.array.size() != 2) bad("pre_tokenizer.pretokenizers: llmcc implements [Split, ByteLevel]");
    const JsonValue& s = list.array[0];
    const std::string w = "pre_tokenizer.pretokenizers[0].";
    if (member(s, "type", JsonValue::Kind::String, w, path).string != "Split")
      bad(w + "type is " + s.find("type")->string + "; llmcc implements Split");
    check_members(s, w, {{"type", ""}, {"pattern", ""}, {"behavior", "Isolated"}, {"invert", "false"}}, path);
    pattern = member(member(s, "pattern", JsonValue::Kind::Object, w, path), "Regex", JsonValue::Kind::String,
                     w + "pattern.", path)
                  .string;
    const JsonValue& b = list.array[1];
    const std::string wb = "pre_tokenizer.pretokenizers[1].";
    if (member(b, "type", JsonValue::Kind::String, wb, path).string != "ByteLevel")
      bad(wb + "type is " + b.find("type")->string + "; llmcc implements ByteLevel");
    byte_level(b, wb, false);
  } else {
    bad("pre_tokenizer.type is " + pre_type + "; llmcc implements ByteLevel and Sequence[Split, ByteLevel]");
  }
  split_pattern = pattern;
  int error = 0;
  PCRE2_SIZE offset = 0;
  split = std::make_unique<Pcre2Code>();
  split->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (split->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    bad("the pre-tokenizer's regex does not compile at offset " + std::to_string(offset) + ": " +
        reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(split->code, PCRE2_JIT_COMPLETE);  // without JIT (unsupported CPU) it interprets

  // decoder
  if (const JsonValue* d = root.find("decoder"); d != nullptr && d->kind != JsonValue::Kind::Null) {
    const std::string type = member(*d, "type", JsonValue::Kind::String, "decoder.", path).string;
    if (type != "ByteLevel") bad("decoder.type is " + type + "; llmcc implements ByteLevel");
  }
}

void HfTokenizer::Impl::parse_model(const JsonValue& root, const JsonValue& model) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const JsonValue* v = model.find(key);
    if (v != nullptr &&
        !(v->kind == JsonValue::Kind::Null || (v->kind == JsonValue::Kind::String && v->string.empty())))
      bad(std::string("model.") + key + " is set; llmcc implements byte-level BPE without it");
  }
  ignore_merges = flag(model, "ignore_merges");
  const JsonValue& v = member(model, "vocab", JsonValue::Kind::Object, "model.", path);
  std::int64_t max_id = -1;
  for (const auto& [token, id] : v.object) {
    if (!id.is_integer || id.integer < 0 || id.integer > std::numeric_limits<std::int32_t>::max() / 2)
      bad("model.vocab['" + token + "'] is not a non-negative id");
    vocab.emplace(token, static_cast<std::int32_t>(id.integer));
    max_id = std::max(max_id, id.integer);
  }

  // added_tokens
  if (const JsonValue* a = root.find("added_tokens"); a != nullptr && a->kind != JsonValue::Kind::Null) {
    if (a->kind != JsonValue::Kind::Array)
      bad("added_tokens is " + std::string(a->kind_name()) + ", expected an array");
    for (std::size_t i = 0; i < a->array.size(); ++i) {
      const JsonValue& t = a->array[i];
      const std::string w = "added_tokens[" + std::to_string(i) + "].";
      check_members(t, w,
                    {{"id", ""},
                     {"content", ""},
                     {"single_word", "false"},
                     {"lstrip", "false"},
                     {"rstrip", "false"},
                     {"normalized", ""},
                     {"special", ""}},
                    path);
      const JsonValue& id = member(t, "id", JsonValue::Kind::Number, w, path);
      const std::string& content = member(t, "content", JsonValue::Kind::String, w, path).string;
      if (!id.is_integer || id.integer < 0 || id.integer > std::numeric_limits<std::int32_t>::max() / 2)
        bad(w + "id is not a non-negative id");
      if (content.empty()) bad(w + "content is empty");
      // `tokenizers` finds a normalized added token in the normalized text by its normalized
      // content: after the Prepend normalizer only where a replacement precedes it.
      if (prepend_unconditionally && flag(t, "normalized"))
        bad(w + "normalized is true after the Prepend normalizer; llmcc implements false there");
      added.push_back({content, static_cast<std::int32_t>(id.integer), flag(t, "special")});
      max_id = std::max(max_id, id.integer);
    }
  }
  // Longest first; two of one length cannot both match at a position, so their order is free.
  // (std::sort: libstdc++ 12's stable_sort calls get_temporary_buffer, deprecated under Clang.)
  std::sort(added.begin(), added.end(), [](const Added& x, const Added& y) {
    return x.content.size() != y.content.size() ? x.content.size() > y.content.size() : x.content < y.content;
  });
  for (std::size_t i = 0; i < added.size(); ++i)
    added_at[static_cast<unsigned char>(added[i].content[0])].push_back(static_cast<std::uint32_t>(i));
  // Ids are numbered densely in real files; a table indexed by id must not be sized by a stray one.
  const std::int64_t tokens = static_cast<std::int64_t>(vocab.size() + added.size());
  if (max_id + 1 > tokens + kMaxIdGap)
    bad("ids go up to " + std::to_string(max_id) + " for " + std::to_string(tokens) +
        " tokens; llmcc reads files whose ids leave at most " + std::to_string(kMaxIdGap) + " unused");
  id_to_token.assign(static_cast<std::size_t>(max_id + 1), "");
  is_added.assign(id_to_token.size(), 0);
  // Decoding maps an id back to one string, so an id names one token: a vocab entry, an added
  // token, or both with the same text (GPT-2's "<|endoftext|>" is in both).
  std::vector<std::uint8_t> is_vocab(id_to_token.size(), 0);
  for (const auto& [token, id] : vocab) {
    const auto i = static_cast<std::size_t>(id);
    if (is_vocab[i] != 0)
      bad("model.vocab gives id " + std::to_string(id) + " to both '" + id_to_token[i] + "' and '" + token +
          "'; each id names one token");
    is_vocab[i] = 1;
    id_to_token[i] = token;
  }
  for (const Added& a : added) {
    const auto i = static_cast<std::size_t>(a.id);
    if ((is_vocab[i] != 0 || is_added[i] != 0) && id_to_token[i] != a.content)
      bad("added token '" + a.content + "' has id " + std::to_string(a.id) + ", which names '" + id_to_token[i] +
          "'; each id names one token");
    if (const auto it = vocab.find(a.content); it != vocab.end() && it->second != a.id)
      bad("added token '" + a.content + "' has id " + std::to_string(a.id) + " but model.vocab gives it id " +
          std::to_string(it->second));
    id_to_token[i] = a.content;
    is_added[i] = 1;
  }

  if (metaspace) {
    byte_fallback = flag(model, "byte_fallback");
    fuse_unk = flag(model, "fuse_unk");
    if (const JsonValue* u = model.find("unk_token"); u != nullptr && u->kind == JsonValue::Kind::String) {
      const auto it = vocab.find(u->string);
      if (it == vocab.end()) bad("model.unk_token '" + u->string + "' is not in model.vocab");
      unk_id = it->second;
    }
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const auto it = vocab.find(name);
      fallback_id[static_cast<std::size_t>(b)] = it == vocab.end() ? -1 : it->second;
    }
  }

  // ByteLevel's alphabet: printable Latin-1 bytes are themselves, the other 68 are U+0100 on.
  std::uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const std::uint32_t cp = printable ? static_cast<std::uint32_t>(b) : next++;
    append_utf8(byte_char[static_cast<std::size_t>(b)], cp);
    char_byte[cp] = static_cast<unsigned char>(b);
    const auto it = vocab.find(byte_char[static_cast<std::size_t>(b)]);
    byte_id[static_cast<std::size_t>(b)] = it == vocab.end() ? -1 : it->second;
  }

  // merges: "a b" or ["a", "b"], most important first
  const JsonValue& m = member(model, "merges", JsonValue::Kind::Array, "model.", path);
  for (std::size_t rank = 0; rank < m.array.size(); ++rank) {
    const JsonValue& e = m.array[rank];
    std::string left, right;
    if (e.kind == JsonValue::Kind::String) {
      const std::size_t space = e.string.find(' ');
      if (space == std::string::npos || e.string.find(' ', space + 1) != std::string::npos)
        bad("model.merges[" + std::to_string(rank) + "] '" + e.string + "' is not two tokens separated by a space");
      left = e.string.substr(0, space);
      right = e.string.substr(space + 1);
    } else if (e.kind == JsonValue::Kind::Array && e.array.size() == 2 && e.array[0].kind == JsonValue::Kind::String &&
               e.array[1].kind == JsonValue::Kind::String) {
      left = e.array[0].string;
      right = e.array[1].string;
    } else {
      bad("model.merges[" + std::to_string(rank) + "] is neither \"a b\" nor [\"a\", \"b\"]");
    }
    const auto l = vocab.find(left), r = vocab.find(right), lr = vocab.find(left + right);
    if (l == vocab.end() || r == vocab.end() || lr == vocab.end())
      bad("model.merges[" + std::to_string(rank) + "] '" + left + " " + right + "': " +
          (l == vocab.end()   ? left
           : r == vocab.end() ? right
                              : left + right) +
          " is not in the vocabulary");
    const std::uint64_t key = static_cast<std::uint64_t>(l->second) << 32 | static_cast<std::uint32_t>(r->second);
    merges.emplace(key, std::pair<std::int32_t, std::int32_t>{static_cast<std::int32_t>(rank), lr->second});
  }
}

// A piece's symbols before merging. ByteLevel: each byte's character. Metaspace: each character
// the vocabulary has; one it lacks becomes its bytes' <0xXX> tokens (byte_fallback, when the
// vocabulary has them all), else unk (consecutive unks one, with fuse_unk), else nothing, as in
// `tokenizers`. A byte that is not UTF-8 is a character of its own.
std::vector<std::int32_t> HfTokenizer::Impl::symbols(std::string_view piece) const {
  std::vector<std::int32_t> ids;
  if (!metaspace) {
    for (const char c : piece) {
      const std::int32_t id = byte_id[static_cast<unsigned char>(c)];
      if (id < 0) {
        fail(kWhere, path + ": the vocabulary has no token for byte " + std::to_string(static_cast<unsigned char>(c)) +
                         " ('" + byte_char[static_cast<unsigned char>(c)] + "'); a byte-level BPE needs all 256");
      }
      ids.push_back(id);
    }
    return ids;
  }
  bool last_unk = false;
  for (std::size_t i = 0; i < piece.size();) {
    const std::size_t n = std::max<std::size_t>(next_char(piece, i).second, 1);
    const std::string_view ch = piece.substr(i, n);
    i += n;
    if (const auto it = vocab.find(std::string(ch)); it != vocab.end()) {
      ids.push_back(it->second);
      last_unk = false;
      continue;
    }
    bool all_bytes = byte_fallback;
    for (const char c : ch) all_bytes = all_bytes && fallback_id[static_cast<unsigned char>(c)] >= 0;
    if (all_bytes) {
      for (const char c : ch) ids.push_back(fallback_id[static_cast<unsigned char>(c)]);
      last_unk = false;
      continue;
    }
    if (unk_id < 0) continue;
    if (!(fuse_unk && last_unk)) ids.push_back(unk_id);
    last_unk = true;
  }
  return ids;
}

// BPE over one piece: the adjacent pair of lowest merge rank (leftmost among equals) merges until
// none does, as `tokenizers` does. A heap of candidate pairs keeps a long piece (a Metaspace
// model's unsplit text, a line of text without spaces) at n log n.
void HfTokenizer::Impl::bpe(std::string_view piece, std::vector<std::int32_t>& out) const {
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    const auto it = cache.find(std::string(piece));
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::int32_t> ids;
  std::string mapped;
  if (ignore_merges) {
    if (metaspace) {
      mapped = std::string(piece);
    } else {
      for (const char c : piece) mapped += byte_char[static_cast<unsigned char>(c)];
    }
  }
  const auto whole = ignore_merges ? vocab.find(mapped) : vocab.end();
  if (whole != vocab.end()) {
    ids.push_back(whole->second);
  } else {
    ids = symbols(piece);
    const std::size_t n = ids.size();
    std::vector<std::int64_t> prev(n), next(n);
    for (std::size_t i = 0; i < n; ++i) {
      prev[i] = static_cast<std::int64_t>(i) - 1;
      next[i] = i + 1 < n ? static_cast<std::int64_t>(i) + 1 : -1;
    }
    struct Candidate {
      std::int32_t rank;
      std::int64_t pos;
    };
    const auto later = [](const Candidate& a, const Candidate& b) {
      return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> heap(later);
    const auto pair_at = [&](std::int64_t i) {  // the merge of symbol i and the next, or end()
      const std::int64_t j = next[static_cast<std::size_t>(i)];
      if (j < 0) return merges.end();
      return merges.find(static_cast<std::uint64_t>(ids[static_cast<std::size_t>(i)]) << 32 |
                         static_cast<std::uint32_t>(ids[static_cast<std::size_t>(j)]));
    };
    const auto consider = [&](std::int64_t i) {
      if (const auto it = pair_at(i); it != merges.end()) heap.push({it->second.first, i});
    };
    for (std::size_t i = 0; i + 1 < n; ++i) consider(static_cast<std::int64_t>(i));
    std::vector<char> alive(n, 1);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      // A pair that changed since it was pushed is stale: ranks name pairs, so an equal rank
      // means the same pair.
      const auto it = alive[static_cast<std::size_t>(c.pos)] ? pair_at(c.pos) : merges.end();
      if (it == merges.end() || it->second.first != c.rank) continue;
      const auto p = static_cast<std::size_t>(c.pos);
      const auto j = static_cast<std::size_t>(next[p]);
      ids[p] = it->second.second;
      alive[j] = 0;
      next[p] = next[j];
      if (next[j] >= 0) prev[static_cast<std::size_t>(next[j])] = c.pos;
      if (prev[p] >= 0) consider(prev[p]);
      consider(c.pos);
    }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (alive[i]) ids[kept++] = ids[i];
    ids.resize(kept);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() >= kCacheLimit) cache.clear();
  cache.emplace(std::string(piece), std::move(ids));
}

// text in NFC (ICU), in `storage` when normalizing changes it; text itself when it is NFC already
// or not UTF-8.
std::string_view HfTokenizer::Impl::nfc_of(std::string_view text, std::string& storage) const {
  if (!valid_utf8(text)) return text;
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* n = unorm2_getNFCInstance(&status);
  std::vector<UChar> wide(text.size() + 1);
  std::int32_t wide_len = 0;
  u_strFromUTF8(wide.data(), static_cast<std::int32_t>(wide.size()), &wide_len, text.data(),
                static_cast<std::int32_t>(text.size()), &status);
  if (U_FAILURE(status) || unorm2_isNormalized(n, wide.data(), wide_len, &status) || U_FAILURE(status)) return text;
  std::vector<UChar> norm(static_cast<std::size_t>(wide_len) * 3 + 16);
  const std::int32_t norm_len =
      unorm2_normalize(n, wide.data(), wide_len, norm.data(), static_cast<std::int32_t>(norm.size()), &status);
  std::int32_t bytes = 0;
  storage.resize(static_cast<std::size_t>(norm_len) * 3 + 4);
  u_strToUTF8(storage.data(), static_cast<std::int32_t>(storage.size()), &bytes, norm.data(), norm_len, &status);
  if (U_FAILURE(status)) fail(kWhere, path + ": NFC normalization failed: " + u_errorName(status));
  storage.resize(static_cast<std::size_t>(bytes));
  return storage;
}

// Text without added tokens: normalized, split by the pattern (matches and the text between them
// are pieces), each piece through BPE; a Metaspace model's text goes to encode_metaspace.
void HfTokenizer::Impl::encode_text(std::string_view text, bool at_start, std::vector<std::int32_t>& out) const {
  if (text.empty()) return;
  std::string normalized;
  if (nfc) text = nfc_of(text, normalized);
  if (metaspace) {
    encode_metaspace(text, at_start, out);
    return;
  }
  // Owned here: bpe() throws for a byte the vocabulary lacks.
  const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create_from_pattern(split->code, nullptr), pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t gap = 0, search = 0;
  while (search < text.size()) {
    const int rc = pcre2_match(split->code, subject, text.size(), search, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      fail(kWhere, path + ": the pre-tokenizer's regex failed at byte " + std::to_string(search) +
                       " of the text: " + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const std::size_t begin = ov[0], end = ov[1];
    if (end == begin) {  // an empty match splits nothing: look again one character on
      const std::size_t n = next_char(text, begin).second;
      search = begin + std::max<std::size_t>(n, 1);
      continue;
    }
    if (begin > gap) bpe(text.substr(gap, begin - gap), out);
    bpe(text.substr(begin, end - begin), out);
    gap = search = end;
  }
  if (gap < text.size()) bpe(text.substr(gap), out);
}

// Metaspace: spaces become the replacement, which is put first (always; at the start of the
// input only; never; or unconditionally for the Prepend normalizer) unless the text starts with
// it; then pieces start at each replacement (split) or the text is one piece.
void HfTokenizer::Impl::encode_metaspace(std::string_view text, bool at_start, std::vector<std::int32_t>& out) const {
  std::string s;
  s.reserve(text.size() + replacement.size());
  for (const char c : text) {
    if (c == ' ')
      s += replacement;
    else
      s += c;
  }
  const bool starts = s.compare(0, replacement.size(), replacement) == 0;
  if (prepend_unconditionally || (!starts && (prepend == Prepend::Always || (prepend == Prepend::First && at_start))))
    s.insert(0, replacement);
  if (!meta_split) {
    bpe(s, out);
    return;
  }
  std::size_t begin = 0;
  for (std::size_t at = s.find(replacement, 1); at != std::string::npos; at = s.find(replacement, at + 1)) {
    bpe(std::string_view(s).substr(begin, at - begin), out);
    begin = at;
  }
  bpe(std::string_view(s).substr(begin), out);
}

// A Metaspace model's decoder: its steps on the tokens' strings, as `tokenizers` applies them,
// except that bytes from <0xXX> tokens stay the bytes they are where `tokenizers` would write
// U+FFFD for those that are not UTF-8.
std::string HfTokenizer::Impl::decode_metaspace(std::span<const std::int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) tokens.push_back(id_to_token[static_cast<std::size_t>(id)]);
  const auto byte_of = [](const std::string& t) -> int {  // "<0xXX>" -> XX, else -1
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int v = 0;
    for (std::size_t k = 3; k < 5; ++k) {
      const char c = t[k];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                           : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  };
  for (const DecodeStep& step : decode_steps) {
    std::vector<std::string> next;
    switch (step.kind) {
      case DecodeStep::Kind::ByteFallback: {
        std::string bytes;
        bool pending = false;
        for (std::string& t : tokens) {
          if (const int b = byte_of(t); b >= 0) {
            bytes += static_cast<char>(b);
            pending = true;
            continue;
          }
          if (pending) next.push_back(std::move(bytes));
          bytes.clear();
          pending = false;
          next.push_back(std::move(t));
        }
        if (pending) next.push_back(std::move(bytes));
        break;
      }
      case DecodeStep::Kind::Fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        next.push_back(std::move(all));
        break;
      }
      case DecodeStep::Kind::Metaspace:
      case DecodeStep::Kind::Replace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          const bool drop = step.kind == DecodeStep::Kind::Metaspace && i == 0 && step.first_drops;
          const std::string& to = step.kind == DecodeStep::Kind::Metaspace ? std::string(drop ? "" : " ") : step.to;
          std::string t;
          const std::string& t0 = tokens[i];
          for (std::size_t at = 0; at < t0.size();) {
            if (t0.compare(at, step.from.size(), step.from) == 0) {
              t += to;
              at += step.from.size();
            } else {
              t += t0[at++];
            }
          }
          next.push_back(std::move(t));
        }
        break;
      case DecodeStep::Kind::Strip:
        for (std::string& t : tokens) {
          std::size_t begin = 0, end = t.size();
          for (int k = 0; k < step.start && t.compare(begin, step.from.size(), step.from) == 0; ++k)
            begin += step.from.size();
          for (int k = 0; k < step.stop && end >= begin + step.from.size() &&
                          t.compare(end - step.from.size(), step.from.size(), step.from) == 0;
               ++k)
            end -= step.from.size();
          next.push_back(t.substr(begin, end - begin));
        }
        break;
    }
    tokens = std::move(next);
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::~HfTokenizer() = default;
HfTokenizer::HfTokenizer(HfTokenizer&&) noexcept = default;
HfTokenizer& HfTokenizer::operator=(HfTokenizer&&) noexcept = default;

HfTokenizer HfTokenizer::from_json(std::string json, const std::string& label) {
  auto impl = std::make_unique<Impl>();
  impl->path = label;
  impl->json = std::move(json);
  impl->parse();
  return HfTokenizer(std::move(impl));
}

HfTokenizer HfTokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kWhere, path + ": cannot open for reading (expected a tokenizer.json)");
  std::ostringstream s;
  s << in.rdbuf();
  return from_json(s.str(), path);
}

std::vector<std::int32_t> HfTokenizer::encode(std::string_view text, bool allow_special) const {
  const Impl& t = *impl_;
  std::vector<std::int32_t> out;
  // Added tokens first: at each position the longest that starts there; the text between them
  // goes through the pipeline.
  std::size_t plain = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    for (const std::uint32_t k : t.added_at[static_cast<unsigned char>(text[i])]) {
      const Impl::Added& a = t.added[k];
      if ((a.special && !allow_special) || text.compare(i, a.content.size(), a.content) != 0) continue;
      t.encode_text(text.substr(plain, i - plain), plain == 0, out);
      out.push_back(a.id);
      i += a.content.size() - 1;
      plain = i + 1;
      break;
    }
  }
  t.encode_text(text.substr(plain), plain == 0, out);
  return out;
}

std::string HfTokenizer::decode(std::span<const std::int32_t> ids) const {
  const Impl& t = *impl_;
  for (const std::int32_t id : ids)
    if (id < 0 || static_cast<std::size_t>(id) >= t.id_to_token.size())
      fail(kWhere, t.path + ": token id " + std::to_string(id) + " is outside [0, " +
                       std::to_string(t.id_to_token.size()) + ")");
  if (t.metaspace) return t.decode_metaspace(ids);
  std::string out;
  for (const std::int32_t id : ids) {
    const std::string& token = t.id_to_token[static_cast<std::size_t>(id)];
    if (t.is_added[static_cast<std::size_t>(id)]) {
      out += token;
      continue;
    }
    for (std::size_t i = 0; i < token.size();) {
      const auto [cp, n] = next_char(token, i);
      const auto it = n == 0 ? t.char_byte.end() : t.char_byte.find(cp);
      if (it == t.char_byte.end()) {  // not ByteLevel's alphabet: the character as it is
        out.append(token, i, std::max<std::size_t>(n, 1));
      } else {
        out += static_cast<char>(it->second);
      }
      i += std::max<std::size_t>(n, 1);
    }
  }
  return out;
}

int HfTokenizer::vocab_size() const { return static_cast<int>(impl_->id_to_token.size()); }

Vocabulary HfTokenizer::vocabulary() const {
  const Impl& t = *impl_;
  if (t.metaspace)
    t.bad("a SentencePiece-style (Metaspace) tokenizer.json's vocabulary cannot be written; byte-level BPE ones can");
  Vocabulary v;
  v.model = "gpt2";
  v.split_pattern = t.split_pattern;
  v.tokens = t.id_to_token;
  v.kinds.assign(v.tokens.size(), Vocabulary::Kind::Normal);
  for (std::size_t id = 0; id < v.tokens.size(); ++id)
    if (v.tokens[id].empty()) v.kinds[id] = Vocabulary::Kind::Unused;
  for (const Impl::Added& a : t.added)
    v.kinds[static_cast<std::size_t>(a.id)] = a.special ? Vocabulary::Kind::Control : Vocabulary::Kind::UserDefined;
  std::vector<std::pair<std::int32_t, std::uint64_t>> by_rank;
  by_rank.reserve(t.merges.size());
  for (const auto& [pair, rank_and_id] : t.merges) by_rank.emplace_back(rank_and_id.first, pair);
  std::sort(by_rank.begin(), by_rank.end());
  v.merges.reserve(by_rank.size());
  for (const auto& [rank, pair] : by_rank)
    v.merges.push_back(t.id_to_token[static_cast<std::size_t>(pair >> 32)] + " " +
                       t.id_to_token[static_cast<std::size_t>(pair & 0xFFFFFFFFu)]);
  return v;
}

std::optional<std::int32_t> HfTokenizer::token_id(std::string_view token) const {
  for (const Impl::Added& a : impl_->added)
    if (a.content == token) return a.id;
  const auto it = impl_->vocab.find(std::string(token));
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

bool HfTokenizer::lossless() const { return !impl_->metaspace; }
const std::string& HfTokenizer::path() const { return impl_->path; }
const std::string& HfTokenizer::json() const { return impl_->json; }

}  // namespace llmcc
