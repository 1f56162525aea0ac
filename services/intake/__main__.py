import argparse

from allot.services.intake.app import serve
from allot.services.runtime import run_service

run_service("intake", argparse.ArgumentParser(prog="allot-intake"), serve)
