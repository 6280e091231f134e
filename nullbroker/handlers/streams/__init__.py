"""Streams groups' APIs (KIP-1071, Kafka Streams' own group protocol): membership and task
assignment (StreamsGroupHeartbeat), the administration's view (StreamsGroupDescribe) and the
topology's description (StreamsGroupTopologyDescriptionUpdate). The groups are
nullbroker.state.streams'."""
