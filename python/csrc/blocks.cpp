// Whole transformer blocks for PyTorch: the forward runs llmcc's block forward and keeps the
// record adgen's generated backward reads; the backward runs that generated backward in one
// call and returns the gradients of the input and of every parameter. The parameters are torch
// tensors (nn.Parameters in llmcc_torch/modules.py), read in place, in llmcc's parameter order.
// pybind11 and the at::Tensor caster (not torch/extension.h: see module.cpp).
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "gpt2.grad.h"
#include "llama.grad.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "python_errors.h"
#include "torch_bridge.h"

namespace py = pybind11;

namespace llmcc_torch {
namespace {

// Arenas for block records, kept when a record is released so the next forward reuses memory
// already touched (a training step needs one arena per block at its peak).
class ArenaPool {
 public:
  std::unique_ptr<llmcc::Arena> acquire(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < free_.size(); ++i) {
      if (free_[i]->capacity() >= bytes) {
        std::unique_ptr<llmcc::Arena> a = std::move(free_[i]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        return a;
      }
    }
    return std::make_unique<llmcc::Arena>(bytes);
  }
  void release(std::unique_ptr<llmcc::Arena> arena) {
    arena->reset();
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(arena));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<llmcc::Arena>> free_;
};

ArenaPool& arena_pool() {
  static ArenaPool* pool = new ArenaPool;  // never destroyed: records may outlive static teardown
  return *pool;
}

// What one block forward leaves for its backward: the generated record and the arena holding
// it. Released (its arena back to the pool) when Python drops it.
class BlockRecord {
 public:
  virtual ~BlockRecord() = default;
  bool consumed = false;  // a backward ran: the record's adjoint memory is spent
};

template <class Saved>
class Record final : public BlockRecord {
 public:
  explicit Record(std::size_t bytes) : arena(arena_pool().acquire(bytes)) {}
  ~Record() override { arena_pool().release(std::move(arena)); }
  std::unique_ptr<llmcc::Arena> arena;
  Saved saved;
};

std::vector<std::int64_t> sizes_of(const llmcc::Tensor& t) {
  std::vector<std::int64_t> s(t.ndim());
  for (int i = 0; i < t.ndim(); ++i) s[i] = t.dim(i);
  return s;
}

// (name, shape) of every parameter of a block whose tensors are declared, in llmcc's order.
template <class Grad, class Block>
std::vector<std::tuple<std::string, std::vector<std::int64_t>>> parameter_list(const Block& block) {
  std::vector<std::tuple<std::string, std::vector<std::int64_t>>> list;
  Grad::for_each_parameter(
      block, "", [&](const std::string& name, const llmcc::Tensor& t) { list.emplace_back(name, sizes_of(t)); });
  return list;
}

// Points the block's parameters at the torch tensors, checking each against its declared shape.
template <class Grad, class Block>
void bind(const char* op, Block& block, const std::vector<at::Tensor>& params) {
  std::size_t i = 0;
  std::size_t count = 0;
  Grad::for_each_parameter(block, "", [&](const std::string&, const llmcc::Tensor&) { ++count; });
  TORCH_CHECK_VALUE(params.size() == count, "[", op, "] got ", params.size(), " parameters, expected ", count);
  Grad::for_each_parameter(block, "", [&](const std::string& name, llmcc::Tensor& t) {
    const at::Tensor& p = params[i++];
    TORCH_CHECK_VALUE(p.defined() && p.device().is_cpu() && p.scalar_type() == at::kFloat && p.is_contiguous(), "[", op,
                      "] parameter ", name, " must be a contiguous CPU float32 tensor");
    TORCH_CHECK_VALUE(p.sizes().vec() == sizes_of(t), "[", op, "] parameter ", name, " has shape ", p.sizes(),
                      ", expected ", at::IntArrayRef(sizes_of(t)));
    t = llmcc::Tensor(p.data_ptr<float>(), t.shape());
  });
}

// Gradients of the block's parameters: torch tensors (returned, in llmcc's order) that the
// gradient mirror's handles point at, with their zeros pending.
template <class Grad, class Block>
std::vector<at::Tensor> parameter_adjoints(const Block& block, Grad& grad) {
  std::vector<at::Tensor> adjoints;
  grad.shape_like(block);
  grad.for_each_pair(block, "", [&](const std::string&, const llmcc::Tensor& p, llmcc::Tensor& g) {
    adjoints.push_back(at::empty(sizes_of(p), at::kFloat));
    g = llmcc::Tensor(adjoints.back().data_ptr<float>(), p.shape());
    g.mark_zero_pending();
  });
  return adjoints;
}

// The arena a block's forward and backward need at most (activations kept, plus the backward's
// top-level adjoints): generous, since pages are only touched when used.
std::size_t record_bytes(const at::Tensor& x, std::int64_t widest) {
  const std::size_t rows = static_cast<std::size_t>(x.size(0) * x.size(1));
  return rows * static_cast<std::size_t>(48 * x.size(2) + 16 * widest) * sizeof(float) + (std::size_t{4} << 20);
}

// ---- the forward and backward of a block, for any generated block type ---------------------

template <class Block, class Grad, class Saved, auto Fwd, auto Bwd>
struct BlockOps {
  static std::tuple<at::Tensor, std::shared_ptr<BlockRecord>> forward(const char* op, Block& block,
                                                                      const at::Tensor& x_in,
                                                                      const std::vector<at::Tensor>& params,
                                                                      std::int64_t widest) {
    const at::Tensor x = checked_float(op, "x", x_in, 3, 3);
    bind<Grad>(op, block, params);
    auto record = std::make_shared<Record<Saved>>(record_bytes(x, widest));
    llmcc::ArenaScope scope(*record->arena);
    const llmcc::Tensor y = Fwd(block, view(x), record->saved);
    at::Tensor out = at::empty(x.sizes(), at::kFloat);
    std::memcpy(out.data_ptr<float>(), y.f32(), y.nbytes());
    return {out, record};
  }

