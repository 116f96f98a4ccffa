#include "llmcc/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace llmcc::profile {
namespace detail {

std::atomic<bool> g_enabled{false};

namespace {
// The list of sites that have run while profiling was on. Pushed under the lock (once per
// site); read by snapshot() and reset() under the same lock.
std::mutex g_list_mutex;
Site* g_list = nullptr;
}  // namespace

void record(Site& site, std::int64_t ns) {
  if (!site.linked.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(g_list_mutex);
    if (!site.linked.load(std::memory_order_relaxed)) {
      site.next = g_list;
      g_list = &site;
      site.linked.store(true, std::memory_order_release);
    }
  }
  site.nanoseconds.fetch_add(ns, std::memory_order_relaxed);
  site.calls.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace detail

void enable(bool on) { detail::g_enabled.store(on, std::memory_order_relaxed); }

void reset() {
  std::lock_guard<std::mutex> lock(detail::g_list_mutex);
  for (detail::Site* s = detail::g_list; s != nullptr; s = s->next) {
    s->nanoseconds.store(0, std::memory_order_relaxed);
    s->calls.store(0, std::memory_order_relaxed);
  }
}

std::vector<Entry> snapshot() {
  std::vector<Entry> out;
  {
    std::lock_guard<std::mutex> lock(detail::g_list_mutex);
    for (const detail::Site* s = detail::g_list; s != nullptr; s = s->next) {
      const std::int64_t calls = s->calls.load(std::memory_order_relaxed);
      if (calls == 0) continue;
      const double seconds = static_cast<double>(s->nanoseconds.load(std::memory_order_relaxed)) * 1e-9;
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const Entry& e) { return std::strcmp(e.name.c_str(), s->name) == 0; });
      if (it == out.end()) {
        out.push_back({s->name, seconds, calls});
      } else {
        it->seconds += seconds;
        it->calls += calls;
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
  });
  return out;
}

std::string report(double total_seconds) {
  const std::vector<Entry> entries = snapshot();
  double sum = 0;
  for (const Entry& e : entries) sum += e.seconds;
  const double total = total_seconds > 0 ? total_seconds : sum;
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%-28s %10s %12s %12s %8s\n", "name", "calls", "total ms", "ms/call", "share");
  out += line;
  for (const Entry& e : entries) {
    std::snprintf(line, sizeof line, "%-28s %10lld %12.3f %12.4f %7.1f%%\n", e.name.c_str(),
                  static_cast<long long>(e.calls), e.seconds * 1e3, e.seconds * 1e3 / static_cast<double>(e.calls),
                  total > 0 ? 100.0 * e.seconds / total : 0.0);
    out += line;
  }
  return out;
}

}  // namespace llmcc::profile
