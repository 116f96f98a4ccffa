// GPT-2 byte-level BPE: loading encoder.json / vocab.bpe, encode with a piece cache, decode.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>

#include "llmcc/error.h"
#include "io/data_files.h"
#include "llmcc/text/tokenizer.h"
#include "text/gpt2_pretokenize.h"
#include "io/json_reader.h"

namespace llmcc {
namespace {

constexpr std::string_view kEndOfText = "<|endoftext|>";

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail("tokenizer", "cannot open " + std::string(what) + " '" + path + "': " + std::strerror(errno) +
                          " (hint: pass the path of GPT-2's " + what +
                          ", or set LLMCC_GPT2_TOKENIZER_DIR to the directory holding it)");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// GPT-2 stores each byte as a printable code point: bytes that are printable Latin-1 map to
// themselves, the other 68 map to U+0100.. in byte order. Returns code point -> byte (-1: none).
std::vector<int> unicode_to_byte() {
  std::vector<int> inv(512, -1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    inv[static_cast<std::size_t>(printable ? b : next++)] = b;
  }
  return inv;
}

// A token string in GPT-2's alphabet -> raw bytes; "" and an error description on failure.
std::string to_bytes(std::string_view s, const std::vector<int>& inv, std::string& error) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len = 0;
    const uint32_t cp = gpt2::decode_utf8(s, i, len);
    if (cp >= inv.size() || inv[cp] < 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "character U+%04X is not in GPT-2's byte alphabet",
                    cp == 0xFFFFFFFFu ? 0xFFFDu : cp);
      error = buf;
      return {};
    }
    out += static_cast<char>(inv[cp]);
    i += len;
  }
  return out;
}

