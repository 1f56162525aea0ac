"""The node agent as one installs it on a GPU host: `allot node`, its systemd unit, the GPU
check; and what it says on a host without NVIDIA GPUs."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from allot.bus import EmbeddedNats
from allot.services.node.__main__ import parser
from allot.services.runtime import connection_arguments
from tests.nvml import nvml_loads

ROOT = Path(__file__).resolve().parents[2]
SYSTEMD = ROOT / "deploy" / "systemd"


def run(*command: str, **env: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, env={**os.environ, **env}, cwd=ROOT
    )


def test_the_systemd_unit_runs_allot_node_with_arguments_the_agent_takes() -> None:
    unit = (SYSTEMD / "allot-node.service").read_text()
    settings = dict(
        line.split("=", 1)
        for line in (SYSTEMD / "node.env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    [command] = re.findall(r"^ExecStart=(.*)$", unit.replace("\\\n", " "), re.MULTILINE)
    expanded = re.sub(r"\$\{(\w+)\}", lambda m: settings[m.group(1)], command)
    program, subcommand, *arguments = shlex.split(expanded)
    assert (program.rsplit("/", 1)[-1], subcommand) == ("allot", "node")
    args = connection_arguments(parser).parse_args(arguments)
    assert args.gpus is None  # the host's own GPUs, through NVML
    assert args.nats_url == settings["ALLOT_NATS_URL"]
    assert args.identity == Path("/etc/allot/identity.json")
    assert args.checkpoint_root == Path(settings["ALLOT_CHECKPOINT_ROOT"])
    assert "KillMode=process" in unit  # its jobs outlive a restart of the agent


def test_allot_node_is_the_agent() -> None:
    shown = run(sys.executable, "-m", "allot.client.cli", "node", "--help")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: allot-node")
    assert "through NVML" in shown.stdout
    assert "--creds" in shown.stdout
    listed = run(sys.executable, "-m", "allot.client.cli", "--help")
    assert "run this host's node agent" in listed.stdout


async def test_without_nvml_and_without_gpus_the_agent_says_how_to_simulate(
    nats_server: EmbeddedNats, tmp_path: Path
) -> None:
    if nvml_loads():  # on a GPU host the agent would start: nothing to refuse there
        assert run(sys.executable, "-c", "import pynvml; pynvml.nvmlInit()").returncode == 0
        return
    done = run(
        sys.executable, "-m", "allot.client.cli", "node",
        "--nats-url", nats_server.url, "--node-id", "gpu-01", "--work-dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2
    assert "NVML cannot be used on this host" in done.stderr
    assert "pass --gpus N to simulate N GPUs" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_gpu_check_runs_on_a_gpu_host_and_says_it_skipped_elsewhere() -> None:
    done = run(str(ROOT / "deploy" / "gpu-check.sh"), PYTHON=sys.executable)
    assert done.returncode == 0, done.stdout + done.stderr
    if not nvml_loads():
        assert done.stdout.startswith("gpu-check skipped: NVML cannot be used on this host")
        assert "There is no NVIDIA GPU to check on this host." in done.stdout
    else:
        assert "gpu-check passed" in done.stdout
