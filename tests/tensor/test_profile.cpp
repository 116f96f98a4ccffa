// The per-op profiler: records only while enabled, sums sites of one name, sorts by time, and
// the ops' and optimizer's sites report under the names `llmcc bench` groups by.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "llmcc/arena.h"
#include "llmcc/ops/add.h"
#include "llmcc/profile.h"

namespace {

using llmcc::profile::Entry;

void slow_site(int ms) {
  LLMCC_PROFILE("test.slow");
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}
void other_slow_site() {
  LLMCC_PROFILE("test.slow");  // a second site with the same name: summed with the first
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
void fast_site() { LLMCC_PROFILE("test.fast"); }

const Entry* find(const std::vector<Entry>& entries, const std::string& name) {
  for (const Entry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

class Profile : public ::testing::Test {
 protected:
  void SetUp() override { llmcc::profile::reset(); }
  void TearDown() override {
    llmcc::profile::enable(false);
    llmcc::profile::reset();
  }
};

TEST_F(Profile, RecordsOnlyWhileEnabled) {
  fast_site();
  EXPECT_EQ(find(llmcc::profile::snapshot(), "test.fast"), nullptr);
  llmcc::profile::enable(true);
  EXPECT_TRUE(llmcc::profile::enabled());
  fast_site();
  fast_site();
  llmcc::profile::enable(false);
  fast_site();
  const auto entries = llmcc::profile::snapshot();
  const Entry* e = find(entries, "test.fast");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->calls, 2);
  llmcc::profile::reset();
  EXPECT_EQ(find(llmcc::profile::snapshot(), "test.fast"), nullptr);
}

TEST_F(Profile, SumsSitesOfOneNameAndSortsByTime) {
  llmcc::profile::enable(true);
  slow_site(5);
  other_slow_site();
  fast_site();
  llmcc::profile::enable(false);
  const auto entries = llmcc::profile::snapshot();
  const Entry* slow = find(entries, "test.slow");
  ASSERT_NE(slow, nullptr);
  EXPECT_EQ(slow->calls, 2);
  EXPECT_GE(slow->seconds, 0.006);
  EXPECT_LT(slow->seconds, 1.0);
  ASSERT_GE(entries.size(), 2u);
  for (std::size_t i = 1; i < entries.size(); ++i) EXPECT_GE(entries[i - 1].seconds, entries[i].seconds);
  const std::string table = llmcc::profile::report(0.012);
  EXPECT_NE(table.find("test.slow"), std::string::npos) << table;
  EXPECT_NE(table.find('%'), std::string::npos) << table;
}

TEST_F(Profile, OpsReportForwardAndBackward) {
  llmcc::Arena arena(1 << 20);
  llmcc::ArenaScope scope(arena);
  llmcc::Tensor a = llmcc::new_zeros({4, 8}, "test"), b = llmcc::new_zeros({4, 8}, "test");
  llmcc::profile::enable(true);
  const llmcc::Tensor out = llmcc::add(a, b);
  llmcc::Tensor d_a = llmcc::new_zeros({4, 8}, "test");
  llmcc::add_pullback(a, b, out, out, &d_a, nullptr);
  llmcc::profile::enable(false);
  const auto entries = llmcc::profile::snapshot();
  ASSERT_NE(find(entries, "add.fwd"), nullptr);
  ASSERT_NE(find(entries, "add.bwd"), nullptr);
  EXPECT_EQ(find(entries, "add.fwd")->calls, 1);
  EXPECT_EQ(find(entries, "add.bwd")->calls, 1);
}

}  // namespace
