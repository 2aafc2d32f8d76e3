"""The promise a fault case is judged by comes from the backend registry, per broker."""

from __future__ import annotations

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
    their parameters default to the libraries' own (at-most-once), and the verdict follows the value."""
    from taskbench import params

    assert params.default("saq_retries") == 1 and params.default("procrastinate_retry_stalled") is False
    for name, setting, on in (("saq", "saq_retries", 3), ("saq-postgres", "saq_retries", 2),
                              ("procrastinate", "procrastinate_retry_stalled", True)):
        meta = backends.info(name)
        assert setting in meta.promise_settings
        assert meta.delivery_on(meta.brokers[0]).guarantee == backends.AT_MOST_ONCE, name
        assert meta.delivery_on(meta.brokers[0], {setting: on}).guarantee == backends.AT_LEAST_ONCE, name
        off = promise_of(name, meta.brokers[0], durable=True)
        assert not off.keeps_accepted and off.no_duplicates
        kept = promise_of(name, meta.brokers[0], durable=True, settings={setting: on})
        assert kept.keeps_accepted and not kept.no_duplicates
    pgqueuer = backends.info("pgqueuer").delivery_on("postgres", {"pgqueuer_heartbeat_timeout": 7.0})
    assert pgqueuer.guarantee == backends.AT_LEAST_ONCE and pgqueuer.after == 7.0 and "7 s" in pgqueuer.recovery
    # every promise setting is a run parameter a scenario case and the command line take
    for name in backends.available(unsafe=True):
        for setting in backends.info(name).promise_settings:
            param = params.get(setting)
            assert param.cli and "queue" in param.kinds and param.env, setting


def test_the_drain_waits_for_a_redelivery_set_by_the_library(tmp_path) -> None:
    from taskbench.harness.config import RunConfig

    config = RunConfig(backends=("pgqueuer", "arq"), task_timeout=3.0, pgqueuer_heartbeat_timeout=20.0,
                       output=tmp_path)
    assert config.redelivery_wait("pgqueuer") == 20.0 and config.redelivery_wait("arq") == 3.0
    assert config.promise_settings("pgqueuer") == {"pgqueuer_heartbeat_timeout": 20.0}
    assert config.promise_settings("arq") == {}


def test_rq_and_huey_promise_what_their_source_does() -> None:
    """RQ without Retry fails an abandoned job, with Retry re-runs it after its TTL and the next maintenance
    (RQ's defaults: 600 s and a worker TTL of 420 s); Huey's BRPOP loses what a killed worker had taken."""
    from taskbench import params

    assert params.default("rq_maintenance_interval") == 600 and params.default("rq_worker_ttl") == 420
    rq, retry, huey = (backends.info(n).delivery_on("redis") for n in ("rq", "rq-retry", "huey"))
    assert rq.guarantee == backends.AT_MOST_ONCE and "failed registry" in rq.recovery
    # the started jobs: TTL + a maintenance interval + an idle dequeue; a job taken off the queue but not
    # started (RQ's intermediate queue): a maintenance 60 s or more later, + another idle dequeue
    assert retry.guarantee == backends.AT_LEAST_ONCE and retry.after == 90 + (600 + 405) + (600 + 405)
    assert "intermediate queue" in retry.recovery
    quick = backends.info("rq-retry").delivery_on("redis", {"rq_maintenance_interval": 2, "rq_worker_ttl": 17})
    assert quick.after == 90 + (2 + 2) + (60 + 2) and "2 s" in quick.recovery
    assert huey.guarantee == backends.AT_MOST_ONCE and "BRPOP" in huey.recovery
    assert backends.info("rq").remembers_ids and not backends.info("huey").remembers_ids
