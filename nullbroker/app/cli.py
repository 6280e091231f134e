"""The `nullbroker` command."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__
from ..settings import CONNECTION_LOOPS, Config, ConfigError
from ..workers.listening import StartupError
from ..workers.run import run_server
from .configuration import CONFIG_FILE_VARIABLE, load

log = logging.getLogger("nullbroker")

DESCRIPTION = """\
A Kafka-compatible broker whose storage engine is /dev/null. It answers every request
real clients send (Produce with real, contiguous offsets; Metadata; admin APIs), counts
exactly what it was sent, and stores nothing. Point producers, perf tests and pipelines
at it to measure them with a broker that costs nothing.
"""

SERVE_EPILOG = f"""\
settings come, lowest priority first, from: defaults, the --config TOML file (top-level
keys named like the flags: listen = "127.0.0.1:9092", partitions = 4, no-auto-create = true),
environment variables NULLBROKER_<SETTING> (NULLBROKER_PARTITIONS=4, NULLBROKER_LISTEN=...;
{CONFIG_FILE_VARIABLE} names the config file), then these flags.

Every 5 s with traffic, one line on stdout: records/sec and MB/sec (2^20 bytes) produced and
fetched, requests/sec, p50 and p99 of the broker's own time per request in microseconds (a
Fetch or JoinGroup held waiting counts only its own time), how many requests were held and
their p99 hold, connections, RSS.
A mistake in the settings, a port in use or an unwritable --summary-json folder stops the
broker at once with exit code 2 and one line naming the setting.
SIGINT or SIGTERM: stop accepting, answer requests in flight, write --summary-json, exit 0.

example:
  nullbroker serve --listen 127.0.0.1:9092 --partitions 4 --metrics 127.0.0.1:9100 \\
      --summary-json summary.json
