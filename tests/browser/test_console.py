"""The live console in a real browser: Debian's Chromium (/usr/bin/chromium), driven by Playwright, against
three controllers and a three-replica group. The page, opened on a follower, must show what
``getSyncStateSet --format json`` says; after the master is killed it must show the new master and the
election in its timeline within 5 s without a reload; a designated election made from the page goes through
the confirmation dialog and shows the controller's answer code. After a consumer group consumed some of a topic and
more was sent, the consumer-groups view shows the group's lag as ``consumerProgress`` has it (from the master,
over RocketMQ's requests), its queues, and its chart.

Skipped without Chromium or Playwright, except under CI (``CI=true``), where that is a failure: .ci/run
installs both. ``MQCTL_CONSOLE_SCREENSHOT=path`` also saves the page as a PNG there (docs/img/console.png)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster
from tests.integration.conftest import group_cluster, poll, run_cli

GROUP = "broker-a"
TOPIC, CONSUMER = "ConsoleTopic", "console-group"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Flags for a headless Chromium in a sandbox with no network beyond loopback.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (.ci/run installs it)")
    pytest.skip(reason)


@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install -e '.[test]')")
    if not Path(CHROMIUM).exists():
        missing("Chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                                     chromium_sandbox=False)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ControllerCluster, list[BrokerNode]]]:
    with group_cluster(tmp_path, GROUP, 3) as started:
        yield started


def sync_state(controllers: ControllerCluster) -> dict[str, Any]:
    done = run_cli("getSyncStateSet", "-a", controllers.addresses, "-b", GROUP, "--format", "json")
    if done.returncode == 2 and "not known" in done.stderr:  # no broker registered yet
        return {"masterBrokerId": None, "inSyncReplicas": []}
    assert done.returncode == 0, done.stderr
    group: dict[str, Any] = json.loads(done.stdout)["brokers"][0]
    return group


def shown(page: Any) -> dict[str, Any]:
    """What the page shows of the group: master, epoch and SyncStateSet, read from its attributes."""
    section = page.locator(f'section.group[data-group="{GROUP}"]')
    return {"master": section.get_attribute("data-master"), "epoch": section.get_attribute("data-epoch"),
            "inSync": section.get_attribute("data-in-sync")}


def test_the_console_follows_a_failover_live(browser: Any, cluster: tuple[ControllerCluster, list[BrokerNode]],
                                             tmp_path: Path) -> None:
    controllers, brokers = cluster
    poll(lambda: (g := sync_state(controllers))["masterBrokerId"] and len(g["inSyncReplicas"]) == 3, 90,
         "a master and two slaves in sync")
    group = sync_state(controllers)
    leader = controllers.leader()
    follower = next(n for n in controllers.nodes if n is not leader)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(f"http://{follower.address}/console")  # any node serves it: here a follower
    page.wait_for_selector(f'section.group[data-group="{GROUP}"][data-in-sync="1,2,3"]', timeout=15_000)
    assert shown(page) == {"master": str(group["masterBrokerId"]), "epoch": str(group["masterEpoch"]),
                           "inSync": ",".join(str(r["brokerId"]) for r in group["inSyncReplicas"])}
    assert page.locator("#live").inner_text() == "live"
    assert page.locator('#controller-table tr[data-node]').count() == 3
    assert "a follower" in page.locator("#node").inner_text()

    # Kill the master: the page shows the new master and the election within 5 s, without a reload.
    old = next(b for b in brokers if b.address == group["masterAddress"])
    page.evaluate("window.__marker = 1")  # gone if the page reloads
    old.kill()
    killed = time.monotonic()
    page.wait_for_function(
        f"""() => {{
            const g = document.querySelector('section.group[data-group="{GROUP}"]');
            const election = document.querySelector('#events tr[data-type="ELECT_MASTER"]');
            return g && g.dataset.master && g.dataset.master !== "{group['masterBrokerId']}" && election
                && election.textContent.includes("FAILOVER");
        }}""", timeout=5_000)
    seen_after = time.monotonic() - killed
    assert page.evaluate("window.__marker") == 1
    assert seen_after < 5.0
    new = sync_state(controllers)
    assert shown(page)["master"] == str(new["masterBrokerId"])

    # A designated election from the page: confirm, see the answer code, see the result.
    target = next(r["brokerId"] for r in new["inSyncReplicas"]
                  if r["brokerId"] != new["masterBrokerId"] and r["alive"])
    button = page.locator(f'section.group[data-group="{GROUP}"] tr[data-broker-id="{target}"] button')
    button.focus()  # from the keyboard: Enter on the button opens the confirmation, on Confirm sends it
    page.keyboard.press("Enter")
    assert page.locator("#confirm").is_visible()
    page.locator("#confirm-go").focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#confirm-answer').textContent.includes('code')",
                           timeout=10_000)
    assert "SUCCESS (code 0)" in page.locator("#confirm-answer").inner_text()
    page.keyboard.press("Escape")  # the dialog closes from the keyboard
    page.wait_for_selector(f'section.group[data-group="{GROUP}"][data-master="{target}"]', timeout=10_000)
    assert page.locator('#events tr[data-type="ELECT_MASTER"]').first.inner_text().count("ADMIN") == 1

    screenshot = os.environ.get("MQCTL_CONSOLE_SCREENSHOT")
    if screenshot:  # the picture in the docs: the killed master back, every replica in sync again, a consumer group
        old.start()
        page.wait_for_selector(f'section.group[data-group="{GROUP}"][data-in-sync="1,2,3"]', timeout=60_000)
        consume_some(controllers)
        row = f'#consumer-table tr[data-consumer-group="{CONSUMER}"]'
        page.wait_for_selector(f'{row}[data-lag="9"]', timeout=30_000)
        mqctl("consumeMessage", "-a", controllers.addresses, "-b", GROUP, "-t", TOPIC, "-q", "0", "-g", CONSUMER,
              "-n", "4")
        page.wait_for_selector(f'{row}[data-lag="5"] svg[data-points="6"]', timeout=30_000)
    page.screenshot(path=screenshot or str(tmp_path / "console.png"), full_page=True)


def mqctl(*args: str) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return done.stdout


def progress(controllers: ControllerCluster) -> dict[str, Any] | None:
    """What ``consumerProgress`` says of the group (the master's GET_CONSUME_STATS), once the topic is routed."""
    done = run_cli("consumerProgress", "-n", controllers.addresses, "-g", CONSUMER, "-t", TOPIC, "--format", "json")
    found: dict[str, Any] | None = json.loads(done.stdout) if done.returncode == 0 else None
    return found


def consume_some(controllers: ControllerCluster) -> None:
    """The group, on the master; 10 messages sent, 6 of them consumed as the group, 5 more sent: a lag of 9."""
    master, a = sync_state(controllers)["masterAddress"], controllers.addresses
    mqctl("updateSubGroup", "-n", a, "-b", master, "-g", CONSUMER)  # what GET_ALL_SUBSCRIPTIONGROUP_CONFIG lists
    mqctl("sendMessage", "-a", a, "-b", GROUP, "-t", TOPIC, "-q", "0", "-p", "m", "--count", "10")
    read = json.loads(mqctl("consumeMessage", "-a", a, "-b", GROUP, "-t", TOPIC, "-q", "0", "-g", CONSUMER,
                            "-n", "6", "--format", "json"))
    assert len(read["messages"]) == 6
    mqctl("sendMessage", "-a", a, "-b", GROUP, "-t", TOPIC, "-q", "0", "-p", "m", "--count", "5")


def test_the_console_shows_a_consumer_groups_lag_queues_and_chart(
        browser: Any, cluster: tuple[ControllerCluster, list[BrokerNode]]) -> None:
    controllers, _ = cluster
    poll(lambda: (g := sync_state(controllers))["masterBrokerId"] and len(g["inSyncReplicas"]) == 3, 90,
         "a master and two slaves in sync")
    consume_some(controllers)
    stats = poll(lambda: (p := progress(controllers)) and p["diffTotal"] == 9 and p, 60, "the group's lag of 9")
    a = controllers.addresses

    follower = next(n for n in controllers.nodes if n is not controllers.leader())
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(f"http://{follower.address}/console")
    row = f'#consumer-table tr[data-consumer-group="{CONSUMER}"]'
    page.wait_for_selector(f'{row}[data-lag="{stats["diffTotal"]}"]', timeout=30_000)
    assert page.locator(f'#consumer-brokers tr[data-broker="{GROUP}"]').get_attribute("data-status") == "ok"
    cells = page.locator(f"{row} td").all_inner_texts()
    assert cells[4] != "never" and cells[5] == GROUP  # last consumed, and the broker group that answered

    # Its queues, as the broker answers them: one row per queue, the lag of each as consumerProgress has it.
    page.locator(f"{row} button").click()
    detail = page.locator(f'#cg-{CONSUMER}-detail')
    detail.wait_for(timeout=5_000)
    assert detail.locator("caption").inner_text().startswith(f"Queues of {CONSUMER}")
    for queue in stats["queues"]:
        shown = detail.locator(f'tr[data-topic="{TOPIC}"][data-queue="{queue["queueId"]}"]')
        assert shown.get_attribute("data-lag") == str(queue["lag"])

    # The chart: an SVG with a title and a text alternative; after the group consumes more, its lag falls and
    # the chart shows the consume rate it measured between two answers.
    chart = page.locator(f"{row} svg[role=img]")
    assert (chart.locator("title").text_content() or "").startswith(f"Lag and consume rate of {CONSUMER}")
    assert (chart.get_attribute("aria-label") or "").startswith(f"Lag and consume rate of {CONSUMER}")
    assert "to 9 (peak 9)" in page.locator(f"{row} .sr-only").inner_text()  # the same in words
    mqctl("consumeMessage", "-a", a, "-b", GROUP, "-t", TOPIC, "-q", "0", "-g", CONSUMER, "-n", "4")
    page.wait_for_selector(f'{row}[data-lag="5"]', timeout=15_000)
    page.wait_for_function(f"""() => {{
        const svg = document.querySelector('{row} svg[role=img]');
        return svg && Number(svg.dataset.peakConsume) > 0 && Number(svg.dataset.points) >= 2;
    }}""", timeout=15_000)
    assert page.locator(f"{row} svg polyline.lag").count() == 1
    assert page.locator(f"#cg-{CONSUMER}-detail").is_visible()  # still open after the page updated
