"""GUI observation styles and step latency, measured in one run on the bundled sites and a real gedit.

Web: for each page, the size (characters and Qwen tokens) and extraction time of
  - aria-ai:  Playwright's ARIA snapshot in "ai" mode with [ref=eN] element ids (the web domain's choice),
  - aria:     the plain ARIA snapshot (no ids: cannot be acted on; shown for reference),
  - cdp-ax:   CDP Accessibility.getFullAXTree rendered with our own ids, non-ignored nodes only, main
              frame only (iframes would need one more call each): the baseline,
  - cdp-json: the raw CDP reply, what a collector storing the tree as-is would keep.
The styles are measured on a Chromium on this machine against the bundled sites served here (trusted
content; the sizes do not depend on where the browser runs). Then the web domain's per-step latency
(click, fill, noop; goal <= 300 ms) as the collector sees it, with the browser in its sandbox and every
step a round trip to the in-sandbox helper, and the OS domain's (typing and keys in gedit under Xvfb +
AT-SPI; goal <= 500 ms), with the tree extraction alone.

Run: .venv/bin/python benchmarks/gui_bench.py [--rounds 10] [--no-os]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from collectors import engine
from collectors.environment import EnvironmentOptions, Task
from collectors.sites import serve_sites
from collectors.web import CHROMIUM, BrowserLimits, BrowserSandbox, WebEnvironment, launch_args
from schemas import Action, ActionKind
from worldline.tokenizer import get_token_counter

PAGES = ["/shop/", "/shop/checkout", "/notes/", "/wiki/article/http-503", "/wiki/embed", "/wiki/"]


def render_cdp_tree(nodes: list[dict[str, Any]]) -> str:
    """BrowserGym-style text of a CDP full AX tree: `[id] role "name" props`, ignored nodes skipped
    (their children kept), generic/none roles without a name folded."""
    by_id = {n["nodeId"]: n for n in nodes}
    roots = [n for n in nodes if not n.get("parentId")]
    lines: list[str] = []
    counter = 0

    def walk(node: dict[str, Any], depth: int) -> None:
        nonlocal counter
        role = (node.get("role") or {}).get("value", "")
        name = (node.get("name") or {}).get("value", "")
        shown = not node.get("ignored") and not (role in ("generic", "none", "InlineTextBox") and not name)
        if shown:
            counter += 1
            props = []
            for prop in node.get("properties", []):
                value = (prop.get("value") or {}).get("value")
                if value not in (None, False, "", "false"):
                    props.append(f"{prop['name']}={value}" if value is not True else prop["name"])
            lines.append(
                "  " * depth
                + f"[{counter}] {role} {json.dumps(name)}"
                + (f" {', '.join(props)}" if props else "")
            )
        for child_id in node.get("childIds", []):
            child = by_id.get(child_id)
            if child is not None:
                walk(child, depth + 1 if shown else depth)

    for root in roots:
        walk(root, 0)
    return "\n".join(lines)


def timed(fn: Any, rounds: int) -> tuple[Any, float]:
    result = fn()  # warm
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return result, statistics.median(times)


def web_styles(browser: Any, base: str, rounds: int) -> None:
    tok = get_token_counter()
    page = browser.new_page()
    cdp = page.context.new_cdp_session(page)
    totals: dict[str, list[float]] = {}
    print(f"\n== web observation styles (median of {rounds}; tokens: {tok.name})")
    print(f"{'page':28} {'style':9} {'chars':>7} {'tokens':>7} {'ms':>7}")
    for path in PAGES:
        page.goto(base + path)
        page.wait_for_timeout(200)
        styles = {
            "aria-ai": lambda: page.aria_snapshot(mode="ai"),
            "aria": lambda: page.locator("body").aria_snapshot(),
            "cdp-ax": lambda: render_cdp_tree(cdp.send("Accessibility.getFullAXTree")["nodes"]),
            "cdp-json": lambda: json.dumps(cdp.send("Accessibility.getFullAXTree")),
        }
        for style, fn in styles.items():
            text, seconds = timed(fn, rounds)
            tokens = tok.count(text)
            totals.setdefault(style, [0.0, 0.0, 0.0])
            totals[style][0] += len(text)
            totals[style][1] += tokens
            totals[style][2] += seconds
            print(f"{path:28} {style:9} {len(text):7d} {tokens:7d} {seconds * 1000:7.1f}")
    base_chars, base_tokens, base_s = totals["cdp-ax"]
    print(f"\n{'style':9} {'chars':>8} {'tokens':>8} {'ms/page':>8}   vs cdp-ax (chars, tokens, time)")
    for style, (chars, tokens, seconds) in totals.items():
        print(
            f"{style:9} {chars:8.0f} {tokens:8.0f} {seconds / len(PAGES) * 1000:8.1f}   "
            f"{chars / base_chars:.2f}x {tokens / base_tokens:.2f}x {seconds / base_s:.2f}x"
        )
    page.close()


def web_steps(browser: BrowserSandbox, rounds: int) -> None:
    env = WebEnvironment(EnvironmentOptions(), browser=browser)
    reset = env.reset(Task(id="bench", instruction="bench", config={"web": {"start_url": "{sites}/notes/"}}))
    box = next(line for line in reset.observation.text.splitlines() if 'textbox "New note"' in line)
    ref = box.split("[ref=")[1].split("]")[0]
    actions = {
        "fill": f'fill("{ref}", "a note")',
        "click (client-side)": '{"action": "click", "role": "button", "name": "Show details"}',
        "noop(0)": "noop(0)",
    }
    print(
        f"\n== web step latency (median of {rounds}; settle {env.limits.settle_ms} ms included; goal <= 300 ms)"
    )
    for label, text in actions.items():
        kind = ActionKind.GUI if text.startswith("{") else ActionKind.COMMAND
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            env.step(Action(kind=kind, text=text))
            times.append(time.perf_counter() - t0)
        print(
            f"{label:22} {statistics.median(times) * 1000:7.1f} ms  (p90 {sorted(times)[int(0.9 * (len(times) - 1))] * 1000:.1f})"
        )
    env.reset(Task(id="bench2", instruction="bench", config={"web": {"start_url": "{sites}/shop/"}}))
    times = []
    for i in range(rounds):
        text = '{"action": "click", "role": "link", "name": "Milk jug"}' if i % 2 == 0 else "go_back()"
        kind = ActionKind.GUI if text.startswith("{") else ActionKind.COMMAND
        t0 = time.perf_counter()
        env.step(Action(kind=kind, text=text))
        times.append(time.perf_counter() - t0)
    print(
        f"{'navigation (link/back)':22} {statistics.median(times) * 1000:7.1f} ms  (includes the page load)"
    )
    env.close()


def os_steps(rounds: int) -> None:
    from collectors.os_desktop import DesktopEnvironment

    env = DesktopEnvironment(EnvironmentOptions())
    t0 = time.perf_counter()
    env.reset(Task(id="bench", instruction="bench", config={"os": {"apps": ["gedit"]}}))
    print(f"\n== os (gedit): session + app start {time.perf_counter() - t0:.2f} s")
    session = env.session
    assert session is not None
    _, tree_s = timed(lambda: session.atspi("tree", pid=env.focused_pid, max_nodes=800), rounds)
    _, observe_s = timed(env._observe, rounds)
    print(
        f"AT-SPI tree via helper   {tree_s * 1000:7.1f} ms;  full observation (windows + tree) {observe_s * 1000:7.1f} ms"
    )
    print(f"== os step latency (median of {rounds}; includes a 150 ms settle for the app; goal <= 500 ms)")
    for label, text in {
        "typewrite('a')": "typewrite('a')",
        "press('left')": "press('left')",
        "wait(0)": "wait(0)",
    }.items():
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            env.step(Action(kind=ActionKind.CODE, text=text))
            times.append(time.perf_counter() - t0)
        print(f"{label:22} {statistics.median(times) * 1000:7.1f} ms")
    env.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-os", action="store_true", help="skip the desktop measurements")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    sites = serve_sites()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, args=launch_args(BrowserLimits(), network=False)
            )
            print(f"chromium {browser.version}; sites at {sites.base_url}")
            web_styles(browser, sites.base_url, args.rounds)
            browser.close()
    finally:
        sites.stop()
    box = BrowserSandbox.open(engine.connect())
    try:
        print(f"\nsandboxed chromium {box.version} in {box.sandbox.name}; sites at {box.sites_url} inside it")
        web_steps(box, args.rounds)
    finally:
        box.close()
    if not args.no_os:
        os_steps(args.rounds)


if __name__ == "__main__":
    main()
