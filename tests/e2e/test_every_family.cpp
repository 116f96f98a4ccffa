// Every registered model family (models/registry.h) through the command line as a user drives
// it, with nothing here naming a family: a new family is covered by registering it. For each, its
// smallest preset shrunk to 2 layers and a 67-token vocabulary trains with checkpoints, resumes
// exactly, evaluates, generates with its KV cache, exports to Hugging Face safetensors and back
// with the same evaluation loss, refuses GGUF flags it cannot honour, and rejects a config key it
// does not have.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.h"
#include "llmcc/train/data_loader.h"
#include "models/registry.h"
#include "smallest_preset.h"
#include "temp_dir.h"
#include "train_run.h"

namespace {

namespace fs = std::filesystem;
using llmcc::test::run_llmcc;
using llmcc::test::smallest_preset;

// "val loss 4.1234" from `llmcc eval`'s text.
std::string val_loss(const std::string& out) {
  const auto at = out.find("val loss ");
  return at == std::string::npos ? "" : out.substr(at + 9, out.find(',', at) - at - 9);
}

TEST(EveryFamily, TrainsResumesEvaluatesGeneratesAndExports) {
  for (const llmcc::models::Family* f : llmcc::models::model_families()) {
    const std::string preset = smallest_preset(*f);
    SCOPED_TRACE(std::string(f->name()) + " (" + preset + ")");
    llmcc::test::TempDir dir;
    llmcc::test::write_progression_shard(dir.file("train.bin"), 4000, 1, 67);
    llmcc::test::write_progression_shard(dir.file("val.bin"), 1000, 2, 67);
    const std::vector<std::string> model = {"--model", preset, "--n-layer", "2", "--vocab-size", "67"};
    auto train = [&](const std::string& out_dir, const std::string& steps, std::vector<std::string> extra) {
      std::vector<std::string> args = {"train",
                                       "--train-data",
                                       dir.file("train.bin"),
                                       "--val-data",
                                       dir.file("val.bin"),
                                       "--steps",
                                       steps,
                                       "--batch-size",
                                       "2",
                                       "--seq-len",
                                       "16",
                                       "--val-every",
                                       "4",
                                       "--ckpt-every",
                                       "4",
                                       "--out-dir",
                                       dir.file(out_dir),
                                       "--threads",
                                       "1",
                                       "--sample-every",
                                       "0"};
      args.insert(args.end(), extra.begin(), extra.end());
      return run_llmcc(dir, args);
    };
    // 8 steps in one go; 4 steps then a resume to 8: the same final checkpoint, byte for byte.
    auto r = train("whole", "8", model);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(f->display_name()), std::string::npos) << r.out;
    r = train("split", "8", {"--model", preset, "--n-layer", "2", "--vocab-size", "67", "--stop-after", "4"});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    r = train("split", "8", {"--resume", "auto"});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const std::string ckpt = dir.file("whole/ckpt_000008.bin");
    EXPECT_EQ(llmcc::test::slurp(ckpt), llmcc::test::slurp(dir.file("split/ckpt_000008.bin")))
        << "a resumed run must end where an uninterrupted one does";

    r = run_llmcc(dir, {"eval", "--ckpt", ckpt, "--val-data", dir.file("val.bin"), "--threads", "1"});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const std::string loss = val_loss(r.out);
    ASSERT_FALSE(loss.empty()) << r.out;
    EXPECT_LT(std::stod(loss), std::log(67.0)) << "8 steps on a progression learn something";

    // Hugging Face safetensors and back: the same weights, so the same loss.
    r = run_llmcc(dir, {"export", "--ckpt", ckpt, "--format", "safetensors", "--out", dir.file("hf")});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(f->hf_architecture()), std::string::npos) << r.out;
    r = run_llmcc(dir, {"export", "--ckpt", dir.file("hf"), "--out", dir.file("back.ckpt")});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    for (const std::string& weights : {dir.file("hf"), dir.file("back.ckpt")}) {
      r = run_llmcc(dir, {"eval", "--ckpt", weights, "--val-data", dir.file("val.bin"), "--threads", "1",
                          "--batch-size", "2", "--seq-len", "16"});
      ASSERT_EQ(r.code, 0) << r.out << r.err;
      EXPECT_EQ(val_loss(r.out), loss) << weights;
    }

