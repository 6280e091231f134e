"""The streams groups' task assignor: Kafka 4.4's default, `sticky` (StickyTaskAssignor), to its
tie-breaks, so that a group is given the same tasks here as there.

A task is a subtopology's partition. Members are a process's stream threads; a process's
load is its tasks over its members. Active tasks first:
1. in (partition, subtopology) order, each goes back to the member that ran it, while that
   member is under its share (the tasks over the members, rounded up);
2. the rest to a member that had it as a standby or reported an offset for it (its state is
   warm), the one of least process load and least tasks, while under its share;
3. the rest, in (subtopology, partition) order, to the least loaded member of the least
   loaded process.
Then `streams.num.standby.replicas` standbys of each stateful task (one with a changelog), in
descending (partition, subtopology) order, on processes that hold no copy of it yet: its
previous active member, else a previous standby, else the least loaded process.

Every tie is broken as Kafka's breaks it: members and processes in the order Java's HashMaps
of their ids iterate, least loaded first as java.util.PriorityQueue polls. Warm-up tasks are
never assigned (Kafka 4.4's assignment refiner leaves them out).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import ceil
from typing import Generic, TypeVar

from ...java_hashing import java_compute_if_absent_order, java_hash_order

Tasks = dict[str, frozenset[int]]
"""Partitions by subtopology id."""
Task = tuple[str, int]
T = TypeVar("T")


@dataclass(slots=True)
class TaskAssignment:
    """What one member runs: its active, standby and warm-up tasks."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AssignorMember:
    member_id: str
    process_id: str
    active: Tasks = field(default_factory=dict)
    """What it runs now: its active tasks kept where the share allows."""
    standby: Tasks = field(default_factory=dict)
    offsets: dict[Task, int] = field(default_factory=dict)
    """The task offsets it reported (its state of each task, where it has some)."""


def as_tasks(tasks: set[Task] | list[Task]) -> Tasks:
    by_subtopology: dict[str, set[int]] = {}
    for subtopology, partition in tasks:
        by_subtopology.setdefault(subtopology, set()).add(partition)
    return {subtopology: frozenset(parts) for subtopology, parts in by_subtopology.items()}


def flatten(tasks: Tasks) -> set[Task]:
    return {(subtopology, p) for subtopology, parts in tasks.items() for p in parts}


class _PriorityQueue(Generic[T]):
    """java.util.PriorityQueue's binary heap, whose order among equal keys decides ties: an
    added element stops rising at an equal parent, a sinking one goes left on a tie."""

    def __init__(self, key: Callable[[T], float]) -> None:
        self._heap: list[T] = []
        self._key = key

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, item: T) -> None:
        heap, key = self._heap, self._key
        index = len(heap)
        heap.append(item)
        while index > 0:
            parent = (index - 1) >> 1
            if key(item) >= key(heap[parent]):
                break
            heap[index] = heap[parent]
            index = parent
        heap[index] = item

    def poll(self) -> T | None:
        heap, key = self._heap, self._key
        if not heap:
            return None
        first, last = heap[0], heap.pop()
        size = len(heap)
        if size:
            index = 0
            while index < size >> 1:
                child = 2 * index + 1
                if child + 1 < size and key(heap[child]) > key(heap[child + 1]):
                    child += 1
                if key(last) <= key(heap[child]):
                    break
                heap[index] = heap[child]
                index = child
            heap[index] = last
        return first


class _Process:
    """One process's members and what they were given."""

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.counts: dict[str, int] = {}
        """Tasks given to each member (active and standby), as its HashMap orders them."""
        self.held: set[Task] = set()
        self.active: dict[str, set[Task]] = {}
        self.standby: dict[str, set[Task]] = {}
        self._by_load: _PriorityQueue[list[object]] | None = None

    @property
    def load(self) -> float:
        return sum(self.counts.values()) / len(self.counts)

    def give(self, member_id: str, task: Task, active: bool) -> int:
        """Give `task` to `member_id`; the member's task count after it."""
        self._by_load = None
        return self._give(member_id, task, active)

    def _give(self, member_id: str, task: Task, active: bool) -> int:
        self.held.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.counts[member_id] += 1
        return self.counts[member_id]

    def give_least_loaded(self, task: Task, active: bool) -> int:
        members = java_hash_order(self.counts)
        if len(members) == 1:
            return self._give(members[0], task, active)
        if self._by_load is None:
            self._by_load = _PriorityQueue(key=lambda entry: entry[1])  # type: ignore[arg-type,return-value]
            for member_id in members:
                self._by_load.add([member_id, self.counts[member_id]])
        entry = self._by_load.poll()
        assert entry is not None
        count = self._give(str(entry[0]), task, active)
        entry[1] = count
        self._by_load.add(entry)
        return count


class _Quota:
    """A member's share of tasks: the tasks over the members, rounded up; a member that
    reaches it leaves the rest to share among the others."""

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks, self.members = tasks, members
        self.share = ceil(tasks / members) if members else 0

    def reached(self, count: int) -> None:
        if count == self.share:
            self.members -= 1
            self.tasks -= count
            self.share = ceil(self.tasks / self.members) if self.members else 0


