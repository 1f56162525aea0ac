import argparse

from allot.services.runtime import run_service
from allot.services.telemetry.app import serve

parser = argparse.ArgumentParser(prog="allot-telemetry")
parser.add_argument(
    "--node-timeout", type=float, default=10.0, help="seconds of silence before a node is lost"
)
run_service("telemetry", parser, serve)
