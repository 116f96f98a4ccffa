// Trains the character-level MLP of model.h on Tiny Shakespeare (or, when that file is not
// there, on the short text shipped beside this file), then samples from it.
//
//   char_mlp                 train 10000 steps, printing progress and a sample at the end
//   char_mlp --check         gradient check on a small random model, then 60 steps that must
//                            lower the validation loss; exit 0 only if both pass
//   char_mlp --out run       also write checkpoints and run/log.jsonl
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "example.h"
#include "llmcc/error.h"
#include "llmcc/parameters.h"
#include "llmcc/train/grad_check.h"
#include "llmcc/train/rng.h"
#include "llmcc/train/trainer.h"
#include "model.grad.h"

namespace {

using char_mlp::CharMlp;
using Entry = char_mlp::char_mlp_loss_Entry;
using Batch = Entry::Inputs;  // (ctx (B, K), next (B, 1))

#ifndef CHAR_MLP_FALLBACK_TEXT
#define CHAR_MLP_FALLBACK_TEXT "fallback.txt"
#endif

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) llmcc::fail("char_mlp", "cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Tiny Shakespeare where scripts/fetch_data.sh puts it ($LLMCC_SHARED_DATA, else ../shared/data
// from the working directory), else the text shipped with the example.
std::string load_text() {
  const char* shared = std::getenv("LLMCC_SHARED_DATA");
  const std::filesystem::path path =
      std::filesystem::path(shared != nullptr ? shared : "../shared/data") / "tinyshakespeare" / "input.txt";
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    std::string text = read_file(path);
    std::printf("data: Tiny Shakespeare, %zu characters, from %s\n", text.size(), path.string().c_str());
    return text;
  }
  std::string text = read_file(CHAR_MLP_FALLBACK_TEXT);
  std::printf(
      "data: %s not found; using the fallback text %s, %zu characters (small: a long run memorises it, and "
      "the validation loss rises again)\n",
      path.string().c_str(), CHAR_MLP_FALLBACK_TEXT, text.size());
  return text;
}

// The characters of a text as ids 0..V-1 (in byte order).
struct Vocab {
  std::vector<char> chars;  // id -> character
  int id[256] = {};         // character -> id
  explicit Vocab(const std::string& text) {
    bool seen[256] = {};
    for (unsigned char c : text) seen[c] = true;
    for (int c = 0; c < 256; ++c)
      if (seen[c]) {
        id[c] = static_cast<int>(chars.size());
        chars.push_back(static_cast<char>(c));
      }
  }
  int size() const { return static_cast<int>(chars.size()); }
};

// Random windows of a text: B contexts of K characters and the character after each. The
// buffers are allocated once; each batch overwrites them.
class Windows {
 public:
  Windows(const std::vector<std::int32_t>& ids, int B, int K)
      : ids_(ids), B_(B), K_(K), ctx_(static_cast<std::size_t>(B) * K), next_(B) {}
  void make(Batch& batch, llmcc::Rng& rng) {
    const std::uint64_t positions = ids_.size() - static_cast<std::size_t>(K_);
    for (int b = 0; b < B_; ++b) {
      const std::size_t p = static_cast<std::size_t>(rng.below(positions)) + K_;  // predict ids_[p]
      for (int k = 0; k < K_; ++k) ctx_[static_cast<std::size_t>(b) * K_ + k] = ids_[p - K_ + k];
      next_[b] = ids_[p];
    }
    batch = Batch(llmcc::Tokens(ctx_.data(), B_, K_), llmcc::Tokens(next_.data(), B_, 1));
  }

 private:
  const std::vector<std::int32_t>& ids_;
  int B_, K_;
  std::vector<std::int32_t> ctx_;   // (B, K)
  std::vector<std::int32_t> next_;  // (B, 1)
};

// Makemore's initialisation: embeddings N(0, 1); the tanh layer N(0, (5/3) / sqrt(fan_in)) (the
// tanh gain); the output layer small, so the first predictions are near uniform; biases zero.
void init(CharMlp& m, std::uint64_t seed) {
  llmcc::Rng rng(seed);
  auto normal = [&](llmcc::Tensor& t, float std) {
    rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), 0.0f, std);
  };
  normal(m.wte, 1.0f);
  normal(m.hidden.w, (5.0f / 3.0f) / std::sqrt(static_cast<float>(m.cfg.K * m.cfg.C)));
  normal(m.head.w, 0.01f);
}

// n characters drawn from the model after `prompt` (at least K characters), temperature 1.
std::string sample(const CharMlp& m, const Vocab& vocab, const std::string& prompt, int n, llmcc::Rng& rng) {
  llmcc::Arena arena(std::size_t{16} << 20);
  std::vector<std::int32_t> ctx;  // (1, K)
  for (std::size_t i = prompt.size() - m.cfg.K; i < prompt.size(); ++i)
    ctx.push_back(vocab.id[static_cast<unsigned char>(prompt[i])]);
  std::string out = prompt;
  for (int i = 0; i < n; ++i) {
    llmcc::ArenaScope scope(arena);
    const llmcc::Tensor logits = m.forward(llmcc::Tokens(ctx.data(), 1, m.cfg.K));  // (1, V)
    const float* z = logits.f32();
    const float zmax = *std::max_element(z, z + m.cfg.V);
    double sum = 0.0;
    for (int v = 0; v < m.cfg.V; ++v) sum += std::exp(static_cast<double>(z[v] - zmax));
    double r = rng.uniform_f64() * sum;
    int next = m.cfg.V - 1;
    for (int v = 0; v < m.cfg.V; ++v) {
      r -= std::exp(static_cast<double>(z[v] - zmax));
      if (r < 0.0) {
        next = v;
        break;
      }
    }
    out.push_back(vocab.chars[static_cast<std::size_t>(next)]);
    ctx.erase(ctx.begin());
    ctx.push_back(next);
    arena.reset();
  }
  return out;
}

