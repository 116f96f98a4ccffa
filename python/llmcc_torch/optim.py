"""torch.optim.AdamW's update on llmcc's fused kernel: one pass over each parameter, its gradient
and both moments, parallel over torch's threads. Same hyperparameters, parameter groups and state
names (`step`, `exp_avg`, `exp_avg_sq`) as torch.optim.AdamW, so state_dicts load either way.
Dense CPU float32 parameters and gradients only; no amsgrad, maximize or capturable."""
import torch

from . import _C


class AdamW(torch.optim.Optimizer):

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"[AdamW] invalid hyperparameters: lr={lr}, betas={betas}, eps={eps}, "
                             f"weight_decay={weight_decay} (expected lr, eps, weight_decay >= 0 and betas in [0, 1))")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise ValueError("[AdamW] sparse gradients are not supported")
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
                state["step"] += 1
                params.append(p)
                grads.append(p.grad if p.grad.is_contiguous() else p.grad.contiguous())
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(int(state["step"].item()))
            if params:
                beta1, beta2 = group["betas"]
                _C.adamw_step(params, grads, exp_avgs, exp_avg_sqs, steps, float(group["lr"]), beta1, beta2,
                              group["eps"], group["weight_decay"])
        return loss
