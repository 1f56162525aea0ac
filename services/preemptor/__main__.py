import argparse

from allot.services.preemptor.app import serve
from allot.services.runtime import run_service, seconds

parser = argparse.ArgumentParser(prog="allot-preemptor")
parser.add_argument(
    "--tick", type=seconds(0.01), default=1.0, help="seconds between checks while the log is quiet"
)
run_service("preemptor", parser, serve)
