import argparse

from allot.services.runtime import run_service, seconds
from allot.services.view.app import serve

parser = argparse.ArgumentParser(prog="allot-view")
parser.add_argument(
    "--refresh",
    type=seconds(0.01),
    default=1.0,
    help="seconds between recomputations of the queue while the log moves (default 1)",
)
parser.add_argument(
    "--dashboard-port",
    type=int,
    help="serve the dashboard on this port (0: a free one; default: no dashboard)",
)
parser.add_argument(
    "--dashboard-host",
    default="127.0.0.1",
    help="the address to serve the dashboard on (default 127.0.0.1: this machine only)",
)
parser.add_argument(
    "--nats-websocket-url",
    help="where a browser reaches NATS as its user (ws://HOST:PORT): the dashboard then "
    "lets a signed-in user cancel, cordon and drain, and read output, as the CLI would",
)
run_service("view", parser, serve)
