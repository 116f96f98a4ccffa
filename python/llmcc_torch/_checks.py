"""The argument checks every Python entry point makes before calling llmcc, with llmcc's message
style: "[op] name ... expected ...". The C++ operators check again for direct torch.ops calls."""
import torch


def check_float(op: str, name: str, t, min_dim: int, max_dim: int) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"[{op}] {name} is a {type(t).__name__}, expected a torch.Tensor")
    if t.device.type != "cpu":
        raise ValueError(f"[{op}] {name} is on {t.device}, expected a CPU tensor (llmcc's kernels run on the CPU)")
    if t.dtype != torch.float32:
        raise TypeError(f"[{op}] {name} has dtype {t.dtype}, expected torch.float32 (llmcc's kernels are float32)")
    if not min_dim <= t.dim() <= max_dim:
        want = str(min_dim) if min_dim == max_dim else f"{min_dim} to {max_dim}"
        raise ValueError(f"[{op}] {name} has {t.dim()} dimensions {tuple(t.shape)}, expected {want}")


def check_targets(op: str, name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"[{op}] {name} is a {type(t).__name__}, expected a torch.Tensor")
    if t.device.type != "cpu":
        raise ValueError(f"[{op}] {name} is on {t.device}, expected a CPU tensor")
    if t.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"[{op}] {name} has dtype {t.dtype}, expected int64 or int32 class indices")
