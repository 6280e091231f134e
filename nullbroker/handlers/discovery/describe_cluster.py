"""DescribeCluster: the cluster's id, its controller and its live brokers, each at the host
the client reached us at (the Admin client's describeCluster)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import CLUSTER_OPERATIONS, NO_THROTTLE, authorized_operations, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


BROKERS_ENDPOINT = 1


KEY = ApiKey.DESCRIBE_CLUSTER


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.DESCRIBE_CLUSTER, version)
    body = request.body
    endpoint_type = getattr(body, "endpoint_type", BROKERS_ENDPOINT)
    error = ErrorCode.none
    message = None
    if endpoint_type != BROKERS_ENDPOINT:
        error = counted(broker, ErrorCode.unsupported_endpoint_type)
        message = "nullbroker has no controller endpoints; ask for brokers (endpoint type 1)"
    return make(
        types.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        endpoint_type=endpoint_type,
        cluster_id=broker.cluster_id,
        controller_id=broker.cluster.controller,
        brokers=tuple(
            make(
                types.DescribeClusterBroker,
                broker_id=node,
                host=session.node(broker.cluster, node).host,
                port=session.node(broker.cluster, node).port,
                rack=None,
                is_fenced=False,
            )
            for node in broker.cluster.live
        )
        if error is ErrorCode.none
        else (),
        cluster_authorized_operations=authorized_operations(
            body.include_cluster_authorized_operations, CLUSTER_OPERATIONS
        ),
    )
