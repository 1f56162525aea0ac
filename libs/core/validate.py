"""Checks on what users send. Each problem names the field, the value and what is accepted.

``spec_problems`` needs nothing but the spec: the fold holds every ``JobSubmitted`` to it
too, so a job that reached the log around the intake is refused there just the same.
"""

import functools
import re
from collections.abc import Callable

from allot.core.arrays import array_problems
from allot.core.durations import format_duration
from allot.core.model import JobStatus, State
from allot.core.topology import largest_blocks
from allot.proto import limits
from allot.proto.commands import CancelRequest, FieldError, SubmitRequest
from allot.proto.events import JobSpec, Topology
from allot.proto.limits import (
    MAX_ARGS,
    MAX_ARGV_ENV_BYTES,
    MAX_CPUS,
    MAX_ENV,
    MAX_FLAVOR,
    MAX_GPUS_PER_WORKER,
    MAX_GRACE_NS,
    MAX_KEY,
    MAX_MEMORY_MIB,
    MAX_MIN_RUNTIME_NS,
    MAX_NAME,
    MAX_PATH,
    MAX_REASON,
    MAX_RUNTIME_NS,
    MAX_WORKERS,
    shown,
)

ACCOUNT_PATTERN = re.compile(limits.ACCOUNT_PATTERN)
ENV_NAME = re.compile(limits.ENV_NAME_PATTERN)

Bad = Callable[[str, object, str], None]


@functools.lru_cache(maxsize=1 << 14)
def is_account_path(path: str) -> bool:
    """Whether ``path`` matches ``ACCOUNT_PATTERN``, remembered: a log names the same few
    accounts again and again, and the pattern takes a microsecond to match."""
    return ACCOUNT_PATTERN.fullmatch(path) is not None


def validate_submission(request: SubmitRequest, state: State) -> list[FieldError]:
    """Everything wrong with a submission, against the cluster and accounts ``state`` knows."""
    spec = request.spec
    errors: list[FieldError] = []

    def bad(field: str, value: object, message: str) -> None:
        errors.append(FieldError(field=field, value=shown(value), message=message))

    _check_account(spec, state, bad)
    _check_shape(spec, state, bad)
    _check_spec(spec, bad)
    _check_resources(spec, state, bad)
    key = request.idempotency_key
    if key is not None and not (0 < len(key) <= MAX_KEY and key.isprintable()):
        bad("idempotency_key", key, f"1 to {MAX_KEY} printable characters")
    if request.array is not None:
        errors += array_problems(request.array)
    return errors


def spec_problems(spec: JobSpec) -> list[FieldError]:
    """What is wrong with a spec in itself, whatever the cluster and accounts."""
    errors: list[FieldError] = []

    def bad(field: str, value: object, message: str) -> None:
        errors.append(FieldError(field=field, value=shown(value), message=message))

    if not is_account_path(spec.account):
        _bad_account_path(spec.account, bad)
    _check_shape_alone(spec, bad)
    _check_spec(spec, bad)
    return errors


def _bad_account_path(account: str, bad: Bad) -> None:
    bad(
        "account",
        account,
        "expected a path of lower-case segments such as 'ml/vision/alice' "
        "(letters a-z, digits, '-' and '_'; each segment starts with a letter or digit)",
    )


def _check_account(spec: JobSpec, state: State, bad: Bad) -> None:
    if not is_account_path(spec.account):
        _bad_account_path(spec.account, bad)
    elif state.accounts and spec.account not in state.accounts:
        bad(
            "account",
            spec.account,
            "no such account; `allot accounts show` lists them, `allot accounts apply` adds one",
        )
    elif state.accounts and any(p.startswith(spec.account + "/") for p in state.accounts):
        bad(
            "account",
            spec.account,
            "a parent account; submit to one of its leaves (a team or user queue)",
        )


