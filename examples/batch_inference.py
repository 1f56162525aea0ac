"""A resumable batch-inference job under Allot's preemption contract: it answers a list
of prompts in order, appending one line per prompt to an output file, and checkpoints how
far it got; resumed, it drops what it wrote after its last checkpoint and carries on, so
the output is exactly that of an uninterrupted run.

    allot submit --gpus 1 --account demo --resumable --env OUTPUT=/tmp/answers.txt \\
        -- python examples/batch_inference.py

Environment: OUTPUT (required), PROMPTS (how many, default 100), STEP_SECONDS (default
0.02), CHECKPOINT_EVERY (prompts, default 10).
"""

import hashlib
import os
import sys
import time

from allot import workload


def answer(prompt: str) -> str:
    """Stands in for a model: the same prompt always gets the same answer."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


def main() -> int:
    output = os.environ["OUTPUT"]
    prompts = [f"prompt {n}" for n in range(int(os.environ.get("PROMPTS", "100")))]
    pause = float(os.environ.get("STEP_SECONDS", "0.02"))
    every = int(os.environ.get("CHECKPOINT_EVERY", "10"))
    state = workload.resume() or {"done": 0, "bytes": 0}
    with open(output, "a+b") as out:
        out.truncate(state["bytes"])  # lines written after the last checkpoint go again
        out.seek(state["bytes"])
        if state["done"]:
            print(f"resumed after {state['done']} prompts", flush=True)
        for n in range(state["done"], len(prompts)):
            if workload.should_stop():
                print(f"stopping after {n} prompts", flush=True)
                return 0  # the last checkpoint stands; what came after is redone
            out.write(f"{prompts[n]}\t{answer(prompts[n])}\n".encode())
            time.sleep(pause)
            if (n + 1) % every == 0 or n + 1 == len(prompts):
                out.flush()
                os.fsync(out.fileno())
                workload.save({"done": n + 1, "bytes": out.tell()})
    print(f"answered {len(prompts)} prompts", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
