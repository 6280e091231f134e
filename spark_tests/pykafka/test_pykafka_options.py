"""pykafka's options and offset arithmetic, checked without a broker: every wrong option is
named in its error, and ranges split and rate-limit as Spark's Kafka source does."""

from __future__ import annotations

import re

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from nullbroker.spark import PyKafkaOptionError
from nullbroker.spark.offsets import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)
from nullbroker.spark.options import (
    EARLIEST,
    LATEST,
    OffsetBound,
    parse_read_options,
    parse_write_options,
)

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def read_options(**options: str) -> dict[str, str]:
    return {**BOOTSTRAP, "subscribe": "t", **options}


def refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(PyKafkaOptionError, match=re.escape(message)):
        parse_read_options(options)


def test_a_subscription_is_required() -> None:
    refused(BOOTSTRAP, "pykafka: option 'subscribe', 'subscribePattern' or 'assign' is required")


def test_only_one_subscription_is_allowed() -> None:
    refused(
        {**BOOTSTRAP, "subscribe": "t", "assign": '{"t":[0]}'},
        "pykafka: options 'subscribe', 'assign' are exclusive",
    )


def test_bootstrap_servers_are_required() -> None:
    refused({"subscribe": "t"}, "pykafka: option 'kafka.bootstrap.servers' is required")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": " , "}, "option 'subscribe' names no topic"),
        ({"subscribePattern": "("}, "option 'subscribePattern' is not a valid regular"),
        ({"assign": "t:0"}, "option 'assign' must be JSON"),
        ({"assign": '{"t":[-1]}'}, "option 'assign' must be JSON"),
        ({"assign": '{"t":[]}'}, "option 'assign' must be JSON"),
    ],
)
def test_a_wrong_subscription_names_its_option(options: dict[str, str], message: str) -> None:
    refused({**BOOTSTRAP, **options}, message)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "first"}, "option 'startingOffsets' must be"),
        ({"startingOffsets": '{"t":{"x":1}}'}, "option 'startingOffsets' must be"),
        ({"endingOffsets": '{"t":{"0":-3}}'}, "option 'endingOffsets' must be"),
        ({"endingOffsets": '{"t":[0]}'}, "option 'endingOffsets' must be"),
        ({"maxOffsetsPerTrigger": "0"}, "option 'maxOffsetsPerTrigger' must be a positive"),
        ({"minPartitions": "many"}, "option 'minPartitions' must be a positive"),
        ({"kafkaConsumer.pollTimeoutMs": "-5"}, "option 'kafkaConsumer.pollTimeoutMs' must be"),
        ({"failOnDataLoss": "maybe"}, "option 'failOnDataLoss' must be 'true' or 'false'"),
        ({"includeHeaders": "yes"}, "option 'includeHeaders' must be 'true' or 'false'"),
        ({"kafka.auto.offset.reset": "earliest"}, "option 'kafka.auto.offset.reset' is not"),
        ({"kafka.enable.auto.commit": "true"}, "option 'kafka.enable.auto.commit' is not"),
        ({"startingTimestamp": "1000"}, "option 'startingTimestamp' is not supported"),
        ({"minOffsetsPerTrigger": "10"}, "option 'minOffsetsPerTrigger' is not supported"),
    ],
)
def test_a_wrong_option_is_named(options: dict[str, str], message: str) -> None:
    refused(read_options(**options), message)


def test_options_are_case_insensitive_as_in_spark() -> None:
    options = parse_read_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "t.*", "FAILONDATALOSS": "false"}
    )
    assert options.subscription.pattern == "t.*"
    assert options.fail_on_data_loss is False


def test_kafka_options_reach_the_client_without_their_prefix() -> None:
    options = parse_read_options(
        read_options(**{"kafka.fetch.min.bytes": "1", "kafka.group.id": "mine"})
    )
    assert options.client_config == {"bootstrap.servers": "127.0.0.1:1", "fetch.min.bytes": "1"}
    config = options.consumer_config(100)
    assert config["group.id"] == "mine"
    assert config["enable.auto.commit"] is False
    assert config["auto.offset.reset"] == "error"


def test_a_generated_group_id_uses_the_prefix() -> None:
    options = parse_read_options(read_options(groupIdPrefix="job"))
    assert options.group_id.startswith("job-")


def test_batch_reads_default_to_earliest_through_latest() -> None:
    starting, ending = parse_read_options(read_options()).batch_bounds()
    assert (starting.every, ending.every) == (EARLIEST, LATEST)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "latest"}, "option 'startingOffsets' can't be latest"),
        ({"startingOffsets": '{"t":{"0":-1}}'}, "option 'startingOffsets' can't be latest"),
        ({"endingOffsets": "earliest"}, "option 'endingOffsets' can't be earliest"),
        ({"endingOffsets": '{"t":{"0":-2}}'}, "option 'endingOffsets' can't be earliest"),
    ],
)
def test_batch_reads_refuse_a_latest_start_or_an_earliest_end(
    options: dict[str, str], message: str
) -> None:
    parsed = parse_read_options(read_options(**options))
    with pytest.raises(PyKafkaOptionError, match=re.escape(message)):
        parsed.batch_bounds()


