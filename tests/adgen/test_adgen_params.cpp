// The generated parameter list (llmcc::for_each_parameter without a member list): GPT-2's and
// Llama's names and order equal the hand-written lists they replaced (recorded below, with
// shapes); LLMCC_ADGEN_NAME on tensors, nested modules and module vectors; the parameter store,
// the gradient store and for_each_pair agree on names; a member list still wins; and the
// generated Entry trait runs the same forward and backward as `<entry>_grad`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "adgen_test_util.h"
#include "gpt2.grad.h"
#include "llama.grad.h"
#include "llmcc/runtime.h"
#include "models/gpt2/gpt2.h"
#include "models/llama/llama.h"
#include "params.grad.h"

namespace {

using llmcc::Tensor;

template <class Model>
std::vector<std::string> names_and_shapes(Model& m) {
  std::vector<std::string> out;
  llmcc::for_each_parameter(m, [&](const std::string& name, const Tensor& t) {
    out.push_back(name + " " + t.shape().str());
  });
  return out;
}

template <class Model>
std::vector<std::string> names(Model& m) {
  std::vector<std::string> out;
  llmcc::for_each_parameter(m, [&](const std::string& name, const Tensor&) { out.push_back(name); });
  return out;
}

void expect_lists_equal(const std::vector<std::string>& got, const std::vector<std::string>& want) {
  EXPECT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << "first difference at " << i << ": got '" << got[i] << "', expected '" << want[i] << "'";
      return;
    }
}

// Gpt2::for_each_parameter as it was written by hand, for gpt2-tiny.
TEST(AdgenParams, Gpt2TinyListIsTheHandWrittenOne) {
  const std::vector<std::string> want = {
      "wte (50304, 128)",
      "wpe (256, 128)",
      "h.0.ln_1.weight (128)",
      "h.0.ln_1.bias (128)",
      "h.0.attn.c_attn.weight (384, 128)",
      "h.0.attn.c_attn.bias (384)",
      "h.0.attn.c_proj.weight (128, 128)",
      "h.0.attn.c_proj.bias (128)",
      "h.0.ln_2.weight (128)",
      "h.0.ln_2.bias (128)",
      "h.0.mlp.c_fc.weight (512, 128)",
      "h.0.mlp.c_fc.bias (512)",
      "h.0.mlp.c_proj.weight (128, 512)",
      "h.0.mlp.c_proj.bias (128)",
      "h.1.ln_1.weight (128)",
      "h.1.ln_1.bias (128)",
      "h.1.attn.c_attn.weight (384, 128)",
      "h.1.attn.c_attn.bias (384)",
      "h.1.attn.c_proj.weight (128, 128)",
      "h.1.attn.c_proj.bias (128)",
      "h.1.ln_2.weight (128)",
      "h.1.ln_2.bias (128)",
      "h.1.mlp.c_fc.weight (512, 128)",
      "h.1.mlp.c_fc.bias (512)",
      "h.1.mlp.c_proj.weight (128, 512)",
      "h.1.mlp.c_proj.bias (128)",
      "h.2.ln_1.weight (128)",
      "h.2.ln_1.bias (128)",
      "h.2.attn.c_attn.weight (384, 128)",
      "h.2.attn.c_attn.bias (384)",
      "h.2.attn.c_proj.weight (128, 128)",
      "h.2.attn.c_proj.bias (128)",
      "h.2.ln_2.weight (128)",
      "h.2.ln_2.bias (128)",
      "h.2.mlp.c_fc.weight (512, 128)",
      "h.2.mlp.c_fc.bias (512)",
      "h.2.mlp.c_proj.weight (128, 512)",
      "h.2.mlp.c_proj.bias (128)",
      "h.3.ln_1.weight (128)",
      "h.3.ln_1.bias (128)",
      "h.3.attn.c_attn.weight (384, 128)",
      "h.3.attn.c_attn.bias (384)",
      "h.3.attn.c_proj.weight (128, 128)",
      "h.3.attn.c_proj.bias (128)",
      "h.3.ln_2.weight (128)",
      "h.3.ln_2.bias (128)",
      "h.3.mlp.c_fc.weight (512, 128)",
      "h.3.mlp.c_fc.bias (512)",
      "h.3.mlp.c_proj.weight (128, 512)",
      "h.3.mlp.c_proj.bias (128)",
      "ln_f.weight (128)",
      "ln_f.bias (128)",
  };
  llmcc::models::Gpt2 m(llmcc::models::gpt2_preset("gpt2-tiny"));
  expect_lists_equal(names_and_shapes(m), want);
  const llmcc::models::Gpt2& cm = m;
  expect_lists_equal(names_and_shapes(cm), want);
}

