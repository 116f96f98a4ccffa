// llmcc::Trainer on a model of the user's own (classifier.h), as a user's program drives
// it: the loss falls on a learnable task; stopping and resuming gives the run an uninterrupted
// one gives, bit for bit; the planning step changes nothing (same run as a given arena size);
// the arena it reserves is within 1.2x of the step's high-water mark; metrics and state hooks
// are called; SIGINT ends the run with a checkpoint; bad options are clear errors before any
// step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "classifier.grad.h"
#include "llmcc/error.h"
#include "llmcc/parameters.h"
#include "llmcc/train/grad_check.h"
#include "llmcc/train/trainer.h"
#include "temp_dir.h"
#include "train_run.h"

namespace {

using llmcc::Rng;
using llmcc::Tensor;
using llmcc::Tokens;
using test_train::Classifier;
using Entry = test_train::classifier_loss_Entry;
using Batch = Entry::Inputs;  // (x (B, 1, D), y (B, 1))

constexpr int D = 6, H = 16, K = 3, B = 8;

// Points in D dimensions; the label is which of the first K coordinates is largest.
// A batch whose first value equals `marked` is poisoned (all NaN; with spike_marked, scaled by
// 1000: finite, but its loss spikes), or, with drop_marked_step, replaced by the draw after next:
// what a run gets when a rollback drops the marked batch and the other micro-batch of its step
// (the marked draw being its step's first).
class Task {
 public:
  Task() : x_(static_cast<std::size_t>(B) * D), y_(B) {}
  float marked = std::numeric_limits<float>::quiet_NaN();
  bool drop_marked_step = false;
  bool spike_marked = false;
  void make(Batch& batch, Rng& rng) {
    draw(rng);
    if (x_[0] == marked) {
      if (drop_marked_step) {
        draw(rng);
        draw(rng);
      } else if (spike_marked) {
        for (float& x : x_) x *= 1000.0f;
      } else {
        std::fill(x_.begin(), x_.end(), std::numeric_limits<float>::quiet_NaN());
      }
    }
    batch = Batch(Tensor(x_.data(), llmcc::Shape{B, 1, D}), Tokens(y_.data(), B, 1));
  }

 private:
  void draw(Rng& rng) {
    for (int b = 0; b < B; ++b) {
      int best = 0;
      for (int d = 0; d < D; ++d) {
        x_[static_cast<std::size_t>(b) * D + d] = static_cast<float>(rng.normal());
        if (d < K && x_[static_cast<std::size_t>(b) * D + d] > x_[static_cast<std::size_t>(b) * D + best]) best = d;
      }
      y_[b] = best;
    }
  }

  std::vector<float> x_;
  std::vector<std::int32_t> y_;
};

struct Learner {
  Classifier model{D, H, K};
  llmcc::ParameterStore params = llmcc::bind_parameters(model);
  Task train_task, val_task;
  llmcc::GeneratedBatches<Batch> train{11, [this](Batch& b, Rng& r) { train_task.make(b, r); }, B};
  llmcc::GeneratedBatches<Batch> val{12, [this](Batch& b, Rng& r) { val_task.make(b, r); }, B};
  Learner() {
    Rng rng(5);
    for (std::size_t i = 0; i < params.count(); ++i) {
      Tensor t = params.tensor(i);
      if (t.shape().ndim() == 2) rng.fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), 0.0f, 0.3f);
    }
  }
};

llmcc::TrainerOptions options(const std::string& out_dir) {
  llmcc::TrainerOptions o;
  o.steps = 40;
  o.grad_accum = 2;
  o.schedule = {.max_lr = 3e-2, .min_lr = 3e-3, .warmup_steps = 4};
  o.grad_clip = 1.0;
  o.val_every = 10;
  o.val_batches = 4;
  o.ckpt_every = 10;
  o.out_dir = out_dir;
  o.quiet = true;
  o.name = "test";
  return o;
}

bool same_bytes(const llmcc::ParameterStore& a, const llmcc::ParameterStore& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(TrainerApi, ParameterListIsGeneratedFromTheStruct) {
  Learner r;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < r.params.count(); ++i) names.push_back(r.params.name(i));
  EXPECT_EQ(names, (std::vector<std::string>{"hidden.weight", "hidden.bias", "head.weight", "head.bias"}));
  EXPECT_EQ(r.params.parameter_count(), H * D + H + K * H + K);
}