def assign(
    members: list[AssignorMember],
    task_counts: dict[str, int],
    standby_replicas: int = 0,
    stateful: frozenset[str] = frozenset(),
) -> dict[str, TaskAssignment]:
    """Each member's target. `task_counts` is each subtopology's number of tasks, `stateful`
    the subtopologies with state (those that get standbys); `members` in the group's order."""
    if not members:
        return {}
    by_id = {member.member_id: member for member in members}
    order = java_hash_order(by_id)
    subtopologies = sorted(task_counts)
    total_active = sum(task_counts.values())
    total = total_active + standby_replicas * sum(
        task_counts[sub] for sub in subtopologies if sub in stateful
    )
    active_quota, total_quota = _Quota(total_active, len(order)), _Quota(total, len(order))
    processes: dict[str, _Process] = {}
    for member_id in order:
        process_id = by_id[member_id].process_id
        processes.setdefault(process_id, _Process(process_id)).counts[member_id] = 0
    process_order = java_compute_if_absent_order(
        [by_id[member_id].process_id for member_id in order], len(order)
    )
    previous_owner, warm = _previous(order, by_id)

    def given(process: _Process, member_id: str, task: Task, active: bool) -> None:
        count = process.give(member_id, task, active)
        if active:
            active_quota.reached(count)
        total_quota.reached(count)

    tasks = sorted(
        ((sub, partition) for sub in subtopologies for partition in range(task_counts[sub])),
        key=lambda task: (task[1], task[0]),
    )
    left = []
    for task in tasks:
        owner = previous_owner.get(task)
        if owner is not None and processes[owner[0]].counts[owner[1]] < active_quota.share:
            given(processes[owner[0]], owner[1], task, True)
        else:
            left.append(task)
    rest = []
    for task in left:
        candidate = _least_loaded(processes, warm.get(task, []))
        if candidate is not None and processes[candidate[0]].counts[candidate[1]] < (
            active_quota.share
        ):
            given(processes[candidate[0]], candidate[1], task, True)
        else:
            rest.append(task)
    by_load: _PriorityQueue[_Process] = _PriorityQueue(key=lambda process: process.load)
    for process_id in process_order:
        by_load.add(processes[process_id])
    for task in sorted(rest):
        process = by_load.poll()
        assert process is not None
        count = process.give_least_loaded(task, True)
        active_quota.reached(count)
        total_quota.reached(count)
        by_load.add(process)
    if standby_replicas > 0:
        _standbys(
            processes, process_order, tasks, stateful, standby_replicas,
            previous_owner, warm, total_quota,
        )  # fmt: skip
    return {
        member_id: TaskAssignment(
            as_tasks(processes[by_id[member_id].process_id].active.get(member_id, set())),
            as_tasks(processes[by_id[member_id].process_id].standby.get(member_id, set())),
        )
        for member_id in order
    }


Owner = tuple[str, str]
"""(process id, member id)."""


def _previous(
    order: list[str], by_id: dict[str, AssignorMember]
) -> tuple[dict[Task, Owner], dict[Task, list[Owner]]]:
    """Who ran each task as active, and who holds state of it: its standbys first, then
    members that reported an offset for it, each by greatest offset first."""
    owner: dict[Task, Owner] = {}
    ranked: dict[Task, list[tuple[int, int, Owner]]] = {}
    for member_id in order:
        member = by_id[member_id]
        who = (member.process_id, member_id)
        for task in flatten(member.active):
            owner[task] = who
        standby = flatten(member.standby)
        for task in standby:
            ranked.setdefault(task, []).append((0, -member.offsets.get(task, 0), who))
        for task, offset in member.offsets.items():
            if task not in standby:
                ranked.setdefault(task, []).append((1, -offset, who))
    warm = {
        task: [who for _, _, who in sorted(found, key=lambda entry: entry[:2])]
        for task, found in ranked.items()
    }
    return owner, warm


def _least_loaded(
    processes: dict[str, _Process], candidates: list[Owner], task: Task | None = None
) -> Owner | None:
    """The candidate whose process and own load are both lower than every earlier pick's
    (Kafka's rule, which keeps the first on a tie), skipping processes holding `task`."""
    best: Owner | None = None
    best_process = best_member = float("inf")
    for process_id, member_id in candidates:
        process = processes[process_id]
        if task is not None and task in process.held:
            continue
        load, count = process.load, process.counts[member_id]
        if best is None or (load < best_process and count < best_member):
            best, best_process, best_member = (process_id, member_id), load, count
    return best


def _standbys(
    processes: dict[str, _Process],
    process_order: list[str],
    tasks: list[Task],
    stateful: frozenset[str],
    replicas: int,
    previous_owner: dict[Task, Owner],
    warm: dict[Task, list[Owner]],
    total_quota: _Quota,
) -> None:
    def given(owner: Owner, task: Task) -> None:
        total_quota.reached(processes[owner[0]].give(owner[1], task, False))

    later: list[tuple[Task, int]] = []
    for task in sorted((t for t in tasks if t[0] in stateful), key=lambda t: (t[1], t[0]))[::-1]:
        for replica in range(replicas):
            owner = previous_owner.get(task)
            if (
                owner is not None
                and task not in processes[owner[0]].held
                and processes[owner[0]].counts[owner[1]] < total_quota.share
            ):
                given(owner, task)
                continue
            candidate = _least_loaded(processes, warm.get(task, []), task)
            if candidate is not None and processes[candidate[0]].counts[candidate[1]] < (
                total_quota.share
            ):
                given(candidate, task)
                continue
            later.append((task, replicas - replica))
            break
    by_load: _PriorityQueue[_Process] = _PriorityQueue(key=lambda process: process.load)
    for process_id in process_order:
        by_load.add(processes[process_id])

    def to_least_loaded(task: Task) -> bool:
        # The least loaded process without a copy of the task; the ones skipped go back.
        process = by_load.poll()
        if process is None:
            return False
        found = False
        if task not in process.held:
            total_quota.reached(process.give_least_loaded(task, False))
            found = True
        elif len(by_load):
            found = to_least_loaded(task)
        by_load.add(process)
        return found

    for task, remaining in sorted(later, key=lambda entry: entry[0], reverse=True):
        for _ in range(remaining):
            if not to_least_loaded(task):
                break  # fewer processes than copies: Kafka assigns what it can
