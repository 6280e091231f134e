"""The two ways a pykafka query fails on purpose: a wrong option, or data that is gone."""

from __future__ import annotations

import logging

logger = logging.getLogger("nullbroker.spark")

DATA_LOSS_ADVICE = (
    "Some data may have been lost because it is not available in Kafka any more: it was "
    "deleted (retention, DeleteRecords) or the topic was deleted or recreated before the query "
    "read it. If you want the query to go on in such cases, set the source option "
    "'failOnDataLoss' to 'false'."
)


class PyKafkaOptionError(ValueError):
    """An option of the pykafka data source is missing or wrong; the message names it."""


class DataLossError(RuntimeError):
    """Offsets a query was told to read no longer exist (Spark's failOnDataLoss=true)."""


def option_error(option: str, problem: str) -> PyKafkaOptionError:
    """`pykafka: option 'NAME' PROBLEM`, the one shape every option error has."""
    return PyKafkaOptionError(f"pykafka: option '{option}' {problem}")


def report_data_loss(fail_on_data_loss: bool, message: str) -> None:
    """Raise DataLossError, or with failOnDataLoss=false log a warning and let the caller skip
    what is missing, as Spark's Kafka source does."""
    if fail_on_data_loss:
        raise DataLossError(f"pykafka: {message}. {DATA_LOSS_ADVICE}")
    logger.warning("pykafka: %s; skipping it (failOnDataLoss=false)", message)


class PyKafkaColumnError(ValueError):
    """The data written to Kafka lacks a column it needs, or has one of the wrong type."""
