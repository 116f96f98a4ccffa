// The train/eval flag layer without running training: model flags (preset + overrides, padded
// vocab, conflicts with a loaded model named by flag), train option validation naming the flag,
// data path expansion, the checkpoint round trip of hyper-parameters (restore and warn), and
// the JSON-lines log (escaping, exact numbers, resume truncation).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "llmcc/io/token_file.h"
#include "model_flags.h"
#include "models/gpt2/gpt2_config.h"
#include "models/llama/llama_config.h"
#include "temp_dir.h"
#include "test_support.h"
#include "llmcc/train/train_log.h"
#include "train_options.h"

namespace {

using llmcc::cli::ArgParser;
using llmcc::cli::ModelFlags;
using llmcc::cli::TrainOptions;
using llmcc::test::throws_error;

ModelFlags parse_model(const std::vector<std::string>& args) {
  ModelFlags f;
  ArgParser p("test", "model flags");
  llmcc::cli::add_model_flags(p, f);
  p.parse(args);
  return f;
}

TrainOptions parse_train(const std::vector<std::string>& args) {
  TrainOptions o;
  EXPECT_TRUE(llmcc::cli::parse_train_flags(args, o));
  return o;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ModelFlags, PresetAndOverrides) {
  const auto def = parse_model({}).config().as<llmcc::models::Gpt2Config>();
  EXPECT_EQ(def.n_layer, 12);
  EXPECT_EQ(def.n_embd, 768);
  const auto c = parse_model({"--model", "gpt2-tiny", "--n-layer", "2", "--n-embd", "64", "--vocab-size", "1000",
                              "--max-seq-len", "32"})
                     .config()
                     .as<llmcc::models::Gpt2Config>();
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);  // the preset's
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.max_seq_len, 32);
  EXPECT_EQ(c.vocab_size, 1000);
  EXPECT_EQ(c.padded_vocab_size, 1024);  // recomputed, multiple of 128
}

TEST(ModelFlags, BadValuesNameTheFlag) {
  EXPECT_TRUE(throws_error([] { parse_model({"--n-layer", "-1"}).config(); }, {"--n-layer", "positive"}));
  EXPECT_TRUE(throws_error([] { parse_model({"--model", "gpt2-tiny", "--n-embd", "66"}).config(); },
                           {"n_embd", "n_head", "gpt2-tiny"}));
  EXPECT_TRUE(throws_error([] { parse_model({"--model", "gpt5"}).config(); }, {"gpt5", "gpt2-tiny"}));
  EXPECT_TRUE(throws_error([] { parse_model({"--n-layer", "two"}); }, {"--n-layer expects an integer"}));
}

TEST(ModelFlags, ConflictsWithALoadedModelNameTheFlag) {
  auto loaded = llmcc::models::model_preset("gpt2-tiny");
  loaded.set("n_layer", 2);
  // Flags that agree, or none, pass.
  parse_model({}).check_matches(loaded, "the checkpoint c.bin", "where");
  parse_model({"--n-layer", "2", "--n-head", "4"}).check_matches(loaded, "the checkpoint c.bin", "where");
  EXPECT_TRUE(
      throws_error([&] { parse_model({"--n-layer", "3"}).check_matches(loaded, "the checkpoint c.bin", "where"); },
                   {"[where]", "--n-layer 3 conflicts with the checkpoint c.bin", "n_layer 2"}));
  // A preset is a whole shape: gpt2-tiny has 4 layers, the file 2.
  EXPECT_TRUE(throws_error(
      [&] { parse_model({"--model", "gpt2-tiny"}).check_matches(loaded, "the checkpoint c.bin", "where"); },
      {"--model gpt2-tiny conflicts", "n_layer 2"}));
  parse_model({"--model", "gpt2-tiny", "--n-layer", "2"}).check_matches(loaded, "x", "where");
}

