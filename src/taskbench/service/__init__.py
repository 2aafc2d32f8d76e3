"""The reference FastAPI service: one backend per process."""
