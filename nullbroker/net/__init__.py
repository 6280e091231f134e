"""The connection layer: listeners, TLS and SASL, the epoll host loop, connections, the C
Produce lane, the read budget and idle connections. Handlers never see any of it."""