TEST(ModelFlags, LlamaPresetsAndOverrides) {
  const auto c = parse_model({"--model", "llama-tiny", "--n-kv-head", "1", "--hidden-dim", "300", "--rope-theta",
                              "500000", "--vocab-size", "50257", "--norm-eps", "1e-6"})
                     .config();
  EXPECT_STREQ(c.family_name(), "llama");
  const auto& llama = c.as<llmcc::models::LlamaConfig>();
  EXPECT_EQ(llama.n_layer, 4);  // the preset's
  EXPECT_EQ(llama.n_kv_head, 1);
  EXPECT_EQ(llama.hidden_dim, 300);
  EXPECT_EQ(llama.rope_theta, 500000.0f);
  EXPECT_EQ(llama.norm_eps, 1e-6f);
  EXPECT_EQ(c.vocab_size(), 50257);  // not padded
  EXPECT_EQ(parse_model({"--model", "stories15m"}).config().get("hidden_dim"), 768);
  // Llama-only flags on a GPT-2, and a bad GQA split, name the flag or field.
  EXPECT_TRUE(throws_error([] { parse_model({"--model", "gpt2-tiny", "--n-kv-head", "2"}).config(); },
                           {"--n-kv-head", "applies to Llama", "models only", "gpt2-tiny"}));
  EXPECT_TRUE(throws_error([] { parse_model({"--rope-theta", "1e4"}).config(); }, {"--rope-theta", "Llama"}));
  EXPECT_TRUE(throws_error([] { parse_model({"--model", "llama-tiny", "--n-kv-head", "3"}).config(); },
                           {"n_kv_head (3)", "n_head (4)", "llama-tiny"}));
  EXPECT_TRUE(
      throws_error([] { parse_model({"--model", "llama-99"}).config(); }, {"llama-99", "stories15m", "gpt2-tiny"}));
}

TEST(ModelFlags, LlamaConflictsWithALoadedModel) {
  auto loaded = llmcc::models::model_preset("llama-tiny");
  loaded.set("n_kv_head", 1);
  parse_model({"--model", "llama-tiny", "--n-kv-head", "1"}).check_matches(loaded, "c.bin", "where");
  EXPECT_TRUE(throws_error([&] { parse_model({"--model", "llama-tiny"}).check_matches(loaded, "c.bin", "where"); },
                           {"--model llama-tiny conflicts with c.bin", "n_kv_head 1"}));
  EXPECT_TRUE(throws_error([&] { parse_model({"--rope-theta", "20"}).check_matches(loaded, "c.bin", "where"); },
                           {"--rope-theta 20 conflicts", "rope_theta 10000"}));
  // Another family.
  const auto gpt2 = llmcc::models::model_preset("gpt2-tiny");
  EXPECT_TRUE(throws_error([&] { parse_model({"--model", "llama-tiny"}).check_matches(gpt2, "c.bin", "where"); },
                           {"--model llama-tiny (Llama) conflicts with c.bin", "GPT-2"}));
  EXPECT_TRUE(throws_error([&] { parse_model({"--n-kv-head", "2"}).check_matches(gpt2, "c.bin", "where"); },
                           {"--n-kv-head conflicts with c.bin", "GPT-2 model (no n_kv_head)"}));
}

// The memory plan the trainer prints (model_report.h) for llama-3.2-1b: weights, gradients,
// AdamW's two moments, and the step arena for one (1, 2048) micro-batch, which the trainer
// measures when it starts.
TEST(MemoryPlan, Llama32OneB) {
  const llmcc::models::ModelConfig mc = llmcc::models::model_preset("llama-3.2-1b");
  const llmcc::cli::MemoryPlan plan = llmcc::cli::memory_plan(mc, 1, 2048);
  std::printf("llama-3.2-1b: %s\n", llmcc::cli::describe(plan).c_str());
  EXPECT_EQ(plan.parameters, 1235814400);  // Meta's count: the head is the embedding
  EXPECT_EQ(plan.params_bytes, static_cast<std::size_t>(mc.parameter_count()) * 4);
  EXPECT_EQ(plan.optimizer_bytes, 2 * plan.params_bytes);
  EXPECT_EQ(plan.arena_bytes, 0u);
  EXPECT_NE(llmcc::cli::describe(plan).find("measured when training starts"), std::string::npos);
}