    // --logits-out: the first batch's logits as .npy, (2, 16, 67) float32, whose cross-entropy on
    // the batch's targets is the loss eval reports for that batch.
    r = run_llmcc(dir, {"eval", "--ckpt", ckpt, "--val-data", dir.file("val.bin"), "--threads", "1", "--batch-size",
                        "2", "--seq-len", "16", "--steps", "1", "--json", "--logits-out", dir.file("logits.npy")});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    {
      const std::string npy = llmcc::test::slurp(dir.file("logits.npy"));
      ASSERT_GT(npy.size(), 10u);
      const std::size_t header = 10 + static_cast<unsigned char>(npy[8]) + 256u * static_cast<unsigned char>(npy[9]);
      EXPECT_EQ(npy.substr(0, 6), "\x93NUMPY");
      EXPECT_EQ(header % 64, 0u);
      EXPECT_NE(npy.find("'descr': '<f4', 'fortran_order': False, 'shape': (2, 16, 67), }"), std::string::npos);
      ASSERT_EQ(npy.size(), header + 2 * 16 * 67 * sizeof(float));
      llmcc::DataLoader loader({dir.file("val.bin")}, {.B = 2, .T = 16});
      loader.next_batch();
      const auto* logits = reinterpret_cast<const float*>(npy.data() + header);
      double nll = 0;
      for (int i = 0; i < 32; ++i) {
        const float* row = logits + i * 67;
        double max = row[0], sum = 0;
        for (int v = 1; v < 67; ++v) max = std::max(max, static_cast<double>(row[v]));
        for (int v = 0; v < 67; ++v) sum += std::exp(row[v] - max);
        nll += max + std::log(sum) - row[loader.targets().data()[i]];
      }
      const double loss = std::stod(r.out.substr(r.out.find("\"loss\": ") + 8));
      EXPECT_NEAR(nll / 32, loss, 1e-5 * loss);
    }

    // GGUF's flags: --quant only with --format gguf, and one of llama.cpp's names (the files
    // themselves: tests/models/test_gguf_export.cpp, tests/hf/test_gguf_export.py).
    r = run_llmcc(dir,
                  {"export", "--ckpt", ckpt, "--format", "safetensors", "--quant", "q8_0", "--out", dir.file("x")});
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("--quant and --tokenizer apply to --format gguf, not safetensors"), std::string::npos)
        << r.err;
    r = run_llmcc(dir, {"export", "--ckpt", ckpt, "--format", "gguf", "--quant", "q3_k", "--out", dir.file("x.gguf")});
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("--quant must be f32, f16, bf16, q8_0, q4_0, q4_k_m, got 'q3_k'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.file("x.gguf")));

    // Generation on the KV cache, from ids the model knows (the run stored no tokenizer: GPT-2's
    // decodes, and its "a" is id 64).
    r = run_llmcc(dir, {"generate", "--ckpt", ckpt, "--prompt", "a", "--max-tokens", "5", "--temperature", "0"});
    if (r.code == 0) {
      EXPECT_NE(r.err.find("decode: "), std::string::npos) << r.err;
    } else {
      // Without GPT-2's tokenizer files there is nothing to decode with.
      EXPECT_NE(r.err.find("encoder.json"), std::string::npos) << r.err;
    }

    // A config key no family of this one's has is refused by name.
    for (const llmcc::models::ConfigKey& k : llmcc::models::model_config_keys()) {
      if (f->preset(preset).get(k.name)) continue;
      std::string flag = std::string("--") + k.name;
      for (char& c : flag)
        if (c == '_') c = '-';
      r = run_llmcc(dir, {"train", "--model", preset, flag, "2", "--train-data", dir.file("train.bin")});
      EXPECT_EQ(r.code, 1);
      EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    }
  }
}

}  // namespace
