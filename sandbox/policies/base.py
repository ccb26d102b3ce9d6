"""The ``Policy`` protocol: one interface for every model family (tabular, MLP, the tiny transformer,
Hugging Face causal LMs), in functional form over population parameters ``[S, ...]`` (S seeds
train as one batched computation; HF models have S = 1).

    init(population, generator) → params                        (a list of tensors, outside the policy)
    sample(params, obs, chain, generator, versions) → PolicySample   (the stepper in the one decode loop)
    score(params, obs, actions) → logp [*P, B, T]                 (the one teacher-forced scorer)

**Temperature has one meaning**: ``temperature`` τ is the policy's own, π_θ(a | ·) = softmax(z_θ/τ)
over its logits z_θ. ``score`` returns log π_θ at τ (what the learner differentiates), evaluation
samples π_θ at τ, and the actor's sampling chain draws from z_θ/(τ·τ_s) — τ_s ≠ 1 is a sampler
that draws at another temperature than the learner scores, a sampler mismatch stated on top of the
policy (``Task.temperature`` is the chain's τ·τ_s), never a second meaning of τ. The HF family's
``temperature`` knob is its policy's τ (τ_s = 1); the transformer family's ``temperature`` knob is
τ_s over a τ = 1 policy; the categorical family has τ = τ_s = 1.

``obs`` is what the environment shows the policy (``sandbox.envs.base.Environment.observe``):
context ids with their features, prompts grouped by prompt, left-padded token ids with a mask.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from sandbox.core.observations import ObservationSpec, kinds
from sandbox.core.registry import Registry
from sandbox.core.sampling import SamplingChain
from sandbox.core.versions import Versions


@dataclass
class PolicySample:
    """Tokens ``[*P, B, T]`` drawn by the actor, their log-probs under its sampling chain, and
    ``logp_of(actions)``: the per-token log-probs of any tokens under the same actor (for the true μ
    of rows a friction replaces)."""

    actions: Tensor
    logp: Tensor
    logp_of: Callable[[Tensor], Tensor]


@dataclass
class Scored:
    """The learner's view of a rollout: differentiable ``logp [*P, B, T]``, the supervised target's
    log-probs (or None) and lazy providers of the extra inputs baselines may need
    (``probs``, ``grad_sq_norms``; ``rho`` and ``mask`` are supplied by the learner)."""

    logp: Tensor
    target_logp: Tensor | None = None
    providers: dict[str, Callable[[], Tensor]] = field(default_factory=dict)


class Policy(ABC):
    """A model family (module docstring). Subclasses give ``n_actions`` and implement ``init``, ``sample``
    and ``score``; ``scored`` (the learner's call) and ``token_logits`` have defaults. A registered
    family declares the observations it ``reads`` (spec classes of ``sandbox.core.observations``)
    and is built from an environment's spec by ``from_spec``."""

    #: the kinds of observation it reads (``ContextIdSpec``, ``TokenPromptSpec`` …): a task refuses
    #: it on an environment that shows another kind, in one line naming both
    reads: ClassVar[tuple[type[ObservationSpec], ...]] = ()
    #: ``score`` takes ``Prompts`` whose ``groups`` map any rows to any prompts (the screened
    #: objective re-scores only the rows it keeps through it)
    scores_regrouped: ClassVar[bool] = False

    #: π_θ = softmax(z_θ/τ): the one temperature (module docstring)
    temperature: float = 1.0
    #: its sampler decodes each position with any version's parameters (``sample(versions=…)``:
    #: a rollout resumed under newer parameters, ``sandbox.frictions.partial``)
    resumable: ClassVar[bool] = False
    #: the device types its tensors may live on
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    #: one model per run: its parameters have a population axis of 1 (a task's ``population`` must be 1)
    one_model_per_run: ClassVar[bool] = False

    #: size of the action (token) vocabulary the policy samples from (a field or a property)
    n_actions: int
    #: the run's device (set through the task)
    device: torch.device = torch.device("cpu")

    @classmethod
    def from_spec(cls, spec: ObservationSpec, **kwargs: Any) -> Policy:
        """The family built for an environment's ``spec`` with the run's ``policy_kwargs``: by default
        ``cls(**spec.policy_fields(), **kwargs)`` (token prompts: ``vocab``, ``prompt_len``,
        ``answer_len``, ``dtype``)."""
        return cls(**spec.policy_fields(), **kwargs)

    @abstractmethod
    def init(self, population: int, generator: torch.Generator) -> list[Tensor]:
        """Initial parameters of ``population`` independent members, each ``[S, ...]``, from ``generator``."""

    @abstractmethod
    def sample(self, params: Sequence[Tensor], obs: Any, chain: SamplingChain, generator: torch.Generator,
               versions: Versions | None = None) -> PolicySample:
        """Draw tokens for ``obs`` through the one decode loop (``sandbox.policies.decode``) and the
        actor's ``chain`` (applied to z/τ); a ``resumable`` policy decodes position t with
        ``versions``' parameters when given."""

    @abstractmethod
    def score(self, params: Sequence[Tensor], obs: Any, actions: Tensor) -> Tensor:
        """log π_θ(a_t | obs, a_<t) at the policy's temperature, ``[*P, B, T]`` (differentiable)."""

    def scored(self, params: Sequence[Tensor], obs: Any, actions: Tensor, target: Tensor | None = None) -> Scored:
        """The learner's scores of ``actions`` (and of the supervised ``target``), through ``score``."""
        return Scored(self.score(params, obs, actions), None if target is None else self.score(params, obs, target))

    def token_logits(self, params: Sequence[Tensor], obs: Any, actions: Tensor) -> Tensor | None:
        """Next-token logits ``[*P, B, T, V]`` at every token (no gradient), for the entropy signal;
        None where the family cannot give them."""
        return None

    def sampler_mismatch(self, obs: Any, actor_params: Sequence[Tensor], params: Sequence[Tensor],
                         sample: PolicySample) -> Tensor | None:
        """Where the actor sampled with other numerics than the learner scores (``params``, the
        friction-transformed ``actor_params``, in another dtype), the learner's log-probs of the
        sampled tokens ``[*P, B, T]`` (the task logs their k3 KL to the sampler's); None (the default) else."""
        return None


#: every policy family by name (``register_policy``); a task builds a family other than its own as
#: ``cls.from_spec(environment.spec, **policy_kwargs)`` where the family ``reads`` that spec
POLICIES: Registry[Policy] = Registry("policy")


def register_policy(name: str, *, replace: bool = False):
    """Class decorator: register a ``Policy`` family as ``name`` (the README's "Add a policy")."""
    def decorator(cls: type[Policy]) -> type[Policy]:
        if not (isinstance(cls, type) and issubclass(cls, Policy)):
            raise ValueError(f"register_policy({name!r}) takes a subclass of sandbox.policies.base.Policy, got {cls!r}")
        if not (cls.reads and all(isinstance(s, type) and issubclass(s, ObservationSpec) for s in cls.reads)):
            raise ValueError(f"register_policy({name!r}): declare the observations {cls.__name__} reads, e.g. "
                             f"reads = (TokenPromptSpec,) (sandbox.core.observations), got {kinds(cls.reads)}")
        return POLICIES.register(name, replace=replace)(cls)
    return decorator


__all__ = ["POLICIES", "Policy", "PolicySample", "Scored", "register_policy"]
