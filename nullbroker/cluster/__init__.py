"""The cluster's rules that requests consult: which node leads what, and faults."""
