"""What the config APIs (DescribeConfigs, IncrementalAlterConfigs, and CreateTopics v5+,
which reports a new topic's configs) share: the resource types they name, and a node's
broker configs in their layers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...state.broker_configs import BrokerLayers, static_broker_configs

if TYPE_CHECKING:
    from ...broker import Broker


TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8
CLIENT_METRICS_RESOURCE = 16
"""A KIP-714 subscription (nullbroker.state.client_metrics; handlers/configs/client_metrics)."""
GROUP_RESOURCE = 32


def node_layers(broker: Broker, node_id: int) -> BrokerLayers:
    """A node's broker configs: set for it, for every broker, and at start."""
    return BrokerLayers(
        broker.broker_configs.get(str(node_id), {}),
        broker.broker_configs.get("", {}),
        static_broker_configs(broker.config, node_id),
    )