TEST(TrainFlags, ParsesAndRecordsGivenFlags) {
  const TrainOptions o = parse_train({"--train-data", "a.bin", "b.bin", "--batch-size", "8", "--seq-len=128", "--lr",
                                      "1e-3", "--grad-clip", "0", "--quiet", "--model", "gpt2-tiny"});
  EXPECT_EQ(o.train_data, (std::vector<std::string>{"a.bin", "b.bin"}));
  EXPECT_EQ(o.batch_size, 8);
  EXPECT_EQ(o.seq_len, 128);
  EXPECT_DOUBLE_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.grad_clip, 0.0);
  EXPECT_TRUE(o.quiet);
  EXPECT_EQ(o.model.model, "gpt2-tiny");
  EXPECT_EQ(o.given, (std::set<std::string>{"--train-data", "--batch-size", "--seq-len", "--lr", "--grad-clip",
                                            "--quiet", "--model"}));
  EXPECT_TRUE(throws_error([] { parse_train({"--bogus", "1"}); }, {"unknown flag --bogus"}));
  EXPECT_TRUE(throws_error([] { parse_train({"-B", "4"}); }, {"'-B'"}));
  EXPECT_TRUE(throws_error([] { parse_train({"--steps", "ten"}); }, {"--steps expects an integer, got 'ten'"}));
}

// --recipe llmc: llm.c's train_gpt2.c values for every flag not given, each then counted as
// given (a resume keeps it).
TEST(TrainFlags, TheLlmcRecipeFillsWhatIsNotGiven) {
  TrainOptions o = parse_train({"--recipe", "llmc"});
  EXPECT_DOUBLE_EQ(o.lr, 1e-4);
  EXPECT_DOUBLE_EQ(o.min_lr, 1e-4);
  EXPECT_EQ(o.warmup_steps, 0);
  EXPECT_EQ(o.beta2, 0.999f);
  EXPECT_EQ(o.weight_decay, 0.0f);
  EXPECT_EQ(o.grad_clip, 0.0);
  EXPECT_EQ(o.sampling, "sequential");
  EXPECT_EQ(o.given, (std::set<std::string>{"--recipe", "--lr", "--min-lr", "--warmup-steps", "--beta2",
                                            "--weight-decay", "--grad-clip", "--sampling"}));
  o = parse_train({"--recipe", "llmc", "--lr", "3e-4", "--grad-clip", "1"});
  EXPECT_DOUBLE_EQ(o.lr, 3e-4);
  EXPECT_DOUBLE_EQ(o.min_lr, 3e-4);  // still constant
  EXPECT_EQ(o.grad_clip, 1.0);
  EXPECT_TRUE(throws_error([] { parse_train({"--recipe", "nanogpt"}); }, {"--recipe must be 'llmc'", "'nanogpt'"}));
}

