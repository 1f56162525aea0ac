"""The dashboard acts as its signed-in user, and only as far as that user may: the browser
connects to NATS as the user's own identity, so the server holds it to the CLI's rights.
Each rank's output is read the same way, from the node that ran it."""

import asyncio
from pathlib import Path

from playwright.async_api import Page, Route, expect

from allot.bus.identity import load
from allot.client import AsyncClient
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus
from allot.proto.events import JobCancelRequested, JobSpec, NodeCordoned
from tests.e2e.test_dashboard import browser, shot
from tests.stack import python, running, status, until

TREE = {"lab": {}, "lab/vision": {"members": ["alice"]}, "lab/nlp": {"members": ["bob"]}}
TALKS = python("import time\nfor n in range(600):\n print('step', n, flush=True); time.sleep(0.2)")


async def user(stack: Stack, name: str) -> Path:
    assert stack.keyring is not None
    path = stack.keyring.add(name, "user")
    stack.nats.reload()
    await asyncio.sleep(0.5)  # the server rereads its config
    return path


async def sign_in(page: Page, url: str, identity: Path) -> None:
    await page.goto(url)
    await page.locator("#identity-file").set_input_files(identity)
    await expect(page.locator("#signed-in")).to_contain_text(load(identity).name)


async def test_a_signed_in_user_reads_output_and_cancels_only_what_they_may(
    tmp_path: Path,
) -> None:
    nodes = [NodeShape(node_id="node-1", gpus=2), NodeShape(node_id="node-2", gpus=2)]
    async with (
        Stack(tmp_path / "allot", nodes, restart=False, heartbeat_s=0.2, stop_grace_s=2,
              dashboard_port=0, websocket=True) as stack,
        await stack.client() as operator,
        browser(tmp_path / "chromium") as context,
    ):  # fmt: skip
        assert stack.dashboard_url is not None
        assert stack.operator is not None
        await operator.apply_accounts(TREE)
        alice, bob = await user(stack, "alice"), await user(stack, "bob")
        async with await AsyncClient.connect(stack.url, load(alice)) as as_alice:
            job_id = str((await as_alice.submit(
                JobSpec(account="lab/vision", gpus=1, name="talks", command=TALKS)
            )).job_id)  # fmt: skip
        state = await until(operator, lambda s: running(s, job_id))
        [node_id] = state.jobs[job_id].placements  # either node: they are alike
        job_page = stack.dashboard_url + "jobs/" + job_id

        # Bob may read the page, as everyone may, but neither its output nor its cancel. He
        # asks before the page has drawn the job (its data held back): the cancel names the
        # job of the page's address all the same.
        page = await context.new_page()
        drawn = asyncio.Event()

        async def held_back(route: Route) -> None:
            await drawn.wait()
            await route.continue_()

        await page.route("**/api/jobs/**", held_back)
        await sign_in(page, job_page, bob)
        await expect(page.locator("#act-panel")).to_be_visible()
        await page.locator("#cancel-form button").click()
        await expect(page.locator("#act-said")).to_contain_text("bob may not cancel")
        drawn.set()
        await expect(page.locator("#output pre")).to_contain_text("may not")
        await page.locator("#sign-out").click()

        # Alice, who submitted it, reads its output as it is written, and cancels it.
        await sign_in(page, job_page, alice)
        shown = page.locator(f'#output pre[data-node="{node_id}"]')
        await expect(shown).to_contain_text("step 3")
        await expect(shown).to_contain_text("step 6")  # more, without a reload
        await shot(page, "job-signed-in", whole=True)
        await page.locator("#cancel-form input").fill("done with it")
        await page.locator("#cancel-form button").click()
        await expect(page.locator("#act-said")).to_contain_text("cancel of")
        ended = await until(operator, lambda s: status(s, job_id) == JobStatus.CANCELLED)
        asked = [r.event for r in await operator.events.read()
                 if isinstance(r.event, JobCancelRequested)]  # fmt: skip
        assert [(e.job_id, e.by, e.reason) for e in asked] == [(job_id, "alice", "done with it")]
        await expect(page.locator("#job-status")).to_have_text("cancelled")
        assert ended.jobs[job_id].status == JobStatus.CANCELLED

        # Cordons are an operator's: refused to Alice by the server itself, done for the
        # operator, and recorded as theirs.
        await page.goto(stack.dashboard_url + "nodes")
        form = page.locator("#node-form")
        await expect(form.locator("option")).to_have_count(2)
        await form.locator("select").select_option("node-2")
        await form.locator("button[value=cordon]").click()
        await expect(page.locator("#act-said")).to_contain_text("no answer")
        await page.locator("#sign-out").click()
        await sign_in(page, stack.dashboard_url + "nodes", stack.operator)
        await form.locator("select").select_option("node-2")
        await form.locator("input").fill("fan noise")
        await form.locator("button[value=drain]").click()
        await expect(page.locator("#act-said")).to_contain_text("node-2: drain done")
        await expect(page.locator('.card[data-node="node-2"] .why')).to_contain_text("fan noise")
        cordons = [r.event for r in await operator.events.read()
                   if isinstance(r.event, NodeCordoned)]  # fmt: skip
        assert [(c.node_id, c.drain, c.now, c.by) for c in cordons] == [
            ("node-2", True, False, stack.operator.stem)
        ]