"""


class _Parser(argparse.ArgumentParser):
    """Reports a bad command line in one line, like a bad setting, instead of argparse's
    usage block followed by the error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="nullbroker", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"nullbroker {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the broker",
        description="Run the broker until SIGINT or SIGTERM.",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = Config()
    serve.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"where to accept Kafka clients (default {defaults.listen}; port 0 picks a free "
        "port, printed at start)",
    )
    serve.add_argument(
        "--advertise",
        metavar="HOST:PORT",
        help="the address Metadata gives clients (default: the address each client connected to)",
    )
    serve.add_argument(
        "--listeners",
        metavar="PROTOCOL://HOST:PORT,...",
        help="listeners as Kafka names them, in place of --listen: PLAINTEXT, SSL, "
        "SASL_PLAINTEXT, SASL_SSL (SSL needs --tls-cert and --tls-key, SASL --users); "
        "Metadata and FindCoordinator answer with the addresses of the listener a client "
        "came in on",
    )
    serve.add_argument(
        "--advertised-listeners",
        metavar="PROTOCOL://HOST:PORT,...",
        help="the address each listener gives clients, by the same protocol names (default: "
        "the address each client connected to)",
    )
    serve.add_argument(
        "--tls-cert", metavar="PEM", help="the SSL listener's certificate (chain), PEM"
    )
    serve.add_argument("--tls-key", metavar="PEM", help="the SSL listener's private key, PEM")
    serve.add_argument(
        "--tls-ca",
        metavar="PEM",
        help="the CA certificates that client certificates are checked against (mTLS)",
    )
    serve.add_argument(
        "--tls-client-auth",
        choices=("none", "requested", "required"),
        help="whether SSL clients must show a certificate signed by --tls-ca (default none)",
    )
    serve.add_argument(
        "--users",
        metavar="FILE",
        help="SASL users for SASL_PLAINTEXT and SASL_SSL listeners: a TOML file, [users] name "
        '= "password"',
    )
    serve.add_argument(
        "--sasl-mechanisms",
        metavar="LIST",
        help="the SASL mechanisms offered, comma-separated: PLAIN, SCRAM-SHA-256, "
        "SCRAM-SHA-512, OAUTHBEARER (unsecured tokens, as Kafka's default validator) "
        "(default PLAIN,SCRAM-SHA-256,SCRAM-SHA-512)",
    )
    serve.add_argument(
        "--oauthbearer-principal-claim",
        metavar="NAME",
        help="the claim of an OAUTHBEARER token that names its principal (default sub)",
    )
    serve.add_argument(
        "--sasl-session-lifetime-ms",
        type=int,
        metavar="MS",
        help="how long a SASL session lasts: clients re-authenticate on the connection before "
        "it ends (KIP-368), else their next request closes it (default 0: for ever)",
    )
    serve.add_argument(
        "--brokers",
        type=int,
        metavar="N",
        help="serve a cluster of N brokers, node ids 0..N-1, on consecutive ports from "
        "--listen's (port 0: each picks a free one; all are printed): partitions are led "
        "by different nodes, groups coordinated by one (default 1)",
    )
    serve.add_argument(
        "--node-map",
        metavar="FILE",
        help="a cluster over several hosts: a TOML file with a [nodes] table (node id = "
        '"HOST:PORT") and supervisor = "HOST:PORT" on node 0\'s host. Run the broker on '
        "every host with the same file: each serves the nodes at its own addresses, the "
        "one with node 0 is the supervisor the others join",
    )
    serve.add_argument(
        "--processes",
        metavar="P|auto",
        help="spread the --brokers nodes over P processes (auto: one per core), each serving "
        "the partitions its nodes lead, so that the broker can use more than one core; "
        "topic changes and faults reach every process before they are answered, and "
        "/metrics, the console line and the summary cover them all (default 1)",
    )
    serve.add_argument(
        "--partitions",
        type=int,
        metavar="N",
        help=f"partitions of auto-created topics and of CreateTopics without a count "
        f"(default {defaults.partitions})",
    )
    serve.add_argument(
        "--no-auto-create",
        action="store_const",
        const=True,
        help="do not create topics on Metadata or Produce; unknown topics get "
        "UNKNOWN_TOPIC_OR_PARTITION",
    )
    serve.add_argument(
        "--verify-crc",
        action="store_const",
        const=True,
        help="check every batch's CRC-32C; a mismatch gets CORRUPT_MESSAGE (default: off, "
        "since it costs a pass over the bytes)",
    )
    serve.add_argument(
        "--max-frame-bytes",
        type=int,
        metavar="BYTES",
        help=f"close connections that send a larger request (default {defaults.max_frame_bytes}, "
        "100 MiB, as Kafka's socket.request.max.bytes)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="connections served at once, over every node (Kafka's max.connections); "
        "beyond it new ones wait to be accepted until one closes (default 0: no limit)",
    )
    serve.add_argument(
        "--max-connections-per-ip",
        type=int,
        metavar="N",
        help="connections at once from one client address (Kafka's "
        "max.connections.per.ip); beyond it a new one is closed at once, with one log line "
        "(default 0: no limit)",
    )
    serve.add_argument(
        "--idle-timeout-ms",
        type=int,
        metavar="MS",
        help="close a connection that sent nothing for this long, one held request "
        "excepted (Kafka's connections.max.idle.ms; default "
        f"{defaults.idle_timeout_ms}; 0: never)",
    )
    serve.add_argument(
        "--max-buffered-bytes",
        type=int,
        metavar="BYTES",
        help="bytes that requests larger than 1 MiB may hold while they are read, over all "
        "connections (Kafka's queued.max.request.bytes): such a request reserves its "
        "announced size before its body is read, and its connection stops reading until "
        "there is room; smaller requests keep flowing; one announced larger than the "
        f"whole budget closes its connection (default {defaults.max_buffered_bytes})",
    )
    serve.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus text at http://HOST:PORT/metrics (default: off)",
    )
    serve.add_argument(
        "--schema-registry",
        metavar="HOST:PORT",
        help="serve the Schema Registry REST paths clients use at http://HOST:PORT, in memory: "
        "the format=avro source topics' schemas under <topic>-value, and whatever producers "
        "register (default: off)",
    )
    serve.add_argument(
        "--summary-json",
        metavar="PATH",
        help="write what the broker counted here at shutdown (JSON; the folder must exist and "
        "be writable, which is checked at start)",
    )
    serve.add_argument(
        "--report-interval",
        type=float,
        metavar="SECONDS",
        help=f"seconds between console lines (default {defaults.report_interval:g})",
    )
    serve.add_argument(
        "--fault",
        action="append",
        metavar="SPEC",
        help="apply a fault from the start (repeatable): latency:api=Produce,ms=20[,node=N] "
        "(or p50=MS,p99=MS), error:api=Produce|Fetch,code=NAME[,rate=R][,node=N], "
        "down:node=N[,for=5s], move:topic=T,partition=P,to=N, "
        "throttle:produce-mbps=M[,fetch-mbps=M][,node=N]; live ones come and go over "
        "HTTP on the --metrics listener: see `nullbroker fault --help`",
    )
    serve.add_argument(
        "--source",
        action="append",
        metavar="NAME:OPTIONS",
        help="declare a synthetic source topic (repeatable): NAME:partitions=P,records=N,"
        "size=S[,key-size=K][,rate=R][,compression=none|gzip|snappy|lz4|zstd][,headers=H]"
        "[,payload-file=PATH[,payload-delimiter=D]][,format=json,schema=PATH]"
        "[,format=avro,schema=PATH.avsc[,wire=confluent[,schema-id=N]]]"
        "[,format=nexmark[,nexmark-rate=E]]. "
        "records=N per partition exist from the start; rate=R grows each partition by R "
        "records/s from the broker's start (capped by records when both are given); "
        "payload-file: values are the file's lines (or D-separated records), cycled by offset; "
        "format=json: values generated from the JSON Schema in PATH; format=avro: Avro binary "
        "values generated from the Avro schema in PATH.avsc, with wire=confluent behind "
        "Confluent's magic byte and schema id (default 1); format=nexmark: the Nexmark "
        "benchmark's person, auction and bid events as JSON, E events/s of event time "
        "(default rate x partitions, else 10000)",
    )
    serve.add_argument(
        "--produced-record-size",
        type=int,
        metavar="BYTES",
        help=f"value size of the synthetic records Fetch serves for produced topics "
        f"(default {defaults.produced_record_size})",
    )
    serve.add_argument(
        "--retain",
        type=int,
        metavar="BYTES",
        help="keep each produced partition's newest batches, up to BYTES, as received, and "
        "serve them back by Fetch with their real offsets, so that consumers read exactly "
        "what was produced (end-to-end latency); the log start moves as batches are dropped. "
        f"Default {defaults.retain}: nothing is kept and Fetch serves synthetic records",
    )
    serve.add_argument(
        "--group-initial-rebalance-delay-ms",
        type=int,
        metavar="MS",
        help="how long a new or empty consumer group waits for more members before its "
        f"first rebalance completes (default {defaults.group_initial_rebalance_delay_ms}, as "
        "Kafka's group.initial.rebalance.delay.ms; 0 for tests)",
    )
    serve.add_argument(
        "--fetch-session-cache-slots",
        type=int,
        metavar="N",
        help="fetch sessions (KIP-227) each node keeps for consumers' incremental fetches "
        f"(default {defaults.fetch_session_cache_slots}, as Kafka's "
        "max.incremental.fetch.session.cache.slots; 0: none, every Fetch is full)",
    )
    serve.add_argument(
        "--offsets-topic-partitions",
        type=int,
        metavar="N",
        help="partitions of __consumer_offsets: on a cluster, the leader of the one that "
        "holds a group coordinates it (default "
        f"{defaults.offsets_topic_partitions}, as Kafka's offsets.topic.num.partitions)",
    )
    serve.add_argument(
        "--transaction-state-partitions",
        type=int,
        metavar="N",
        help="partitions of __transaction_state, likewise for transactional ids (default "
        f"{defaults.transaction_state_partitions}, as Kafka's "
        "transaction.state.log.num.partitions)",
    )
    serve.add_argument(
        "--group-consumer-heartbeat-interval-ms",
        type=int,
        metavar="MS",
        help="how often members of groups of the new protocol (KIP-848, "
        "group.protocol=consumer) are told to heartbeat: partitions move between members "
        f"at heartbeats (default {defaults.group_consumer_heartbeat_interval_ms}, as "
        "Kafka's group.consumer.heartbeat.interval.ms)",
    )
    serve.add_argument(
        "--group-consumer-assignment-interval-ms",
        type=int,
        metavar="MS",
        help="how often, at most, such a group's partitions are assigned again: a member "
        "joining sooner gets its partitions at a heartbeat after it (default "
        f"{defaults.group_consumer_assignment_interval_ms}, as Kafka 4.4's "
        "group.consumer.assignment.interval.ms; 0 assigns at every change, as Kafka 4.1)",
    )
    serve.add_argument(
        "--group-consumer-session-timeout-ms",
        type=int,
        metavar="MS",
        help="how long such a member may go without a heartbeat before it is removed and "
        f"its partitions reassigned (default {defaults.group_consumer_session_timeout_ms}, "
        "as Kafka's group.consumer.session.timeout.ms)",
    )
    serve.add_argument(
        "--group-share-record-lock-duration-ms",
        type=int,
        metavar="MS",
        help="how long a share group's member (KIP-932, a queue's consumer) holds a record "
        "it acquired before the record goes to another member (default "
        f"{defaults.group_share_record_lock_duration_ms}, as Kafka's "
        "group.share.record.lock.duration.ms; a group's share.record.lock.duration.ms "
        "overrides it)",
    )
    serve.add_argument(
        "--group-share-min-record-lock-duration-ms",
        type=int,
        metavar="MS",
        help="the least share.record.lock.duration.ms a group may set (default "
        f"{defaults.group_share_min_record_lock_duration_ms}, as Kafka's "
        "group.share.min.record.lock.duration.ms; lower it to test lock timeouts quickly)",
    )
    serve.add_argument(
        "--group-share-delivery-count-limit",
        type=int,
        metavar="N",
        help="deliveries of a record to a share group before it is archived rather than "
        f"delivered again (default {defaults.group_share_delivery_count_limit}, as Kafka's "
        "group.share.delivery.count.limit)",
    )
    serve.add_argument(
        "--group-share-partition-max-record-locks",
        type=int,
        metavar="N",
        help="records a share group may have in flight per partition, which bounds its "
        f"memory (default {defaults.group_share_partition_max_record_locks}, as Kafka's "
        "group.share.partition.max.record.locks)",
    )
    serve.add_argument(
        "--group-share-heartbeat-interval-ms",
        type=int,
        metavar="MS",
        help="how often share group members are told to heartbeat (default "
        f"{defaults.group_share_heartbeat_interval_ms}, as Kafka's "
        "group.share.heartbeat.interval.ms)",
    )
    serve.add_argument(
        "--group-share-session-timeout-ms",
        type=int,
        metavar="MS",
        help="how long a share group member may go without a heartbeat before it is "
        "removed and the records it holds released (default "
        f"{defaults.group_share_session_timeout_ms}, as Kafka's "
        "group.share.session.timeout.ms)",
    )
    serve.add_argument(
        "--client-metrics",
        metavar="PREFIXES",
        help="client telemetry (KIP-714): the metric name prefixes producers and consumers "
        "are asked to push, comma separated (e.g. org.apache.kafka.producer.); '*' (the "
        "default) asks for every metric; 'off' advertises neither GetTelemetrySubscriptions "
        "nor PushTelemetry, so clients push nothing. What they push is in /metrics "
        "(nullbroker_client_*), /accounts, the status page and the summary",
    )
    serve.add_argument(
        "--client-metrics-interval-ms",
        type=int,
        metavar="MS",
        help="how often clients push their metrics (default "
        f"{defaults.client_metrics_interval_ms}; Kafka's interval.ms of a client-metrics "
        "subscription, 100 to 3600000)",
    )
    serve.add_argument(
        "--client-metrics-match",
        metavar="KEY=REGEX,...",
        help="ask only the clients whose every KEY matches its REGEX (the whole value): "
        "client_id, client_software_name, client_software_version, client_source_address, "
        "client_source_port, client_instance_id (default: every client)",
    )
    serve.add_argument(
        "--client-metrics-max-clients",
        type=int,
        metavar="N",
        help="client instances whose pushed metrics are kept; a new one pushes out one that "
        "ended, else the one that pushed least recently "
        f"(default {defaults.client_metrics_max_clients})",
    )
    serve.add_argument(
        "--client-metrics-max-series",
        type=int,
        metavar="N",
        help="pushed series (a metric and its attributes) kept over every client; more are "
        f"counted as dropped (default {defaults.client_metrics_max_series})",
    )
    serve.add_argument(
        "--telemetry-max-bytes",
        type=int,
        metavar="BYTES",
        help="the largest push a client may send, compressed (TELEMETRY_TOO_LARGE) and "
        f"inflated (INVALID_RECORD), as Kafka's telemetry.max.bytes (default "
        f"{defaults.telemetry_max_bytes})",
    )
    serve.add_argument(
        "--connection-loop",
        choices=CONNECTION_LOOPS,
        help="what serves plain TCP connections: epoll (the default), a loop in the main "
        "thread that answers every ready connection's requests itself and hosts trio, the "
        "broker's frame (listeners, held requests, groups, metrics), as its guest; or trio "
        "alone, which costs more CPU per request (to compare, or to rule the loop out)",
    )
    serve.add_argument(
        "--config", metavar="FILE", help=f"a TOML file of settings (or ${CONFIG_FILE_VARIABLE})"
    )
    from .fault_command import add_parser

    add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "fault":
        from .fault_command import run

        return run(args)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    flags = {key: value for key, value in vars(args).items() if key not in ("command", "config")}
    try:
        config = load(flags, args.config or os.environ.get(CONFIG_FILE_VARIABLE))
    except ConfigError as error:
        print(f"nullbroker: {error}", file=sys.stderr)
        return 2
    try:
        if config.process_count > 1 or config.node_map is not None:
            from ..workers.processes import serve_processes

            return serve_processes(config)
        run_server(config)
    except StartupError as error:
        print(f"nullbroker: {error}", file=sys.stderr)
        return 2
    return 0
