// `llmcc train` gives the same run, bit for bit, as the recorded one: for a tiny GPT-2 and a tiny
// Llama with fixed seeds (random batches, two micro-batches per step, clipping, validation), every
// logged loss, gradient norm and validation loss, and the bytes of the final weights and AdamW
// moments, equal what the command line produced when these goldens were recorded. A change to
// the trainer that is meant to change nothing (moving it into the library, say) must pass this.
//
// What decides the rounding, and so the key a golden is kept under (kernel_path):
//   - the instruction set: the hand-vectorised kernels (GEMM micro-kernel, attention) use the
//     widest vectors the build targets, and their tiles and blockings differ per instruction set,
//     so AVX2 and AVX-512 may sum in other orders (for this model they do not: goldens());
//   - the compiler's major version (code generation, contraction into FMAs);
//   - the thread count (the command line below fixes it at 2) and the GEMM's cache blocking
//     (the built-in blocking of the instruction set; the test turns autotuning off).
// Not the CPU model or the compiler's tuning: every sum the compiler would vectorise on its own
// goes through kernels/cpu/ordered_sum.h, whose order -mtune cannot change, and the test command
// builds with another vendor's tuning than the machine's (LLMCC_TUNE) to keep it so.
// On a path with no golden the run is compared with the first golden within a tolerance, and
// the test is reported as skipped, saying so. To print this build's goldens:
//   LLMCC_PRINT_GOLDEN=1 ./test_train_golden
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cli_run.h"
#include "llmcc/parameters.h"
#include "llmcc/io/checkpoint.h"
#include "temp_dir.h"
#include "train_run.h"

namespace {

constexpr int kVocab = 512;

std::string kernel_path() {
  std::string key;
#if defined(__AVX512F__)
  key += "avx512";
#elif defined(__AVX2__)
  key += "avx2";
#else
  key += "generic";
#endif
#if defined(__AVX512BF16__)
  key += "-bf16";
#endif
#if defined(__GNUC__) && !defined(__clang__)
  key += "-gcc" + std::to_string(__GNUC__);
#elif defined(__clang__)
  key += "-clang" + std::to_string(__clang_major__);
#endif
  return key;
}

// What a run leaves that must not change.
struct RunRecord {
  std::map<long, std::string> loss, grad_norm, val_loss;
  std::uint64_t weights_hash = 0;  // FNV-1a of the final params, adamw.m and adamw.v bytes
};

struct Golden {
  std::vector<std::string> kernel_paths;     // the paths that gave this run, bit for bit
  const char* model;                         // "gpt2" | "llama"
  std::vector<std::string> loss, grad_norm;  // steps 1..8
  std::vector<std::string> val_loss;         // steps 0, 3, 6, 8
  std::uint64_t weights_hash;
};

// One run may stand for several kernel paths: every float sum of this small model is summed in
// the same order by AVX2 and AVX-512 (the GEMM's tiles sum each element over k in order, in one
// KC slice here; ordered_sum.h fixes 16 lanes whatever the vector width). A path is listed only
// once a machine with it has printed the same record. Recorded on a Zen 3 (avx2, GCC 12; checked
// there with -mtune=znver1 and -mtune=icelake-server) and on an Intel Xeon (avx512-bf16 built
// with -march=native -mtune=znver3; avx512 with -march=icelake-server).
const std::vector<Golden>& goldens() {
  static const std::vector<Golden> g = {
#include "train_golden.inc"
  };
  return g;
}

std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::uint64_t hash_checkpoint(const std::string& path) {
  const llmcc::CheckpointReader r(path);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char* section : {"params", "adamw.m", "adamw.v"}) {
    std::vector<llmcc::ParameterInfo> infos;
    for (const auto& t : r.tensors(section)) infos.push_back({t.name, t.shape});
    llmcc::ParameterStore store(infos);
    r.read_tensors(section, store);
    for (std::size_t i = 0; i < store.count(); ++i) {
      const llmcc::Tensor t = store.tensor(i);
      h = fnv1a(h, store.name(i).data(), store.name(i).size());
      h = fnv1a(h, t.raw(), t.nbytes());
    }
  }
  return h;
}

