"""Typed results: the models a run produces and every report reads, and the reader for old files."""

from taskbench.results.cases import (
    SCHEMA_VERSION,
    Case,
    CaseBase,
    CeleryCase,
    Commit,
    HttpCase,
    Machine,
    QueueCase,
    Result,
    ScenarioInfo,
    passed,
)
from taskbench.results.migrate import RANKED_BY, ResultFormatError, load, parse
from taskbench.results.model import (
    AuditResult,
    BrokerRestart,
    Cleanup,
    FaultRecord,
    LimitAsked,
    LimitRecord,
    LimitStats,
    Load,
    MetricsCheck,
    Percentiles,
    RepeatRun,
    SeriesPoint,
    Spread,
    Status,
    Summary,
)

__all__ = [
    "RANKED_BY", "SCHEMA_VERSION", "AuditResult", "BrokerRestart", "Case", "CaseBase", "CeleryCase", "Cleanup",
    "Commit", "FaultRecord", "HttpCase", "LimitAsked", "LimitRecord", "LimitStats", "Load", "Machine", "MetricsCheck",
    "Percentiles", "QueueCase", "RepeatRun", "Result", "ResultFormatError", "ScenarioInfo", "SeriesPoint",
    "Spread", "Status", "Summary", "load", "parse", "passed",
]
