import argparse

from allot.services.metrics.app import serve
from allot.services.runtime import run_service, seconds

parser = argparse.ArgumentParser(prog="allot-metrics")
parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
parser.add_argument("--port", type=int, default=9464, help="port to serve on (default 9464)")
parser.add_argument(
    "--refresh", type=seconds(0.01), default=2.0, help="seconds between recomputations (default 2)"
)
run_service("metrics", parser, serve)
