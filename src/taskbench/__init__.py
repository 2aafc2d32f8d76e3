"""taskbench: measure and audit FastAPI background-task backends."""