def _check_spec(spec: JobSpec, bad: Bad) -> None:
    """Runtimes, resources per worker, the command and its environment, names."""
    if not 0 <= spec.min_runtime_ns <= MAX_MIN_RUNTIME_NS:
        bad("min_runtime", format_duration(spec.min_runtime_ns), "from 0 up to 8h")
    elif spec.max_runtime_ns is not None and not (
        max(1, spec.min_runtime_ns) <= spec.max_runtime_ns <= MAX_RUNTIME_NS
    ):
        bad(
            "max_runtime",
            format_duration(spec.max_runtime_ns),
            "positive, not shorter than min_runtime, and at most 365d",
        )
    interval = spec.checkpoint_interval_ns
    if interval is not None and not 0 < interval <= MAX_RUNTIME_NS:
        bad(
            "checkpoint_interval",
            format_duration(interval),
            "a positive duration up to 365d, or leave it out",
        )
    if not 0 <= spec.grace_ns <= MAX_GRACE_NS:
        bad("grace", format_duration(spec.grace_ns), "from 0 up to 1h")
    if not 0 <= spec.cpus <= MAX_CPUS:
        bad("cpus", spec.cpus, f"0 to {MAX_CPUS} per worker")
    if not 0 <= spec.memory_mib <= MAX_MEMORY_MIB:
        bad("memory_mib", spec.memory_mib, f"0 to {MAX_MEMORY_MIB} MiB per worker")
    _check_command(spec, bad)
    if len(spec.name) > MAX_NAME or not spec.name.isprintable():
        bad("name", spec.name, f"at most {MAX_NAME} printable characters")
    workdir = spec.workdir
    if workdir is not None and (
        not workdir.startswith("/") or "\0" in workdir or len(workdir) > MAX_PATH
    ):
        bad("workdir", workdir, f"an absolute path on the node (at most {MAX_PATH} characters)")


def _check_command(spec: JobSpec, bad: Bad) -> None:
    args = "".join(spec.command)  # the checks below read the arguments once, at C speed
    if not spec.command or not spec.command[0].strip():
        bad("command", spec.command, "give the program to run and its arguments")
    elif "\0" in args:
        bad("command", spec.command, "arguments cannot contain NUL characters")
    elif len(spec.command) > MAX_ARGS:
        bad("command", f"{len(spec.command)} arguments", f"at most {MAX_ARGS} arguments")
    size = len(args.encode()) + len(spec.command)  # each argument ends in a NUL
    if spec.env:
        size += _check_env(spec.env, bad)
    if size > MAX_ARGV_ENV_BYTES:
        bad(
            "command",
            f"{size} bytes of arguments and environment",
            f"at most {MAX_ARGV_ENV_BYTES} bytes together; put long inputs in a file",
        )


def _check_env(env: dict[str, str], bad: Bad) -> int:
    """Check the variables; the bytes they take (``NAME=value`` and a NUL each)."""
    if len(env) > MAX_ENV:
        bad("env", f"{len(env)} variables", f"at most {MAX_ENV} variables")
    for variable, value in env.items():
        if not ENV_NAME.fullmatch(variable):
            bad("env", variable, "environment variable names are letters, digits and '_'")
        elif variable.startswith("ALLOT_") or variable == "CUDA_VISIBLE_DEVICES":
            bad("env", variable, "ALLOT_* and CUDA_VISIBLE_DEVICES are set by Allot")
        elif "\0" in value:
            bad(f"env.{variable}", value, "values cannot contain NUL characters")
    return sum(len(k.encode()) + len(v.encode()) + 2 for k, v in env.items())


def _check_resources(spec: JobSpec, state: State, bad: Bad) -> None:
    """CPUs and memory per worker no more than the largest node reports (nodes that
    report none are not counted: their agents do not know)."""
    cluster = cluster_limits(state)
    cpus, memory = cluster.cpus, cluster.memory_mib
    if cpus and cpus < spec.cpus <= MAX_CPUS:
        bad("cpus", spec.cpus, f"no node has that many CPUs; the largest has {cpus}")
    if memory and memory < spec.memory_mib <= MAX_MEMORY_MIB:
        bad(
            "memory_mib",
            spec.memory_mib,
            f"no node has that much memory; the largest has {memory} MiB",
        )


def _check_shape(spec: JobSpec, state: State, bad: Bad) -> None:
    """Workers, GPUs, flavor and topology: each valid alone, and the whole able to fit the
    cluster as registered (a job that could never be placed is refused, not queued)."""
    if _check_shape_alone(spec, bad) and state.nodes:
        _check_fit(spec, state, bad)


def _check_shape_alone(spec: JobSpec, bad: Bad) -> bool:
    """Whether workers and GPUs are valid, so the job's size can be held to a cluster."""
    if not 1 <= spec.workers <= MAX_WORKERS:
        bad("workers", spec.workers, f"from 1 up to {MAX_WORKERS}")
    if not 1 <= spec.gpus <= MAX_GPUS_PER_WORKER:
        bad("gpus", spec.gpus, f"from 1 up to {MAX_GPUS_PER_WORKER} per worker")
    if spec.max_gpus is not None and not spec.gpus <= spec.max_gpus <= MAX_GPUS_PER_WORKER:
        bad(
            "max_gpus",
            spec.max_gpus,
            f"at least gpus ({spec.gpus}) and at most {MAX_GPUS_PER_WORKER}, or leave it out",
        )
    elif spec.max_gpus is not None and spec.workers != 1:
        bad(
            "max_gpus", spec.max_gpus, "elastic jobs have one worker; leave out workers or max_gpus"
        )
    if spec.flavor is not None and not (0 < len(spec.flavor.strip()) <= MAX_FLAVOR):
        bad("flavor", spec.flavor, "a GPU model such as 'H100', or leave it out")
    return 1 <= spec.workers <= MAX_WORKERS and 1 <= spec.gpus <= MAX_GPUS_PER_WORKER


