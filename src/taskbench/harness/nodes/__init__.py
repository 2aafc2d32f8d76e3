"""Stand-in nodes on one machine (network namespaces) for the pods of a cluster run: ``taskbench run --nodes N``."""
