"""Share groups' APIs (KIP-932, queues): membership (ShareGroupHeartbeat, ShareGroupDescribe),
records acquired and acknowledged (ShareFetch, ShareAcknowledge), and the administration of
their start offsets (Describe/Alter/DeleteShareGroupOffsets). The groups and their share
partitions are nullbroker.state.share's."""
