// AdamW for torch parameters on llmcc's fused update: one pass per tensor over the parameter,
// its gradient and both moments (include/llmcc/train/adamw.h), instead of the several passes of
// torch.optim.AdamW's tensor arithmetic.
// pybind11 and the at::Tensor caster (not torch/extension.h: see module.cpp).
#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <vector>

#include "llmcc/train/adamw.h"
#include "python_errors.h"
#include "torch_bridge.h"

namespace py = pybind11;

namespace llmcc_torch {
namespace {

void check_state(const char* name, const at::Tensor& t, const at::Tensor& p, std::size_t i) {
  TORCH_CHECK_VALUE(
      t.defined() && t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && !t.is_sparse(),
      "[AdamW] ", name, " of parameter ", i, " must be a dense contiguous CPU float32 tensor");
  TORCH_CHECK_VALUE(t.numel() == p.numel(), "[AdamW] ", name, " of parameter ", i, " has ", t.numel(),
                    " elements, expected ", p.numel(), " (the parameter's)");
}

// One step of every parameter of a group; steps[i] is parameter i's step count t (>= 1).
void adamw_step(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                const std::vector<std::int64_t>& steps, double lr, double beta1, double beta2, double eps,
                double weight_decay) {
  const std::size_t n = params.size();
  TORCH_CHECK_VALUE(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n,
                    "[AdamW] params, grads, exp_avgs, exp_avg_sqs and steps must have one entry per parameter");
  for (std::size_t i = 0; i < n; ++i) {
    check_state("the parameter", params[i], params[i], i);
    check_state("the gradient", grads[i], params[i], i);
    check_state("exp_avg", exp_avgs[i], params[i], i);
    check_state("exp_avg_sq", exp_avg_sqs[i], params[i], i);
  }
  const llmcc::AdamWConfig config{.beta1 = static_cast<float>(beta1),
                                  .beta2 = static_cast<float>(beta2),
                                  .eps = static_cast<float>(eps),
                                  .weight_decay = static_cast<float>(weight_decay)};
  for (std::size_t i = 0; i < n; ++i) {
    llmcc::adamw_step_tensor(params[i].data_ptr<float>(), grads[i].data_ptr<float>(), exp_avgs[i].data_ptr<float>(),
                             exp_avg_sqs[i].data_ptr<float>(), params[i].numel(), weight_decay != 0.0, config,
                             static_cast<float>(lr), steps[i]);
  }
}

}  // namespace

void register_optim(py::module_& m) {
  m.def(
      "adamw_step",
      [](const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
         const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
         const std::vector<std::int64_t>& steps, double lr, double beta1, double beta2, double eps,
         double weight_decay) {
        python_errors(
            [&] { adamw_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, eps, weight_decay); });
      },
      py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"), py::arg("steps"), py::arg("lr"),
      py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"),
      "One AdamW step of a parameter group, in place (torch.optim.AdamW's update).");
}

}  // namespace llmcc_torch
