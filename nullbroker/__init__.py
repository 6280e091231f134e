"""nullbroker: a Kafka-compatible broker whose storage engine is /dev/null.

From Python, `nullbroker.start(partitions=4)` runs one in a process of its own and returns it
listening: a `RunningBroker` with its bootstrap address, its accounts, faults and a reset of
its counts (docs/python-api.md). Those names are loaded when first used, so that importing
the package (as the broker itself, and the pytest plugin, do) costs nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below
    from .app.accounts import Accounts as Accounts
    from .app.launcher import ActiveFault as ActiveFault
    from .app.launcher import RunningBroker as RunningBroker
    from .app.launcher import ServerError as ServerError
    from .app.launcher import start as start
    from .app.operator_http import OperatorHttpError as OperatorHttpError

_PUBLIC = {
    "start": "launcher",
    "RunningBroker": "launcher",
    "ActiveFault": "launcher",
    "ServerError": "launcher",
    "Accounts": "accounts",
    "OperatorHttpError": "operator_http",
}


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'nullbroker' has no attribute {name!r}")
    return getattr(importlib.import_module(f"nullbroker.app.{module}"), name)
