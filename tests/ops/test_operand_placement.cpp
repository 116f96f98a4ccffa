// Where an op's operands lie decides memory, never values: the same inputs give the same bits
// whether a gradient buffer lies right next to an input or far from it, in both kernel modes. A
// compiler that vectorises a loop keeps a scalar copy of it for operands closer together than
// a vector, chosen at run time; if the two copies round differently, a result depends on where
// the arena put the operands (a checkpointed backward, whose arena layout differs, would then
// give other bits than the plain one). The norms' backward loops read a row while they add to
// d_w, which is such a loop.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/rmsnorm.h"
#include "test_support.h"

namespace llmcc {
namespace {

struct ModeGuard {
  KernelMode before = kernel_mode();
  ~ModeGuard() { set_kernel_mode(before); }
};

// The first float whose bits differ, as "name[i] a vs b", or "".
std::string first_difference(const char* name, const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return std::string(name) + "[" + std::to_string(i) + "] " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
  return "";
}

// One norm's forward and pullback over inputs at given places: x (N, C) is copied to x_at, d_w
// (C) starts at zero at d_w_at; returns out, d_x and d_w.
using NormRun = std::function<std::vector<std::vector<float>>(float* x_at, float* d_w_at)>;

// Runs `run` with d_w far from x (the reference bits), then right after x's last row and right
// before its first, at 0 to 8 cache lines away, and expects the same bits every time.
void expect_placement_free(const char* op, int N, int C, const NormRun& run) {
  const std::size_t NC = static_cast<std::size_t>(N) * C;
  const std::size_t x_floats = (NC + 15) / 16 * 16;  // x as the arena would place it: whole cache lines
  constexpr int kLines = 8;
  std::vector<float> far_x(NC), far_d_w(C);
  const std::vector<std::vector<float>> want = run(far_x.data(), far_d_w.data());
  Arena pool(sizeof(float) * (x_floats + 2 * (kLines * 16 + static_cast<std::size_t>(C) + 16)) + 256);
  auto* base = static_cast<float*>(pool.allocate(pool.capacity() - 64, "placement pool"));
  const char* names[3] = {"out", "d_x", "d_w"};
  for (int lines = 0; lines <= kLines; ++lines) {
    const std::size_t gap = static_cast<std::size_t>(lines) * 16;
    // d_w after x's last row, then before x's first row.
    const std::pair<float*, float*> places[2] = {
        {base, base + x_floats + gap},
        {base + (static_cast<std::size_t>(C) + 15) / 16 * 16 + gap, base},
    };
    for (const auto& [x_at, d_w_at] : places) {
      const std::vector<std::vector<float>> got = run(x_at, d_w_at);
      for (int k = 0; k < 3; ++k) {
        const std::string diff = first_difference(names[k], got[k], want[k]);
        EXPECT_TRUE(diff.empty()) << op << " N=" << N << " C=" << C << " mode "
                                  << (kernel_mode() == KernelMode::Fast ? "fast" : "reference") << ", d_w "
                                  << (d_w_at > x_at ? "after" : "before") << " x, " << lines
                                  << " lines apart: " << diff;
      }
    }
  }
}

TEST(OperandPlacementKernel, NormPullbacksGiveTheSameBitsWhereverDwLies) {
  ModeGuard guard;
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const int N = 21;
  for (const KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    set_kernel_mode(mode);
    for (const int C : {3, 9, 17, 33, 100}) {
      const std::size_t NC = static_cast<std::size_t>(N) * C;
      const std::vector<float> x = test::random_vector<float>(NC, 1), d_out_v = test::random_vector<float>(NC, 4);
      const std::vector<float> w_v = test::random_vector<float>(C, 2), b_v = test::random_vector<float>(C, 3);
      Tensor w = test::tensor_from(arena, {C}, w_v);             // (C)
      Tensor b = test::tensor_from(arena, {C}, b_v);             // (C)
      Tensor d_out = test::tensor_from(arena, {N, C}, d_out_v);  // (N, C)
      // One run's operands: x copied to x_at, a zeroed d_w at d_w_at, d_x (zeros) and everything
      // the op allocates in `run`, rewound for each run.
      Arena run(1 << 20);
      struct Placed {
        Tensor x, d_w, d_x;  // (N, C), (C), (N, C)
      };
      auto place = [&](float* x_at, float* d_w_at) {
        run.reset();
        std::memcpy(x_at, x.data(), sizeof(float) * NC);
        std::memset(d_w_at, 0, sizeof(float) * C);
        return Placed{Tensor(x_at, {N, C}), Tensor(d_w_at, {C}), run.zeros({N, C}, "d_x")};
      };
      auto outputs = [&](const Tensor& out, const Placed& p) {
        return std::vector<std::vector<float>>{test::to_vector(out), test::to_vector(p.d_x), test::to_vector(p.d_w)};
      };
      expect_placement_free("rmsnorm", N, C, [&](float* x_at, float* d_w_at) {
        Placed p = place(x_at, d_w_at);
        ArenaScope in_run(run);
        RmsNormSaved saved;
        Tensor out = rmsnorm_fwd(p.x, w, 1e-5f, saved);  // (N, C)
        rmsnorm_pullback(p.x, w, 1e-5f, out, saved, d_out, &p.d_x, &p.d_w);
        return outputs(out, p);
      });
      expect_placement_free("layernorm", N, C, [&](float* x_at, float* d_w_at) {
        Placed p = place(x_at, d_w_at);
        ArenaScope in_run(run);
        Tensor d_b = run.zeros({C}, "d_b");  // (C)
        LayerNormSaved saved;
        Tensor out = layernorm_fwd(p.x, w, b, saved);  // (N, C)
        layernorm_pullback(p.x, w, b, out, saved, d_out, &p.d_x, &p.d_w, &d_b);
        return outputs(out, p);
      });
    }
  }
}

}  // namespace
}  // namespace llmcc
