import argparse

from allot.services.runtime import run_service
from allot.services.view.app import serve

parser = argparse.ArgumentParser(prog="allot-view")
parser.add_argument(
    "--refresh",
    type=float,
    default=1.0,
    help="seconds between recomputations of the queue while the log moves (default 1)",
)
run_service("view", parser, serve)