// Llama::for_each_parameter as it was written by hand, for llama-tiny with 2 layers, vocab 64.
TEST(AdgenParams, LlamaListIsTheHandWrittenOne) {
  const std::vector<std::string> want = {
      "tok_embeddings.weight (64, 128)",
      "layers.0.attention_norm.weight (128)",
      "layers.0.attention.wq.weight (128, 128)",
      "layers.0.attention.wk.weight (64, 128)",
      "layers.0.attention.wv.weight (64, 128)",
      "layers.0.attention.wo.weight (128, 128)",
      "layers.0.ffn_norm.weight (128)",
      "layers.0.feed_forward.w1.weight (352, 128)",
      "layers.0.feed_forward.w2.weight (128, 352)",
      "layers.0.feed_forward.w3.weight (352, 128)",
      "layers.1.attention_norm.weight (128)",
      "layers.1.attention.wq.weight (128, 128)",
      "layers.1.attention.wk.weight (64, 128)",
      "layers.1.attention.wv.weight (64, 128)",
      "layers.1.attention.wo.weight (128, 128)",
      "layers.1.ffn_norm.weight (128)",
      "layers.1.feed_forward.w1.weight (352, 128)",
      "layers.1.feed_forward.w2.weight (128, 352)",
      "layers.1.feed_forward.w3.weight (352, 128)",
      "norm.weight (128)",
      "output.weight (64, 128)",
  };
  llmcc::models::LlamaConfig c = llmcc::models::llama_preset("llama-tiny");
  c.n_layer = 2;
  c.vocab_size = 64;
  llmcc::models::Llama m(c);
  expect_lists_equal(names_and_shapes(m), want);
}

// The gradient store's names and layout are the parameter store's (the optimizer checks both).
TEST(AdgenParams, Gpt2GradientStoreHasTheParameterStoresNames) {
  llmcc::models::Gpt2Config c = llmcc::models::gpt2_preset("gpt2-tiny");
  c.n_layer = 2;
  llmcc::models::Gpt2 m(c);
  const llmcc::ParameterStore params = llmcc::bind_parameters(m);
  auto g = llmcc::adgen::make_grad(m);
  ASSERT_EQ(g.store.count(), params.count());
  for (std::size_t i = 0; i < params.count(); ++i) {
    EXPECT_EQ(g.store.name(i), params.name(i));
    EXPECT_EQ(g.store.offset(i), params.offset(i));
  }
  std::vector<std::string> pair_names;
  g.grad.for_each_pair(m, "", [&](const std::string& name, const Tensor&, Tensor&) { pair_names.push_back(name); });
  expect_lists_equal(pair_names, names(m));
}

pm::Proj make_proj(int OC, int C) { return {Tensor(nullptr, {OC, C}), Tensor(nullptr, {OC})}; }
pm::Norm make_norm(int C) { return {1e-5f, Tensor(nullptr, {C})}; }
pm::Net make_net(int V, int C, int L) {
  pm::Net m;
  m.vocab = V;
  m.emb = Tensor(nullptr, {V, C});
  for (int i = 0; i < L; ++i) m.layers.push_back({make_norm(C), make_proj(4 * C, C), make_proj(C, 4 * C)});
  m.final_norm = make_norm(C);
  m.head = make_proj(V, C);
  return m;
}

TEST(AdgenParams, AnnotatedNamesNestedModulesAndVectors) {
  pm::Net m = make_net(5, 4, 2);
  const std::vector<std::string> want = {
      "embed.weight (5, 4)",
      "blocks.0.ln.scale (4)",
      "blocks.0.up.kernel (16, 4)",
      "blocks.0.up.bias (16)",
      "blocks.0.out.proj.kernel (4, 16)",
      "blocks.0.out.proj.bias (4)",
      "blocks.1.ln.scale (4)",
      "blocks.1.up.kernel (16, 4)",
      "blocks.1.up.bias (16)",
      "blocks.1.out.proj.kernel (4, 16)",
      "blocks.1.out.proj.bias (4)",
      "final_norm.scale (4)",
      "head.kernel (5, 4)",
      "head.bias (5)",
  };
  expect_lists_equal(names_and_shapes(m), want);
  // The generated list directly, with a prefix.
  std::vector<std::string> prefixed;
  pm::Net_Grad::for_each_parameter(m, "model.", [&](const std::string& n, Tensor&) { prefixed.push_back(n); });
  ASSERT_EQ(prefixed.size(), want.size());
  EXPECT_EQ(prefixed.front(), "model.embed.weight");
  EXPECT_EQ(prefixed.back(), "model.head.bias");

  // bind_parameters follows the list: tensor i of the store is the i-th visited parameter.
  const llmcc::ParameterStore params = llmcc::bind_parameters(m);
  ASSERT_EQ(params.count(), want.size());
  std::size_t i = 0;
  llmcc::for_each_parameter(m, [&](const std::string& name, Tensor& t) {
    EXPECT_EQ(params.name(i), name);
    EXPECT_EQ(t.raw(), params.tensor(i).raw()) << name;
    ++i;
  });
  // make_grad and for_each_pair use the same names.
  auto g = llmcc::adgen::make_grad(m);
  ASSERT_EQ(g.store.count(), params.count());
  for (std::size_t k = 0; k < params.count(); ++k) EXPECT_EQ(g.store.name(k), params.name(k));
  std::vector<std::string> pair_names;
  g.grad.for_each_pair(m, "", [&](const std::string& name, const Tensor&, Tensor&) { pair_names.push_back(name); });
  expect_lists_equal(pair_names, names(m));
  EXPECT_EQ(g.grad.layers[1].down.w.raw(), g.store.tensor(9).raw());  // blocks.1.out.proj.kernel
}