  static std::tuple<at::Tensor, std::vector<at::Tensor>> backward(const char* op, Block& block, BlockRecord& base,
                                                                  const at::Tensor& x_in,
                                                                  const std::vector<at::Tensor>& params,
                                                                  const at::Tensor& d_y_in) {
    auto* record = dynamic_cast<Record<Saved>*>(&base);
    TORCH_CHECK_VALUE(record != nullptr, "[", op, "] the record is from another kind of block");
    TORCH_CHECK_VALUE(!record->consumed, "[", op,
                      "] this forward's record was used by an earlier backward; a block's backward runs "
                      "once per forward (run the forward again to differentiate again)");
    const at::Tensor x = checked_float(op, "x", x_in, 3, 3);
    const at::Tensor d_y = checked_float(op, "d_y", d_y_in, 3, 3);
    TORCH_CHECK_VALUE(d_y.sizes() == x.sizes(), "[", op, "] d_y has shape ", d_y.sizes(), ", expected ", x.sizes(),
                      " (the output's)");
    bind<Grad>(op, block, params);
    Grad grad;
    std::vector<at::Tensor> d_params = parameter_adjoints(block, grad);
    Adjoint d_x = pending_adjoint(x.sizes());
    record->consumed = true;
    {
      llmcc::ArenaScope scope(*record->arena);
      Bwd(block, view(x), record->saved, view(d_y), &grad, &d_x.handle, false);
    }
    settle(d_x);
    grad.for_each_pair(block, "", [](const std::string&, const llmcc::Tensor&, llmcc::Tensor& g) {
      if (g.zero_pending()) (void)g.raw();  // no contribution: write the pending zeros
    });
    return {d_x.torch, d_params};
  }
};

// ---- GPT-2 ---------------------------------------------------------------------------------

llmcc::models::Gpt2Block gpt2_block(std::int64_t C, std::int64_t n_head) {
  TORCH_CHECK_VALUE(C > 0 && n_head > 0 && C % n_head == 0, "[Gpt2Block] n_embd (", C,
                    ") must be a positive multiple of n_head (", n_head, ")");
  using llmcc::Shape;
  using llmcc::Tensor;
  llmcc::models::Gpt2Block b;
  b.ln_1 = {Tensor(nullptr, Shape{C}), Tensor(nullptr, Shape{C})};
  b.attn.n_head = static_cast<int>(n_head);
  b.attn.c_attn = {Tensor(nullptr, Shape{3 * C, C}), Tensor(nullptr, Shape{3 * C})};
  b.attn.c_proj = {Tensor(nullptr, Shape{C, C}), Tensor(nullptr, Shape{C})};
  b.ln_2 = {Tensor(nullptr, Shape{C}), Tensor(nullptr, Shape{C})};
  b.mlp.c_fc = {Tensor(nullptr, Shape{4 * C, C}), Tensor(nullptr, Shape{4 * C})};
  b.mlp.c_proj = {Tensor(nullptr, Shape{C, 4 * C}), Tensor(nullptr, Shape{C})};
  return b;
}

// A block's generated forward and backward take its LoRA adapters; the extension's blocks have
// none (every weight is the caller's parameter), so they pass an empty set.
const llmcc::models::Gpt2BlockLora kNoGpt2Adapters;
llmcc::Tensor gpt2_block_fwd(const llmcc::models::Gpt2Block& block, const llmcc::Tensor& x,
                             llmcc::models::Gpt2Block_forward_Saved& saved) {
  return llmcc::models::Gpt2Block_forward_fwd(block, x, kNoGpt2Adapters, saved);
}
void gpt2_block_bwd(const llmcc::models::Gpt2Block& block, const llmcc::Tensor& x,
                    const llmcc::models::Gpt2Block_forward_Saved& saved, const llmcc::Tensor& d_y,
                    llmcc::models::Gpt2Block_Grad* grad, llmcc::Tensor* d_x, bool final) {
  llmcc::models::Gpt2Block_forward_bwd(block, x, kNoGpt2Adapters, saved, d_y, grad, d_x, nullptr, final);
}
using Gpt2Ops = BlockOps<llmcc::models::Gpt2Block, llmcc::models::Gpt2Block_Grad,
                         llmcc::models::Gpt2Block_forward_Saved, &gpt2_block_fwd, &gpt2_block_bwd>;

// ---- Llama ---------------------------------------------------------------------------------

struct LlamaShape {
  std::int64_t dim, n_head, n_kv_head, hidden;
  double eps, theta;
};

llmcc::models::LlamaBlock llama_block(const LlamaShape& s) {
  TORCH_CHECK_VALUE(s.dim > 0 && s.n_head > 0 && s.dim % s.n_head == 0 && (s.dim / s.n_head) % 2 == 0,
                    "[LlamaBlock] dim (", s.dim, ") must be a multiple of n_head (", s.n_head,
                    ") with an even head size");
  TORCH_CHECK_VALUE(s.n_kv_head > 0 && s.n_head % s.n_kv_head == 0, "[LlamaBlock] n_kv_head (", s.n_kv_head,
                    ") must divide n_head (", s.n_head, ")");
  TORCH_CHECK_VALUE(s.hidden > 0 && s.eps > 0 && s.theta > 0,
                    "[LlamaBlock] hidden_dim, eps and rope_theta must be positive");
  using llmcc::Shape;
  using llmcc::Tensor;
  const std::int64_t C = s.dim, HS = s.dim / s.n_head, F = s.hidden;
  llmcc::models::LlamaBlock b;
  b.attention_norm.eps = b.ffn_norm.eps = static_cast<float>(s.eps);
  b.attention_norm.w = Tensor(nullptr, Shape{C});
  b.ffn_norm.w = Tensor(nullptr, Shape{C});
  b.attention.n_head = static_cast<int>(s.n_head);
  b.attention.n_kv_head = static_cast<int>(s.n_kv_head);
  b.attention.rope_freqs.theta = static_cast<float>(s.theta);
  b.attention.wq = Tensor(nullptr, Shape{s.n_head * HS, C});
  b.attention.wk = Tensor(nullptr, Shape{s.n_kv_head * HS, C});
  b.attention.wv = Tensor(nullptr, Shape{s.n_kv_head * HS, C});
  b.attention.wo = Tensor(nullptr, Shape{C, s.n_head * HS});
  b.feed_forward.w1 = Tensor(nullptr, Shape{F, C});
  b.feed_forward.w2 = Tensor(nullptr, Shape{C, F});
  b.feed_forward.w3 = Tensor(nullptr, Shape{F, C});
  return b;
}

// As GPT-2's.
const llmcc::models::LlamaBlockLora kNoAdapters;
llmcc::Tensor llama_block_fwd(const llmcc::models::LlamaBlock& block, const llmcc::Tensor& x,
                              llmcc::models::LlamaBlock_forward_Saved& saved) {
  return llmcc::models::LlamaBlock_forward_fwd(block, x, kNoAdapters, saved);
}
void llama_block_bwd(const llmcc::models::LlamaBlock& block, const llmcc::Tensor& x,
                     const llmcc::models::LlamaBlock_forward_Saved& saved, const llmcc::Tensor& d_y,
                     llmcc::models::LlamaBlock_Grad* grad, llmcc::Tensor* d_x, bool final) {
  llmcc::models::LlamaBlock_forward_bwd(block, x, kNoAdapters, saved, d_y, grad, d_x, nullptr, final);
}
using LlamaOps = BlockOps<llmcc::models::LlamaBlock, llmcc::models::LlamaBlock_Grad,
                          llmcc::models::LlamaBlock_forward_Saved, &llama_block_fwd, &llama_block_bwd>;

}  // namespace

void register_blocks(py::module_& m) {
  py::class_<BlockRecord, std::shared_ptr<BlockRecord>>(
      m, "BlockRecord", "What a block's forward keeps for its backward (llmcc memory, freed with this object).");

  m.def(
      "gpt2_block_parameters",
      [](std::int64_t C, std::int64_t n_head) {
        return python_errors([&] { return parameter_list<llmcc::models::Gpt2Block_Grad>(gpt2_block(C, n_head)); });
      },
      py::arg("n_embd"), py::arg("n_head"), "(name, shape) of a GPT-2 block's parameters, in llmcc's order.");
  m.def(
      "gpt2_block_forward",
      [](const at::Tensor& x, const std::vector<at::Tensor>& params, std::int64_t n_head) {
        return python_errors([&] {
          const char* op = "Gpt2Block";
          TORCH_CHECK_VALUE(x.dim() == 3, "[", op, "] x has ", x.dim(), " dimensions ", x.sizes(),
                            ", expected 3 (B, T, n_embd)");
          llmcc::models::Gpt2Block block = gpt2_block(x.size(2), n_head);
          return Gpt2Ops::forward(op, block, x, params, 4 * x.size(2));
        });
      },
      py::arg("x"), py::arg("params"), py::arg("n_head"));
  m.def(
      "gpt2_block_backward",
      [](BlockRecord& record, const at::Tensor& x, const std::vector<at::Tensor>& params, std::int64_t n_head,
         const at::Tensor& d_y) {
        return python_errors([&] {
          llmcc::models::Gpt2Block block = gpt2_block(x.size(-1), n_head);
          return Gpt2Ops::backward("Gpt2Block backward", block, record, x, params, d_y);
        });
      },
      py::arg("record"), py::arg("x"), py::arg("params"), py::arg("n_head"), py::arg("d_y"));

  m.def(
      "llama_block_parameters",
      [](std::int64_t dim, std::int64_t n_head, std::int64_t n_kv_head, std::int64_t hidden) {
        return python_errors([&] {
          return parameter_list<llmcc::models::LlamaBlock_Grad>(llama_block({dim, n_head, n_kv_head, hidden, 1, 1}));
        });
      },
      py::arg("dim"), py::arg("n_head"), py::arg("n_kv_head"), py::arg("hidden_dim"),
      "(name, shape) of a Llama block's parameters, in llmcc's order.");
  m.def(
      "llama_block_forward",
      [](const at::Tensor& x, const std::vector<at::Tensor>& params, std::int64_t n_head, std::int64_t n_kv_head,
         std::int64_t hidden, double eps, double theta) {
        return python_errors([&] {
          const char* op = "LlamaBlock";
          TORCH_CHECK_VALUE(x.dim() == 3, "[", op, "] x has ", x.dim(), " dimensions ", x.sizes(),
                            ", expected 3 (B, T, dim)");
          llmcc::models::LlamaBlock block = llama_block({x.size(2), n_head, n_kv_head, hidden, eps, theta});
          return LlamaOps::forward(op, block, x, params, hidden);
        });
      },
      py::arg("x"), py::arg("params"), py::arg("n_head"), py::arg("n_kv_head"), py::arg("hidden_dim"), py::arg("eps"),
      py::arg("rope_theta"));
  m.def(
      "llama_block_backward",
      [](BlockRecord& record, const at::Tensor& x, const std::vector<at::Tensor>& params, std::int64_t n_head,
         std::int64_t n_kv_head, std::int64_t hidden, double eps, double theta, const at::Tensor& d_y) {
        return python_errors([&] {
          llmcc::models::LlamaBlock block = llama_block({x.size(-1), n_head, n_kv_head, hidden, eps, theta});
          return LlamaOps::backward("LlamaBlock backward", block, record, x, params, d_y);
        });
      },
      py::arg("record"), py::arg("x"), py::arg("params"), py::arg("n_head"), py::arg("n_kv_head"),
      py::arg("hidden_dim"), py::arg("eps"), py::arg("rope_theta"), py::arg("d_y"));
}

}  // namespace llmcc_torch
