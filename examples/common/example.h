// What the examples share: the command line and the "did training lower the loss" verdict of
// --check (its gradient check is the library's, llmcc/train/grad_check.h).
//
//   example::Args args = example::parse_args(argc, argv, "char_mlp", 3000);
//   bool ok = llmcc::check_gradients<char_mlp_loss_Entry>(model, batch).ok();  // --check (a)
//   ok = example::loss_fell("validation loss", before, after, 0.9) && ok;              // --check (b)
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/runtime.h"
#include "llmcc/train/rng.h"

namespace example {

struct Args {
  bool check = false;      // --check: gradient check and a short training, exit 0 only if both pass
  std::int64_t steps = 0;  // --steps N (default: the example's)
  std::string out_dir;     // --out DIR: checkpoints and log.jsonl (default: none)
  std::uint64_t seed = 1;  // --seed S: initialisation and data
  int threads = 1;         // --threads N
};

[[noreturn]] inline void usage(const char* name, std::int64_t default_steps, int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: %s [--check] [--steps N] [--out DIR] [--seed S] [--threads N]\n"
               "  --check      check the generated gradient against finite differences, train briefly\n"
               "               and check that the loss falls; exit 0 only if both pass\n"
               "  --steps N    optimizer steps (default %lld)\n"
               "  --out DIR    write checkpoints and log.jsonl to DIR\n"
               "  --seed S     seed of the initialisation and the data (default 1)\n"
               "  --threads N  threads of the kernels (default 1: the ops of models this small are short,\n"
               "               and a thread team synchronising in each can cost more than it saves)\n",
               name, static_cast<long long>(default_steps));
  std::exit(code);
}

inline Args parse_args(int argc, char** argv, const char* name, std::int64_t default_steps) {
  Args a;
  a.steps = default_steps;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", name, arg.c_str());
        usage(name, default_steps, 2);
      }
      return argv[++i];
    };
    auto number = [&](const std::string& text) {
      char* end = nullptr;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (end == text.c_str() || *end != '\0' || v < 0) {
        std::fprintf(stderr, "%s: %s expects a non-negative integer, got '%s'\n", name, arg.c_str(), text.c_str());
        usage(name, default_steps, 2);
      }
      return v;
    };
    if (arg == "--check") {
      a.check = true;
    } else if (arg == "--steps") {
      a.steps = number(value());
      if (a.steps == 0) {
        std::fprintf(stderr, "%s: --steps must be at least 1\n", name);
        std::exit(2);
      }
    } else if (arg == "--out") {
      a.out_dir = value();
    } else if (arg == "--seed") {
      a.seed = static_cast<std::uint64_t>(number(value()));
    } else if (arg == "--threads") {
      a.threads = static_cast<int>(number(value()));
      if (a.threads == 0) {
        std::fprintf(stderr, "%s: --threads must be at least 1\n", name);
        std::exit(2);
      }
    } else if (arg == "-h" || arg == "--help") {
      usage(name, default_steps, 0);
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", name, arg.c_str());
      usage(name, default_steps, 2);
    }
  }
  llmcc::set_num_threads(a.threads);
  return a;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --check (b): the loss after a short training must be below `factor` times the loss before.
inline bool loss_fell(const char* what, double before, double after, double factor) {
  const bool ok = std::isfinite(after) && after < factor * before;
  std::printf("training check: %s %.4f -> %.4f (%s: must fall below %.2f x the start, %.4f)\n", what, before, after,
              ok ? "ok" : "FAIL", factor, factor * before);
  return ok;
}

}  // namespace example
