import argparse

from allot.services.runtime import run_service, seconds
from allot.services.telemetry.app import serve

parser = argparse.ArgumentParser(prog="allot-telemetry")
parser.add_argument(
    "--node-timeout",
    type=seconds(0.1),
    default=10.0,
    help="seconds of silence before a node is lost",
)
parser.add_argument(
    "--recover-after",
    type=seconds(0),
    default=60.0,
    help="seconds a GPU must be free of a passing fault (a slowdown, a pending remap) "
    "before it takes work again",
)
run_service("telemetry", parser, serve)
