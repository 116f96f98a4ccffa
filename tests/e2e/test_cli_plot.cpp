// `llmcc plot` as a user runs it: synthetic logs (validation lines, a null loss, a resume, runs
// of different lengths) and the log of a real tiny training run become one SVG of four panels
// with a line per run, the same bytes every time; a missing, empty, stepless or malformed log is
// an error naming the file (and the line). The tick helpers are checked on their own.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "svg_plot.h"
#include "temp_dir.h"
#include "train_run.h"

namespace {

using llmcc::test::CliResult;
using llmcc::test::run_llmcc;
using llmcc::test::slurp;
using llmcc::test::TempDir;

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Run "alpha": validation at 0, 4 and 8; a null loss at step 3; a resume at step 4.
const char* kAlpha = R"({"step": 0, "event": "start", "params": 1234, "config": {"model": "gpt2"}})"
                     "\n"
                     R"({"step": 0, "val_loss": 5.5})"
                     "\n"
                     R"({"step": 1, "loss": 5.4, "lr": 0.0001, "grad_norm": 2.5, "tokens_per_s": 1000.5, "ms": 20})"
                     "\n"
                     R"({"step": 2, "loss": 5.1, "lr": 0.0002, "grad_norm": 2.1, "tokens_per_s": 1100, "ms": 19})"
                     "\n"
                     R"({"step": 2, "sample": "To be <or> not & so"})"
                     "\n"
                     R"({"step": 3, "loss": null, "lr": 0.0003, "grad_norm": null, "tokens_per_s": 1150, "ms": 19})"
                     "\n"
                     R"({"step": 4, "loss": 4.6, "lr": 0.0004, "grad_norm": 1.9, "tokens_per_s": 1180, "ms": 18})"
                     "\n"
                     R"({"step": 4, "val_loss": 4.9})"
                     "\n"
                     R"({"step": 4, "checkpoint": "runs/alpha/ckpt_000004.bin"})"
                     "\n"
                     R"({"step": 4, "event": "resume", "from": "runs/alpha/ckpt_000004.bin"})"
                     "\n"
                     R"({"step": 5, "loss": 4.4, "lr": 0.0004, "grad_norm": 1.7, "tokens_per_s": 900, "ms": 25})"
                     "\n"
                     R"({"step": 8, "loss": 4.0, "lr": 0.0002, "grad_norm": 1.5, "tokens_per_s": 1210, "ms": 18})"
                     "\n"
                     R"({"step": 8, "val_loss": 4.3})"
                     "\n";

// Run "beta": shorter, no validation.
const char* kBeta = R"({"step": 0, "event": "start", "params": 1234})"
                    "\n"
                    R"({"step": 1, "loss": 5.6, "lr": 0.001, "grad_norm": 3.5, "tokens_per_s": 2000, "ms": 10})"
                    "\n"
                    R"({"step": 2, "loss": 5.0, "lr": 0.001, "grad_norm": 3.0, "tokens_per_s": 2100, "ms": 10})"
                    "\n"
                    R"({"step": 3, "loss": 4.7, "lr": 0.0005, "grad_norm": 2.0, "tokens_per_s": 2050, "ms": 10})"
                    "\n";

// The text of each panel (<g class="panel"> ... </g>), in order.
std::vector<std::string> panels(const std::string& svg) {
  std::vector<std::string> out;
  const std::string open = "<g class=\"panel\">";
  for (std::size_t at = svg.find(open); at != std::string::npos;) {
    const std::size_t end = svg.find("</g>", at);
    out.push_back(svg.substr(at, end - at));
    at = svg.find(open, end);
  }
  return out;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

class CliPlot : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir.file("alpha"));
    std::filesystem::create_directories(dir.file("beta"));
    write(dir.file("alpha/log.jsonl"), kAlpha);
    write(dir.file("beta/log.jsonl"), kBeta);
  }
  CliResult plot(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"plot"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_llmcc(dir, args);
  }
  TempDir dir;
};