RunRecord train(const llmcc::test::TempDir& dir, const std::string& model) {
  llmcc::test::write_progression_shard(dir.file("train.bin"), 20000, 1, kVocab);
  llmcc::test::write_progression_shard(dir.file("val.bin"), 2000, 2, kVocab);
  std::vector<std::string> args = {"train",
                                   "--train-data",
                                   dir.file("train.bin"),
                                   "--val-data",
                                   dir.file("val.bin"),
                                   "--out-dir",
                                   dir.file("run"),
                                   "--n-layer",
                                   "2",
                                   "--n-embd",
                                   "64",
                                   "--n-head",
                                   "4",
                                   "--vocab-size",
                                   std::to_string(kVocab),
                                   "--max-seq-len",
                                   "64",
                                   "--batch-size",
                                   "4",
                                   "--seq-len",
                                   "32",
                                   "--grad-accum",
                                   "2",
                                   "--grad-clip",
                                   "0.5",
                                   "--steps",
                                   "8",
                                   "--warmup-steps",
                                   "2",
                                   "--lr",
                                   "3e-3",
                                   "--min-lr",
                                   "3e-4",
                                   "--val-every",
                                   "3",
                                   "--val-steps",
                                   "2",
                                   "--seed",
                                   "7",
                                   "--threads",
                                   "2",
                                   "--gemm-tune",
                                   "off"};
  if (model == "gpt2") {
    args.insert(args.end(), {"--model", "gpt2-tiny"});
  } else {
    args.insert(args.end(), {"--model", "llama-tiny", "--n-kv-head", "2", "--hidden-dim", "96", "--rope-theta", "500"});
  }
  const llmcc::test::CliResult r = llmcc::test::run_llmcc(dir, args);
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  RunRecord rec;
  const std::string log = dir.file("run") + "/log.jsonl";
  rec.loss = llmcc::test::logged(log, "loss");
  rec.grad_norm = llmcc::test::logged(log, "grad_norm");
  rec.val_loss = llmcc::test::logged(log, "val_loss");
  rec.weights_hash = hash_checkpoint(dir.file("run") + "/ckpt_000008.bin");
  return rec;
}

std::vector<std::string> values(const std::map<long, std::string>& m) {
  std::vector<std::string> v;
  for (const auto& [step, text] : m) v.push_back(text);
  return v;
}

void print_golden(const std::string& model, const RunRecord& rec) {
  auto list = [](const std::vector<std::string>& v) {
    std::string s = "{";
    for (const std::string& x : v) s += (s.size() > 1 ? ", \"" : "\"") + x + "\"";
    return s + "}";
  };
  std::printf("    {{\"%s\"}, \"%s\",\n     %s,\n     %s,\n     %s,\n     0x%016llxull},\n", kernel_path().c_str(),
              model.c_str(), list(values(rec.loss)).c_str(), list(values(rec.grad_norm)).c_str(),
              list(values(rec.val_loss)).c_str(), static_cast<unsigned long long>(rec.weights_hash));
}

void expect_close(const std::vector<std::string>& got, const std::vector<std::string>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(std::stod(got[i]), std::stod(want[i]), 2e-3 * std::fabs(std::stod(want[i])) + 1e-4)
        << what << " [" << i << "]";
}

void check(const std::string& model) {
  const llmcc::test::TempDir dir;
  const RunRecord rec = train(dir, model);
  if (std::getenv("LLMCC_PRINT_GOLDEN") != nullptr) print_golden(model, rec);
  const Golden* exact = nullptr;
  const Golden* any = nullptr;
  for (const Golden& g : goldens()) {
    if (g.model != model) continue;
    if (!any) any = &g;
    for (const std::string& path : g.kernel_paths)
      if (path == kernel_path()) exact = &g;
  }
  ASSERT_NE(any, nullptr) << "no golden recorded for " << model;
  if (exact) {
    EXPECT_EQ(values(rec.loss), exact->loss);
    EXPECT_EQ(values(rec.grad_norm), exact->grad_norm);
    EXPECT_EQ(values(rec.val_loss), exact->val_loss);
    EXPECT_EQ(rec.weights_hash, exact->weights_hash) << "the final weights or AdamW moments differ";
    return;
  }
  expect_close(values(rec.loss), any->loss, "loss");
  expect_close(values(rec.grad_norm), any->grad_norm, "grad_norm");
  expect_close(values(rec.val_loss), any->val_loss, "val_loss");
  GTEST_SKIP() << "no bit-exact golden for kernel path " << kernel_path() << ": the run matched "
               << any->kernel_paths[0]
               << "'s within 0.2%, which cannot catch a change in the last bits; print this path's runs with "
                  "LLMCC_PRINT_GOLDEN=1 ./test_train_golden and add the path to the record that equals it, or "
                  "add the record";
}

TEST(TrainGolden, Gpt2RunIsUnchanged) { check("gpt2"); }
TEST(TrainGolden, LlamaRunIsUnchanged) { check("llama"); }

}  // namespace
