"""Consumer groups: the classic protocol, the new one (KIP-848), and the offsets
committed to both."""
