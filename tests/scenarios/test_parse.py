"""Scenario files: matrix expansion, article rows, and every mistake reported with its file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from taskbench.harness.processes.cgroups import Limit
from taskbench.scenarios import ScenarioError, load, resolve, shipped

HEAD = 'name = "t"\ndescription = "d"\nkind = "queue"\n'


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_environment_parameters_name_every_pinned_environment() -> None:
    """An HTTP case's ``environment`` is `servers` or a pinned/<name>/ of server libraries; a queue case's
    ``versions`` is `lock` or a pinned/<name>/ that names the backends it holds (each with its lock)."""
    from taskbench import params
    from taskbench.harness.processes.envs import pinned_backends, pinned_max_concurrency, pinned_names, pinned_requires

    servers = tuple(name for name in pinned_names() if not pinned_backends(name))
    queues = tuple(name for name in pinned_names() if pinned_backends(name))
    # a queue set holds FastAPI too, so an HTTP case may run its server there (article-000's fastapi 0.108.0)
    assert params.get("environment", "http").choices == ("servers", *sorted((*servers, *queues)))
    assert params.get("versions", "queue").choices == ("lock", *queues)
    assert "article-004" in servers
    assert pinned_backends("article-000") == ("arq", "saq", "faststream-pubsub", "celery")
    assert pinned_requires("article-000") == {"celery": {"pool": "prefork"}}
    assert pinned_max_concurrency("article-000") == {"faststream-pubsub": 1}
    assert pinned_max_concurrency("article-004") == {}


def test_every_shipped_scenario_loads() -> None:
    names = {p.stem for p in shipped()}
    assert names == {"background-impact", "backends", "backends-awaited", "backends-pinned", "endpoint-styles",
                     "endpoint-styles-workers", "middleware", "middleware-pinned", "servers-and-threads", "servers-and-threads-pinned", "celery-pools",
                     "faults"}
    for path in shipped():
        scenario = load(path)
        assert scenario.name == path.stem
        assert scenario.cases
        labels = [c.label for c in scenario.cases]
        assert len(set(labels)) == len(labels), f"{path.stem}: two cases share a label"
        if path.stem == "faults":  # no article killed anything, nor delayed its broker
            assert all(c.params.get("fault") or "broker_delay" in c.params for c in scenario.cases)
            assert sorted({c.params["broker_delay"] for c in scenario.cases if "broker_delay" in c.params}) == [
                0.0, 1.0, 5.0]
            continue
        assert scenario.article.get("source")
        labels = [c.label for c in scenario.cases]
        assert len(set(labels)) == len(labels), f"{path.stem}: two cases share a label"
        assert any(c.article for c in scenario.cases), "the article's figures are matched to cases"


def test_matrix_defaults_cases_limits_and_article(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + """
        [defaults]
        workload = "io/simple"
        duration = 5
        limits = "small"
        [matrix]
        backend = ["arq", "saq"]
        concurrency = [1, 2, 3]
        [[case]]
        backend = "celery"
        enqueue_mode = "after-response"
        [limits.small]
        api = { cpu = 0.2, memory_mb = 200 }
        workers = { cpu = 0.5 }
        [[article.rows]]
        match = { backend = "arq", concurrency = 1 }
        rps = 227
        [[article.rows]]
        match = { backend = "arq" }
        rps = 1
    """)
    scenario = load(path)
    assert len(scenario.cases) == 7
    assert [c.index for c in scenario.cases] == list(range(7))
    first = scenario.cases[0]
    assert first.params == {"workload": "io/simple", "duration": 5, "limits": "small", "backend": "arq",
                            "concurrency": 1}
    assert first.limits == {"api": Limit(cpu=0.2, memory_mb=200), "workers": Limit(cpu=0.5)}
    assert first.article == {"rps": 227}, "the first matching row wins"
    assert scenario.cases[1].article == {"rps": 1}
    assert scenario.cases[3].article is None
    assert scenario.cases[6].params["enqueue_mode"] == "after-response"
    assert set(scenario.varying) == {"backend", "concurrency", "enqueue_mode"}
    assert first.label == "arq, concurrency=1"


def test_resolve_by_name_and_path(tmp_path: Path) -> None:
    assert resolve("middleware").kind == "http"
    with pytest.raises(ScenarioError, match=r"unknown scenario .nope.*backends"):
        resolve("nope")
    with pytest.raises(ScenarioError, match="no such scenario file"):
        resolve(str(tmp_path / "missing.toml"))


@pytest.mark.parametrize(
    ("body", "line", "fragment"),
    [
        ("[defaults\n", 4, "not valid TOML"),
        ("colour = 1\n", 4, "unknown key 'colour'"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\nusers = 'many'\n", 8,
         "users must be int"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\nusers = 0\n", 8,
         "users must be between 1 and 10000"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\nmodel = 'spiky'\n", 8,
         "model must be one of closed, open, ramp"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\ncolour = 2\n", 8,
         "unknown parameter 'colour'"),
        ("[defaults]\nworkload = 'io/simple'\nduration = 1\n[[case]]\nbackend = 'arq'\n[[case]]\nbackend = 'kue'\n",
         10, "unknown backend 'kue'"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/fast'\nduration = 1\n", 6, "unknown workload 'io/fast'"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\nlimits = 'huge'\n", 8,
         "no limit set 'huge'"),
        ("[limits.x]\nredis = { cpu = 1 }\n", 5, "unknown component 'redis'"),
        ("[limits.x]\napi = { cpu = 0 }\n", 5, "cpu limit must be between"),
        ("[matrix]\nbackend = []\n", 5, "non-empty list"),
        ('[limits."0.2 CPU / 200 MB"]\napi = { cpu = "x" }\n', 5, "cpu must be a number"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\nlabel = '{backend} at {limit}'\n", 8,
         "names 'limit', which this case does not set"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\n[matrix]\n"
         "fault = ['kill-worker@1', 'kill-redis@1']\n", 9, "unknown fault 'kill-redis'"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\nfault = 'kill-api'\n", 8,
         "say when"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\n[[article.rows]]\n"
         "match = { backend = 'arq' }\nspeed = 3\n", 10, "unknown figure 'speed'"),
        ("[defaults]\nworkload = 'io/simple'\nduration = 1\n[[matrix]]\nbackend = ['arq']\n[[matrix]]\n"
         "backend = ['saq']\nusers = 0\n", 11, "users must be between 1 and 10000"),
        ("[defaults]\nworkload = 'io/simple'\nduration = 1\n[[matrix]]\nbackend = ['arq']\n[[matrix]]\n"
         "backend = []\n", 10, "non-empty list"),
        ("[defaults]\nworkload = 'io/simple'\nduration = 1\n[[matrix]]\nbackend = ['arq']\n[[matrix]]\n"
         "backend = 'saq'\n", 9, "needs at least one list"),
    ],
)
def test_mistakes_name_the_line(tmp_path: Path, body: str, line: int, fragment: str) -> None:
    path = _write(tmp_path, HEAD + body)
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert str(err.value).startswith(f"{path}:{line}: "), str(err.value)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("", "no 'backend'"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\n", "every load must be bounded"),
        ("[defaults]\nbackend = 'arq'\nworkload = 'io/simple'\nduration = 1\nmodel = 'open'\n", "needs 'rate'"),
    ],
)
def test_incomplete_cases_are_refused(tmp_path: Path, body: str, fragment: str) -> None:
    with pytest.raises(ScenarioError, match=fragment):
        load(_write(tmp_path, HEAD + body))


def test_unknown_kind(tmp_path: Path) -> None:
    path = _write(tmp_path, 'name = "t"\ndescription = "d"\nkind = "grpc"\n')
    with pytest.raises(ScenarioError, match=r":3: unknown kind 'grpc'"):
        load(path)


def test_label_templates_take_the_case_values(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + """
        [defaults]
        workload = "io/simple"
        duration = 5
        label = "{backend} at {limits}, {duration} s"
        [matrix]
        backend = ["arq", "saq"]
        limits = ["0.2 CPU / 200 MB"]
        [[case]]
        backend = "celery"
        label = "{backend} alone"
        [limits."0.2 CPU / 200 MB"]
        api = { cpu = 0.2, memory_mb = 200 }
        [[article.rows]]
        match = { backend = "saq", limits = "0.2 CPU / 200 MB" }
        rps = 162
    """)
    scenario = load(path)
    assert [c.label for c in scenario.cases] == [
        "arq at 0.2 CPU / 200 MB, 5 s", "saq at 0.2 CPU / 200 MB, 5 s", "celery alone"]
    assert scenario.cases[1].article == {"rps": 162}
    assert scenario.cases[0].limits["api"] == Limit(cpu=0.2, memory_mb=200)


PROFILED = HEAD + """\
    [defaults]
    backend = "arq"
    duration = 3.0
    requests = 1000

    [matrix]
    workload = ["io/simple", "cpu/simple"]

    [profile.article]
    requests = 50000
    duration = 1800.0

    [[profile.article.for]]
    match = { workload = "cpu/simple" }
    requests = 100
    """


def test_a_profile_overrides_every_case_and_its_for_entries_the_matched_ones(tmp_path: Path) -> None:
    path = _write(tmp_path, PROFILED)
    plain = load(path)
    assert plain.profiles == ("article",) and plain.profile is None
    assert [c.params["requests"] for c in plain.cases] == [1000, 1000]
    scaled = load(path, "article")
    assert scaled.profile == "article" and scaled.to_dict()["profile"] == "article"
    assert {c.params["workload"]: (c.params["requests"], c.params["duration"]) for c in scaled.cases} == {
        "io/simple": (50000, 1800.0), "cpu/simple": (100, 1800.0)}
    assert [c.label for c in scaled.cases] == [c.label for c in plain.cases]


def test_an_unknown_profile_is_named(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"no profile 'huge'; defined: article"):
        load(_write(tmp_path, PROFILED), "huge")


@pytest.mark.parametrize(("extra", "fragment"), [
    ("[profile.article]\nusers = 0\n", "users must be between"),
    ("[profile.article]\nlabel = 'x'\n", "not their labels"),
    ("[profile.article]\nnope = 1\n", "unknown parameter 'nope'"),
    ("[[profile.article.for]]\nrequests = 5\n", "needs a match"),
])
def test_profile_mistakes_name_the_line(tmp_path: Path, extra: str, fragment: str) -> None:
    body = HEAD + '[defaults]\nbackend = "arq"\nworkload = "io/simple"\nduration = 1.0\n' + extra
    path = tmp_path / "s.toml"
    path.write_text(body)
    with pytest.raises(ScenarioError, match=fragment) as info:
        load(path)
    assert f"{path}:" in str(info.value)


def test_the_shipped_article_profiles() -> None:
    backends = resolve("backends", "article")
    assert all(c.params["requests"] == 50000 for c in backends.cases)
    impact = {c.params["workload"]: c.params["requests"] for c in resolve("background-impact", "article").cases}
    assert impact == {"io/simple": 50000, "io/sync": 50000, "io/thread": 50000, "cpu/simple": 100,
                      "cpu/process": 1000}
    styles = resolve("endpoint-styles", "article")
    assert {(c.params["ramp"], c.params["server_workers"]) for c in styles.cases} == {(10.0, 8)}
    workers = resolve("endpoint-styles-workers", "article")
    assert {(c.params["ramp"], c.params["server_workers"]) for c in workers.cases} == {(10.0, 8)}
    awaited = resolve("backends-awaited", "article")
    assert {(c.params["requests"], c.params["enqueue_mode"]) for c in awaited.cases} == {(50000, "awaited")}
    pinned = resolve("backends-pinned", "article")
    seed_scale = [c for c in pinned.cases if not c.params.get("io_delay")]
    assert {(c.params["requests"], c.params["concurrency"], c.params["enqueue_mode"]) for c in seed_scale} == {
        (50000, 1, "after-response")}
    # row 20's half-second tasks keep their 200 under the profile (the profile's `for` entry)
    assert {(c.params["requests"], c.params["concurrency"]) for c in pinned.cases if c.params.get("io_delay")} == {
        (200, 1), (200, 10)}
    assert [c.params["versions"] for c in resolve("backends-pinned").cases] == [
        "article-000", "lock", "article-000", "article-000", "article-000", "article-000", "article-000",
        "article-000", "article-000", "lock", "article-000", "article-000"]
    assert [c.params["options"]["celery"]["pool"] for c in resolve("backends-pinned").cases
            if c.params["backend"] == "celery"] == [
        "prefork", "prefork"]


def test_the_thread_limit_can_be_set_the_seed_s_way() -> None:
    cases = resolve("servers-and-threads").cases
    via = {c.label: c.params.get("thread_limit_via") for c in cases if c.params.get("thread_limit")}
    assert via["uvicorn, limit 200 via RunVar (the article's line)"] == "runvar"
    assert via["uvicorn, limit 200 via current_default_thread_limiter()"] is None


def test_matrix_blocks_cross_their_own_lists_and_fix_their_scalars(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + """
        [defaults]
        workload = "io/simple"
        duration = 5
        [[matrix]]
        backend = ["arq", "saq"]
        fault = ["kill-worker@1", "kill-api@1"]
        [[matrix]]
        backend = ["arq", "celery"]
        broker_delay = [0.0, 5.0]
        requests = 400
        duration = 30
        [[case]]
        backend = "dramatiq"
    """)
    scenario = load(path)
    params = [c.params for c in scenario.cases]
    assert len(params) == 9
    assert params[0] == {"workload": "io/simple", "duration": 5, "backend": "arq", "fault": "kill-worker@1"}
    assert [p["fault"] for p in params[:4]] == ["kill-worker@1", "kill-api@1"] * 2
    assert params[4] == {"workload": "io/simple", "duration": 30, "requests": 400, "backend": "arq",
                         "broker_delay": 0.0}, "a block's scalar overrides the defaults for its cases only"
    assert [(p["backend"], p["broker_delay"]) for p in params[4:8]] == [
        ("arq", 0.0), ("arq", 5.0), ("celery", 0.0), ("celery", 5.0)]
    assert params[8] == {"workload": "io/simple", "duration": 5, "backend": "dramatiq"}
    assert "requests" not in params[0] and "broker_delay" not in params[8]


def test_cases_are_selected_by_number_range_and_label(tmp_path: Path) -> None:
    from taskbench.scenarios import select

    path = _write(tmp_path, HEAD + """
        [defaults]
        workload = "io/simple"
        duration = 5
        label = "{backend}, {fault}"
        [matrix]
        fault = ["kill-worker@1", "kill-api@1"]
        backend = ["arq", "saq", "celery"]
    """)
    scenario = load(path)
    assert select(scenario, "0,3") == [0, 3]
    assert select(scenario, "1-3, 5") == [1, 2, 3, 5]
    assert select(scenario, "kill-api") == [3, 4, 5]
    assert select(scenario, "CELERY,0") == [0, 2, 5], "words match labels whatever their case"
    assert select(scenario, "saq") == [1, 4]
    assert select(scenario, "saq,kill-worker") == [0, 1, 2, 4], "items add up"
    for text, fragment in [("6", "cases 0..5"), ("4-9", "cases 0..5"), ("3-1", "cases 0..5"),
                           ("dramatiq", "no case number, range or label"), (",", "selects no case")]:
        with pytest.raises(ValueError, match=fragment):
            select(scenario, text)


def _sync_queues() -> set[str]:
    """The synchronous Redis queues, whose rows are their own (RQ's TTL outlasts the matrix's drain): the
    forking ones by declaration, and Huey."""
    from taskbench import backends

    return {name for name in backends.available() if backends.info(name).threading == "forked"} | {"huey"}


def test_the_faults_scenario_covers_the_matrix() -> None:
    """Every queue backend × every fault on Redis, RabbitMQ and NATS where a backend uses them, and the
    delay sweep: one scenario (its run time is in docs/faults.md). The backends are read from the registry,
    as faults.toml selects them: a backend added later is in the matrix too."""
    from taskbench import backends

    scenario = resolve("faults")
    sync_queues = _sync_queues()
    queues = {name for name in backends.available() if backends.info(name).has_worker
              and "redis" in backends.info(name).brokers} - sync_queues
    assert {"arq", "saq", "faststream", "celery", "taskiq", "dramatiq", "streaq"} <= queues
    assert {"rq", "rq-retry", "huey"} <= sync_queues
    on_redis = {(c.params["backend"], c.params.get("fault"), c.params.get("redis_fsync"),
                 c.params.get("broker_delay")) for c in scenario.cases if c.params.get("broker", "redis") == "redis"}
    for backend in queues:
        for fault in ("kill-worker@2", "kill-worker@2/2", "pause-worker@2+5", "stall-broker@2+2",
                      "kill-api@2"):
            assert (backend, fault, None, None) in on_redis, (backend, fault)
        for fsync in ("always", "none"):
            assert (backend, "restart-broker@2", fsync, None) in on_redis, (backend, fsync)
        for delay in (0.0, 1.0, 5.0):
            assert (backend, None, None, delay) in on_redis, (backend, delay)
    others = {(c.params["backend"], c.params["broker"], c.params["fault"]) for c in scenario.cases
              if c.params.get("broker", "redis") != "redis"}
    assert {("faststream", "rabbitmq", "restart-broker@2"), ("taskiq", "rabbitmq", "restart-broker@2"),
            ("celery", "rabbitmq", "restart-broker@2"), ("celery", "rabbitmq", "stall-broker@2+2"),
            ("faststream", "nats", "restart-broker@2"), ("faststream", "nats", "stall-broker@2+2")} <= others
    on_postgres = {(c.params["backend"], c.params["fault"]) for c in scenario.cases
                   if c.params.get("broker") == "postgres"}
    for name in backends.available():
        if "postgres" in backends.info(name).brokers:
            for fault in ("kill-worker@2", "restart-broker@2", "stall-broker@2+2"):
                assert (name, fault) in on_postgres, (name, fault)
    for name in sync_queues:  # the worker killed and frozen, Redis restarted
        for fault in ("kill-worker@2", "pause-worker@2+5", "restart-broker@2"):
            assert any(k[:2] == (name, fault) for k in on_redis), (name, fault)
    paused = [c for c in scenario.cases if str(c.params.get("fault", "")).startswith("pause-worker")]
    assert all(c.params["workers"] == 2 for c in paused), "a paused worker's tasks go to the other one"