// 50000 -> "50,000", for counts in messages.
std::string with_commas(std::size_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

struct Gpt2Tokenizer::Cache {
  static constexpr std::size_t kMaxEntries = 1 << 18;  // bounded: cleared when full
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> pieces;
};

Gpt2Tokenizer::Gpt2Tokenizer() : cache_(std::make_unique<Cache>()) {}
Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer& Gpt2Tokenizer::operator=(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer::~Gpt2Tokenizer() = default;

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& encoder_json, const std::string& vocab_bpe) {
  Gpt2Tokenizer tok;
  const std::vector<int> inv = unicode_to_byte();

  // encoder.json: every id in [0, n) exactly once.
  const auto entries = parse_json_int_object(read_file(encoder_json, "encoder.json"), encoder_json, "tokenizer");
  const auto bad_encoder = [&](const std::string& what) {
    fail("tokenizer", encoder_json + ": " + what + " (is this GPT-2's encoder.json?)");
  };
  if (entries.size() < 256) {
    bad_encoder("has " + std::to_string(entries.size()) + " tokens, expected at least 256 (one per byte)");
  }
  const std::size_t n = entries.size();
  tok.token_bytes_.assign(n, {});
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids;  // bytes -> id
  ids.reserve(n);
  for (const auto& [key, id] : entries) {
    if (id < 0 || static_cast<std::size_t>(id) >= n) {
      bad_encoder("token '" + key + "' has id " + std::to_string(id) + ", expected 0.." + std::to_string(n - 1));
    }
    if (seen[static_cast<std::size_t>(id)]) bad_encoder("id " + std::to_string(id) + " is used twice");
    seen[static_cast<std::size_t>(id)] = true;
    std::string error;
    std::string bytes = key == kEndOfText ? std::string(kEndOfText) : to_bytes(key, inv, error);
    if (!error.empty()) bad_encoder("token '" + key + "' (id " + std::to_string(id) + "): " + error);
    if (key == kEndOfText)
      tok.eot_ = static_cast<int32_t>(id);
    else if (!ids.emplace(bytes, static_cast<int32_t>(id)).second)
      bad_encoder("token '" + key + "' appears twice");
    tok.token_bytes_[static_cast<std::size_t>(id)] = std::move(bytes);
  }
  if (tok.eot_ < 0) bad_encoder("has no \"<|endoftext|>\" token");
  for (int b = 0; b < 256; ++b) {
    auto it = ids.find(std::string(1, static_cast<char>(b)));
    if (it == ids.end()) bad_encoder("has no token for byte " + std::to_string(b));
    tok.byte_token_[b] = it->second;
  }

  // vocab.bpe: "#version" line, then one merge "left right" per line, highest priority first.
  const std::string merges = read_file(vocab_bpe, "vocab.bpe");
  const bool ends_in_newline = !merges.empty() && merges.back() == '\n';
  std::vector<bool> produced(n, false);  // id -> some merge makes it
  std::size_t pos = 0, line_no = 0;
  int32_t rank = 0;
  while (pos < merges.size()) {
    std::size_t end = merges.find('\n', pos);
    if (end == std::string::npos) end = merges.size();
    const bool last = end == merges.size();
    std::string_view line(merges.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const auto bad_line = [&](const std::string& what) {
      fail("tokenizer", vocab_bpe + ":" + std::to_string(line_no) + ": " + what + " in '" + std::string(line) + "'" +
                            (last ? " (the last line, with no newline after it: is the file truncated?)"
                                  : " (is this GPT-2's vocab.bpe, matching " + encoder_json + "?)"));
    };
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      bad_line("expected two tokens separated by one space");
    }
    std::string error;
    const std::string left = to_bytes(line.substr(0, space), inv, error);
    const std::string right = error.empty() ? to_bytes(line.substr(space + 1), inv, error) : std::string();
    if (!error.empty()) bad_line(error);
    const auto l = ids.find(left), r = ids.find(right), m = ids.find(left + right);
    if (l == ids.end() || r == ids.end() || m == ids.end()) {
      bad_line(std::string("the ") +
               (l == ids.end()   ? "left token"
                : r == ids.end() ? "right token"
                                 : "merged token") +
               " is not in encoder.json");
    }
    produced[static_cast<std::size_t>(m->second)] = true;
    const uint64_t key = (static_cast<uint64_t>(l->second) << 32) | static_cast<uint32_t>(r->second);
    tok.merges_.emplace(key, std::make_pair(rank++, m->second));  // first occurrence wins
  }
  if (tok.merges_.empty()) fail("tokenizer", vocab_bpe + ": no merges found (is this GPT-2's vocab.bpe?)");

  // Every token longer than one byte must be made by some merge: BPE can never emit one that no
  // merge makes, so encoding would silently differ from the tokenizer the files came from. A
  // vocab.bpe cut short (GPT-2's has 50,000 merges for its 50,000 such tokens) fails here.
  std::size_t unreachable = 0;
  int32_t first = -1;
  for (std::size_t id = 0; id < n; ++id) {
    if (static_cast<int32_t>(id) == tok.eot_ || tok.token_bytes_[id].size() == 1 || produced[id]) continue;
    if (unreachable++ == 0) first = static_cast<int32_t>(id);
  }
  if (unreachable > 0) {
    std::string key;  // the token as encoder.json spells it
    for (const auto& [k, id] : entries) {
      if (id == first) key = k;
    }
    const std::size_t need = n - 257;  // all but the 256 single bytes and <|endoftext|>
    fail("tokenizer", vocab_bpe + ": its " + with_commas(static_cast<std::size_t>(rank)) + " merges make " +
                          with_commas(need - unreachable) + " of the " + with_commas(need) +
                          " tokens longer than one byte in " + encoder_json + "; the other " +
                          with_commas(unreachable) + " could never be produced, the first '" + key + "' (id " +
                          std::to_string(first) + ")" +
                          (ends_in_newline ? "" : ", and the file's last line has no newline") +
                          ". Is vocab.bpe truncated, or from another tokenizer than encoder.json?");
  }
  return tok;
}

Gpt2Tokenizer Gpt2Tokenizer::load_default() {
  std::filesystem::path dir;
  if (const char* env = std::getenv("LLMCC_GPT2_TOKENIZER_DIR"); env && *env) {
    dir = env;
  } else {
    // A download is checked by loading it before it is kept.
    dir = fetch_data_files(gpt2_tokenizer_files(), "tokenizer", [](const std::filesystem::path& got) {
      (void)load((got / "encoder.json").string(), (got / "vocab.bpe").string());
    });
  }
  return load((dir / "encoder.json").string(), (dir / "vocab.bpe").string());
}

// BPE on one piece's bytes, GPT-2's rule: take the adjacent pair with the best (lowest) rank in
// vocab.bpe, merge all its occurrences left to right, and repeat until no adjacent pair is a merge.
// Done with a linked list and a heap of candidate pairs ordered by (rank, position), so a long
// piece (a base64 blob, a line of 100k letters) costs O(n log n) instead of O(n^2). Each round
// pops every candidate of one rank; the pairs that round forms are queued only after it, which is
// exactly "all occurrences, then re-evaluate". A popped candidate whose tokens changed since it was
// queued is stale and skipped.
void Gpt2Tokenizer::bpe(std::string_view piece, std::vector<int32_t>& out) const {
  const auto n = static_cast<int32_t>(piece.size());
  struct Node {
    int32_t id, prev, next;  // prev/next: neighbouring live nodes, -1 at the ends
    bool alive;
  };
  std::vector<Node> nodes(static_cast<std::size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    nodes[static_cast<std::size_t>(i)] = {byte_token_[static_cast<unsigned char>(piece[static_cast<std::size_t>(i)])],
                                          i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  struct Candidate {
    int32_t rank, pos, left, right, merged;
  };
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> heap(later);
  const auto consider = [&](int32_t pos) {  // queue the pair starting at node pos, if it is a merge
    if (pos < 0) return;
    const int32_t next = nodes[static_cast<std::size_t>(pos)].next;
    if (next < 0) return;
    const int32_t left = nodes[static_cast<std::size_t>(pos)].id, right = nodes[static_cast<std::size_t>(next)].id;
    auto it = merges_.find((static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right));
    if (it != merges_.end()) heap.push({it->second.first, pos, left, right, it->second.second});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  std::vector<int32_t> merged_at;
  while (!heap.empty()) {
    const int32_t rank = heap.top().rank;
    merged_at.clear();
    while (!heap.empty() && heap.top().rank == rank) {
      const Candidate c = heap.top();
      heap.pop();
      Node& a = nodes[static_cast<std::size_t>(c.pos)];
      if (!a.alive || a.id != c.left || a.next < 0 || nodes[static_cast<std::size_t>(a.next)].id != c.right) continue;
      Node& b = nodes[static_cast<std::size_t>(a.next)];
      b.alive = false;
      a.id = c.merged;
      a.next = b.next;
      if (b.next >= 0) nodes[static_cast<std::size_t>(b.next)].prev = c.pos;
      merged_at.push_back(c.pos);
    }
    for (int32_t pos : merged_at) {
      if (!nodes[static_cast<std::size_t>(pos)].alive) continue;
      consider(nodes[static_cast<std::size_t>(pos)].prev);
      consider(pos);
    }
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = nodes[static_cast<std::size_t>(i)].next) {
    out.push_back(nodes[static_cast<std::size_t>(i)].id);  // node 0 is never removed
  }
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    auto it = cache_->pieces.find(piece);
    if (it != cache_->pieces.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t start = out.size();
  bpe(piece, out);
  std::lock_guard<std::mutex> lock(cache_->mutex);
  if (cache_->pieces.size() >= Cache::kMaxEntries) cache_->pieces.clear();
  cache_->pieces.emplace(std::string(piece),
                         std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
}

std::vector<int32_t> Gpt2Tokenizer::encode_ordinary(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3);
  gpt2::pretokenize(text, [&](std::string_view piece) { encode_piece(piece, out); });
  return out;
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3);
  const auto emit = [&](std::string_view piece) { encode_piece(piece, out); };
  for (;;) {
    const std::size_t at = text.find(kEndOfText);
    gpt2::pretokenize(text.substr(0, at), emit);  // the text before the special token is encoded alone
    if (at == std::string_view::npos) break;
    out.push_back(eot_);
    text.remove_prefix(at + kEndOfText.size());
  }
  return out;
}

std::string Gpt2Tokenizer::decode_token(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    fail("tokenizer", "decode: token id " + std::to_string(id) + " is out of range, expected 0.." +
                          std::to_string(vocab_size() - 1) +
                          " (ids from a padded vocabulary, e.g. 50304, must be sampled below vocab_size)");
  }
  return token_bytes_[static_cast<std::size_t>(id)];
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) decode_token(id);  // throws with the message
    out += token_bytes_[static_cast<std::size_t>(id)];
  }
  return out;
}

namespace {

// A code point as UTF-8 (GPT-2's alphabet stays below U+0800: one or two bytes).
void append_utf8(std::string& out, int cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Raw bytes in GPT-2's printable byte alphabet (unicode_to_byte's inverse).
std::string to_alphabet(const std::string& bytes, const std::vector<int>& byte_to_code) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(out, byte_to_code[b]);
  return out;
}

std::vector<int> byte_to_unicode() {
  const std::vector<int> inv = unicode_to_byte();
  std::vector<int> fwd(256, -1);
  for (std::size_t cp = 0; cp < inv.size(); ++cp)
    if (inv[cp] >= 0) fwd[static_cast<std::size_t>(inv[cp])] = static_cast<int>(cp);
  return fwd;
}

}  // namespace

