"""How a streams group member moves towards its target (Kafka's CurrentAssignmentBuilder for
streams groups), one heartbeat at a time.

A member keeps what its target keeps, is told to give up the rest, and is given what it gains
only when no one else still holds it: an active task while any member runs it (or revokes
it) or another member of its process keeps a copy; a standby while another member of its
process runs or keeps the task. A member with tasks to give up keeps its epoch until a
heartbeat lists none of them (UNREVOKED_TASKS); one waiting for tasks others still hold takes
the new epoch and is given them at a later heartbeat (UNRELEASED_TASKS).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

from .assignor import Task, TaskAssignment, as_tasks, flatten


class MemberState(IntEnum):
    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3


@dataclass(slots=True)
class Tasks3:
    """Active, standby and warm-up tasks as sets of (subtopology, partition)."""

    active: set[Task] = field(default_factory=set)
    standby: set[Task] = field(default_factory=set)
    warmup: set[Task] = field(default_factory=set)

    @classmethod
    def of(cls, tasks: TaskAssignment) -> Tasks3:
        return cls(flatten(tasks.active), flatten(tasks.standby), flatten(tasks.warmup))

    def as_assignment(self) -> TaskAssignment:
        return TaskAssignment(as_tasks(self.active), as_tasks(self.standby), as_tasks(self.warmup))

    def all(self) -> set[Task]:
        return self.active | self.standby | self.warmup

    def __bool__(self) -> bool:
        return bool(self.active or self.standby or self.warmup)


@dataclass(slots=True)
class Holdings:
    """Who holds each task in the group now (assigned or still being revoked): the process
    running it as active, and the processes keeping a standby or warm-up copy, each by
    member."""

    active: dict[Task, tuple[str, str]] = field(default_factory=dict)
    copies: dict[Task, list[tuple[str, str]]] = field(default_factory=dict)
    """(process id, member id) of each standby or warm-up copy."""

    @classmethod
    def of(cls, members: Iterable[tuple[str, str, Tasks3, Tasks3]]) -> Holdings:
        """From each member's (id, process id, assigned, revoking)."""
        holdings = cls()
        for member_id, process_id, assigned, revoking in members:
            for tasks in (assigned, revoking):
                for task in tasks.active:
                    holdings.active[task] = (process_id, member_id)
                for task in tasks.standby | tasks.warmup:
                    holdings.copies.setdefault(task, []).append((process_id, member_id))
        return holdings

    def withholds_active(self, task: Task, process_id: str, member_id: str) -> bool:
        runner = self.active.get(task)
        if runner is not None and runner[1] != member_id:
            return True
        return any(
            process == process_id and member != member_id
            for process, member in self.copies.get(task, ())
        )

    def withholds_copy(self, task: Task, process_id: str, member_id: str) -> bool:
        runner = self.active.get(task)
        if runner is not None and runner[0] == process_id and runner[1] != member_id:
            return True
        return any(
            process == process_id and member != member_id
            for process, member in self.copies.get(task, ())
        )


@dataclass(slots=True)
class Reconciled:
    """A member after reconciling: its epoch, state, tasks and tasks still to give up."""

    epoch: int
    previous_epoch: int
    state: MemberState
    assigned: Tasks3
    revoking: Tasks3


def reconcile(
    member_id: str,
    process_id: str,
    epoch: int,
    assigned: Tasks3,
    target: Tasks3,
    target_epoch: int,
    holdings: Holdings,
    owned: Tasks3 | None,
) -> Reconciled:
    """The member's next step towards `target` (made at `target_epoch`), knowing what it
    said it runs (`owned`; None when its heartbeat did not say)."""
    keep = Tasks3(
        assigned.active & target.active,
        assigned.standby & target.standby,
        assigned.warmup & target.warmup,
    )
    revoke = Tasks3(
        assigned.active - target.active,
        assigned.standby - target.standby,
        assigned.warmup - target.warmup,
    )
    pending = Tasks3(
        target.active - assigned.active,
        target.standby - assigned.standby,
        target.warmup - assigned.warmup,
    )
    withheld = Tasks3(
        {task for task in pending.active if holdings.withholds_active(task, process_id, member_id)},
        {task for task in pending.standby if holdings.withholds_copy(task, process_id, member_id)},
        {task for task in pending.warmup if holdings.withholds_copy(task, process_id, member_id)},
    )
    # A copy becoming active here stays a copy until the active task is granted.
    for kind in ("standby", "warmup"):
        becoming = getattr(revoke, kind) & withheld.active
        getattr(revoke, kind).difference_update(becoming)
        getattr(keep, kind).update(becoming)
    if revoke and not released(revoke, owned):
        return Reconciled(epoch, epoch, MemberState.UNREVOKED_TASKS, keep, revoke)
    granted = Tasks3(
        keep.active | (pending.active - withheld.active),
        keep.standby | (pending.standby - withheld.standby),
        keep.warmup | (pending.warmup - withheld.warmup),
    )
    state = MemberState.UNRELEASED_TASKS if withheld else MemberState.STABLE
    return Reconciled(target_epoch, epoch, state, granted, Tasks3())


def released(tasks: Tasks3, owned: Tasks3 | None) -> bool:
    """Whether a member that said it runs `owned` has let go of every one of `tasks`."""
    return owned is not None and not (owned.all() & tasks.all())
