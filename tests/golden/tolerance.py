"""How close a golden case must come to its frozen numbers, and why (``compare``).

The golden data record the CPU capability they were frozen on (``frozen.json``: ATen's
``torch.backends.cpu.get_cpu_capability()``, which ``ATEN_CPU_CAPABILITY`` can lower). Integer and
boolean tensors (actions, masks, versions) must always be equal. Floats:

- **Same capability** (the vector width of every ATen reduction, so the same order of every sum):
  every float within ``RTOL·(|frozen| + 1)``, RTOL = 2⁻¹⁶ = 256 u (float32's unit roundoff
  u = 2⁻²⁴): another CPU of the capability differs in the last bits of BLAS (MKL dispatches by CPU
  vendor) and of vectorised exp/log; a reduction of n ≤ 256 terms errs by at most n·u of its
  terms' magnitude. Measured: ≤ 9.5e-7 on an Intel Xeon against these AMD-frozen numbers (issue 46).
- **Another capability** (another vector width: every reduction sums in another order): the
  numbers of the first step (``rollouts[0]``, ``metrics[0]``, made from the initial parameters)
  within the same RTOL (measured ≤ 1.7e-7 under ``default``), and the parameters within Adam's
  step bound ``2·lr·Σₜ sₜ`` (``adam_bound``). The later floats cannot be held to any rounding
  tolerance: a gradient coordinate that is zero in exact arithmetic (group-mean advantages sum to
  zero over a group sharing a context, so the gradient of what the group shares cancels) is
  rounding noise of ~1e-9, and Adam (ε = 1e-8) turns it into an update of up to lr — an
  amplification of lr/ε = 10⁶ that the order of summation decides. Measured against these numbers:
  parameters up to 6.3e-3 apart after four steps (lr = 1e-2), a gradient cosine 0.75 apart, an
  evaluation 1/6 apart (``default``); log-probabilities 1e-2 apart (``avx2``, key_value). Their
  shapes and dtypes are still checked, and they are checked in full on the freezing capability.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

FROZEN = Path(__file__).parent / "frozen.json"
RTOL = 2.0**-16  # 256 float32 rounding units

#: logged signals added after the numbers were frozen (issue 32: sandbox.diagnostics.SIGNALS); a
#: step's metrics may hold them besides the frozen keys
ADDED_SIGNALS = {"log_ratio_abs_mean", "log_ratio_abs_max", "entropy"}


def capability() -> str:
    return torch.backends.cpu.get_cpu_capability()


def frozen_capability() -> str:
    return json.loads(FROZEN.read_text())["cpu_capability"]


def adam_ratio_bound(t: int, betas: tuple[float, float] = (0.9, 0.999)) -> float:
    """max |m̂ₜ| / √v̂ₜ over all gradient sequences (Cauchy–Schwarz): with m̂ₜ = Σ aᵢ gᵢ and
    v̂ₜ = Σ bᵢ gᵢ², |m̂ₜ| ≤ √(Σ aᵢ²/bᵢ) · √v̂ₜ. Adam's step (ε > 0 only shrinks it) is at most lr times this."""
    b1, b2 = betas
    a = [(1 - b1) * b1 ** (t - i) / (1 - b1**t) for i in range(1, t + 1)]
    b = [(1 - b2) * b2 ** (t - i) / (1 - b2**t) for i in range(1, t + 1)]
    return math.sqrt(sum(x * x / y for x, y in zip(a, b)))


def adam_bound(lr: float, steps: int) -> float:
    """How far two runs' parameters can be apart after ``steps`` Adam updates, whatever their gradients."""
    return 2 * lr * sum(adam_ratio_bound(t) for t in range(1, steps + 1))


def _close(got: torch.Tensor, want: torch.Tensor, atol: float = 0.0) -> tuple[bool, float]:
    g, w = got.double(), want.double()
    same_special = torch.equal(torch.isnan(g), torch.isnan(w)) and torch.equal(torch.isinf(g), torch.isinf(w)) \
        and torch.equal(g[torch.isinf(g)], w[torch.isinf(w)])
    finite = torch.isfinite(w) & torch.isfinite(g)
    delta = (g - w).abs()[finite]
    limit = (RTOL * (w.abs() + 1) + atol)[finite]
    worst = float(delta.max()) if delta.numel() else 0.0
    return same_special and bool((delta <= limit).all()), worst


def compare(got, want, where: str, lr: float, steps: int, same: bool | None = None) -> None:
    """Assert ``got`` (a ``cases.record``) holds ``want`` (the frozen one) within the tolerance above;
    ``same``: whether this capability is the freezing one (default: ask torch)."""
    same = capability() == frozen_capability() if same is None else same
    if isinstance(want, dict):
        extra = set(got) - set(want)
        allowed = ADDED_SIGNALS if ".metrics[" in where else set()
        assert set(want) <= set(got) and extra <= allowed, f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            compare(got[k], want[k], f"{where}.{k}", lr, steps, same)
        return
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            compare(g, w, f"{where}[{i}]", lr, steps, same)
        return
    assert got.dtype == want.dtype and got.shape == want.shape, f"{where}: {got.dtype}{tuple(got.shape)}"
    if not want.is_floating_point():
        assert torch.equal(got, want), f"{where}: differs"
        return
    first_step = ".rollouts[0]." in where or ".metrics[0]." in where
    if same or first_step:
        ok, worst = _close(got, want)
        assert ok, f"{where}: max |Δ| {worst:.3g} beyond {RTOL:.3g}·(|x| + 1) (or NaN/∞ moved)"
    elif ".params[" in where:
        bound = adam_bound(lr, steps)
        ok, worst = _close(got, want, atol=bound)
        assert ok, f"{where}: max |Δ| {worst:.3g} beyond Adam's bound {bound:.3g} after {steps} steps"
