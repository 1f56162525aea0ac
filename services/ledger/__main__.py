import argparse

from allot.services.ledger.app import serve
from allot.services.runtime import run_service, seconds

parser = argparse.ArgumentParser(prog="allot-ledger")
parser.add_argument(
    "--accounting-interval",
    type=seconds(0.1),
    default=60.0,
    help="seconds of a running job's time charged at once (finished jobs are charged at once)",
)
run_service("ledger", parser, serve)
