// A per-op wall-time profiler that costs nothing measurable when off.
//
//   llmcc::profile::enable(true);
//   ... { LLMCC_PROFILE("linear.fwd"); work(); } ...     // one line at the top of a function
//   for (const auto& e : llmcc::profile::snapshot()) ...  // sorted by time, largest first
//   std::fputs(llmcc::profile::report(step_seconds * steps).c_str(), stdout);
//
// Each LLMCC_PROFILE site is a statically initialised record (name, nanoseconds, calls) that
// links itself into a global list the first time it runs while profiling is on. When profiling
// is off a site costs one relaxed atomic load and a branch: no clock read, no lock, no heap. When
// on, it reads std::chrono::steady_clock twice and adds to two relaxed atomics; it never
// allocates, so a profiled step still allocates nothing. Sites with the same name (the same op
// entered through two front ends) are summed in snapshot() and report().
//
// Times are inclusive wall time on the calling thread; nested sites are each charged in full,
// so shares are meaningful for leaf scopes (the ops) and the caller decides what "total" is.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace llmcc::profile {

namespace detail {

extern std::atomic<bool> g_enabled;

// One LLMCC_PROFILE call site. Constant-initialised (no guard, no constructor at run time).
struct Site {
  const char* name;
  std::atomic<std::int64_t> nanoseconds{0};
  std::atomic<std::int64_t> calls{0};
  std::atomic<bool> linked{false};
  Site* next = nullptr;  // the global list, written once under a lock when linked

  explicit constexpr Site(const char* n) : name(n) {}
};

// Adds one call of `ns` nanoseconds to the site (linking it into the list on first use).
void record(Site& site, std::int64_t ns);

}  // namespace detail

// Turns profiling on or off for every thread. Counts already gathered are kept.
void enable(bool on);
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// Forgets every count gathered so far (sites stay registered).
void reset();

struct Entry {
  std::string name;
  double seconds = 0;  // total wall time
  std::int64_t calls = 0;
};

// Every name that has been recorded, sites of the same name summed, largest time first.
std::vector<Entry> snapshot();

// A table: name, calls, total ms, ms per call, and share of `total_seconds` (when > 0; else of
// the sum of all entries), largest first.
std::string report(double total_seconds = 0);

// RAII timer behind LLMCC_PROFILE.
class Scope {
 public:
  explicit Scope(detail::Site& site) : site_(enabled() ? &site : nullptr) {
    if (site_ != nullptr) start_ = std::chrono::steady_clock::now();
  }
  ~Scope() {
    if (site_ != nullptr) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
      detail::record(*site_, static_cast<std::int64_t>(ns));
    }
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  detail::Site* site_;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace llmcc::profile

#define LLMCC_PROFILE_CAT2(a, b) a##b
#define LLMCC_PROFILE_CAT(a, b) LLMCC_PROFILE_CAT2(a, b)
// Times the rest of the enclosing block under `name` (a string literal).
#define LLMCC_PROFILE(name)                                                                               \
  static constinit ::llmcc::profile::detail::Site LLMCC_PROFILE_CAT(llmcc_profile_site_, __LINE__){name}; \
  const ::llmcc::profile::Scope LLMCC_PROFILE_CAT(llmcc_profile_scope_,                                   \
                                                  __LINE__)(LLMCC_PROFILE_CAT(llmcc_profile_site_, __LINE__))