// The library's finite-difference check passes the generated gradient and names a tensor whose
// gradient is 5% off.
struct OffByFivePercent : Entry {
  static void bwd(const Model& m, const Inputs& in, const Saved& s, float d_loss, Grad* g) {
    Entry::bwd(m, in, s, d_loss, g);
    float* w = g->head.w.f32();
    for (std::int64_t i = 0; i < g->head.w.numel(); ++i) w[i] *= 1.05f;
  }
};

TEST(TrainerApi, GradientCheckPassesAndCatchesAWrongGradient) {
  Learner r;
  Batch batch;
  Rng rng(3);
  r.train_task.make(batch, rng);
  const llmcc::GradCheckReport good = llmcc::check_gradients<Entry>(r.model, batch, {.out = nullptr});
  EXPECT_TRUE(good.ok());
  EXPECT_EQ(good.tensors.size(), 4u);
  const llmcc::GradCheckReport bad = llmcc::check_gradients<OffByFivePercent>(r.model, batch, {.out = nullptr});
  EXPECT_FALSE(bad.ok());
  ASSERT_EQ(bad.failed(), 1);
  for (const auto& t : bad.tensors) EXPECT_EQ(t.ok, t.name != "head.weight") << t.name << " " << t.first_bad;
}

TEST(TrainerApi, LossFallsAndHooksAreCalled) {
  const llmcc::test::TempDir dir;
  Learner r;
  int metric_calls = 0;
  llmcc::TrainerHooks hooks;
  hooks.metrics = [&](std::int64_t) {
    ++metric_calls;
    return std::vector<std::pair<std::string, double>>{{"calls", metric_calls}};
  };
  hooks.save_state = [](llmcc::TrainState& s) { s.rngs["mine"] = 42; };
  llmcc::Trainer<Entry> trainer(r.model, r.params, r.train, &r.val, options(dir.file("run")), hooks);
  const double before = trainer.evaluate(4);
  const llmcc::TrainResult result = trainer.run();
  EXPECT_EQ(result.step, 40);
  EXPECT_LT(result.val_loss, 0.6 * before) << "validation loss " << before << " -> " << result.val_loss;
  EXPECT_EQ(metric_calls, 5);  // steps 0, 10, 20, 30, 40
  const auto val = llmcc::test::logged(dir.file("run") + "/log.jsonl", "val_loss");
  EXPECT_EQ(val.size(), 5u);
  EXPECT_EQ(llmcc::test::logged(dir.file("run") + "/log.jsonl", "calls").size(), 5u);
  llmcc::CheckpointReader ckpt(dir.file("run") + "/ckpt_000040.bin");
  EXPECT_TRUE(ckpt.has("params"));
  // The planned arena: within 1.2x of what a step used.
  EXPECT_GT(trainer.arena().high_water(), 0u);
  EXPECT_LE(static_cast<double>(trainer.arena().capacity()),
            1.2 * static_cast<double>(trainer.arena().high_water()) + (2 << 20));
}

TEST(TrainerApi, StopAndResumeEqualsOneRun) {
  const llmcc::test::TempDir dir;
  Learner a;
  llmcc::Trainer<Entry>(a.model, a.params, a.train, &a.val, options(dir.file("a"))).run();

  {
    Learner b;
    auto o = options(dir.file("b"));
    o.stop_after = 17;  // stops at 17 with a checkpoint, mid-way between scheduled ones
    const auto r = llmcc::Trainer<Entry>(b.model, b.params, b.train, &b.val, o).run();
    EXPECT_EQ(r.step, 17);
    EXPECT_EQ(r.checkpoint, dir.file("b") + "/ckpt_000017.bin");
  }
  Learner c;  // a new process would start from scratch like this
  llmcc::Trainer<Entry> resumed(c.model, c.params, c.train, &c.val, options(dir.file("b")));
  resumed.resume(dir.file("b") + "/ckpt_000017.bin");
  EXPECT_EQ(resumed.run().step, 40);
  EXPECT_TRUE(same_bytes(a.params, c.params));
  EXPECT_EQ(llmcc::test::logged(dir.file("a") + "/log.jsonl", "loss"),
            llmcc::test::logged(dir.file("b") + "/log.jsonl", "loss"));
}

TEST(TrainerApi, SigintCheckpointsAndStops) {
  const llmcc::test::TempDir dir;
  Learner r;
  auto o = options(dir.file("run"));
  o.sample_every = 1;
  llmcc::TrainerHooks hooks;
  hooks.sample = [](std::int64_t step) {
    if (step == 5) std::raise(SIGINT);  // as a user's Ctrl-C during step 5
  };
  const auto result = llmcc::Trainer<Entry>(r.model, r.params, r.train, &r.val, o, hooks).run();
  // The signal comes after step 5 looked for one: step 6 is finished, checkpointed, and the run ends.
  EXPECT_TRUE(result.interrupted);
  EXPECT_EQ(result.step, 6);
  EXPECT_EQ(result.checkpoint, dir.file("run") + "/ckpt_000006.bin");
  EXPECT_EQ(std::signal(SIGINT, SIG_DFL), SIG_DFL) << "the trainer's handler outlived the run";
}

