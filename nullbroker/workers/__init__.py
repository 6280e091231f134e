"""How the broker runs: one process's service, and a cluster spread over processes
(the supervisor, its workers, their channel, the node map)."""