TEST(AdgenParams, AMemberListWins) {
  pm::Listed m{Tensor(nullptr, {3, 3}), Tensor(nullptr, {3})};
  const std::vector<std::string> want = {"second (3)", "first (3, 3)"};
  expect_lists_equal(names_and_shapes(m), want);
  const pm::Listed& cm = m;
  expect_lists_equal(names_and_shapes(cm), want);
  const llmcc::ParameterStore params = llmcc::bind_parameters(m);
  EXPECT_EQ(params.name(0), "second");
  EXPECT_EQ(m.b.raw(), params.tensor(0).raw());
  auto g = llmcc::adgen::make_grad(m);
  EXPECT_EQ(g.store.name(0), "second");
  EXPECT_EQ(g.grad.b.raw(), g.store.tensor(0).raw());
}

using Entry = pm::net_loss_Entry;
static_assert(std::is_same_v<Entry::Model, pm::Net>);
static_assert(std::is_same_v<Entry::Grad, pm::Net_Grad>);
static_assert(std::is_same_v<Entry::Saved, pm::net_loss_Saved>);
static_assert(std::is_same_v<Entry::Inputs, std::tuple<llmcc::Tokens, llmcc::Tokens, float>>);
static_assert(std::is_same_v<llmcc::models::gpt2_loss_Entry::Inputs, std::tuple<llmcc::Tokens, llmcc::Tokens>>);
static_assert(std::is_same_v<llmcc::models::gpt2_loss_Entry::Grad, llmcc::models::Gpt2_Grad>);
static_assert(std::is_same_v<llmcc::models::llama_loss_Entry::Model, llmcc::models::Llama>);

TEST(AdgenParams, EntryTraitRunsTheEntrysForwardAndBackward) {
  llmcc::set_kernel_mode(llmcc::KernelMode::Reference);
  EXPECT_STREQ(Entry::name, "net_loss");
  EXPECT_STREQ(llmcc::models::gpt2_loss_Entry::name, "gpt2_loss");
  constexpr int B = 2, T = 3, V = 5, C = 4;
  pm::Net m = make_net(V, C, 2);
  std::vector<float> storage;
  adgen_test::bind_random(m, storage, 31, 0.5f);
  std::vector<std::int32_t> ids = {1, 4, 0, 2, 3, 1}, tg = {4, 0, 2, 3, 1, -1};
  const Entry::Inputs in{llmcc::Tokens(ids.data(), B, T), llmcc::Tokens(tg.data(), B, T), 0.75f};
  llmcc::Arena arena(1 << 22);
  llmcc::ArenaScope scope(arena);

  auto ref = llmcc::adgen::make_grad(m);
  const float ref_value = pm::net_loss_grad(m, std::get<0>(in), std::get<1>(in), std::get<2>(in), ref.grad);

  auto g = llmcc::adgen::make_grad(m);
  Entry::Saved s;
  const float value = Entry::fwd(m, in, s);
  Entry::bwd(m, in, s, 1.0f, &g.grad);
  EXPECT_EQ(value, ref_value);
  EXPECT_FLOAT_EQ(Entry::loss(m, in), ref_value);
  ASSERT_EQ(g.store.size(), ref.store.size());
  for (std::size_t i = 0; i < g.store.size(); ++i)
    ASSERT_EQ(g.store.data()[i], ref.store.data()[i]) << "gradient element " << i;
  // d_loss scales the gradient.
  g.zero();
  Entry::Saved s2;
  Entry::fwd(m, in, s2);
  Entry::bwd(m, in, s2, 2.0f, &g.grad);
  for (std::size_t i = 0; i < g.store.size(); ++i)
    EXPECT_NEAR(g.store.data()[i], 2.0f * ref.store.data()[i], 1e-6f + 1e-5f * std::fabs(ref.store.data()[i]));
  llmcc::set_kernel_mode(llmcc::KernelMode::Fast);
}

}  // namespace
