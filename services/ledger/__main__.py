import argparse

from allot.services.ledger.app import serve
from allot.services.runtime import run_service

run_service("ledger", argparse.ArgumentParser(prog="allot-ledger"), serve)
