from dataclasses import dataclass

from sandbox import Estimator, PGTerms, register_estimator


@register_estimator("clipped_adv_pg")
@dataclass(frozen=True)
class ClippedAdvantagePG(Estimator):
    """REINFORCE with the advantage clipped to [−c, c]."""

    c: float = 1.0

    def check(self):
        if not self.c > 0:
            raise ValueError(f"c must be > 0, got {self.c}")

    def token_loss(self, t: PGTerms):
        return -t.token_advantages.clamp(-self.c, self.c) * t.logp
