import argparse

from allot.services.planner.app import serve
from allot.services.runtime import run_service

run_service("planner", argparse.ArgumentParser(prog="allot-planner"), serve)
