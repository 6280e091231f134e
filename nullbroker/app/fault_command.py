"""`nullbroker fault add|list|clear --http HOST:PORT`: faults on a running broker, through
the `/faults` paths of its metrics listener (nullbroker.cluster.faults)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..cluster.faults import __doc__ as FAULTS_DOC

EPILOG = """\
examples:
  nullbroker fault add 'latency:api=Produce,ms=20' --http 127.0.0.1:9100
  nullbroker fault add 'down:node=1,for=5s' --http 127.0.0.1:9100
  nullbroker fault list --http 127.0.0.1:9100
  nullbroker fault clear --http 127.0.0.1:9100

The broker must run with --metrics HOST:PORT: --http is that address.
"""


def add_parser(commands: Any) -> None:
    fault = commands.add_parser(
        "fault",
        help="add, list or clear faults on a running broker",
        description=FAULTS_DOC,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fault.add_argument("action", choices=("add", "list", "clear"), help="what to do")
    fault.add_argument("spec", nargs="?", help="the fault, for add (KIND:option=value,...)")
    fault.add_argument(
        "--http",
        required=True,
        metavar="HOST:PORT",
        help="the broker's --metrics address, where /faults is served",
    )


def run(args: argparse.Namespace) -> int:
    """Send the action; print the broker's answer. Exit 0, or 1 with the reason."""
    from .operator_http import OperatorHttpError, call

    if args.action == "add" and not args.spec:
        print("nullbroker fault add: give the fault's SPEC", file=sys.stderr)
        return 2
    if args.action != "add" and args.spec:
        print(f"nullbroker fault {args.action}: takes no SPEC", file=sys.stderr)
        return 2
    method, body = {
        "add": ("POST", (args.spec or "").encode()),
        "list": ("GET", None),
        "clear": ("DELETE", None),
    }[args.action]
    try:
        answer = call(args.http, method, "/faults", body)
    except OperatorHttpError as error:
        print(f"nullbroker fault {args.action}: {error}", file=sys.stderr)
        return 1
    if args.action == "list":
        for fault in answer:
            left = fault["seconds_left"]
            until = "" if left is None else f" ({left:.1f} s left)"
            print(f"{fault['id']}: {fault['spec']}{until}")
    elif args.action == "add":
        print(f"added fault {answer['id']}: {answer['spec']}")
    else:
        print(f"cleared {answer['cleared']} faults")
    return 0
