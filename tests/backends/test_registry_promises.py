"""The promise a fault case is judged by comes from the backend registry, per broker."""

from __future__ import annotations

import re

from taskbench import backends, brokers
from taskbench.harness.faults.recovery import promise_of, unkept_promises


def test_every_backend_states_its_promise_on_every_broker_it_names() -> None:
    for name in backends.available(unsafe=True):
        meta = backends.info(name)
        assert set(meta.delivery) <= set(meta.brokers), f"{name}: a promise for a broker it does not name"
        for broker in meta.brokers:
            assert broker in brokers.BROKERS, f"{name}: unknown broker {broker!r}"
            delivery = meta.delivery_on(broker)
            assert delivery.guarantee in (backends.AT_LEAST_ONCE, backends.AT_MOST_ONCE)
            assert delivery.recovery.strip(), f"{name} on {broker}: says nothing of how a dead worker's task fares"


def test_the_verdict_reads_the_registry(monkeypatch) -> None:
    """An at-most-once entry fails a case on a duplicate and not on a loss; at-least-once the reverse."""
    at_least = promise_of("arq", "redis", durable=True)
    assert at_least.keeps_accepted and not at_least.no_duplicates
    assert unkept_promises(at_least, lost=1, duplicated=0)
    assert not unkept_promises(at_least, lost=0, duplicated=3)

    entry = backends.REGISTRY["arq"]
    changed = backends.BackendInfo(**{**entry.__dict__, "default_delivery": backends.Delivery(
        guarantee=backends.AT_MOST_ONCE, recovery="not re-run")})
    monkeypatch.setitem(backends.REGISTRY, "arq", changed)
    at_most = promise_of("arq", "redis", durable=True)
    assert "at-most-once" in at_most.text
    assert not unkept_promises(at_most, lost=2, duplicated=0)
    assert unkept_promises(at_most, lost=0, duplicated=1)


def test_a_broker_without_persistence_keeps_nothing_whatever_the_library() -> None:
    promise = promise_of("saq", "redis", durable=True, broker_keeps=False)
    assert not promise.keeps_accepted
    assert "without persistence" in promise.text


def test_a_library_setting_changes_the_promise_and_defaults_to_the_library() -> None:
    """SAQ's retries and Procrastinate's stalled-job task decide whether a dead worker's task runs again;
    their options default to the libraries' own (at-most-once), and the verdict follows the value."""
    for name, setting, on in (("saq", "retries", 3), ("saq-postgres", "retries", 2),
                              ("procrastinate", "retry_stalled", True)):
        meta = backends.info(name)
        assert setting in meta.promise_settings
        assert meta.delivery_on(meta.brokers[0]).guarantee == backends.AT_MOST_ONCE, name
        assert meta.delivery_on(meta.brokers[0], {setting: on}).guarantee == backends.AT_LEAST_ONCE, name
        off = promise_of(name, meta.brokers[0], durable=True)
        assert not off.keeps_accepted and off.no_duplicates
        kept = promise_of(name, meta.brokers[0], durable=True, settings={setting: on})
        assert kept.keeps_accepted and not kept.no_duplicates
    pgqueuer = backends.info("pgqueuer").delivery_on("postgres", {"heartbeat_timeout": 7.0})
    assert pgqueuer.guarantee == backends.AT_LEAST_ONCE and pgqueuer.after == 7.0 and "7 s" in pgqueuer.recovery
    # every promise setting is a field of its library's options model, with the library's default
    for name in backends.available(unsafe=True):
        meta = backends.info(name)
        for setting in meta.promise_settings:
            assert setting in meta.options.model_fields, (name, setting)


def test_a_library_option_is_checked_by_its_model_in_one_line(tmp_path) -> None:
    """``--option LIB.KEY=VALUE``: a known key's value converted by the library's model; an unknown library,
    an unknown key or a bad value is one line naming the library and the setting."""

    import pytest

    from taskbench.backends import options
    from taskbench.harness.config import RunConfig

    parsed = options.parse(["saq.retries=3", "rq.worker_ttl=17", "rq.maintenance_interval=2"])
    assert parsed == {"saq": {"retries": "3"}, "rq": {"worker_ttl": "17", "maintenance_interval": "2"}}
    config = RunConfig(backends=("saq", "rq"), options=parsed, output=tmp_path)
    assert config.promise_settings("saq") == {"retries": 3}
    assert config.promise_settings("rq") == {"worker_ttl": 17, "maintenance_interval": 2}
    assert config.options_json("saq") == '{"retries": 3}' and config.options_json("arq") is None
    for given, message in ((["saq.retries=0"], "saq.retries: Input should be greater than or equal to 1"),
                           (["saq.retry=3"], "saq has no setting 'retry'; its settings: retries"),
                           (["saq.retries=many"], "saq.retries: Input should be a valid integer"),
                           (["nope.x=1"], "no library 'nope' takes settings"),
                           (["huey.worker_type=fiber"], "huey.worker_type: Input should be 'thread' or 'process'")):
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            RunConfig(backends=("saq",), options=options.parse(given), output=tmp_path)
    for bad in ("saq.retries", "retries=3", ".x=1", "saq.=1"):
        with pytest.raises(options.OptionError, match=re.escape("write LIB.KEY=VALUE")):
            options.parse([bad])


def test_the_drain_waits_for_a_redelivery_set_by_the_library(tmp_path) -> None:
    from taskbench.harness.config import RunConfig

    config = RunConfig(backends=("pgqueuer", "arq"), task_timeout=3.0, options={"pgqueuer": {"heartbeat_timeout": 20.0}},
                       output=tmp_path)
    assert config.redelivery_wait("pgqueuer") == 20.0 and config.redelivery_wait("arq") == 3.0
    assert config.promise_settings("pgqueuer") == {"heartbeat_timeout": 20.0}
    assert config.promise_settings("arq") == {}


def test_rq_and_huey_promise_what_their_source_does() -> None:
    """RQ without Retry fails an abandoned job, with Retry re-runs it after its TTL and the next maintenance
    (RQ's defaults: 600 s and a worker TTL of 420 s); Huey's BRPOP loses what a killed worker had taken."""
    from taskbench.backends.rq import Options

    assert Options().maintenance_interval == 600 and Options().worker_ttl == 420
    rq, retry, huey = (backends.info(n).delivery_on("redis") for n in ("rq", "rq-retry", "huey"))
    assert rq.guarantee == backends.AT_MOST_ONCE and "failed registry" in rq.recovery
    # the started jobs: TTL + a maintenance interval + an idle dequeue; a job taken off the queue but not
    # started (RQ's intermediate queue): a maintenance 60 s or more later, + another idle dequeue
    assert retry.guarantee == backends.AT_LEAST_ONCE and retry.after == 90 + (600 + 405) + (600 + 405)
    assert "intermediate queue" in retry.recovery
    quick = backends.info("rq-retry").delivery_on("redis", {"maintenance_interval": 2, "worker_ttl": 17})
    assert quick.after == 90 + (2 + 2) + (60 + 2) and "2 s" in quick.recovery
    assert huey.guarantee == backends.AT_MOST_ONCE and "BRPOP" in huey.recovery
    assert backends.info("rq").remembers_ids and not backends.info("huey").remembers_ids
