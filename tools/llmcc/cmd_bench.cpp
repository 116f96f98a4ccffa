// llmcc bench: training-step speed of any family's preset on random data, and where the time
// goes.
//
//   llmcc bench --model gpt2 --batch-size 4 --seq-len 64 --threads 2 --warmup 2 --steps 10
//   llmcc bench --model stories15m --batch-size 4 --seq-len 256
//
// Model flags are the trainer's (model_flags.h: a preset and per-field overrides).
// Measures this machine's fp32 FMA peak (bench_peak.h), builds the model with random weights,
// runs warm-up steps then timed steps (Model::bench_step, models/bench_step.h: a Trainer's step,
// as `llmcc train` takes it, on one fixed batch; no allocation once warm), and
// prints median and min ms per step, tokens/s, achieved GFLOP/s (ModelConfig::flops_per_step),
// MFU against the measured peak, peak RSS, page faults per timed step and the arenas' high-water marks. Then,
// unless --no-profile, a separate run with the per-op profiler on (llmcc/profile.h): forward
// and backward ms per op per step and their share of the step. The last line,
// "result: key=value ...", is for scripts (bench/compare.sh).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "llmcc/error.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "model_flags.h"

namespace llmcc::cli {
namespace {

constexpr const char* kCmd = "llmcc bench";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Page faults of the whole process so far: minor (a page mapped without I/O: first touch of
// fresh memory, or memory the allocator gave back to the kernel and took again) and major
// (read from disk).
struct PageFaults {
  long minor = 0, major = 0;
};
PageFaults page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {u.ru_minflt, u.ru_majflt};
}

// One line of the per-op table: an op's forward and backward seconds and calls over the run.
struct OpTime {
  double fwd = 0, bwd = 0, other = 0;
  std::int64_t fwd_calls = 0, bwd_calls = 0, other_calls = 0;
  double total() const { return fwd + bwd + other; }
};

// Groups profiler entries "<op>.fwd" / "<op>.bwd" by op; other names (the optimizer, zeroing)
// stand alone.
std::map<std::string, OpTime> group_by_op(const std::vector<profile::Entry>& entries) {
  std::map<std::string, OpTime> ops;
  auto ends_with = [](const std::string& s, const char* suffix) {
    const std::string x(suffix);
    return s.size() > x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  for (const profile::Entry& e : entries) {
    if (ends_with(e.name, ".fwd")) {
      OpTime& o = ops[e.name.substr(0, e.name.size() - 4)];
      o.fwd += e.seconds;
      o.fwd_calls += e.calls;
    } else if (ends_with(e.name, ".bwd")) {
      OpTime& o = ops[e.name.substr(0, e.name.size() - 4)];
      o.bwd += e.seconds;
      o.bwd_calls += e.calls;
    } else {
      OpTime& o = ops[e.name];
      o.other += e.seconds;
      o.other_calls += e.calls;
    }
  }
  return ops;
}

void print_profile(const std::vector<models::BenchStep::Split>& splits) {
  const double n = static_cast<double>(splits.size());
  std::vector<double> steps;
  double fwd = 0, bwd = 0, opt = 0;
  for (const auto& s : splits) {
    steps.push_back(s.forward + s.backward + s.optimizer);
    fwd += s.forward;
    bwd += s.backward;
    opt += s.optimizer;
  }
  const double step_ms = 1e3 * (fwd + bwd + opt) / n;  // mean: the profile is a sum over steps
  std::printf(
      "\nper-op profile (%zu profiled steps, mean step %.1f ms: forward %.1f, backward %.1f, "
      "optimizer+zero %.1f; median step %.1f ms)\n",
      splits.size(), step_ms, 1e3 * fwd / n, 1e3 * bwd / n, 1e3 * opt / n, 1e3 * median(steps));
  const auto ops = group_by_op(profile::snapshot());
  std::vector<std::pair<std::string, OpTime>> rows(ops.begin(), ops.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.total() > b.second.total(); });
  std::printf("%-24s %9s %10s %10s %10s %7s\n", "op", "uses/step", "fwd ms", "bwd ms", "total ms", "share");
  double profiled = 0;
  for (const auto& [name, o] : rows) {
    // Uses per step: forward calls (or calls, for the optimizer and zeroing).
    const double calls = static_cast<double>(o.fwd_calls > 0 ? o.fwd_calls : o.bwd_calls + o.other_calls) / n;
    const double total_ms = 1e3 * o.total() / n;
    profiled += total_ms;
    auto cell = [&](double seconds, std::int64_t c, char* buf) {
      if (c == 0)
        std::snprintf(buf, 16, "%10s", "-");
      else
        std::snprintf(buf, 16, "%10.2f", 1e3 * seconds / n);
    };
    char f[16], b[16];
    cell(o.fwd + o.other, o.fwd_calls + o.other_calls, f);
    cell(o.bwd, o.bwd_calls, b);
    std::printf("%-24s %9.0f %s %s %10.2f %6.1f%%\n", name.c_str(), calls, f, b, total_ms, 100.0 * total_ms / step_ms);
  }
  // Whatever no op accounts for: adgen's glue (adjoint zero-fill and pass-through sums), arena
  // bookkeeping, and the clock reads themselves.
  const double rest = step_ms - profiled;
  std::printf("%-24s %9s %10s %10s %10.2f %6.1f%%\n", "(outside ops)", "", "", "", rest, 100.0 * rest / step_ms);
}

}  // namespace

int run_bench(int argc, char** argv) {
  ModelFlags model_flags;
  int batch = 4, seq_len = 64, threads = num_threads(), warmup = 2, steps = 10, profile_steps = 3;
  bool with_profile = true, checkpoint_activations = false;
  double peak_seconds = 1.0;
  std::string dtype = "fp32", gemm_tune, lora_targets, init_from, base_dtype = "f32";
  int lora_rank = 0;
  float lora_alpha = 16.0f, lora_dropout = 0.0f;
  std::uint64_t seed = 1337;
  ArgParser p("bench", "Time a model's training steps on random data; print tokens/s, MFU and a per-op profile.");
  add_model_flags(p, model_flags);
  p.add("--init-from", &init_from,
        "time steps of this model's shape and weights instead of random ones: " + models::model_path_help());
  p.section("Batch");
  p.add("--batch-size", &batch, "sequences per step (B)");
  p.add("--seq-len", &seq_len, "tokens per sequence (T), at most the model's max_seq_len");
  p.add("--seed", &seed, "seed of the weights and the random tokens");
  p.section("LoRA");
  p.add("--lora-rank", &lora_rank,
        "time LoRA steps: adapters of this rank trained over the frozen random weights (0: every weight trained)");
  p.add("--lora-alpha", &lora_alpha, "LoRA's alpha (the updates are scaled by alpha / rank)");
  p.add("--lora-targets", &lora_targets, "the maps with adapters, comma-separated [default: all of the family's]");
  p.add("--lora-dropout", &lora_dropout, "dropout on each adapter's input in the timed steps (0: none)");
  p.add("--base-dtype", &base_dtype,
        "the frozen base's matrices in f32 or bf16 (rounded once; the products widen them a block at a time)");
  p.section("Run");
  p.add("--threads", &threads, "OpenMP threads (kernels, GEMM library and the FMA peak)");
  p.add("--dtype", &dtype,
        "matrix products in fp32 or bf16 (bf16 operands, fp32 sums), or 'auto' (the faster here); MFU is against "
        "this dtype's measured peak");
  p.add("--gemm-tune", &gemm_tune,
        "the GEMM's cache blocking: 'auto' (this CPU's cached measurement, or measure it), 'off' (built in), "
        "'redo' (measure again) [default: $LLMCC_GEMM_TUNE, else auto]");
  p.add("--checkpoint-activations", &checkpoint_activations,
        "save each block's input only and run its forward again in the backward (less memory, one more forward)");
  p.add("--warmup", &warmup, "untimed steps first (the first sizes memory and caches)");
  p.add("--steps", &steps, "timed steps");
  p.add("--profile", &with_profile, "after the timed steps, a separate run with the per-op profiler on");
  p.add("--profile-steps", &profile_steps, "steps of the profiled run");
  p.add("--peak-seconds", &peak_seconds, "time spent measuring each peak (fp32 FMA, bf16 dot product)");
  p.epilogue("Example: llmcc bench --model gpt2 --batch-size 4 --seq-len 64 --threads 2 --steps 10");
  if (!p.parse(argc, argv)) return 0;
  if (threads < 1) fail(kCmd, "--threads must be at least 1, got " + std::to_string(threads));
  if (warmup < 0) fail(kCmd, "--warmup must be at least 0, got " + std::to_string(warmup));
  if (steps < 1) fail(kCmd, "--steps must be at least 1, got " + std::to_string(steps));
  if (with_profile && profile_steps < 1)
    fail(kCmd, "--profile-steps must be at least 1, got " + std::to_string(profile_steps) + " (or use --no-profile)");
  if (!(peak_seconds > 0)) fail(kCmd, "--peak-seconds must be positive");
  if (lora_rank < 0) fail(kCmd, "--lora-rank must be >= 0, got " + std::to_string(lora_rank));
  if (lora_rank == 0 &&
      (p.given("--lora-alpha") || p.given("--lora-targets") || p.given("--lora-dropout") || p.given("--base-dtype")))
    fail(
        kCmd,
        "--lora-alpha, --lora-targets, --lora-dropout and --base-dtype configure adapters: give --lora-rank with them");
  if (base_dtype != "f32" && base_dtype != "bf16")
    fail(kCmd, "--base-dtype must be 'f32' or 'bf16', got '" + base_dtype + "'");
  if (dtype != "fp32" && dtype != "bf16" && dtype != "auto")
    fail(kCmd, "--dtype must be 'fp32', 'bf16' or 'auto', got '" + dtype + "'");
  if (!gemm_tune.empty() && gemm_tune != "auto" && gemm_tune != "off" && gemm_tune != "redo")
    fail(kCmd, "--gemm-tune must be 'auto', 'off' or 'redo', got '" + gemm_tune + "'");

  // The weights: --init-from's, else random ones of the flags' shape from `seed` (drawn below,
  // after the peaks, so that a random model's first touch is not timed as the load is).
  std::unique_ptr<Model> weights;
  if (!init_from.empty()) {
    models::check_model_path(init_from, "--init-from", kCmd);
    weights = models::load_model(init_from);
    if (weights->lora()) fail(kCmd, "--init-from " + init_from + " holds LoRA adapters; give its base model");
    model_flags.check_matches(weights->config(), "--init-from " + init_from, kCmd);
  }
  const ModelConfig model_config = weights ? weights->config() : model_flags.config();
  const std::string model = !init_from.empty()          ? init_from
                            : model_flags.model.empty() ? model_config.family_name()
                                                        : model_flags.model;
  model_config.validate();
  if (batch < 1) fail(kCmd, "--batch-size must be at least 1, got " + std::to_string(batch));
  if (seq_len < 1 || seq_len > model_config.max_seq_len()) {
    fail(kCmd, "--seq-len must be in [1, " + std::to_string(model_config.max_seq_len()) +
                   "] (the model's max_seq_len), got " + std::to_string(seq_len));
  }
  set_num_threads(threads);
  const MatmulDtypeChoice choice = choose_matmul_dtype(dtype);
  const MatmulDtype matmul = choice.dtype;
  dtype = matmul_dtype_name(matmul);
  if (!choice.note.empty()) std::printf("%s\n", choice.note.c_str());
  set_matmul_dtype(matmul);
  if (!gemm_tune.empty()) set_gemm_tune(parse_gemm_tune(gemm_tune));
  const GemmBlockingInfo gemm = gemm_blocking_info();

  const FmaPeak fp32_peak = measure_fma_peak(threads, peak_seconds, MatmulDtype::Fp32);
  const FmaPeak bf16_peak = measure_fma_peak(threads, peak_seconds, MatmulDtype::Bf16);
  const FmaPeak& peak = matmul == MatmulDtype::Bf16 ? bf16_peak : fp32_peak;
  std::printf("llmcc bench: %s (%s %s), %.2fM parameters, B=%d T=%d, %d threads, %s matmuls on %s\n", model.c_str(),
              model_config.display_name(), model_config.str().c_str(),
              static_cast<double>(model_config.parameter_count()) * 1e-6, batch, seq_len, threads, dtype.c_str(),
              matmul_kernel_name().c_str());
  for (const FmaPeak* q : {&fp32_peak, &bf16_peak}) {
    std::printf("%s peak (measured, %s, %d threads): %.1f GFLOP/s (%.1f per thread)%s\n",
                q == &fp32_peak ? "fp32 FMA" : "bf16 dot-product", q->isa.c_str(), q->threads, q->gflops,
                q->gflops_per_thread, q == &peak ? ": MFU is against this one" : "");
  }
  std::printf("cpu: %s\ngemm blocking: %s (%s)\n", gemm.cpu.c_str(), to_string(gemm.blocking).c_str(),
              gemm.source.c_str());
  std::fflush(stdout);

  // Random weights from `seed` (unless loaded), a fixed random batch from seed + 1.
  if (!weights) {
    weights = models::make_model(model_config);
    weights->init(seed);
  }
  const double full_gflop = model_config.flops_per_step(batch, seq_len) * 1e-9;
  if (lora_rank > 0) {
    models::LoraConfig cfg;
    cfg.rank = lora_rank;
    cfg.alpha = lora_alpha;
    cfg.dropout = lora_dropout;
    cfg.targets = lora_targets.empty() ? model_config.family().lora_targets()
                                       : models::lora_targets_from(lora_targets, "--lora-targets");
    weights = models::add_lora(std::move(weights), init_from.empty() ? "(random weights)" : init_from, cfg);
    weights->init(seed + 1);
    const std::size_t released = base_dtype == "bf16" ? weights->store_base_in_bf16() : 0;
    std::string names;
    for (const std::string& t : cfg.targets) names += (names.empty() ? "" : ",") + t;
    char dropout[32] = "";
    if (lora_dropout > 0.0f) std::snprintf(dropout, sizeof dropout, ", dropout %g", static_cast<double>(lora_dropout));
    std::printf("LoRA: rank %d, alpha %g%s on %s: %.3fM adapter parameters trained, the %.2fM weights frozen\n",
                lora_rank, static_cast<double>(lora_alpha), dropout, names.c_str(),
                static_cast<double>(weights->params().parameter_count()) * 1e-6,
                static_cast<double>(model_config.parameter_count()) * 1e-6);
    if (released > 0)
      std::printf("frozen base: matrices in bf16, %.1f MiB instead of %.1f MiB\n", mib(released / 2), mib(released));
  }
  weights->set_checkpoint_activations(checkpoint_activations);
  const std::unique_ptr<models::BenchStep> step_runner = weights->bench_step(batch, seq_len, seed);
  models::BenchStep& bench = *step_runner;
  float first_loss = 0, loss = 0;
  for (int i = 0; i < warmup; ++i) {
    loss = bench.step();
    if (i == 0) first_loss = loss;
  }
  std::vector<double> ms;
  const PageFaults faults_before = page_faults();
  for (int i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    loss = bench.step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (warmup == 0 && i == 0) first_loss = loss;
  }
  const PageFaults faults_after = page_faults();
  // Per timed step (with --warmup 0 the first step's first touches are included).
  const double minor_faults = static_cast<double>(faults_after.minor - faults_before.minor) / steps;
  const double major_faults = static_cast<double>(faults_after.major - faults_before.major) / steps;
  const double med = median(ms), best = *std::min_element(ms.begin(), ms.end()),
               worst = *std::max_element(ms.begin(), ms.end());
  const double tokens = static_cast<double>(batch) * seq_len;
  const double gflop = weights->flops_per_step(batch, seq_len) * 1e-9;
  const double gflops = gflop / (med * 1e-3);
  const double mfu = gflops / peak.gflops;
  std::printf("steps: %d warm-up, %d timed; loss %.4f -> %.4f (one fixed batch)\n", warmup, steps, first_loss, loss);
  std::printf("ms/step: median %.1f, min %.1f, max %.1f\n", med, best, worst);
  std::printf("tokens/s: %.1f (median step), %.1f (min step)\n", tokens / (med * 1e-3), tokens / (best * 1e-3));
  std::printf("GFLOP/step: %.2f; achieved %.1f GFLOP/s (median), %.1f (min); MFU %.1f%% (median), %.1f%% (min)\n",
              gflop, gflops, gflop / (best * 1e-3), 100.0 * mfu, 100.0 * gflop / (best * 1e-3) / peak.gflops);
  if (lora_rank > 0)
    std::printf("GFLOP/step of training every weight instead: %.2f (LoRA: %.2fx; no weight gradients of the base)\n",
                full_gflop, gflop / full_gflop);
  std::printf("peak RSS: %.1f MiB; arena high-water: %.1f MiB step + %.1f MiB adgen scratch (capacity %.0f MiB)\n",
              peak_rss_mib(), mib(bench.arena_high_water()), mib(bench.scratch_high_water()),
              mib(bench.arena_capacity()));
  std::printf("page faults per timed step: %.1f minor, %.1f major\n", minor_faults, major_faults);
  const double rss = peak_rss_mib();  // before the profiled run, which allocates nothing more

  if (with_profile) {
    profile::reset();
    profile::enable(true);
    std::vector<models::BenchStep::Split> splits;
    for (int i = 0; i < profile_steps; ++i) splits.push_back(bench.step_split());
    profile::enable(false);
    print_profile(splits);
  }
  std::printf(
      "\nresult: impl=llmcc model=%s B=%d T=%d threads=%d dtype=%s median_ms=%.3f min_ms=%.3f tokens_per_s=%.3f "
      "gflops=%.3f mfu=%.4f peak_gflops=%.3f peak_rss_mib=%.1f minor_faults_per_step=%.1f "
      "major_faults_per_step=%.1f gemm_kc=%d gemm_mc=%d gemm_nc=%d gemm_stream_a=%d gemm_stream_rows=%d\n",
      model.c_str(), batch, seq_len, threads, dtype.c_str(), med, best, tokens / (med * 1e-3), gflops, mfu, peak.gflops,
      rss, minor_faults, major_faults, gemm.blocking.kc, gemm.blocking.mc, gemm.blocking.nc, gemm.blocking.stream_a,
      gemm.blocking.stream_rows);
  return 0;
}

}  // namespace llmcc::cli
