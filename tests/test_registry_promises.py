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