// (a) of --check: the generated gradient of a small random model on random characters.
bool check_gradient(std::uint64_t seed) {
  const char_mlp::Config cfg{.V = 13, .K = 3, .C = 5, .H = 7};
  const int B = 6;
  CharMlp m(cfg);
  llmcc::ParameterStore params = llmcc::bind_parameters(m);
  llmcc::Rng rng(seed);
  rng.fill_normal(params.data(), params.size(), 0.0f, 0.5f);  // biases too: every parameter random
  std::vector<std::int32_t> ctx(B * cfg.K), next(B);
  for (auto& c : ctx) c = static_cast<std::int32_t>(rng.below(cfg.V));
  for (auto& c : next) c = static_cast<std::int32_t>(rng.below(cfg.V));
  std::printf("gradient check on a random model: V %d, K %d, C %d, H %d, batch %d\n", cfg.V, cfg.K, cfg.C, cfg.H, B);
  const Batch batch(llmcc::Tokens(ctx.data(), B, cfg.K), llmcc::Tokens(next.data(), B, 1));
  return llmcc::check_gradients<Entry>(m, batch, {.seed = seed + 1}).ok();
}

}  // namespace

int main(int argc, char** argv) {
  const example::Args args = example::parse_args(argc, argv, "char_mlp", 10000);
  try {
    const auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    if (args.check) ok = check_gradient(args.seed);

    const std::string text = load_text();
    const Vocab vocab(text);
    std::vector<std::int32_t> ids;
    for (unsigned char c : text) ids.push_back(vocab.id[c]);
    // The first 90% trains, the last 10% validates.
    const std::size_t split = ids.size() * 9 / 10;
    const std::vector<std::int32_t> train_ids(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
    const std::vector<std::int32_t> val_ids(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());

    const char_mlp::Config cfg{.V = vocab.size(), .K = 8, .C = 16, .H = 256};
    const int B = 64;
    CharMlp model(cfg);
    llmcc::ParameterStore params = llmcc::bind_parameters(model);
    init(model, args.seed);
    std::printf("model: %d characters, context %d, embedding %d, hidden %d (tanh); %lld parameters; batch %d\n", cfg.V,
                cfg.K, cfg.C, cfg.H, static_cast<long long>(params.parameter_count()), B);

    Windows train_windows(train_ids, B, cfg.K), val_windows(val_ids, B, cfg.K);
    llmcc::GeneratedBatches<Batch> train(
        args.seed + 100, [&](Batch& b, llmcc::Rng& r) { train_windows.make(b, r); }, B);
    llmcc::GeneratedBatches<Batch> val(args.seed + 200, [&](Batch& b, llmcc::Rng& r) { val_windows.make(b, r); }, B);

    llmcc::TrainerOptions o;
    o.steps = args.check ? 60 : args.steps;
    o.schedule = {.max_lr = 3e-3, .min_lr = 3e-4, .warmup_steps = std::min<std::int64_t>(50, o.steps / 10)};
    o.val_every = args.check ? 0 : 1000;
    o.val_batches = 50;
    o.sample_every = args.check ? 0 : o.steps;
    o.out_dir = args.out_dir;
    o.name = "char_mlp";
    o.rate_unit = "char";
    o.rate_field = "chars_per_s";
    o.quiet = args.check;
    o.config = {{"V", std::to_string(cfg.V)}, {"K", std::to_string(cfg.K)}, {"C", std::to_string(cfg.C)},
                {"H", std::to_string(cfg.H)}, {"B", std::to_string(B)},     {"seed", std::to_string(args.seed)}};
    llmcc::TrainerHooks hooks;
    llmcc::Rng sample_rng(args.seed + 300);
    const std::string prompt = text.substr(split, 40);
    hooks.sample = [&](std::int64_t step) {
      std::printf("step %lld: sample after \"%s\":\n%s\n", static_cast<long long>(step), prompt.c_str(),
                  sample(model, vocab, prompt, 300, sample_rng).c_str());
    };
    llmcc::Trainer<Entry> trainer(model, params, train, &val, o, hooks);
    const double before = trainer.evaluate(o.val_batches);
    const llmcc::TrainResult r = trainer.run();
    if (args.check) {
      ok = example::loss_fell("validation loss", before, r.val_loss, 0.8) && ok;
      std::printf("check: %s (%.1f s)\n", ok ? "passed" : "FAILED", example::seconds_since(t0));
      return ok ? 0 : 1;
    }
    std::printf("validation loss %.4f -> %.4f in %lld steps (uniform over %d characters: %.4f)\n", before, r.val_loss,
                static_cast<long long>(r.step), cfg.V, std::log(static_cast<double>(cfg.V)));
    return 0;
  } catch (const llmcc::Error& e) {
    std::fprintf(stderr, "char_mlp: %s\n", e.what());
    return 1;
  }
}
