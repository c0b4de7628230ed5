"""Memory policies: one module per design, each a `MemoryPolicy` (`base`), run by `rollout.PolicyRollout`.

`MEMORY_POLICIES` names them; `RolloutSettings.memory` picks one and `agent.rollout.make_rollout` builds
it. "notes" (the paper's notes rewrite, or the line-edit notes by prompt variant) is the default and is
run by `agent.rollout.BoundedMemoryRollout`, so recorded notes runs keep their prompts and replies.
"""

from __future__ import annotations

from supersede_lib.agent.memory.append_truncate import AppendTruncatePolicy
from supersede_lib.agent.memory.base import (
    CAPABILITIES,
    MemoryPolicy,
    PolicyCall,
    PolicyReply,
    TurnRecord,
)
from supersede_lib.agent.memory.core_memory import CoreMemoryPolicy
from supersede_lib.agent.memory.latest_value import LatestValuePolicy
from supersede_lib.agent.memory.mem0_policy import Mem0Policy
from supersede_lib.agent.memory.notes import NotesPolicy
from supersede_lib.agent.memory.observation_log import ObservationLogPolicy
from supersede_lib.agent.memory.rollout import PolicyRollout

DEFAULT_MEMORY = "notes"  # the paper's design
MEMORY_POLICIES: dict[str, type[MemoryPolicy]] = {
    policy.name: policy
    for policy in (
        NotesPolicy,
        AppendTruncatePolicy,
        CoreMemoryPolicy,
        ObservationLogPolicy,
        LatestValuePolicy,
        Mem0Policy,
    )
}


def get_memory_policy(name: str) -> type[MemoryPolicy]:
    """The policy class called `name`; a ValueError naming the known ones otherwise."""
    try:
        return MEMORY_POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown memory policy {name!r}; expected one of {sorted(MEMORY_POLICIES)}"
        ) from None


__all__ = [
    "CAPABILITIES",
    "DEFAULT_MEMORY",
    "MEMORY_POLICIES",
    "MemoryPolicy",
    "PolicyCall",
    "PolicyReply",
    "PolicyRollout",
    "TurnRecord",
    "get_memory_policy",
]