TEST(TrainFlags, ValidationNamesTheFlag) {
  const auto config = llmcc::models::model_preset("gpt2-tiny");  // max_seq_len 256
  auto check = [&](std::vector<std::string> args, std::initializer_list<const char*> fragments) {
    args.insert(args.end(), {"--train-data", "t.bin", "--out-dir", "run"});
    const TrainOptions o = parse_train(args);
    return throws_error([&] { llmcc::cli::validate_train_options(o, config); }, fragments);
  };
  {
    TrainOptions ok = parse_train({"--train-data", "t.bin", "--out-dir", "run"});
    llmcc::cli::validate_train_options(ok, config);
  }
  EXPECT_TRUE(check({"--seq-len", "512"}, {"--seq-len 512 exceeds the model's max_seq_len 256"}));
  EXPECT_TRUE(check({"--steps", "0"}, {"--steps must be positive, got 0"}));
  EXPECT_TRUE(check({"--batch-size", "0"}, {"--batch-size"}));
  EXPECT_TRUE(check({"--grad-accum", "0"}, {"--grad-accum"}));
  EXPECT_TRUE(check({"--warmup-steps", "2000"}, {"--warmup-steps", "[0, --steps = 1000]"}));
  EXPECT_TRUE(check({"--lr", "1e-4", "--min-lr", "1e-3"}, {"--min-lr 0.001 exceeds --lr 0.0001"}));
  EXPECT_TRUE(check({"--beta2", "1"}, {"--beta2 must be in [0, 1)"}));
  EXPECT_TRUE(check({"--eps", "0"}, {"--eps"}));
  EXPECT_TRUE(check({"--grad-clip", "-1"}, {"--grad-clip"}));
  EXPECT_TRUE(check({"--keep-last", "0"}, {"--keep-last"}));
  EXPECT_TRUE(check({"--sampling", "shuffled"}, {"--sampling must be 'random' or 'sequential', got 'shuffled'"}));
  EXPECT_TRUE(check({"--val-every", "10"}, {"--val-every needs --val-data"}));
  EXPECT_TRUE(check({"--sample-top-k", "60000"}, {"--sample-top-k"}));
  EXPECT_TRUE(throws_error([&] { llmcc::cli::validate_train_options(parse_train({"--out-dir", "run"}), config); },
                           {"--train-data is required"}));
  EXPECT_TRUE(throws_error([&] { llmcc::cli::validate_train_options(parse_train({"--train-data", "t.bin"}), config); },
                           {"--out-dir is required"}));
}

TEST(TrainFlags, DataPathsExpandGlobsAndNameMissingFiles) {
  llmcc::test::TempDir dir;
  const std::vector<std::int32_t> ids = {1, 2, 3};
  for (const char* name : {"train_000001.bin", "train_000000.bin", "val_000000.bin"})
    llmcc::write_token_file(dir.file(name), ids);
  const auto files = llmcc::cli::expand_data_paths({dir.file("train_*.bin"), dir.file("val_000000.bin")},
                                                   "--train-data", "llmcc train");
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], dir.file("train_000000.bin"));  // sorted
  EXPECT_EQ(files[1], dir.file("train_000001.bin"));
  EXPECT_EQ(files[2], dir.file("val_000000.bin"));
  EXPECT_TRUE(throws_error([&] { llmcc::cli::expand_data_paths({dir.file("nope.bin")}, "--val-data", "llmcc train"); },
                           {"--val-data: no such file", "nope.bin"}));
  EXPECT_TRUE(throws_error([&] { llmcc::cli::expand_data_paths({dir.file("x_*.bin")}, "--train-data", "llmcc train"); },
                           {"--train-data: no file matches", "x_*.bin"}));
  EXPECT_TRUE(throws_error([&] { llmcc::cli::expand_data_paths({dir.path.string()}, "--train-data", "llmcc train"); },
                           {"is a directory"}));
}

