"""Fold rules for the planner's events: plans (admissions, reasons, preemptions, holds),
the policy adopted, and waits past an account's limit."""

from allot.core.accounts import ancestry
from allot.core.fold_jobs import known_job
from allot.core.model import FoldRule, Ignore, JobStatus, State
from allot.core.quota import needs
from allot.core.topology import model_of
from allot.proto.events import Admission, Event, MaxWaitExceeded, PlanComputed, PolicyAdopted


def _policy_adopted(state: State, seq: int, e: PolicyAdopted) -> None:
    state.policies[e.policy_hash] = e.policy_json


def _max_wait_exceeded(state: State, seq: int, e: MaxWaitExceeded) -> None:
    job = known_job(state, e.job_id)
    if job.status != JobStatus.PENDING or job.attempts != e.attempt:
        raise Ignore(f"job {e.job_id} is {job.status} in attempt {job.attempts}, not waiting")
    job.max_wait_exceeded = True


# --- plans ------------------------------------------------------------------------------


def _plan(state: State, seq: int, e: PlanComputed) -> None:
    for admission in e.admissions:
        problem = _admission_problem(state, admission)
        if problem:
            state.note_ignored(seq, "PlanComputed.admission", f"{admission.job_id}: {problem}")
            continue
        job = state.jobs[admission.job_id]
        for placement in admission.placements:
            node = state.nodes[placement.node_id]
            for index in placement.gpus:
                node.allocated[index] = job.job_id
        model = model_of(state.nodes[admission.placements[0].node_id])
        gpus = sum(len(p.gpus) for p in admission.placements)
        amounts = state.holders[job.job_id] = needs(job.spec, model, gpus)
        for path in ancestry(job.spec.account):
            held = state.quota_used.setdefault(path, {})
            for resource, amount in amounts.items():
                held[resource] = held.get(resource, 0) + amount
        job.status = JobStatus.ADMITTED
        job.placements = {p.node_id: list(p.gpus) for p in admission.placements}
        job.started_on, job.exited_on = {}, {}
        job.admitted_at = e.now
        job.funded, job.lent = admission.funded, admission.lent is True
        job.reason = None
        state.dequeue(job)
        state.holds.pop(job.job_id, None)
        state.holder_changes.add(job.job_id)
    for preemption in e.preemptions:
        victim = state.jobs.get(preemption.job_id)
        if victim is None or victim.status != JobStatus.RUNNING or victim.preemption or victim.stop:
            state.note_ignored(seq, "PlanComputed.preemption", f"{preemption.job_id}: not running")
            continue
        victim.preemption = preemption
        state.holder_changes.add(victim.job_id)
    for hold in e.holds:
        if not hold.placements:
            state.holds.pop(hold.job_id, None)  # let go: nothing is being stopped for it
        elif hold.job_id not in state.pending:
            state.note_ignored(seq, "PlanComputed.hold", f"{hold.job_id}: not waiting")
        elif not all(_on_node(state, p.node_id, p.gpus) for p in hold.placements):
            state.note_ignored(seq, "PlanComputed.hold", f"{hold.job_id}: no such GPUs")
        else:
            state.holds[hold.job_id] = list(hold.placements)
    for reason in e.pending:
        waiting = state.jobs.get(reason.job_id)
        if waiting is not None and waiting.status == JobStatus.PENDING and not waiting.array_held:
            waiting.reason = reason
            state.unstated.pop(reason.job_id, None)
    if e.admissions or e.preemptions or e.holds:  # only then: most plans only state reasons
        state.holders_version += 1


def _on_node(state: State, node_id: str, gpus: list[int]) -> bool:
    node = state.nodes.get(node_id)
    return node is not None and set(gpus) <= {g.index for g in node.gpus}


def _admission_problem(state: State, a: Admission) -> str:
    job = state.jobs.get(a.job_id)
    if job is None or job.status != JobStatus.PENDING or job.array_held:
        return "job is not pending" if job is None or not job.array_held else "job is held"
    spec = job.spec
    counts = [len(p.gpus) for p in a.placements]
    total = sum(counts)
    if spec.max_gpus is None and total != spec.total_gpus:
        return f"{total} GPUs placed, the job needs {spec.total_gpus}"
    if spec.max_gpus is not None and not spec.gpus <= total <= spec.max_gpus:
        return f"{total} GPUs placed, the elastic job takes {spec.gpus} to {spec.max_gpus}"
    nodes = [p.node_id for p in a.placements]
    if len(set(nodes)) != len(nodes):
        return "placements name a node twice"
    if spec.max_gpus is not None and len(nodes) != 1:
        return "an elastic job is one worker, on one node"
    if spec.max_gpus is None and any(count % spec.gpus for count in counts):
        return "placements split a worker across nodes"
    for placement in a.placements:
        node = state.nodes.get(placement.node_id)
        if node is None or not node.schedulable:
            return f"node {placement.node_id} is not schedulable"
        indices = {g.index for g in node.gpus}
        gpus = placement.gpus
        taken = any(i not in indices or i in node.allocated or i in node.gpu_faults for i in gpus)
        if len(set(gpus)) != len(gpus) or taken:
            return f"GPUs {gpus} not free on {placement.node_id}"
    return ""


RULES: dict[type[Event], FoldRule] = {
    MaxWaitExceeded: _max_wait_exceeded,
    PlanComputed: _plan,
    PolicyAdopted: _policy_adopted,
}

CHANGES: dict[type[Event], tuple[str, ...]] = {
    MaxWaitExceeded: (),
    PlanComputed: (),  # its rule: holders, for a plan that admits, preempts or holds
    PolicyAdopted: (),
}