def _check_fit(spec: JobSpec, state: State, bad: Bad) -> None:
    cluster = cluster_limits(state)
    if spec.flavor is not None and spec.flavor not in cluster.models:
        bad(
            "flavor",
            spec.flavor,
            f"no node has that GPU model; the cluster has {', '.join(cluster.models)}",
        )
        return
    largest = cluster.largest_blocks(state, spec.flavor, spec.gpus)
    if spec.gpus > largest["node"]:
        bad("gpus", spec.gpus, f"no node has that many GPUs; the largest has {largest['node']}")
    elif spec.total_gpus > largest[spec.topology]:
        bad(
            "workers" if spec.workers > 1 else "gpus",
            spec.workers if spec.workers > 1 else spec.gpus,
            f"{spec.total_gpus} GPUs with topology {spec.topology!r} cannot fit: the largest "
            f"such block in the cluster has {largest[spec.topology]}",
        )


class ClusterLimits:
    """What a state's registered nodes allow a job, kept for as long as its
    ``nodes_version`` holds: every submission is held to every node, which on a cluster of
    hundreds of nodes was most of what checking one cost the intake."""

    MAX_SHAPES = 64  # (flavor, GPUs per worker) pairs kept: hostile variety stays bounded

    def __init__(self, state: State):
        nodes = state.nodes.values()
        self.nodes_version = state.nodes_version
        self.models = sorted({g.model for n in nodes for g in n.gpus})
        self.cpus = max((n.cpus for n in nodes), default=0)
        self.memory_mib = max((n.memory_mib for n in nodes), default=0)
        self._blocks: dict[tuple[str | None, int], dict[Topology, int]] = {}

    def largest_blocks(
        self, state: State, flavor: str | None, per_worker: int
    ) -> dict[Topology, int]:
        """``topology.largest_blocks`` of ``state``, the state these limits are of."""
        shape = (flavor, per_worker)
        if shape not in self._blocks:
            if len(self._blocks) >= self.MAX_SHAPES:
                self._blocks.clear()
            self._blocks[shape] = largest_blocks(state, flavor, per_worker)
        return self._blocks[shape]


def cluster_limits(state: State) -> ClusterLimits:
    """The limits of ``state``'s nodes as they are now (computed again once they change)."""
    known = state.cluster_limits
    if known is None or known.nodes_version != state.nodes_version:
        known = state.cluster_limits = ClusterLimits(state)
    return known


def validate_cancel(request: CancelRequest, state: State) -> list[FieldError]:
    if len(request.reason) > MAX_REASON:
        return [reason_too_long(request.reason)]
    array = state.arrays.get(request.job_id)
    if array is not None:
        if array.cancel_requested:
            problem = "the array is being cancelled already"
        elif all(state.jobs[task].status.terminal for task in array.tasks):
            problem = "every task of the array has ended"
        else:
            return []
        return [FieldError(field="job_id", value=request.job_id, message=problem)]
    job = state.jobs.get(request.job_id)
    if job is None:
        return [FieldError(field="job_id", value=shown(request.job_id), message="no such job")]
    if job.status.terminal:
        return [FieldError(field="job_id", value=request.job_id, message=already_ended(job.status))]
    return []


def already_ended(status: JobStatus) -> str:
    return f"job already ended ({status})"


def reason_too_long(reason: str) -> FieldError:
    return FieldError(
        field="reason", value=shown(reason), message=f"at most {MAX_REASON} characters"
    )


def known_submission(
    request: SubmitRequest, principal: str, state: State
) -> tuple[str | None, list[FieldError]]:
    """A retry by ``principal`` of a submission already in the log: the job id it got. A
    key that was used for a different job is an error, not a silent alias."""
    key = request.idempotency_key
    if key is None:
        return None, []
    known = state.idempotency.get((principal, request.spec.account, key))
    if known is None:
        return None, []
    array = state.arrays.get(known)
    if array is not None:
        same = array.spec == request.spec and array.array == request.array
    else:
        same = request.array is None and state.jobs[known].spec == request.spec
    return (known, []) if same else (None, [key_reused(key, known)])


def key_reused(key: str, job_id: str) -> FieldError:
    return FieldError(
        field="idempotency_key",
        value=key,
        message=f"already used for a different job ({job_id}); use a new key for a new job",
    )
