"""Nexmark queries as baseline jobs: a `format=nexmark` source topic read through Spark's
own Kafka connector, parsed with `from_json`, and queried as the benchmark defines its
queries (Beam's and the Nexmark Flink project's definitions, run as batch reads):

- q0, pass-through: every bid;
- q1, currency conversion: each bid's price in euros (x 0.908);
- q2, selection: the bids on auctions whose id is a multiple of 123;
- q3, local item suggestion: auctions of category 10 joined with their sellers in OR, ID
  or CA (name, city, state, auction id);
- q5, hot items: in sliding windows of 10 s every 5 s of event time, the auctions with the
  most bids;
- q7, highest bid: in tumbling windows of 10 s, the bids at the window's highest price.

    nullbroker serve --source 'nexmark:partitions=4,records=250000,format=nexmark'
    python -m spark_tests.jobs.nexmark --bootstrap 127.0.0.1:9092 --events 1000000 --partitions 4

Each query is timed on its own (a fresh read of the topic into Spark's `noop` sink):
events/s counts the events read, the rows are the query's result rows.
spark_tests/support/nexmark_answers.py computes the same results in plain Python from the generator;
spark_tests/baseline/test_nexmark.py checks one against the other.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from decimal import Decimal

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from . import cli

TOPIC = "nexmark"
EURO_RATE = Decimal("0.908")
AUCTION_SKIP = 123
LOCAL_STATES = ("OR", "ID", "CA")
LOCAL_CATEGORY = 10
HOT_WINDOW, HOT_SLIDE, HIGHEST_WINDOW = "10 seconds", "5 seconds", "10 seconds"

PERSON = (
    "id bigint, name string, emailAddress string, creditCard string, city string, "
    "state string, dateTime bigint, extra string"
)
AUCTION = (
    "id bigint, itemName string, description string, initialBid bigint, reserve bigint, "
    "dateTime bigint, expires bigint, seller bigint, category bigint, extra string"
)
BID = (
    "auction bigint, bidder bigint, price bigint, channel string, url string, "
    "dateTime bigint, extra string"
)
EVENT_SCHEMA = (
    f"event_type int, person struct<{PERSON}>, auction struct<{AUCTION}>, bid struct<{BID}>"
)


def read_events(spark: SparkSession, bootstrap: str, topic: str = TOPIC) -> DataFrame:
    """Every event of `topic`, parsed: Kafka's partition and offset, then the event's
    columns (event_type, person, auction, bid)."""
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    parsed = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event")
    return frame.select("partition", "offset", parsed).select("partition", "offset", "event.*")


def _bids(events: DataFrame) -> DataFrame:
    return events.where(F.col("event_type") == 2).select("bid.*")


def _window_start_ms(window: Column) -> Column:
    # Seconds since the epoch: the windows are whole seconds, and this is free of time zones.
    return (window.start.cast("long") * 1000).alias("window_start")


def q0(events: DataFrame) -> DataFrame:
    return _bids(events)


def q1(events: DataFrame) -> DataFrame:
    price = (F.col("price") * F.lit(EURO_RATE)).alias("price")
    return _bids(events).select("auction", "bidder", price, "dateTime")


def q2(events: DataFrame) -> DataFrame:
    return _bids(events).where(F.col("auction") % AUCTION_SKIP == 0).select("auction", "price")


def q3(events: DataFrame) -> DataFrame:
    auctions = events.where(F.col("event_type") == 1).select("auction.*")
    people = events.where(F.col("event_type") == 0).select("person.*")
    local = (
        auctions.where(F.col("category") == LOCAL_CATEGORY)
        .alias("a")
        .join(
            people.where(F.col("state").isin(*LOCAL_STATES)).alias("p"),
            F.col("a.seller") == F.col("p.id"),
        )
    )
    return local.select("p.name", "p.city", "p.state", F.col("a.id").alias("auction"))


def q5(events: DataFrame) -> DataFrame:
    bids = _bids(events).withColumn("at", F.timestamp_millis("dateTime"))
    counts = bids.groupBy(F.window("at", HOT_WINDOW, HOT_SLIDE).alias("w"), "auction").count()
    most = counts.groupBy("w").agg(F.max("count").alias("most"))
    return (
        counts.join(most, "w")
        .where(F.col("count") == F.col("most"))
        .select(_window_start_ms(F.col("w")), "auction", F.col("count").alias("bids"))
    )


def q7(events: DataFrame) -> DataFrame:
    bids = _bids(events).withColumn("w", F.window(F.timestamp_millis("dateTime"), HIGHEST_WINDOW))
    highest = bids.groupBy("w").agg(F.max("price").alias("highest"))
    return (
        bids.join(highest, "w")
        .where(F.col("price") == F.col("highest"))
        .select(_window_start_ms(F.col("w")), "auction", "bidder", "price", "dateTime")
    )


QUERIES: dict[str, Callable[[DataFrame], DataFrame]] = {
    query.__name__: query for query in (q0, q1, q2, q3, q5, q7)
}


def timed(spark: SparkSession, bootstrap: str, name: str, events: int) -> dict[str, object]:
    """One query over a fresh read of the topic into `noop`: its events/s and result rows
    (counted as they pass, so the query runs once)."""
    counted = Observation(f"nexmark_{name}")
    query = QUERIES[name](read_events(spark, bootstrap)).observe(
        counted, F.count(F.lit(1)).alias("rows")
    )
    started = time.perf_counter()
    query.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - started
    rows = counted.get["rows"]
    return {
        "job": f"nexmark_{name}",
        "events": events,
        "seconds": round(seconds, 3),
        "events_per_s": round(events / seconds),
        "result_rows": rows,
    }


def source_flag(events: int, partitions: int, rate: float) -> str:
    per_partition = -(-events // partitions)
    return (
        f"{TOPIC}:partitions={partitions},records={per_partition},format=nexmark,"
        f"nexmark-rate={rate:g}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.connector_job_parser(
        "nexmark",
        __doc__ or "",
        "a broker serving the source topic 'nexmark'",
        "start a nullbroker on a free port of 127.0.0.1 serving the topic",
    )
    parser.add_argument(
        "--events",
        type=int,
        default=1_000_000,
        help="events in all, for --start-broker's topic (default 1,000,000)",
    )
    parser.add_argument("--partitions", type=int, default=4, help="partitions (default 4)")
    parser.add_argument(
        "--nexmark-rate",
        type=float,
        default=10_000,
        help="events/s of event time, for --start-broker's topic (default Beam's 10,000)",
    )
    parser.add_argument(
        "--query", action="append", choices=sorted(QUERIES), help="a query to run (default: all)"
    )
    args = parser.parse_args(argv)
    flags = ["--source", source_flag(args.events, args.partitions, args.nexmark_rate)]
    with cli.connector_session(args, flags, "the Nexmark job") as (spark, bootstrap):
        events = read_events(spark, bootstrap).count()
        for name in args.query or QUERIES:
            result = timed(spark, bootstrap, name, events)
            print(
                json.dumps(result)
                if args.json
                else f"nexmark {name}: {events:,} events in {result['seconds']} s: "
                f"{result['events_per_s']:,} events/s, {result['result_rows']:,} result rows",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