TEST(TrainerApi, PlanningChangesNothing) {
  Learner a, b;
  auto oa = options(""), ob = options("");
  oa.ckpt_every = ob.ckpt_every = 0;
  ob.arena_bytes = 4 << 20;  // given: still checked against a planning step, which must not show
  const auto ra = llmcc::Trainer<Entry>(a.model, a.params, a.train, &a.val, oa).run();
  const auto rb = llmcc::Trainer<Entry>(b.model, b.params, b.train, &b.val, ob).run();
  EXPECT_EQ(ra.last_loss, rb.last_loss);
  EXPECT_TRUE(same_bytes(a.params, b.params));
  EXPECT_EQ(a.train.state(), b.train.state());
}

// step_once is run()'s step without what surrounds it: the same weights, bit for bit, with or
// without timing; a step the guard trips updates nothing and says why.
TEST(TrainerApi, StepOnceTakesRunsStep) {
  Learner a, b, c;
  auto o = options("");
  o.ckpt_every = 0;
  o.steps = 12;
  const auto ra = llmcc::Trainer<Entry>(a.model, a.params, a.train, &a.val, o).run();
  llmcc::Trainer<Entry> tb(b.model, b.params, b.train, &b.val, o);
  float last = 0.0f;
  llmcc::TrainLoop::StepTimes times;
  for (int i = 0; i < 12; ++i) last = i % 2 == 0 ? tb.step_once() : tb.step_once(&times);
  EXPECT_EQ(tb.step(), 12);
  EXPECT_EQ(last, ra.last_loss);
  EXPECT_TRUE(same_bytes(a.params, b.params));
  EXPECT_GT(times.forward, 0.0);
  EXPECT_GT(times.backward, 0.0);
  EXPECT_GT(times.update, 0.0);

  llmcc::Trainer<Entry> tc(c.model, c.params, c.train, &c.val, o);
  tc.step_once();
  const std::vector<float> before(c.params.data(), c.params.data() + c.params.size());
  c.train_task.marked = [&] {  // the first value of the next training batch poisons it
    const llmcc::DataLoaderState at = c.train.state();
    const float first = std::get<0>(c.train.next()).f32()[0];
    c.train.set_state(at);
    return first;
  }();
  try {
    tc.step_once();
    ADD_FAILURE() << "a step on NaN inputs did not throw";
  } catch (const llmcc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 2: the loss is not finite; nothing updated"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(std::equal(before.begin(), before.end(), c.params.data()));
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A batch of NaN inputs at step 26 trips the guard. With rollbacks the run goes back to its
// checkpoint at step 20, drops step 26's batches when the replay reaches them, and ends with the
// weights, bit for bit, of a run that never drew them; the rollback is logged.
TEST(TrainerApi, ARollbackDropsTheTrippingBatchesAndEqualsARunWithoutThem) {
  const llmcc::test::TempDir dir;
  float marked = 0.0f;
  {
    Learner probe;  // step s draws batches 2s and 2s + 1 (the planning draw is put back)
    for (int i = 0; i <= 2 * 25; ++i) marked = std::get<0>(probe.train.next()).f32()[0];
  }
  Learner reference;
  reference.train_task.marked = marked;
  reference.train_task.drop_marked_step = true;
  llmcc::Trainer<Entry>(reference.model, reference.params, reference.train, &reference.val,
                        options(dir.file("reference")))
      .run();

  Learner stopped;
  stopped.train_task.marked = marked;
  try {
    llmcc::Trainer<Entry>(stopped.model, stopped.params, stopped.train, &stopped.val, options(dir.file("stopped")))
        .run();
    ADD_FAILURE() << "a NaN batch did not stop the run";
  } catch (const llmcc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 26: the loss is not finite"), std::string::npos) << e.what();
  }

  Learner rolled;
  rolled.train_task.marked = marked;
  auto o = options(dir.file("rolled"));
  o.rollbacks = 1;
  const auto r = llmcc::Trainer<Entry>(rolled.model, rolled.params, rolled.train, &rolled.val, o).run();
  EXPECT_EQ(r.step, 40);
  EXPECT_TRUE(same_bytes(reference.params, rolled.params));
  const std::string log = file_text(dir.file("rolled") + "/log.jsonl");
  EXPECT_NE(log.find("{\"step\": 20, \"event\": \"rollback\", \"tripped_at\": 26, \"reason\": \"the loss is not "
                     "finite\", \"to\": \"" +
                     dir.file("rolled") + "/ckpt_000020.bin\"}"),
            std::string::npos)
      << log;
  // Each step once, as after a resume: the lines of the abandoned steps 21..26 were dropped.
  EXPECT_EQ(llmcc::test::logged(dir.file("rolled") + "/log.jsonl", "loss").size(), 40u);
}

// The same with a batch of another distribution (its loss spikes, finite): --rollbacks 1 goes
// back to the confirmed checkpoint at step 20 and ends bit for bit where a run that never drew
// the batch ends.
TEST(TrainerApi, ALossSpikeIsRolledBackPastAndEqualsARunWithoutTheBatch) {
  const llmcc::test::TempDir dir;
  float marked = 0.0f;
  {
    Learner probe;
    for (int i = 0; i <= 2 * 25; ++i) marked = std::get<0>(probe.train.next()).f32()[0];
  }
  Learner reference;
  reference.train_task.marked = marked;
  reference.train_task.drop_marked_step = true;
  llmcc::Trainer<Entry>(reference.model, reference.params, reference.train, &reference.val,
                        options(dir.file("reference")))
      .run();

  Learner rolled;
  rolled.train_task.marked = marked;
  rolled.train_task.spike_marked = true;
  auto o = options(dir.file("rolled"));
  o.rollbacks = 1;
  const auto r = llmcc::Trainer<Entry>(rolled.model, rolled.params, rolled.train, &rolled.val, o).run();
  EXPECT_EQ(r.step, 40);
  EXPECT_TRUE(same_bytes(reference.params, rolled.params));
  const std::string log = file_text(dir.file("rolled") + "/log.jsonl");
  EXPECT_NE(log.find("{\"step\": 20, \"event\": \"rollback\", \"tripped_at\": 26, \"reason\": \"the loss "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("times the mean of the last"), std::string::npos) << log;
  EXPECT_EQ(llmcc::checkpoint_status(dir.file("rolled") + "/ckpt_000040.bin"), llmcc::CheckpointStatus::confirmed);
}

// Divergence that every replay meets again: the rollbacks run out and the run stops; the only
// checkpoint is the starting point a fresh run saves for them, and it is untouched.
TEST(TrainerApi, RollbacksRunOutAndTheRunStops) {
  const llmcc::test::TempDir dir;
  Learner r;
  auto o = options(dir.file("run"));
  o.schedule = {.max_lr = 3e38f, .min_lr = 3e37f, .warmup_steps = 0};
  o.grad_clip = 0;
  o.rollbacks = 2;
  try {
    llmcc::Trainer<Entry>(r.model, r.params, r.train, &r.val, o).run();
    ADD_FAILURE() << "lr 3e38 did not stop the run";
  } catch (const llmcc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("after 2 rollbacks"), std::string::npos) << e.what();
  }
  const auto kept = llmcc::list_checkpoints(dir.file("run"));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].first, 0);
  Learner fresh, loaded;
  llmcc::load_checkpoint(kept[0].second, loaded.params, nullptr);
  EXPECT_TRUE(same_bytes(fresh.params, loaded.params));
}

TEST(TrainerApi, BadOptionsAreClearErrors) {
  Learner r;
  auto expect_error = [&](llmcc::TrainerOptions o, const std::string& text) {
    try {
      llmcc::Trainer<Entry> t(r.model, r.params, r.train, &r.val, o);
      t.run();
      ADD_FAILURE() << "no error; expected one containing: " << text;
    } catch (const llmcc::Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  auto o = options("");
  o.ckpt_every = 0;
  o.steps = 0;
  expect_error(o, "steps must be at least 1");
  o = options("");
  o.ckpt_every = 0;
  o.val_batches = 0;
  expect_error(o, "its source has no end");
  o = options("");
  expect_error(o, "ckpt_every needs out_dir");
  o = options("");
  o.ckpt_every = 0;
  o.arena_bytes = 1024;
  expect_error(o, "arena_bytes");
  o = options("");
  o.ckpt_every = 0;
  o.schedule.warmup_steps = 100;
  expect_error(o, "warmup");
  o = options("");
  o.ckpt_every = 0;
  o.rollbacks = 1;
  expect_error(o, "rollbacks needs out_dir");
  o.rollbacks = -1;
  expect_error(o, "rollbacks must be >= 0");
}

}  // namespace