TEST(TrainFlags, HyperParametersRoundTripThroughACheckpointConfig) {
  llmcc::test::TempDir dir;
  llmcc::write_token_file(dir.file("t.bin"), std::vector<std::int32_t>{1, 2, 3});
  const TrainOptions trained = parse_train({"--lr", "3e-4", "--beta2", "0.99", "--steps", "500", "--grad-accum", "4",
                                            "--seed", "42", "--sampling", "sequential", "--weight-decay", "0.05"});
  const auto config = llmcc::models::model_preset("gpt2-tiny");
  auto kv = llmcc::cli::train_options_to_kv(trained, config, {dir.file("t.bin")}, {});
  kv["run.threads"] = "3";  // added by the trainer: the count it used
  EXPECT_EQ(kv.at("model.n_layer"), "4");
  EXPECT_EQ(kv.at("train.lr"), "0.0003");
  EXPECT_EQ(kv.at("data.train.0"), dir.file("t.bin"));

  // Nothing given: everything comes back, exactly (the float beta2 included).
  TrainOptions resumed = parse_train({"--out-dir", "run"});
  EXPECT_TRUE(llmcc::cli::restore_train_options(resumed, kv, "ckpt.bin").empty());
  EXPECT_EQ(resumed.lr, trained.lr);
  EXPECT_EQ(resumed.beta2, trained.beta2);
  EXPECT_EQ(resumed.weight_decay, trained.weight_decay);
  EXPECT_EQ(resumed.steps, 500);
  EXPECT_EQ(resumed.grad_accum, 4);
  EXPECT_EQ(resumed.seed, 42u);
  EXPECT_EQ(resumed.sampling, "sequential");
  EXPECT_EQ(resumed.train_data, (std::vector<std::string>{dir.file("t.bin")}));
  EXPECT_EQ(resumed.threads, 3);
  auto again = llmcc::cli::train_options_to_kv(resumed, config, {dir.file("t.bin")}, {});
  again["run.threads"] = "3";
  EXPECT_EQ(again, kv);

  // A given flag wins; a different value is warned about, by flag.
  TrainOptions extended = parse_train({"--steps", "800", "--lr", "3e-4", "--threads", "1"});
  const auto warnings = llmcc::cli::restore_train_options(extended, kv, "ckpt.bin");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("--steps 800 replaces the checkpoint's 500"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("--threads 1 differs from the checkpoint's run (3 threads)"), std::string::npos)
      << warnings[1];
  EXPECT_EQ(extended.steps, 800);
  EXPECT_EQ(extended.grad_accum, 4);

  auto bad = kv;
  bad["train.grad_accum"] = "four";
  TrainOptions o;
  EXPECT_TRUE(throws_error([&] { llmcc::cli::restore_train_options(o, bad, "ckpt.bin"); },
                           {"ckpt.bin", "train.grad_accum", "four"}));
}

TEST(TrainLog, JsonLinesAreExactAndEscaped) {
  llmcc::JsonLine line;
  const float loss = 10.869901f;
  const std::string& s = line.begin()
                             .field("step", std::int64_t{3})
                             .field("loss", loss)
                             .field("lr", 6e-4)
                             .field("grad_norm", std::nan(""))
                             .field("sample", std::string_view("a \"b\"\n\\c\x01"))
                             .end();
  EXPECT_EQ(s,
            "{\"step\": 3, \"loss\": 10.869901, \"lr\": 0.0006, \"grad_norm\": null, "
            "\"sample\": \"a \\\"b\\\"\\n\\\\c\\u0001\"}");
  // The shortest form reads back to the same float.
  EXPECT_EQ(std::stof("10.869901"), loss);
  // The buffer is reused.
  EXPECT_EQ(line.begin().field("step", std::int64_t{4}).end(), "{\"step\": 4}");

  // JSON is UTF-8: characters pass through; a byte that is not part of one (a sample cut
  // mid-character, a byte token) becomes U+FFFD, so the line stays valid JSON.
  const std::string text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";  // e-acute, euro sign, an emoji
  EXPECT_EQ(line.begin().field("s", std::string_view(text)).end(), "{\"s\": \"" + text + "\"}");
  const std::string bad = std::string("\xff") + "a\xe2\x82" + "b\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80" + "\xc3";
  EXPECT_EQ(
      line.begin().field("s", std::string_view(bad)).end(),
      "{\"s\": \"\\ufffda\\ufffd\\ufffdb\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"}");
}

TEST(TrainLog, ResumeDropsLinesPastTheCheckpoint) {
  llmcc::test::TempDir dir;
  const std::string path = dir.file("log.jsonl");
  {
    llmcc::TrainLog log(path, -1);
    for (int step = 1; step <= 5; ++step) log.write("{\"step\": " + std::to_string(step) + ", \"loss\": 1}");
  }
  {
    llmcc::TrainLog log(path, 3);  // the checkpoint was at step 3; steps 4 and 5 get redone
    log.write("{\"step\": 4, \"loss\": 2}");
  }
  EXPECT_EQ(slurp(path),
            "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"loss\": 1}\n{\"step\": 3, \"loss\": 1}\n"
            "{\"step\": 4, \"loss\": 2}\n");
  {
    llmcc::TrainLog fresh(path, -1);  // a fresh run starts a new log
  }
  EXPECT_EQ(slurp(path), "");
}

}  // namespace
