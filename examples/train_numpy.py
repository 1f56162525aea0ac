"""A resumable training loop under Allot's preemption contract: linear regression by full-
batch gradient descent in numpy, deterministic, so a run that is stopped, requeued and
resumed ends with exactly the weights of an uninterrupted one.

    allot submit --gpus 1 --account demo --resumable --grace 30s -- python examples/train_numpy.py

Environment: TRAIN_STEPS (default 200), STEP_SECONDS (a pause per step, to stand in for
real work; default 0.05), CHECKPOINT_EVERY (steps, default 10), RESULT (a file to write
the final weights to as JSON).
"""

import json
import os
import sys
import time

import numpy as np

from allot import workload


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    features = rng.normal(size=(512, 8))
    truth = np.arange(1.0, 9.0)
    return features, features @ truth + rng.normal(scale=0.1, size=512)


def main() -> int:
    steps = int(os.environ.get("TRAIN_STEPS", "200"))
    pause = float(os.environ.get("STEP_SECONDS", "0.05"))
    every = int(os.environ.get("CHECKPOINT_EVERY", "10"))
    features, targets = data()
    state = workload.resume() or {"step": 0, "weights": np.zeros(8)}
    if state["step"]:
        print(f"resumed from step {state['step']}", flush=True)
    while state["step"] < steps:
        if workload.should_stop():
            workload.save(state)
            print(f"stopping at step {state['step']}: checkpoint saved", flush=True)
            return 0
        gradient = features.T @ (features @ state["weights"] - targets) / len(targets)
        state = {"step": state["step"] + 1, "weights": state["weights"] - 0.05 * gradient}
        if state["step"] % every == 0:
            workload.save(state)
        time.sleep(pause)
    loss = float(np.mean((features @ state["weights"] - targets) ** 2))
    print(f"done after {steps} steps: loss {loss:.6f}", flush=True)
    if "RESULT" in os.environ:
        with open(os.environ["RESULT"], "w") as out:
            json.dump({"weights": state["weights"].tolist(), "loss": loss}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
