"""The only skips a strict run (CI, or `make test STRICT=1`) lets pass: each names the tests it
covers, the reason they give, and why the run may still be called green without them.

A test skipped for anything else (a tool not provisioned, a C module not built, a broker
that did not start) fails a strict run: tests/support/skip_gate.py checks every skip against this
table and prints all of them, with their reasons, at the end of the run.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass

from codec import native


@dataclass(frozen=True, slots=True)
class AllowedSkip:
    name: str
    tests: str
    """A glob over the skipped test's node id."""
    reason: str
    """A regular expression the skip's reason must contain."""
    why: str
    """Why a run without these tests is still whole."""
    only_when: Callable[[], bool] = lambda: True
    """The condition under which the skip is allowed at all (read when the skip happens)."""

    def allows(self, nodeid: str, reason: str) -> bool:
        return (
            fnmatch.fnmatchcase(nodeid, self.tests)
            and re.search(self.reason, reason) is not None
            and self.only_when()
        )


ALLOWED_SKIPS: tuple[AllowedSkip, ...] = (
    AllowedSkip(
        "the pure-Python pass",
        "tests/*",
        r"NULLBROKER_NATIVE=off",
        "`make test`'s second pass turns the C code off on purpose, to run the codec and broker "
        "tests on the Python twin; the tests of the C code itself ran in the first pass, where "
        "this entry allows nothing",
        only_when=lambda: not native.switched_on(),
    ),
    AllowedSkip(
        "network namespaces",
        "tests/processes/test_node_map.py::*",
        r"network namespace|making network namespaces needs root|no `ip` command",
        "two hosts are two network namespaces joined by a veth pair, which needs root and "
        "iproute2's `ip` and a kernel that lets the sandbox make them; the same cluster over "
        "processes on one host is tested without them (tests/processes/test_node_map.py's "
        "other tests, test_processes.py)",
    ),
    AllowedSkip(
        "the open-files limit",
        "tests/net/test_limits.py::test_two_thousand_idle_connections_cost_at_most_2_kib_each",
        r"the open-files limit",
        "measuring 2,000 idle connections needs a hard RLIMIT_NOFILE above 4,200, which only "
        "the machine's administrator can raise; the limits on connections themselves are "
        "tested with fewer (the rest of test_limits.py)",
    ),
)


def allowing(nodeid: str, reason: str) -> AllowedSkip | None:
    """The entry that allows this skip, or None."""
    return next((entry for entry in ALLOWED_SKIPS if entry.allows(nodeid, reason)), None)
