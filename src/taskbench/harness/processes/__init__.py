"""The processes of a run: started, placed, limited and stopped.

:mod:`.stack` (the one lifecycle of a case's processes), :mod:`.process_set` (each child in its own
process group, stopped by its id: SIGTERM, then SIGKILL), :mod:`.cgroups` (CPU and memory limits per
component), :mod:`.pinning` (this process's cores for a load phase) and :mod:`.envs` (one uv
environment per backend extra, where a backend's processes run).
"""
