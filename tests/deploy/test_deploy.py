"""The deployment files, checked without a Docker engine or a cluster: `docker-compose config` validates
docker-compose.yml, `kubectl kustomize` renders every overlay, kubernetes-validate checks each rendered
object against the Kubernetes 1.32 schemas offline (KEDA and Prometheus Operator objects against the small
schemas below, of the fields used), and the invariants the deployment relies on are asserted."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from gym_common.jobs import Keys
from gym_common.settings import ServiceSettings
from rl_client.settings import RLSettings
from services.settings import EvalSettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKER = ROOT / "docker"
K8S = ROOT / "k8s"
OVERLAYS = ("dev", "prod")
K8S_VERSION = "1.32.0"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
# Names whose values are credentials (or carry one, like a Redis URL with its password).
SENSITIVE = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY|REDIS_URL")
TEST_ENV = {
    "REDIS_PASSWORD": "0123456789abcdef0123456789abcdef",
    "KERNELGYM_API_KEY_HASHES": '["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]',
    "GRAFANA_ADMIN_PASSWORD": "grafana-test-password",
}


# -- helpers -----------------------------------------------------------------------------------------------
def known_variables() -> set[str]:
    """KERNELGYM_* variables something reads: the service's, the evaluation core's and the RL client's settings,
    and any the clients read directly from the environment."""
    names = {f"KERNELGYM_{n.upper()}" for n in (*ServiceSettings.model_fields, *EvalSettings.model_fields)}
    names |= RLSettings.variables()
    pattern = re.compile(r'os\.environ(?:\.get)?[\[(]\s*"(KERNELGYM_[A-Z0-9_]+)"')
    for path in [*ROOT.joinpath("rl_client").rglob("*.py"), *ROOT.joinpath("gym_client").rglob("*.py")]:
        names |= set(pattern.findall(path.read_text()))
    return names


def pinned_image(image: str) -> bool:
    """A fixed version tag (not `latest`), with or without a digest."""
    name, _, digest = image.partition("@")
    if digest and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        return False
    _, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:  # no tag at all (a `:` may belong to a registry's port)
        return False
    return tag != "latest" and bool(re.search(r"\d", tag))


def requirements(extras: list[str]) -> list[str]:
    """docker/requirements.py's answer for pyproject.toml (docker/ is no package, so it is loaded by path)."""
    spec = importlib.util.spec_from_file_location("docker_requirements", DOCKER / "requirements.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.requirements(ROOT / "pyproject.toml", extras)


def write_env(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def compose(env_file: Path, *args: str, files: tuple[Path, ...] = (COMPOSE,)) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose (v1, the Debian package) is not installed; .ci/run installs it")
    return subprocess.run(
        [exe, "--env-file", str(env_file), *(a for f in files for a in ("-f", str(f))), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def compose_config(tmp_path_factory) -> dict[str, Any]:
    """docker-compose.yml as Compose resolves it (anchors merged, variables substituted)."""
    env = write_env(tmp_path_factory.mktemp("compose") / "test.env", TEST_ENV)
    proc = compose(env, "config")
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout)


@pytest.fixture(scope="module")
def raw_compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, list[dict[str, Any]]]:
    """Every overlay rendered by `kubectl kustomize`, from a copy of k8s/ whose gitignored dev env files are
    made from their committed examples."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    tree = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, tree, ignore=shutil.ignore_patterns("*.env"))
    for example in tree.rglob("*.env.example"):
        shutil.copy(example, example.with_suffix(""))
    out = {}
    for name in ("base", *OVERLAYS):
        path = tree / "base" if name == "base" else tree / "overlays" / name
        proc = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{name}: {proc.stderr}"
        out[name] = [d for d in yaml.safe_load_all(proc.stdout) if d]
    return out


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """target -> source of a Compose service's volumes (v1 prints `src:dst:mode`, v2 a mapping)."""
    out = {}
    for v in service.get("volumes", []):
        if isinstance(v, str):
            source, target = v.split(":")[:2]
        else:
            source, target = v["source"], v["target"]
        out[target] = source
    return out


def objects(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def pod_specs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"])
        for d in docs
        if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job")
    ]


def config_data(docs: list[dict[str, Any]]) -> dict[str, str]:
    (cm,) = [d for d in objects(docs, "ConfigMap") if d["metadata"]["name"].startswith("kernelgym-config")]
    return cm["data"]


def container_env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


# -- Compose -----------------------------------------------------------------------------------------------
def test_compose_file_is_valid(compose_config):
    assert {"redis", "gateway", "worker-gpu0", "worker-cpu", "prometheus", "grafana"} <= set(compose_config["services"])


def test_compose_refuses_to_run_without_its_secrets(tmp_path):
    for missing in ("REDIS_PASSWORD", "KERNELGYM_API_KEY_HASHES", "GRAFANA_ADMIN_PASSWORD"):
        env = write_env(tmp_path / f"no-{missing}.env", {k: v for k, v in TEST_ENV.items() if k != missing})
        proc = compose(env, "config")
        assert proc.returncode != 0
        assert missing in proc.stderr


def test_compose_runs_one_worker_per_gpu_and_profiles_choose_how_many(compose_config):
    services = compose_config["services"]
    gpu_workers = sorted((s for s in services if s.startswith("worker-gpu")), key=lambda s: int(s[len("worker-gpu") :]))
    assert len(gpu_workers) == 8
    for k, name in enumerate(gpu_workers):
        svc = services[name]
        (device,) = svc["deploy"]["resources"]["reservations"]["devices"]
        assert device == {"driver": "nvidia", "device_ids": [str(k)], "capabilities": ["gpu"]}
        assert svc["environment"]["KERNELGYM_DEVICE_CLASS"] == "h100"
        # COMPOSE_PROFILES=gpuN starts the workers of GPUs 0..N-1; `gpu` is one worker.
        assert set(svc["profiles"]) == {f"gpu{n}" for n in range(k + 1, 9)} | ({"gpu"} if k == 0 else set())
    cpu = services["worker-cpu"]
    assert cpu["profiles"] == ["cpu"] and cpu["environment"]["KERNELGYM_DEVICE_CLASS"] == "cpu"
    assert "reservations" not in cpu["deploy"]["resources"]  # no GPU
    # The core services run in every profile.
    for name in ("redis", "gateway", "prometheus", "grafana"):
        assert "profiles" not in services[name]


def test_compose_caps_each_workers_memory_so_a_runaway_evaluation_stays_in_its_container(tmp_path, compose_config):
    workers = [s for name, s in compose_config["services"].items() if name.startswith("worker-")]
    assert len(workers) == 9 and {s["deploy"]["resources"]["limits"]["memory"] for s in workers} == {"32g"}
    env = write_env(tmp_path / "m.env", {**TEST_ENV, "WORKER_MEMORY": "12g"})
    config = yaml.safe_load(compose(env, "config").stdout)
    assert config["services"]["worker-gpu3"]["deploy"]["resources"]["limits"]["memory"] == "12g"


def test_compose_redis_keeps_an_append_only_file_on_a_volume(compose_config):
    redis = compose_config["services"]["redis"]
    script = " ".join(redis["command"])
    assert "--appendonly yes" in script and "--maxmemory-policy noeviction" in script
    assert "--requirepass" not in script  # the password goes into a file, not onto the command line
    assert mounts(redis) == {"/data": "redis-data"}
    assert "redis-data" in compose_config["volumes"]


def test_compose_workers_reach_redis_and_nothing_else(compose_config):
    services, networks = compose_config["services"], compose_config["networks"]
    for name, svc in services.items():
        if not name.startswith("worker-"):
            continue
        assert set(svc["networks"]) == {"workers"}, name
        assert networks["workers"]["internal"] is True
        assert svc["stop_grace_period"] == "21m"  # > KERNELGYM_TASK_TIME_LIMIT_S: the evaluation finishes
    on_workers = {n for n, s in services.items() if "workers" in s.get("networks", {})}
    assert on_workers == {"redis"} | {n for n in services if n.startswith("worker-")}
    assert networks["gateway"]["internal"] is True
    assert set(services["gateway"]["networks"]) == {"gateway", "edge"}


def test_compose_override_shares_redis_with_other_hosts_only_on_a_named_address(tmp_path):
    files = (COMPOSE, DOCKER / "redis-shared.yml")
    unset = compose(write_env(tmp_path / "a.env", TEST_ENV), "config", files=files)
    assert unset.returncode != 0 and "REDIS_BIND" in unset.stderr
    proc = compose(write_env(tmp_path / "b.env", {**TEST_ENV, "REDIS_BIND": "10.0.0.5"}), "config", files=files)
    assert proc.returncode == 0, proc.stderr
    redis = yaml.safe_load(proc.stdout)["services"]["redis"]
    assert [str(p).removesuffix("/tcp") for p in redis["ports"]] == ["10.0.0.5:6379:6379"]
    assert set(redis["networks"]) == {"gateway", "workers", "edge"}
    assert "REDIS_PASSWORD" in redis["environment"]


def test_compose_containers_are_hardened_and_images_pinned(compose_config):
    for name, svc in compose_config["services"].items():
        assert svc["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in svc["security_opt"], name
        assert pinned_image(svc["image"]), f"{name}: {svc['image']}"
        if "build" in svc:  # our images: USER 10001 in the Dockerfile, tagged with the package version
            assert svc["image"].endswith(f":{VERSION}"), name
            assert (ROOT / svc["build"]["dockerfile"]).exists()
        else:  # third-party images: a digest, and an explicit non-root user
            assert "@sha256:" in svc["image"], name
            uid = svc["user"].split(":")[0]
            assert uid.isdigit() and int(uid) != 0, name


def test_compose_secrets_come_from_the_env_file_only(raw_compose):
    for name, svc in raw_compose["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            if SENSITIVE.search(key):
                # The credential itself is always a substitution, e.g. redis://:${REDIS_PASSWORD:?...}@redis:6379
                creds = re.sub(r"\$\{[^}]*\}", "", str(value))
                assert not re.search(r"://[^@/]*:[^@/]+@", creds), f"{name}.{key}"
                if "://" not in creds:
                    assert "${" in str(value) and creds == "", f"{name}.{key} = {value!r}"
    text = COMPOSE.read_text()
    assert TEST_ENV["REDIS_PASSWORD"] not in text
    example = (ROOT / ".env.example").read_text()
    for key in ("REDIS_PASSWORD", "KERNELGYM_API_KEY_HASHES", "GRAFANA_ADMIN_PASSWORD", "RL_API_KEY"):
        assert re.search(rf"^{key}=$", example, re.M), f".env.example must leave {key} empty"
    ignored = (ROOT / ".gitignore").read_text().split() + (ROOT / ".dockerignore").read_text().split()
    assert ".env" in ignored


def test_compose_variables_are_real_settings(compose_config, raw_compose):
    known = known_variables()
    for name, svc in compose_config["services"].items():
        for key in svc.get("environment", {}):
            if key.startswith("KERNELGYM_"):
                assert key in known, f"{name}: {key} is no setting"
    substituted = set(re.findall(r"\$\{(KERNELGYM_[A-Z0-9_]+)", COMPOSE.read_text()))
    assert substituted <= known
    env_example = set(re.findall(r"^(KERNELGYM_[A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    assert env_example <= known


def test_compose_prometheus_scrapes_the_gateway_and_grafana_loads_the_dashboard(compose_config):
    prometheus = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in prometheus["scrape_configs"] if j["job_name"] == "kernelgym-gateway"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["gateway:8000"]
    shared = set(compose_config["services"]["prometheus"]["networks"]) & set(
        compose_config["services"]["gateway"]["networks"]
    )
    assert shared, "Prometheus cannot reach the gateway"
    datasource = yaml.safe_load((DOCKER / "grafana/provisioning/datasources/prometheus.yml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((DOCKER / "grafana/provisioning/dashboards/kernelgym.yml").read_text())
    dashboards_dir = provider["providers"][0]["options"]["path"]
    assert Path(mounts(compose_config["services"]["grafana"])[dashboards_dir]) == DOCKER / "grafana" / "dashboards"
    dashboard = json.loads((DOCKER / "grafana/dashboards/kernelgym.json").read_text())
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == datasource["datasources"][0]["uid"]


# -- the dashboard's queries use metrics the gateway really exports -------------------------------------------
def exported_metric_names() -> set[str]:
    """Sample names in the gateway's /metrics text, from the real collectors with a cluster snapshot."""
    from gym_api.metrics import Metrics

    metrics = Metrics()
    metrics.cluster.snapshot = {
        "workers": [
            {"device_class": "h100", "node": "a", "quarantined": "1"},
            {"device_class": "h100", "node": "b", "quarantined": "0"},
        ],
        "depths": {q: 1 for q in Keys("kg").queues("h100")},
        "verdicts": {"passed": 3, "incorrect": 1},
        "durations": {"1.0": 1, "5.0": 2, "sum": 9.5},
        "cache_hits": 2,
    }
    metrics.requests.labels("/evaluate", "POST", "200").inc()
    metrics.latency.labels("/evaluate", "POST").observe(0.01)
    text = metrics.render().decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_dashboard_queries_only_exported_metrics_and_covers_the_essentials():
    dashboard = json.loads((DOCKER / "grafana/dashboards/kernelgym.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\bkernelgym_[a-z_]+", e)}
    exported = exported_metric_names()
    assert used and used <= exported, used - exported
    titles = " | ".join(p["title"].lower() for p in dashboard["panels"])
    for needed in ("queue depth", "per minute by verdict", "wall time", "latency", "workers alive", "quarantined"):
        assert needed in titles, needed
    assert any("kernelgym_evaluations_total" in e and "* 60" in e and "by (verdict)" in e for e in exprs)
    assert any('quarantined="true"' in e for e in exprs)


# -- Dockerfiles -------------------------------------------------------------------------------------------
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))


def test_there_is_an_image_per_role():
    assert {p.name for p in DOCKERFILES} == {
        "gateway.Dockerfile",
        "worker.Dockerfile",
        "worker-cpu.Dockerfile",
        "rl.Dockerfile",
    }


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_is_pinned_non_root_and_health_checked(dockerfile):
    text = dockerfile.read_text()
    bases = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert bases
    for base in bases:
        assert pinned_image(base) and "@sha256:" in base, base
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users, "no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    assert re.search(r"useradd .*--uid " + uid, text)
    assert re.search(r"^HEALTHCHECK .*\n\s+CMD \[\"kernelgym\", \"healthcheck\"", text, re.M)
    assert 'ENTRYPOINT ["tini", "--"]' in text
    assert "--no-install-recommends" in text and "rm -rf /var/lib/apt/lists/*" in text
    assert "PIP_NO_CACHE_DIR=1" in text


def torch_pin() -> str:
    (version,) = re.findall(r"^TORCH_SPEC \?= torch==(\S+)", (ROOT / "Makefile").read_text(), re.M)
    return version


def test_gateway_image_has_no_torch_or_triton():
    text = (DOCKER / "gateway.Dockerfile").read_text()
    (extras,) = re.findall(r"requirements\.py /tmp/build/pyproject\.toml ([a-z ]+) >", text)
    assert extras.split() == ["service"]
    assert not [r for r in requirements(["service"]) if re.match(r"(torch|triton|numpy)\b", r)]
    installs = [line for line in text.splitlines() if "pip install" in line]
    assert installs and not [line for line in installs if re.search(r"torch|triton", line)]


def test_worker_images_install_the_pinned_torch_and_triton():
    assert "triton==3.7.1" in requirements(["core"])
    for name in ("worker.Dockerfile", "worker-cpu.Dockerfile", "rl.Dockerfile"):
        text = (DOCKER / name).read_text()
        assert f"ARG TORCH_VERSION={torch_pin()}" in text, name
        assert '"torch==${TORCH_VERSION}"' in text, name
        assert re.search(r"ARG NUMPY_VERSION=\d+\.\d+\.\d+", text), name
    gpu = (DOCKER / "worker.Dockerfile").read_text()
    assert "nvidia/cuda:" in gpu and "-runtime-" in gpu
    assert "requirements.py /tmp/build/pyproject.toml core service" in gpu
    assert "gcc" in gpu and "python3-dev" in gpu  # Triton compiles its launcher at run time
    assert "KERNELGYM_DEVICE_CLASS=cpu" in (DOCKER / "worker-cpu.Dockerfile").read_text()


def test_requirements_script_lists_pinned_requirements_and_refuses_unknown_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = requirements(["service"])
    assert lines == project["dependencies"] + project["optional-dependencies"]["service"]
    assert all("==" in r for r in lines)
    with pytest.raises(SystemExit, match="unknown extras: nope"):
        requirements(["nope"])


def test_dockerignore_keeps_secrets_and_local_state_out_of_the_build_context():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", ".env", "k8s/overlays/*/*.env", "tests"} <= ignored


# -- Kubernetes --------------------------------------------------------------------------------------------
# What kubernetes-validate has no schema for: the KEDA and Prometheus Operator objects, checked against the
# fields this repository uses (unknown fields are errors, as in strict mode).
STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
STRING = {"type": "string"}
DURATION = {"type": "string", "pattern": r"^\d+[smh]$"}


def closed(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    """An object with exactly these (optional unless required) fields."""
    return {"type": "object", "additionalProperties": False, "required": list(required), "properties": properties}


def array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "minItems": 1, "items": items}


def custom_resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"type": "object", "required": ["name"], "properties": {"name": STRING, "labels": STR_MAP}}
    properties = {"apiVersion": {"const": api_version}, "kind": {"const": kind}, "metadata": metadata, "spec": spec}
    return {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "properties": properties}


INTEGER = {"type": "integer", "minimum": 0}
CRD_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("keda.sh/v1alpha1", "ScaledObject"): custom_resource(
        "keda.sh/v1alpha1",
        "ScaledObject",
        closed(
            {
                "scaleTargetRef": closed({"name": STRING, "kind": STRING}, "name"),
                "minReplicaCount": INTEGER,
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": INTEGER,
                "advanced": closed({"horizontalPodAutoscalerConfig": closed({"behavior": {"type": "object"}})}),
                # KEDA's CRD types every trigger metadata value as a string.
                "triggers": array(
                    closed(
                        {"type": STRING, "metadata": STR_MAP, "authenticationRef": closed({"name": STRING}, "name")},
                        "type",
                        "metadata",
                    )
                ),
            },
            "scaleTargetRef",
            "triggers",
        ),
    ),
    ("keda.sh/v1alpha1", "TriggerAuthentication"): custom_resource(
        "keda.sh/v1alpha1",
        "TriggerAuthentication",
        closed(
            {
                "secretTargetRef": array(
                    closed(
                        {
                            "parameter": {"enum": ["address", "host", "port", "username", "password"]},
                            "name": STRING,
                            "key": STRING,
                        },
                        "parameter",
                        "name",
                        "key",
                    )
                )
            }
        ),
    ),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): custom_resource(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        closed(
            {
                "selector": closed({"matchLabels": STR_MAP, "matchExpressions": {"type": "array"}}),
                "endpoints": array(
                    closed({"port": STRING, "path": STRING, "interval": DURATION, "scrapeTimeout": DURATION}, "port")
                ),
            },
            "selector",
            "endpoints",
        ),
    ),
}


def validate(doc: dict[str, Any]) -> None:
    schema = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
    if schema is not None:
        jsonschema.validate(doc, schema)
    else:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_every_overlay_renders_and_every_object_is_schema_valid(rendered):
    kinds = set()
    for name in OVERLAYS:
        assert rendered[name]
        for doc in rendered[name]:
            try:
                validate(doc)
            except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
                pytest.fail(f"{name}: {doc['kind']}/{doc['metadata'].get('name')}: {exc.message}")
            kinds.add(doc["kind"])
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy"} <= kinds
    assert {"ScaledObject", "TriggerAuthentication", "ServiceMonitor", "StatefulSet"} <= kinds


def test_the_validators_reject_what_they_should(rendered):
    """The checks above can fail: an unknown field, a wrongly typed value, a KEDA value that is no string."""
    deployment = json.loads(json.dumps(one(rendered["prod"], "Deployment", "kernelgym-gateway")))
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicey"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)
    deployment = json.loads(json.dumps(one(rendered["prod"], "Deployment", "kernelgym-gateway")))
    deployment["spec"]["revisionHistoryLimit"] = "five"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)
    scaled = json.loads(json.dumps(one(rendered["prod"], "ScaledObject", "kernelgym-worker")))
    scaled["spec"]["triggers"][0]["metadata"]["listLength"] = 2
    with pytest.raises(jsonschema.ValidationError):
        validate(scaled)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_request_one_gpu_and_stop_gracefully(rendered, overlay):
    docs = rendered[overlay]
    worker = one(docs, "Deployment", "kernelgym-worker")
    pod = worker["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    resources = container["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == 1 and resources["limits"]["nvidia.com/gpu"] == 1
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert "replicas" not in worker["spec"]  # KEDA owns the count
    # A pod told to stop gets longer than the task's hard limit: its evaluation finishes and is acknowledged.
    limit = int(config_data(docs).get("KERNELGYM_TASK_TIME_LIMIT_S", ServiceSettings().task_time_limit_s))
    assert pod["terminationGracePeriodSeconds"] >= limit + 30
    probes = [container[p]["exec"]["command"] for p in ("startupProbe", "livenessProbe", "readinessProbe")]
    assert all(cmd[:3] == ["kernelgym", "healthcheck", "worker"] for cmd in probes)
    assert "--allow-quarantined" not in probes[2]  # a quarantined GPU is not ready
    child_limit_mb = int(container_env(container)["KERNELGYM_MEMORY_LIMIT_MB"]["value"])
    assert child_limit_mb * 2**20 < parse_quantity(resources["limits"]["memory"])
    if overlay == "prod":
        assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def parse_quantity(text: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    number, unit = re.fullmatch(r"(\d+)([KMGT]i)?", text).groups()
    return int(number) * units.get(unit or "", 1)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_keda_scales_workers_on_their_real_queues(rendered, overlay):
    docs = rendered[overlay]
    worker = one(docs, "Deployment", "kernelgym-worker")
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    device_class = container_env(container)["KERNELGYM_DEVICE_CLASS"]["value"]
    prefix = config_data(docs).get("KERNELGYM_KEY_PREFIX", ServiceSettings().key_prefix)
    scaled = one(docs, "ScaledObject", "kernelgym-worker")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "kernelgym-worker"
    assert 0 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    triggers = scaled["spec"]["triggers"]
    assert [t["metadata"]["listName"] for t in triggers] == Keys(prefix).queues(device_class)
    assert {t["type"] for t in triggers} == {"redis"}
    auth = one(docs, "TriggerAuthentication", triggers[0]["authenticationRef"]["name"])
    refs = {r["parameter"]: r for r in auth["spec"]["secretTargetRef"]}
    redis_secret = container_env(container)["KERNELGYM_REDIS_URL"]["valueFrom"]["secretKeyRef"]["name"]
    assert {r["name"] for r in refs.values()} == {redis_secret}
    assert set(refs) == {"address", "password"}
    # Requests that name no class go to the class the workers serve.
    assert config_data(docs)["KERNELGYM_DEFAULT_DEVICE_CLASS"] == device_class


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_runs_non_root_with_pinned_images_and_bounded_resources(rendered, overlay):
    for where, pod in pod_specs(rendered[overlay]):
        ctx = pod["securityContext"]
        assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] != 0, where
        assert ctx["seccompProfile"]["type"] == "RuntimeDefault", where
        assert pod.get("automountServiceAccountToken") is False, where
        for container in pod["containers"] + pod.get("initContainers", []):
            assert pinned_image(container["image"]), f"{where}: {container['image']}"
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"], where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc.get("privileged", False) is False, where
            res = container["resources"]
            assert {"cpu", "memory"} <= set(res["requests"]) and "memory" in res["limits"], where


@pytest.mark.parametrize("overlay", ["base", *OVERLAYS])
def test_secrets_are_referenced_never_inlined(rendered, overlay):
    docs = rendered[overlay]
    secrets = objects(docs, "Secret")
    if overlay == "dev":  # made by secretGenerator from the gitignored env files
        assert {s["metadata"]["name"] for s in secrets} == {"kernelgym-redis", "kernelgym-api-keys"}
    else:
        assert secrets == []
    for where, pod in pod_specs(docs):
        for container in pod["containers"]:
            for name, var in container_env(container).items():
                if SENSITIVE.search(name):
                    assert "value" not in var and "secretKeyRef" in var["valueFrom"], f"{where}: {name}"
    for cm in objects(docs, "ConfigMap"):
        assert not [k for k in cm["data"] if SENSITIVE.search(k)]
    for path in K8S.rglob("*.yaml"):
        assert not re.search(r"^kind:\s*Secret\b", path.read_text(), re.M), path
    gitignore = (ROOT / ".gitignore").read_text()
    assert "/k8s/overlays/*/*.env" in gitignore.split()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kubernetes_variables_are_real_settings(rendered, overlay):
    known = known_variables()
    docs = rendered[overlay]
    names = set(config_data(docs))
    for _, pod in pod_specs(docs):
        for container in pod["containers"]:
            names |= set(container_env(container))
    kernelgym = {n for n in names if n.startswith("KERNELGYM_")}
    assert kernelgym and kernelgym <= known, kernelgym - known


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_confine_workers_to_redis_and_dns(rendered, overlay):
    docs = rendered[overlay]
    deny = one(docs, "NetworkPolicy", "kernelgym-default-deny")
    assert deny["spec"]["podSelector"] == {} and set(deny["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    worker = one(docs, "NetworkPolicy", "kernelgym-worker")
    assert worker["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "kernelgym-worker"}
    assert "ingress" not in worker["spec"] and "Ingress" in worker["spec"]["policyTypes"]
    ports = {(p["protocol"], p["port"]) for rule in worker["spec"]["egress"] for p in rule["ports"]}
    assert ports == {("TCP", 6379), ("UDP", 53), ("TCP", 53)}
    dns = [r for r in worker["spec"]["egress"] if ("UDP", 53) in {(p["protocol"], p["port"]) for p in r["ports"]}]
    assert dns[0]["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
    gateway = one(docs, "NetworkPolicy", "kernelgym-gateway")
    assert [p["port"] for r in gateway["spec"]["ingress"] for p in r["ports"]] == [8000]
    if overlay == "dev":  # Redis is in the namespace: 6379 goes to its pod only, and it admits only ours
        (redis_rule,) = [r for r in worker["spec"]["egress"] if r["ports"][0]["port"] == 6379]
        assert redis_rule["to"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "kernelgym-redis"}}}]
        redis = one(docs, "NetworkPolicy", "kernelgym-redis")
        sources = [next(iter(peer.values()))["matchLabels"] for peer in redis["spec"]["ingress"][0]["from"]]
        assert {"app.kubernetes.io/name": "kernelgym-worker"} in sources
        assert "egress" not in redis["spec"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gateway_scales_keeps_replicas_through_disruptions_and_is_scraped(rendered, overlay):
    docs = rendered[overlay]
    gateway = one(docs, "Deployment", "kernelgym-gateway")
    labels = gateway["spec"]["template"]["metadata"]["labels"]
    hpa = one(docs, "HorizontalPodAutoscaler", "kernelgym-gateway")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "kernelgym-gateway"}
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    pdb = one(docs, "PodDisruptionBudget", "kernelgym-gateway")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    if "minAvailable" in pdb["spec"]:
        assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]  # a node drain can proceed
    service = one(docs, "Service", "kernelgym-gateway")
    assert service["spec"]["selector"].items() <= labels.items()
    monitor = one(docs, "ServiceMonitor", "kernelgym-gateway")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    (container,) = gateway["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"  # not /readyz: workers may be at zero
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]


def test_dev_runs_its_own_persistent_redis_and_prod_an_external_one(rendered):
    redis = one(rendered["dev"], "StatefulSet", "kernelgym-redis")
    (container,) = redis["spec"]["template"]["spec"]["containers"]
    script = " ".join(container["args"])
    assert "--appendonly yes" in script and "--requirepass" not in script
    assert "--maxmemory-policy noeviction" in script
    maxmemory = int(re.search(r"--maxmemory (\d+)mb", script).group(1)) * 2**20
    assert maxmemory < parse_quantity(container["resources"]["limits"]["memory"])
    assert redis["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/data"}
    assert container_env(container)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "kernelgym-redis"
    assert objects(rendered["prod"], "StatefulSet") == []
    assert not [s for s in objects(rendered["prod"], "Service") if "redis" in s["metadata"]["name"]]
    for overlay in OVERLAYS:
        (namespace,) = objects(rendered[overlay], "Namespace")
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_images_agree_between_compose_kubernetes_and_the_package_version(rendered, compose_config):
    compose_images = {s["image"] for s in compose_config["services"].values() if "build" in s}
    k8s_images = {
        c["image"]
        for overlay in OVERLAYS
        for _, pod in pod_specs(rendered[overlay])
        for c in pod["containers"]
        if c["image"].startswith("kernelgym-")
    }
    assert k8s_images == {f"kernelgym-gateway:{VERSION}", f"kernelgym-worker:{VERSION}"}
    assert k8s_images <= compose_images
