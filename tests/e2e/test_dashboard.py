"""The dashboard in a real browser (Debian's chromium, driven by Playwright) against a real
stack: each page shows what the log holds, user input shows as text, and a page follows
the log as it moves, without being reloaded.

``ALLOT_DASHBOARD_SHOTS=DIR`` also saves a screenshot of each page there (the README's, in
docs/dashboard/, are made so)."""

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, Page, async_playwright, expect

from allot.client.stack import NodeShape, Stack
from allot.core import State
from allot.proto.commands import NodeCommandRequest
from allot.proto.events import JobSpec
from allot.proto.queries import ACCOUNTS, QUEUE, AccountsQuery, QueueQuery
from tests.stack import python, running, until

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
HOSTILE = "<img src=x onerror=document.title='owned'>"
SLEEP = python("import time; time.sleep(120)")
SHOTS = os.environ.get("ALLOT_DASHBOARD_SHOTS")


@contextlib.asynccontextmanager
async def browser(profile: Path) -> AsyncIterator[BrowserContext]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"the dashboard's browser test needs Debian's chromium at {CHROMIUM} "
            "(apt-get install -y chromium); Playwright's own browsers are not used"
        )
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 760},
        )  # fmt: skip
        try:
            yield context
        finally:
            await context.close()


async def shot(page: Page, name: str, whole: bool = False) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=Path(SHOTS) / f"{name}.png", full_page=whole)


def waiting(state: State, *job_ids: str) -> bool:
    return all(j in state.jobs and state.jobs[j].reason is not None for j in job_ids)