std::vector<std::string> Gpt2Tokenizer::token_texts() const {
  const std::vector<int> fwd = byte_to_unicode();
  std::vector<std::string> out;
  out.reserve(token_bytes_.size());
  for (std::size_t id = 0; id < token_bytes_.size(); ++id)
    out.push_back(static_cast<int32_t>(id) == eot_ ? token_bytes_[id] : to_alphabet(token_bytes_[id], fwd));
  return out;
}

std::vector<std::string> Gpt2Tokenizer::merge_texts() const {
  const std::vector<int> fwd = byte_to_unicode();
  std::vector<std::pair<int32_t, std::uint64_t>> by_rank;
  by_rank.reserve(merges_.size());
  for (const auto& [pair, rank_and_id] : merges_) by_rank.emplace_back(rank_and_id.first, pair);
  std::sort(by_rank.begin(), by_rank.end());
  std::vector<std::string> out;
  out.reserve(by_rank.size());
  for (const auto& [rank, pair] : by_rank)
    out.push_back(to_alphabet(token_bytes_[static_cast<std::size_t>(pair >> 32)], fwd) + " " +
                  to_alphabet(token_bytes_[static_cast<std::size_t>(pair & 0xFFFFFFFFu)], fwd));
  return out;
}

}  // namespace llmcc
