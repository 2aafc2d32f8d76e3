"""A user's task body: found, imported, called sync or async, its failures and CPU time recorded."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
import redis

from taskbench import payload
from taskbench.ledger import Ledger
from taskbench.messages import USER_TASK, TaskMessage
from taskbench.settings import Settings
from taskbench.user_task import TaskSpecError, UserTask, load, main
from taskbench.workloads import Workloads

TASKS = '''
import time, asyncio

class RefusedError(Exception):
    pass

def burn(payload):
    until = time.thread_time() + payload.get("cpu_ms", 30) / 1000
    while time.thread_time() < until:
        pass
    if payload.get("fail"):
        raise RefusedError(payload["task_id"])

async def wait(payload):
    await asyncio.sleep(0.05)  # waits: no CPU of its own
    if payload.get("fail"):
        raise KeyError(payload["task_id"])
'''


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "mytasks.py"
    path.write_text(TASKS)
    return path


def test_a_sync_call_is_timed_in_its_threads_cpu_and_a_raise_is_its_outcome(tasks_file: Path) -> None:
    task = UserTask(f"{tasks_file}:burn")
    assert not task.is_async
    cpu_s, error = task.call_sync({"task_id": "a", "cpu_ms": 30})
    assert error is None and cpu_s >= 0.03
    assert str(task.call_sync({"task_id": "b", "cpu_ms": 1, "fail": True})[1]).endswith("mytasks.RefusedError")


def test_an_async_call_counts_its_own_steps_not_the_wait(tasks_file: Path) -> None:
    task = UserTask(f"{tasks_file}:wait")
    assert task.is_async

    async def go() -> list[tuple[float, str | None]]:
        burner = asyncio.create_task(asyncio.to_thread(time.sleep, 0))  # other work on the loop meanwhile
        outcomes = await asyncio.gather(task.call({"task_id": "a"}), task.call({"task_id": "b", "fail": True}))
        await burner
        return list(outcomes)

    (cpu_ok, ok), (_, failed) = asyncio.run(go())
    assert ok is None and failed == "KeyError"
    assert cpu_ok < 0.05  # the 50 ms sleep is not CPU


@pytest.mark.parametrize(("spec", "message"), [
    ("nocolon", "module:callable"),
    ("no_such_module_xyz:f", "cannot import 'no_such_module_xyz': ModuleNotFoundError"),
    ("json:no_such_name", "'json' has no attribute 'no_such_name'"),
    ("json:decoder", "is a module, not a callable"),
    ("/nonexistent/file.py:f", "no such file"),
])
def test_a_callable_that_cannot_be_used_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(TaskSpecError, match=message):
        load(spec)


def test_the_preflight_check_answers_ok_or_one_line(tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([f"{tasks_file}:wait"]) == 0
    assert capsys.readouterr().out.strip() == "ok async"
    assert main(["no_such_module_xyz:f"]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("cannot import") and "\n" not in out


def test_the_payload_template_fills_the_id_everywhere_and_leaves_other_braces(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text('{"id": "{task_id}", "order": "o-{task_id}", "{task_id}": [1, "{x}"], "n": {"m": 2}}')
    template = payload.read(path)
    body = payload.body_template(template, task_id=payload.PLACEHOLDER, enqueued_at=payload.RawField("{enqueued_at}"))
    import json

    filled = json.loads(body.format(task_id="t-1", enqueued_at="1.5"))
    assert filled == {"task_id": "t-1", "enqueued_at": 1.5,
                      "payload": {"id": "t-1", "order": "o-t-1", "t-1": [1, "{x}"], "n": {"m": 2}}}
    assert filled["payload"] == payload.fill(template, "t-1")


@pytest.mark.parametrize(("content", "message"), [
    (b"[1, 2]", "a JSON object is needed, got list"),
    (b"{nope", "not JSON"),
    (b'{"a": NaN}', "not JSON"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_a_payload_file_that_is_no_template_is_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(content)
    with pytest.raises(payload.PayloadError, match=message):
        payload.read(path)


def test_workloads_run_the_users_task_and_record_failed_and_cpu(tasks_file: Path, redis_url: str,
                                                                client: redis.Redis, run_id: str) -> None:
    settings = Settings(redis_url=redis_url, run_id=run_id, task=f"{tasks_file}:burn")

    async def go() -> None:
        async with Workloads(settings) as workloads:
            await asyncio.gather(*(workloads.run(TaskMessage(
                task_id=f"t{i}", workload=USER_TASK, value=1, enqueued_at=time.time(),
                payload={"task_id": f"t{i}", "cpu_ms": 5, "fail": i == 3})) for i in range(5)))

    asyncio.run(go())
    ledger = Ledger(settings.prefix)
    assert ledger.read(client)[0] == {f"t{i}": 1 for i in range(5)}
    found = ledger.outcomes(client)
    # (named taskbench_user_mytasks when another test's mytasks.py was loaded in this process first)
    assert list(found.failed) == ["t3"] and found.failed["t3"][1].endswith("mytasks.RefusedError")
    assert set(found.cpu_s) == {f"t{i}" for i in range(5)} and min(found.cpu_s.values()) >= 0.005


HOSTILE = '''
import asyncio, functools


class Halt(BaseException):
    pass


RAISED = {"exit0": SystemExit(0), "exit3": SystemExit(3), "interrupt": KeyboardInterrupt(),
          "genexit": GeneratorExit(), "halt": Halt("a BaseException of its own"),
          "cancel": asyncio.CancelledError()}
RAN = []


def raise_sync(payload):
    raise RAISED[payload["kind"]]


async def raise_async(payload):
    await asyncio.sleep(0)
    raise RAISED[payload["kind"]]


def gen(payload):
    RAN.append(payload)
    yield 1


async def agen(payload):
    RAN.append(payload)
    yield 1


class Iterates:
    def __call__(self, payload):
        yield payload


gen_partial = functools.partial(gen)


async def _body(payload):
    await asyncio.sleep(0)
    RAN.append(payload["task_id"])
    if payload.get("fail"):
        raise LookupError(payload["task_id"])


returns_coroutine = lambda payload: _body(payload)  # noqa: E731


async def returns_coroutine_twice(payload):
    return _body(payload)


class Later:  # an awaitable that is no coroutine
    def __init__(self, task_id):
        self.task_id = task_id

    def __await__(self):
        yield from asyncio.sleep(0).__await__()
        RAN.append(self.task_id)


def returns_awaitable(payload):
    return Later(payload["task_id"])


gen_instance = Iterates()


returns_generator = lambda payload: (x for x in [payload])  # noqa: E731


async def a_generator_is_its_value(payload):
    return (x for x in [payload])  # its body ran: the generator is what it computed


def hang_sync(payload):
    import time
    time.sleep(payload.get("s", 30))


async def hang_async(payload):
    await asyncio.sleep(payload.get("s", 30))
'''

BASE_KINDS = {"exit0": "SystemExit", "exit3": "SystemExit", "interrupt": "KeyboardInterrupt",
              "genexit": "GeneratorExit", "halt": "hostile.Halt", "cancel": "asyncio.exceptions.CancelledError"}


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE)
    return path


@pytest.mark.parametrize("kind", sorted(BASE_KINDS))
def test_a_base_exception_of_the_task_is_its_failed_call_sync_async_and_forked(hostile: Path, kind: str) -> None:
    sync, coro = UserTask(f"{hostile}:raise_sync"), UserTask(f"{hostile}:raise_async")
    payload = {"task_id": "a", "kind": kind}
    want = BASE_KINDS[kind]
    if kind == "halt":  # named taskbench_user_hostile.Halt when another test loaded a hostile.py first
        want = str(sync.call_sync(payload)[1])
        assert want.endswith("hostile.Halt")
    assert sync.call_sync(payload)[1] == want  # a forked child's call
    assert coro.call_sync(payload)[1] == want  # a coroutine in a forked child
    outcomes = asyncio.run(_both(sync, coro, payload))  # the worker's loop: the pool's thread, the loop itself
    assert [error for _, error in outcomes] == [want, want]
    sync.close()


async def _both(sync: UserTask, coro: UserTask, payload: dict[str, str]) -> list[tuple[float, str | None]]:
    return [await sync.call(payload), await coro.call(payload)]


def test_the_librarys_own_cancellation_passes_through(hostile: Path) -> None:
    for spec in ("hang_sync", "hang_async"):
        task = UserTask(f"{hostile}:{spec}")

        async def cut(task: UserTask = task) -> None:
            await asyncio.wait_for(task.call({"task_id": "a", "s": 0.5}), 0.05)  # as arq's job_timeout does

        with pytest.raises(TimeoutError):
            asyncio.run(cut())
        task.close()


@pytest.mark.parametrize(("name", "kind"), [
    ("gen", "a generator function"), ("agen", "an async generator function"),
    ("Iterates", None), ("gen_partial", "a generator function"),
])
def test_a_generator_function_is_refused_in_one_line(hostile: Path, name: str, kind: str | None,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    spec = f"{hostile}:{name}"
    if kind is None:  # a class whose instances' __call__ is a generator: the class itself makes instances
        spec, kind = f"{hostile}:gen_instance", "a generator function"
    with pytest.raises(TaskSpecError, match=f"is {kind}: a call only makes an iterator"):
        UserTask(spec)
    assert main([spec]) == 2
    out = capsys.readouterr().out.strip()
    assert "runs none of its body" in out and "\n" not in out


def test_an_awaitable_a_plain_function_returns_is_awaited_and_a_generator_is_not_ok(hostile: Path) -> None:
    for spec in ("returns_coroutine", "returns_coroutine_twice", "returns_awaitable"):
        task = UserTask(f"{hostile}:{spec}")
        assert asyncio.run(task.call({"task_id": f"{spec}-1"}))[1] is None
        assert task.call_sync({"task_id": f"{spec}-2"})[1] is None
        task.close()
    ran = sys.modules[load(f"{hostile}:_body").__module__].RAN
    assert ran == [f"{spec}-{i}" for spec in ("returns_coroutine", "returns_coroutine_twice", "returns_awaitable")
                   for i in (1, 2)]  # every body ran, on the loop and in a forked child's own
    failing = UserTask(f"{hostile}:returns_coroutine")
    assert asyncio.run(failing.call({"task_id": "f", "fail": True}))[1] == "LookupError"
    returned = UserTask(f"{hostile}:returns_generator")
    assert returned.call_sync({"task_id": "g"})[1] == "taskbench.user_task.BodyNotRun"
    assert asyncio.run(returned.call({"task_id": "g"}))[1] == "taskbench.user_task.BodyNotRun"
    assert asyncio.run(UserTask(f"{hostile}:a_generator_is_its_value").call({"task_id": "v"}))[1] is None
    returned.close()