async def test_the_dashboard_shows_the_log_and_follows_it_live(tmp_path: Path) -> None:
    nodes = [NodeShape(node_id="node-1", gpus=4), NodeShape(node_id="node-2", gpus=2)]
    async with (
        Stack(tmp_path / "allot", nodes, restart=False, heartbeat_s=0.2, stop_grace_s=2,
              dashboard_port=0) as stack,
        await stack.client() as client,
        browser(tmp_path / "chromium") as context,
    ):  # fmt: skip
        assert stack.dashboard_url is not None
        await client.apply_accounts({"lab": {"weight": 2}, "lab/a": {}, "lab/b": {}, "ops": {}})
        cordon = NodeCommandRequest(node_id="node-2", action="cordon", reason="bad fan, ticket 7")
        assert not (await client.node_command(cordon)).errors
        holder = str((await client.submit(
            JobSpec(account="lab/a", gpus=4, name=HOSTILE, command=SLEEP)
        )).job_id)  # fmt: skip
        await until(client, lambda s: running(s, holder))
        waiter = str((await client.submit(
            JobSpec(account="lab/b", gpus=4, name="waiter", command=SLEEP)
        )).job_id)  # fmt: skip
        later = str((await client.submit(
            JobSpec(account="lab/b", gpus=4, name="later", command=SLEEP)
        )).job_id)  # fmt: skip
        await until(client, lambda s: waiting(s, waiter, later))
        page = await context.new_page()

        # The queue: the planner's order, as `allot queue` has it over NATS.
        await page.goto(stack.dashboard_url)
        answer = await client.query(QUEUE, QueueQuery(at_least=await client.events.last_seq()))
        order = [row["job_id"] for row in answer.data["rows"]]
        assert order == [waiter, later]  # one account: in the order they came
        rows = page.locator("#queue tbody tr")
        await expect(rows).to_have_count(2)
        assert [await row.get_attribute("data-job") for row in await rows.all()] == order
        first = rows.first.locator("td")
        assert await first.nth(0).text_content() == "1"
        assert await first.nth(5).text_content() == "4"
        assert answer.data["rows"][0]["reason_text"] in str(await first.nth(7).text_content())
        await expect(page.locator("#policy")).to_contain_text(f"policy {answer.data['policy']}")
        await shot(page, "queue")

        # The GPU map: who holds each GPU, and why a node takes no work.
        await page.goto(stack.dashboard_url + "nodes")
        card = page.locator('.card[data-node="node-1"]')
        await expect(card.locator(".gpu.busy")).to_have_count(4)
        held = (await client.state()).nodes["node-1"].allocated
        assert set(held.values()) == {holder}
        for cell in await card.locator(".gpu").all():
            index = int(str(await cell.get_attribute("data-gpu")))
            assert await cell.locator("a.job").all_text_contents() == [held[index]]
        cordoned = page.locator('.card[data-node="node-2"]')
        await expect(cordoned.locator(".badge")).to_have_text("cordoned")
        await expect(cordoned.locator(".why")).to_contain_text("bad fan, ticket 7")
        await expect(cordoned.locator(".gpu.free")).to_have_count(2)
        # A GPU's fault shows on its cell as the log records it, while the page is open.
        stack.fault_file("node-2").parent.mkdir(parents=True, exist_ok=True)
        with stack.fault_file("node-2").open("a") as faults:
            faults.write('{"gpu": 1, "xid": 79}\n')

        def faulted(state: State) -> bool:
            node = state.nodes.get("node-2")
            return node is not None and 1 in node.gpu_faults

        fault = (await until(client, faulted)).nodes["node-2"].gpu_faults[1]
        faulty = cordoned.locator('.gpu.faulty[data-gpu="1"] .fault')
        await expect(faulty).to_have_text(f"{fault.kind}: {fault.reason}", timeout=10_000)
        await shot(page, "nodes")

        # The accounts: the tree, as the log's settings have it.
        await page.goto(stack.dashboard_url + "accounts")
        tree = page.locator("#accounts tbody tr")
        await expect(tree.first).to_be_visible()
        shown = [await row.get_attribute("data-account") for row in await tree.all()]
        assert {"lab", "lab/a", "lab/b", "ops"} <= set(shown)
        lab = page.locator('#accounts tr[data-account="lab"] td')
        await expect(lab.nth(1)).to_have_text("2")  # its weight
        budget = (await client.query(ACCOUNTS, AccountsQuery())).data["budget"]
        for row in budget:
            cells = page.locator(f'#accounts tr[data-account="{row["account"]}"] td')
            await expect(cells.nth(3)).to_have_text(str(row["rank"]))
        # GPU-hours owed and delivered come a little later (read from the log in a thread).
        owed = page.locator('#accounts tr[data-account="lab/a"] td').nth(8)
        await expect(owed).not_to_have_text("—", timeout=30_000)
        await expect(page.locator("#owed-note")).to_contain_text("from the log up to sequence")
        await shot(page, "accounts")

        # A job: what a user named it is shown as text, never run as markup.
        await page.goto(f"{stack.dashboard_url}jobs/{holder}")
        await expect(page.locator("#job-name")).to_have_text(HOSTILE)
        assert await page.locator("#job-name img").count() == 0
        assert await page.title() != "owned"
        await expect(page.locator("#job-status")).to_have_text("running")
        steps = page.locator("#trail tbody tr")
        await expect(steps.locator("td:nth-child(2)")).to_contain_text(
            ["submitted", "admitted", "started"]
        )
        await expect(page.locator('#trace .span[data-span="run 0"]')).to_have_count(1)
        assert await page.locator("#output-panel").is_hidden()  # no output is served here

        # Live: the waiting job's page shows it running once the holder is cancelled.
        await page.goto(f"{stack.dashboard_url}jobs/{waiter}")
        await expect(page.locator("#job-status")).to_have_text("pending")
        await expect(page.locator("#explain")).to_contain_text("position")
        await page.evaluate("window.notReloaded = true")
        await client.cancel(holder)
        await expect(page.locator("#job-status")).to_have_text("running", timeout=20_000)
        assert await page.evaluate("window.notReloaded === true")
        await expect(page.locator("#detail")).to_contain_text("node-1[")
        await expect(page.locator('#trace .span[data-span="run 0"]')).to_have_count(1)
        await shot(page, "job", whole=True)

        # Stopping the view service is not held up by the page's open event stream.
        view = stack.children["view"].process
        assert view is not None
        began = time.monotonic()
        view.send_signal(signal.SIGTERM)
        await asyncio.wait_for(view.wait(), 10)
        took = time.monotonic() - began
        assert took < 5, f"the view service took {took:.1f}s to stop with a page open"
