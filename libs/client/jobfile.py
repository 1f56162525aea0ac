"""A job's spec from a TOML job file and the command line (flags win over the file).

A job file holds the same fields as the flags::

    account = "lab/vision/alice"
    workers = 2            # a gang of two workers...
    gpus = 4               # ...of four GPUs each
    topology = "rack"      # nvlink | node | rack | any
    flavor = "H100"
    tier = "batch"
    min_runtime = "30m"
    max_runtime = "4h"
    resumable = true
    checkpoint_interval = "10m"
    grace = "2m"
    command = ["python", "train.py", "--epochs", "3"]
    [env]
    WANDB_MODE = "offline"
"""

import argparse
from pathlib import Path
from typing import Any

import msgspec

from allot.core.accounts import parse_duration
from allot.proto.commands import FieldError, decode_problem, unknown_field
from allot.proto.events import JobSpec

# Durations, written "30m" in a file: flag (argparse dest) and file name -> JobSpec field.
_DURATIONS = {
    "min_runtime": "min_runtime_ns",
    "max_runtime": "max_runtime_ns",
    "checkpoint_interval": "checkpoint_interval_ns",
    "grace": "grace_ns",
}
_PLAIN = (
    "account",
    "gpus",
    "workers",
    "topology",
    "flavor",
    "max_gpus",
    "name",
    "resumable",
    "workdir",
    "cpus",
    "memory_mib",
    "tier",
)


class SpecError(Exception):
    def __init__(self, problem: FieldError):
        super().__init__(str(problem))
        self.problem = problem


def spec_from(args: argparse.Namespace) -> JobSpec:
    fields: dict[str, Any] = _read_file(Path(args.file)) if args.file else {}
    for name in _PLAIN:
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    for name, field in _DURATIONS.items():
        if getattr(args, name) is not None:
            fields[field] = getattr(args, name)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if command:
        fields["command"] = command
    env = dict(fields.get("env", {}))
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep:
            raise SpecError(FieldError(field="env", value=item, message="expected NAME=VALUE"))
        env[name] = value
    fields["env"] = env
    for required in ("account", "gpus"):
        if required not in fields:
            raise SpecError(
                FieldError(
                    field=required, value="", message=f"give --{required} or set it in a job file"
                )
            )
    fields.setdefault("command", [])
    try:
        spec = msgspec.convert(fields, JobSpec)
    except msgspec.ValidationError as error:  # mistyped
        raise SpecError(decode_problem(error, fields, JobSpec)) from None
    unknown = unknown_field(fields, JobSpec)  # a field the spec does not have
    if unknown is not None:
        raise SpecError(unknown)
    return spec


def _read_file(path: Path) -> dict[str, Any]:
    import tomllib  # only for --file: each submission's start-up counts

    try:
        fields = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise SpecError(FieldError(field="file", value=str(path), message=str(error))) from None
    for name, field in _DURATIONS.items():
        if name in fields:
            written = str(fields.pop(name))
            try:
                fields[field] = parse_duration(written)
            except ValueError as error:
                raise SpecError(FieldError(field=name, value=written, message=str(error))) from None
    return fields
