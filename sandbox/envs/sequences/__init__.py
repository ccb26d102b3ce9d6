"""Synthetic sequence problems, one file each (shared/spec/environments.md, "Synthetic transformer
sequence tasks"); the tiny-transformer task that learns them is ``sandbox.tasks.sequences``, which
registers a task for each (a new problem: one file, ``register_sequence_env``).

| problem | V | prompt | answer | reward |
|---|---|---|---|---|
| ``reverse_copy`` | 2 | H | H | κ·(correct prefix)/H + (1 − κ)·1[all correct] |
| ``bit_parity`` | 2 | H | 1 | ±1 for the even-parity bit |
| ``key_value`` | 10 | 2n + 1 | 1 | ±1 for the value of the queried key |
| ``subsequence_match`` | 5 | 2 | 32 | ±1 if the prompt is a subsequence of the answer |
"""

from sandbox.envs.sequences.base import (
           SEQUENCE_ENVS,
           WRONG_ANSWERS,
           SequenceEnv,
           all_sequences,
           signed,
)
from sandbox.envs.sequences.bit_parity import BitParity, parity_labels
from sandbox.envs.sequences.key_value import KeyValue, key_value_labels
from sandbox.envs.sequences.reverse_copy import (
           MATCHES,
           ReverseCopy,
           reversal_reward,
           reversal_targets,
)
from sandbox.envs.sequences.subsequence_match import SubsequenceMatch, is_subsequence

__all__ = ["MATCHES", "SEQUENCE_ENVS", "WRONG_ANSWERS", "BitParity", "KeyValue", "ReverseCopy",
           "SequenceEnv", "SubsequenceMatch", "all_sequences", "is_subsequence", "key_value_labels", "parity_labels",
           "reversal_reward", "reversal_targets", "signed"]