TEST_F(CliPlot, TwoRunsMakeFourPanelsWithALinePerRun) {
  const std::string out = dir.file("plot.svg");
  // A directory and a log file name the runs the same way.
  const CliResult r = plot({dir.file("alpha"), dir.file("beta/log.jsonl"), "--out", out, "--title", "lr <sweep> & co"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(out), std::string::npos) << r.out;
  const std::string svg = slurp(out);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << svg.substr(0, 200);
  ASSERT_GE(svg.size(), 7u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find(">lr &lt;sweep&gt; &amp; co</text>"), std::string::npos);
  EXPECT_EQ(svg.find("<sweep>"), std::string::npos);
  EXPECT_NE(svg.find(">alpha</text>"), std::string::npos);
  EXPECT_NE(svg.find(">beta</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<g"), count(svg, "</g>"));

  const std::vector<std::string> p = panels(svg);
  ASSERT_EQ(p.size(), 4u);
  // Loss: both runs' training loss and alpha's validation loss (dashed, a dot per value).
  EXPECT_EQ(count(p[0], "<path class=\"line\""), 2u) << p[0];
  EXPECT_EQ(count(p[0], "<path class=\"line dashed\""), 1u) << p[0];
  EXPECT_EQ(count(p[0], "<circle"), 3u) << p[0];
  EXPECT_NE(p[1].find(">learning rate</text>"), std::string::npos);
  EXPECT_NE(p[2].find(">tokens/s</text>"), std::string::npos);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(count(p[i], "<path class=\"line"), 2u) << p[i];
  // lr ticks in exponent form, throughput ticks round.
  EXPECT_NE(p[1].find(">1e-3</text>"), std::string::npos) << p[1];
  EXPECT_NE(p[1].find(">4e-4</text>"), std::string::npos) << p[1];
  EXPECT_NE(p[2].find(">1000</text>"), std::string::npos) << p[2];

  // The null loss at step 3 splits alpha's loss line in two (a second "M"); beta's is whole.
  const std::size_t first = p[0].find("<path class=\"line\"");
  const std::string alpha_loss = p[0].substr(first, p[0].find("/>", first) - first);
  EXPECT_EQ(count(alpha_loss, "M"), 2u) << alpha_loss;
  EXPECT_EQ(count(alpha_loss, "L"), 3u) << alpha_loss;  // 1-2, then 4-5-8
}

TEST_F(CliPlot, SameLogsGiveTheSameBytes) {
  ASSERT_EQ(plot({dir.file("alpha"), dir.file("beta"), "--out", dir.file("a.svg")}).code, 0);
  ASSERT_EQ(plot({dir.file("alpha"), dir.file("beta"), "--out", dir.file("b.svg")}).code, 0);
  const std::string a = slurp(dir.file("a.svg"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, slurp(dir.file("b.svg")));
}

TEST_F(CliPlot, LabelsLogScaleAndSize) {
  const std::string out = dir.file("plot.svg");
  const CliResult r = plot({dir.file("alpha"), dir.file("beta"), "--label", "a<1>", "b&2", "--log-y", "--width", "1200",
                            "--height", "800", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string svg = slurp(out);
  EXPECT_NE(svg.find(">a&lt;1&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">b&amp;2</text>"), std::string::npos);
  EXPECT_NE(svg.find("width=\"1200\" height=\"800\""), std::string::npos);
  const std::vector<std::string> p = panels(svg);
  ASSERT_EQ(p.size(), 4u);
  // Loss from 4 to 5.6 on a log axis: round ticks, each with the digits it needs.
  EXPECT_NE(p[0].find(">4.5</text>"), std::string::npos) << p[0];
  EXPECT_NE(p[0].find(">5</text>"), std::string::npos) << p[0];

  const CliResult bad = plot({dir.file("alpha"), dir.file("beta"), "--label", "only-one", "--out", out});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--label has 1 labels for 2 logs"), std::string::npos) << bad.err;
}

TEST_F(CliPlot, OneStepAndStepsPerSecond) {
  std::filesystem::create_directories(dir.file("one"));
  write(dir.file("one/log.jsonl"),
        R"({"step": 0, "event": "start"})"
        "\n"
        R"({"step": 1, "loss": 3.25, "lr": 0.001, "grad_norm": 0.5, "steps_per_s": 12.5, "ms": 80})"
        "\n");
  const std::string out = dir.file("one.svg");
  const CliResult r = plot({dir.file("one"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string svg = slurp(out);
  const std::vector<std::string> p = panels(svg);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_NE(p[2].find(">steps/s</text>"), std::string::npos) << p[2];
  for (const std::string& panel : p) EXPECT_EQ(count(panel, "<circle"), 1u) << panel;  // a lone point is a dot
  EXPECT_NE(svg.find(">one</text>"), std::string::npos);
}

TEST_F(CliPlot, AnIncompleteLastLineIsSkipped) {
  write(dir.file("beta/log.jsonl"), std::string(kBeta) + R"({"step": 4, "loss": 4.)");
  const CliResult r = plot({dir.file("beta"), "--out", dir.file("p.svg")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("log.jsonl:5: skipped an incomplete last line"), std::string::npos) << r.err;
}

TEST_F(CliPlot, BadLogsAreErrorsNamingTheFile) {
  const std::string out = dir.file("p.svg");
  auto expect_error = [&](const std::vector<std::string>& args, const std::string& message) {
    const CliResult r = plot(args);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "expected '" << message << "' in: " << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  };
  expect_error({dir.file("nowhere"), "--out", out}, dir.file("nowhere") + " does not exist");
  expect_error({dir.file("alpha"), dir.file("nowhere/log.jsonl"), "--out", out},
               dir.file("nowhere/log.jsonl") + " does not exist");

  std::filesystem::create_directories(dir.file("nolog"));
  expect_error({dir.file("nolog"), "--out", out}, "run directory " + dir.file("nolog") + " has no log.jsonl");

  write(dir.file("empty.jsonl"), "");
  expect_error({dir.file("empty.jsonl"), "--out", out}, dir.file("empty.jsonl") + " is empty");

  write(dir.file("events.jsonl"), R"({"step": 0, "event": "start"})"
                                  "\n"
                                  R"({"step": 0, "val_loss": 5.5})"
                                  "\n");
  expect_error({dir.file("events.jsonl"), "--out", out}, dir.file("events.jsonl") + " has no step lines");

  write(dir.file("broken.jsonl"),
        std::string(R"({"step": 1, "loss": 5.0})") + "\n\n" + R"({"step": 2, "loss": 4.})" + "\n");
  expect_error({dir.file("broken.jsonl"), "--out", out}, dir.file("broken.jsonl") + ":3:");

  write(dir.file("nostep.jsonl"), R"({"loss": 5.0})"
                                  "\n");
  expect_error({dir.file("nostep.jsonl"), "--out", out},
               dir.file("nostep.jsonl") + ":1: every log line has an integer \"step\"");

  write(dir.file("text.jsonl"), R"({"step": 1, "loss": "low"})"
                                "\n");
  expect_error({dir.file("text.jsonl"), "--out", out}, dir.file("text.jsonl") + ":1: \"loss\" is a string");

  expect_error({"--out", out}, "no logs given");
  expect_error({dir.file("alpha"), "--out", dir.file("p.png")}, "writes SVG");
  expect_error({dir.file("alpha"), "--out", dir.file("missing/p.svg")}, dir.file("missing") + " does not exist");
}

TEST(CliPlotReal, PlotsTheLogOfATinyTrainingRun) {
  TempDir dir;
  llmcc::test::write_progression_shard(dir.file("train.bin"), 5000, 1, 256);
  llmcc::test::write_progression_shard(dir.file("val.bin"), 2000, 2, 256);
  const CliResult train = run_llmcc(dir, {"train",
                                          "--train-data",
                                          dir.file("train.bin"),
                                          "--val-data",
                                          dir.file("val.bin"),
                                          "--model",
                                          "gpt2-tiny",
                                          "--n-layer",
                                          "2",
                                          "--n-embd",
                                          "32",
                                          "--n-head",
                                          "2",
                                          "--vocab-size",
                                          "256",
                                          "--max-seq-len",
                                          "32",
                                          "--batch-size",
                                          "4",
                                          "--seq-len",
                                          "16",
                                          "--steps",
                                          "6",
                                          "--val-every",
                                          "2",
                                          "--val-steps",
                                          "2",
                                          "--seed",
                                          "3",
                                          "--threads",
                                          "1",
                                          "--out-dir",
                                          dir.file("tiny")});
  ASSERT_EQ(train.code, 0) << train.err;
  const std::string out = dir.file("tiny.svg");
  const CliResult r = run_llmcc(dir, {"plot", dir.file("tiny"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string svg = slurp(out);
  const std::vector<std::string> p = panels(svg);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(count(p[0], "<path class=\"line\""), 1u) << p[0];
  EXPECT_EQ(count(p[0], "<path class=\"line dashed\""), 1u) << p[0];
  EXPECT_EQ(count(p[0], "<circle"), 4u) << p[0];  // validation at steps 0, 2, 4, 6
  EXPECT_NE(p[2].find(">tokens/s</text>"), std::string::npos) << p[2];
  for (int i = 1; i < 4; ++i) EXPECT_EQ(count(p[i], "<path class=\"line\""), 1u) << p[i];
  EXPECT_NE(svg.find(">tiny</text>"), std::string::npos);
}

TEST(SvgPlot, TicksAreRoundNumbers) {
  using llmcc::cli::nice_ticks;
  const auto t = nice_ticks(0.3, 9.7, 5, 0);
  EXPECT_EQ(t.step, 2);
  EXPECT_EQ(t.lo, 0);
  EXPECT_EQ(t.hi, 10);
  EXPECT_EQ(t.values.size(), 6u);
  EXPECT_EQ(nice_ticks(1, 1, 5, 1).step, 1);  // one step: whole-number ticks around it
  EXPECT_EQ(nice_ticks(1, 200, 5, 1).step, 50);
  EXPECT_EQ(llmcc::cli::log_ticks(1.8, 11), (std::vector<double>{2, 5, 10}));
  EXPECT_EQ(llmcc::cli::log_ticks(3.2, 7.5), (std::vector<double>{4, 5, 6, 7}));
  EXPECT_EQ(llmcc::cli::log_ticks(1.45, 3.5), (std::vector<double>{1.5, 2, 2.5, 3, 3.5}));
  EXPECT_EQ(llmcc::cli::log_ticks(0.5, 2000), (std::vector<double>{1, 10, 100, 1000}));

  using llmcc::cli::format_tick;
  EXPECT_EQ(format_tick(0, 0.5, 3), "0");
  EXPECT_EQ(format_tick(2.5, 0.5, 3), "2.5");
  EXPECT_EQ(format_tick(150, 50, 200), "150");
  EXPECT_EQ(format_tick(6e-4, 2e-4, 8e-4), "6e-4");
  EXPECT_EQ(format_tick(1.5e-4, 5e-5, 2e-4), "1.5e-4");
  EXPECT_EQ(format_tick(12500, 500, 20000), "12.5k");
  EXPECT_EQ(format_tick(1e-3, 2e-4, 1e-3), "1e-3");
  EXPECT_EQ(format_tick(2e6, 1e6, 4e6), "2M");
  EXPECT_EQ(llmcc::cli::svg_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
}

}  // namespace