def test_streaming_reads_default_to_latest_and_refuse_an_end() -> None:
    assert parse_read_options(read_options()).streaming_start().every == LATEST
    parsed = parse_read_options(read_options(endingOffsets="latest"))
    with pytest.raises(PyKafkaOptionError, match="option 'endingOffsets' is not valid"):
        parsed.streaming_start()


def test_per_partition_offsets_must_cover_exactly_the_subscribed_partitions() -> None:
    bound = OffsetBound("startingOffsets", specific={("t", 0): 5, ("u", 0): -2})
    with pytest.raises(PyKafkaOptionError, match="missing: t-1; not subscribed: u-0"):
        bound.for_partitions([("t", 0), ("t", 1)])
    assert bound.for_partitions([("u", 0), ("t", 0)]) == {("t", 0): 5, ("u", 0): EARLIEST}


def test_subscriptions_pick_partitions_from_the_metadata() -> None:
    counts = {"clicks": 2, "clicks-old": 1, "other": 1}
    pattern = parse_read_options({**BOOTSTRAP, "subscribePattern": "clicks"}).subscription
    anchored = parse_read_options({**BOOTSTRAP, "subscribePattern": "^clicks$"}).subscription
    listed = parse_read_options(read_options(subscribe="other,absent")).subscription
    assigned = parse_read_options({**BOOTSTRAP, "assign": '{"x":[3,1]}'}).subscription
    # As Spark's connector (Scala's findFirstIn): found anywhere in the name unless anchored.
    assert pattern.partitions(counts) == [("clicks", 0), ("clicks", 1), ("clicks-old", 0)]
    assert anchored.partitions(counts) == [("clicks", 0), ("clicks", 1)]
    assert listed.partitions(counts) == [("other", 0)]
    assert assigned.partitions(counts) == [("x", 1), ("x", 3)]


def test_writes_hash_keys_like_java_and_are_idempotent_unless_acks_say_otherwise() -> None:
    config = parse_write_options(BOOTSTRAP).producer_config
    assert config["partitioner"] == "murmur2_random"
    assert config["enable.idempotence"] is True
    relaxed = parse_write_options({**BOOTSTRAP, "kafka.acks": "1"}).producer_config
    assert "enable.idempotence" not in relaxed
    with pytest.raises(PyKafkaOptionError, match="option 'topic' must not be empty"):
        parse_write_options({**BOOTSTRAP, "topic": " "})


def test_offsets_json_is_sparks_and_ordered() -> None:
    offsets = {("b", 10): 7, ("a", 2): 1, ("b", 9): 0}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"]
    assert list(as_json["b"]) == ["9", "10"]
    assert offsets_from_json(as_json) == offsets


def ranges(*spans: tuple[str, int, int]) -> list[OffsetRange]:
    return [OffsetRange(topic, 0, start, end) for topic, start, end in spans]


@pytest.mark.parametrize(
    ("given", "min_partitions", "expected"),
    [
        # Cases of Spark's KafkaOffsetRangeCalculatorSuite.
        ([("a", 1, 2), ("b", 1, 2)], None, [("a", 1, 2), ("b", 1, 2)]),
        ([("a", 1, 2), ("b", 1, 2)], 2, [("a", 1, 2), ("b", 1, 2)]),
        ([("a", 1, 1), ("b", 1, 21)], 4, [("b", 1, 6), ("b", 6, 11), ("b", 11, 16), ("b", 16, 21)]),
        (
            [("a", 1, 5), ("b", 1, 21)],
            4,
            [("a", 1, 5), ("b", 1, 7), ("b", 7, 14), ("b", 14, 21)],
        ),
        (
            [("a", 0, 10), ("b", 0, 10), ("c", 0, 1)],
            6,
            [
                ("a", 0, 3),
                ("a", 3, 6),
                ("a", 6, 10),
                ("b", 0, 3),
                ("b", 3, 6),
                ("b", 6, 10),
                ("c", 0, 1),
            ],
        ),
    ],
)
def test_min_partitions_splits_as_sparks_range_calculator(
    given: list[tuple[str, int, int]],
    min_partitions: int | None,
    expected: list[tuple[str, int, int]],
) -> None:
    assert split_ranges(ranges(*given), min_partitions) == ranges(*expected)


def test_the_rate_limit_shares_offsets_by_backlog_and_never_starves() -> None:
    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 1000, ("t", 1): 101, ("t", 2): 50}
    # Backlogs 1000, 1 and 50 (a new partition from its earliest, 0): shares of 100.
    limited = rate_limit(100, start, latest, {("t", 2): 0})
    assert limited == {("t", 0): 95, ("t", 1): 101, ("t", 2): 4}
    assert rate_limit(100, latest, latest, {}) == latest


def test_a_wrong_option_fails_the_load_with_its_name(spark: SparkSession) -> None:
    reader = spark.read.format("pykafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
    with pytest.raises(PySparkException, match=re.escape("option 'subscribe', 'subscribePattern'")):
        reader.load()
    with pytest.raises(PySparkException, match="option 'minPartitions' must be a positive"):
        reader.option("subscribe", "t").option("minPartitions", "0").load()
