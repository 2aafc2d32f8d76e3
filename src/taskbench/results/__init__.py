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
from taskbench.results.faults import BrokerRestart, FaultRecord, FaultSecond, Promise, PromiseBound
from taskbench.results.limits import Cleanup, LimitAsked, LimitRecord, LimitStats, MetricsCheck
from taskbench.results.migrate import RANKED_BY, ResultFormatError, load, parse
from taskbench.results.model import REFUSED, AuditResult, Load, Percentiles, Status
from taskbench.results.soak import Growth, SoakRecord
from taskbench.results.summary import RepeatRun, RssRecord, SeriesPoint, Spread, Summary

__all__ = [
    "OVERHEAD_SERVERS", "RANKED_BY", "REFUSED", "SCHEMA_VERSION", "AuditResult", "BrokerRestart", "Case",
    "CaseBase", "CeleryCase", "Cleanup", "Commit", "FaultRecord", "FaultSecond", "Growth", "HttpCase", "LimitAsked",
    "LimitRecord", "LimitStats", "Load", "Machine", "MetricsCheck", "OverheadCase", "OverheadRound",
    "Percentiles", "Promise", "PromiseBound", "QueueCase", "RepeatRun", "Result", "ResultFormatError",
    "RssRecord", "ScenarioInfo", "SeriesPoint", "SoakRecord", "Spread", "Status", "Summary", "load", "parse", "passed",
]
