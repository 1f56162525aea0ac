"""The options of ``allot up`` that need more than argparse: kept apart from what runs the
stack, so that building the command line's parser loads none of it."""

import argparse

from allot.proto.subjects import LOG_REPLICAS

DASHBOARD_PORT = 8265


def dashboard_option(up: argparse.ArgumentParser) -> None:
    """``allot up --dashboard-port``; without it, the dashboard is on ``DASHBOARD_PORT``."""
    up.add_argument(
        "--dashboard-port", type=int, default=DASHBOARD_PORT,
        help=f"serve the dashboard on 127.0.0.1:PORT (default {DASHBOARD_PORT}; 0: a free port)",
    )  # fmt: skip


def nats_cluster_option(up: argparse.ArgumentParser) -> None:
    """``allot up --nats-cluster N``; without it, one NATS server."""
    up.add_argument(
        "--nats-cluster", type=cluster_size, metavar="N",
        help=f"run N NATS servers (3 or more) as one JetStream cluster on 127.0.0.1, the log "
        f"kept in {LOG_REPLICAS} copies (R{LOG_REPLICAS}): losing one server loses nothing, "
        "and every service finds the others (default: one server)",
    )  # fmt: skip


def cluster_size(given: str) -> int:
    try:
        size = int(given)
    except ValueError:
        size = 0
    if size < LOG_REPLICAS:
        raise argparse.ArgumentTypeError(
            f"{given!r}: a cluster of {LOG_REPLICAS} or more servers, to hold the log's "
            f"{LOG_REPLICAS} copies"
        )
    return size
