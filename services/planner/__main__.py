from allot.services.planner.app import arguments, serve
from allot.services.runtime import run_service

run_service("planner", arguments(), serve)
