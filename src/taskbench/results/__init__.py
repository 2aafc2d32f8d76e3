"""Typed results: the models a run produces and every report reads, and the reader for old files."""

from taskbench.results.cases import (
    OVERHEAD_SERVERS,
    SCHEMA_VERSION,
    Case,
    CaseBase,
    CeleryCase,
    Commit,
    HttpCase,
    Machine,
    OverheadCase,
    OverheadRound,
    QueueCase,
    Result,
    ScenarioInfo,
    passed,
)
from taskbench.results.migrate import RANKED_BY, ResultFormatError, load, parse
from taskbench.results.model import (
    REFUSED,
    AuditResult,
    BrokerRestart,
    Cleanup,
    FaultRecord,
    FaultSecond,
    LimitAsked,
    LimitRecord,
    LimitStats,
    Load,
    MetricsCheck,
    Percentiles,
    Promise,
    PromiseBound,
    RepeatRun,
    RssRecord,
    SeriesPoint,
    Spread,
    Status,
    Summary,
)
from taskbench.results.soak import Growth, SoakRecord

__all__ = [
    "OVERHEAD_SERVERS", "RANKED_BY", "REFUSED", "SCHEMA_VERSION", "AuditResult", "BrokerRestart", "Case",
    "CaseBase", "CeleryCase", "Cleanup", "Commit", "FaultRecord", "FaultSecond", "Growth", "HttpCase", "LimitAsked",
    "LimitRecord", "LimitStats", "Load", "Machine", "MetricsCheck", "OverheadCase", "OverheadRound",
    "Percentiles", "Promise", "PromiseBound", "QueueCase", "RepeatRun", "Result", "ResultFormatError",
    "RssRecord", "ScenarioInfo", "SeriesPoint", "SoakRecord", "Spread", "Status", "Summary", "load", "parse", "passed",
]
