"""Checks on what users send. Each problem names the field, the value and what is accepted."""

import re
from collections.abc import Callable

from allot.core.model import State
from allot.core.topology import largest_blocks
from allot.proto.commands import CancelRequest, FieldError, SubmitRequest
from allot.proto.events import JobSpec

# An account is a path in the account tree: org/program/project/team, lower-case segments.
ACCOUNT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}(/[a-z0-9][a-z0-9_-]{0,62}){0,7}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME = 128
MAX_KEY = 256
MAX_MIN_RUNTIME_NS = 8 * 3600 * 10**9  # the runtime contract's cap (R13)
MAX_GRACE_NS = 3600 * 10**9


def validate_submission(request: SubmitRequest, state: State) -> list[FieldError]:
    spec = request.spec
    errors: list[FieldError] = []

    def bad(field: str, value: object, message: str) -> None:
        errors.append(FieldError(field=field, value=str(value), message=message))

    if not ACCOUNT_PATTERN.match(spec.account):
        bad(
            "account",
            spec.account,
            "expected a path of lower-case segments such as 'ml/vision/alice' "
            "(letters a-z, digits, '-' and '_'; each segment starts with a letter or digit)",
        )
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
    _check_shape(spec, state, bad)
    if not 0 <= spec.min_runtime_ns <= MAX_MIN_RUNTIME_NS:
        bad("min_runtime", spec.min_runtime_ns, "from 0 up to 8h")
    elif spec.max_runtime_ns is not None and spec.max_runtime_ns < max(1, spec.min_runtime_ns):
        bad("max_runtime", spec.max_runtime_ns, "positive, and not shorter than min_runtime")
    if spec.checkpoint_interval_ns is not None and spec.checkpoint_interval_ns <= 0:
        bad(
            "checkpoint_interval",
            spec.checkpoint_interval_ns,
            "a positive duration, or leave it out",
        )
    if not 0 <= spec.grace_ns <= MAX_GRACE_NS:
        bad("grace", spec.grace_ns, "from 0 up to 1h")
    if spec.cpus < 0 or spec.memory_mib < 0:
        bad("cpus" if spec.cpus < 0 else "memory_mib", min(spec.cpus, spec.memory_mib), "0 or more")
    if not spec.command or not spec.command[0].strip():
        bad("command", spec.command, "give the program to run and its arguments")
    elif any("\0" in arg for arg in spec.command):
        bad("command", spec.command, "arguments cannot contain NUL characters")
    if len(spec.name) > MAX_NAME or not spec.name.isprintable():
        bad("name", spec.name, f"at most {MAX_NAME} printable characters")
    for variable in spec.env:
        if not ENV_NAME.match(variable):
            bad("env", variable, "environment variable names are letters, digits and '_'")
        elif variable.startswith("ALLOT_") or variable == "CUDA_VISIBLE_DEVICES":
            bad("env", variable, "ALLOT_* and CUDA_VISIBLE_DEVICES are set by Allot")
        elif "\0" in spec.env[variable]:
            bad(f"env.{variable}", spec.env[variable], "values cannot contain NUL characters")
    if spec.workdir is not None and (not spec.workdir.startswith("/") or "\0" in spec.workdir):
        bad("workdir", spec.workdir, "an absolute path on the node, or leave it out")
    key = request.idempotency_key
    if key is not None and not (0 < len(key) <= MAX_KEY and key.isprintable()):
        bad("idempotency_key", key, f"1 to {MAX_KEY} printable characters")
    return errors


def _check_shape(spec: JobSpec, state: State, bad: Callable[[str, object, str], None]) -> None:
    """Workers, GPUs, flavor and topology: each valid alone, and the whole able to fit the
    cluster as registered (a job that could never be placed is refused, not queued)."""
    if spec.workers < 1:
        bad("workers", spec.workers, "must be at least 1")
    if spec.gpus < 1:
        bad("gpus", spec.gpus, "must be at least 1")
    if spec.max_gpus is not None and spec.max_gpus < spec.gpus:
        bad("max_gpus", spec.max_gpus, f"at least gpus ({spec.gpus}), or leave it out")
    elif spec.max_gpus is not None and spec.workers != 1:
        bad(
            "max_gpus", spec.max_gpus, "elastic jobs have one worker; leave out workers or max_gpus"
        )
    if spec.flavor is not None and not spec.flavor.strip():
        bad("flavor", spec.flavor, "a GPU model such as 'H100', or leave it out")
    if spec.workers < 1 or spec.gpus < 1 or not state.nodes:
        return
    models = sorted({g.model for n in state.nodes.values() for g in n.gpus})
    if spec.flavor is not None and spec.flavor not in models:
        bad(
            "flavor",
            spec.flavor,
            f"no node has that GPU model; the cluster has {', '.join(models)}",
        )
        return
    largest = largest_blocks(state, spec.flavor, spec.gpus)
    if spec.gpus > largest["node"]:
        bad("gpus", spec.gpus, f"no node has that many GPUs; the largest has {largest['node']}")
    elif spec.total_gpus > largest[spec.topology]:
        bad(
            "workers" if spec.workers > 1 else "gpus",
            spec.workers if spec.workers > 1 else spec.gpus,
            f"{spec.total_gpus} GPUs with topology {spec.topology!r} cannot fit: the largest "
            f"such block in the cluster has {largest[spec.topology]}",
        )


def validate_cancel(request: CancelRequest, state: State) -> list[FieldError]:
    job = state.jobs.get(request.job_id)
    if job is None:
        return [FieldError(field="job_id", value=request.job_id, message="no such job")]
    if job.status.terminal:
        return [
            FieldError(
                field="job_id", value=request.job_id, message=f"job already ended ({job.status})"
            )
        ]
    return []


def known_submission(request: SubmitRequest, state: State) -> tuple[str | None, list[FieldError]]:
    """A retry of a submission already in the log: the job id it got. A key that was used
    for a different job is an error, not a silent alias."""
    key = request.idempotency_key
    if key is None:
        return None, []
    known = state.idempotency.get((request.spec.account, key))
    if known is None:
        return None, []
    if state.jobs[known].spec != request.spec:
        return None, [key_reused(key, known)]
    return known, []


def key_reused(key: str, job_id: str) -> FieldError:
    return FieldError(
        field="idempotency_key",
        value=key,
        message=f"already used for a different job ({job_id}); use a new key for a new job",
    )
