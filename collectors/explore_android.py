"""The explore policy's Android explorer: taps, long presses, swipes and typing on the nodes of the
view hierarchy the android observation shows (collectors/android.py), plus Back, Home, Enter and
switching to apps the device has shown.

It acts only on what a node affords: `tap` on a clickable node, `long_press` on a long-clickable one,
a swipe inside a scrollable one's bounds, and `type` into an editable field (an EditText-like class)
after tapping it; a disabled node is never picked. Values typed follow the field's text, description
or resource id (phone numbers, emails, names, numbers, search words). `open_app` names only packages
the observations showed in the foreground (and the task's app), so exploring never asks for an app
the device lacks. Mix semantics are the other explorers': `invalid / 3` of the turns send a call the
collector refuses (unknown element, bad direction, not a package name), `navigate` draws Back, Home,
app switches and screen swipes, `mutate` scales typing, and after an error observation `react` picks
a real node (or Back).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from collectors.environment import Task
from collectors.explore import Explorer, Mix, OrderedSet, _weighted, rng_choice, typed_value
from collectors.generators import vocab
from collectors.gui_common import format_call
from schemas import Action, ActionKind, ActionSpace, Observation

# One node line of the observation: `[id] Class "text" desc="..." id=res (states) [x1,y1][x2,y2]`,
# indented two spaces per level (collectors.android.node_line).
_STATE_WORDS = r"(?:clickable|long-clickable|checked|focused|selected|scrollable|password|disabled)"
_NODE_LINE = re.compile(
    r"^(?P<indent> *)\[(?P<id>\d+)\] (?P<cls>\S*)(?P<rest>.*?)"
    rf"(?: \((?P<states>{_STATE_WORDS}(?:, {_STATE_WORDS})*)\))?"
    r" \[(?P<x1>-?\d+),(?P<y1>-?\d+)\]\[(?P<x2>-?\d+),(?P<y2>-?\d+)\]$"
)
_LABELS = re.compile(
    r'^(?: "(?P<text>(?:[^"\\]|\\.)*)")?(?: desc="(?P<desc>(?:[^"\\]|\\.)*)")?(?: id=(?P<rid>\S+))?$'
)
_HEAD = re.compile(r"^Package: (\S+)  Activity: (\S+)", re.M)
_PACKAGE = re.compile(r"^[A-Za-z][\w]*(\.[A-Za-z_][\w]*)+$")
# Classes whose nodes take typed text (short names as the observation shows them, or any *EditText).
_EDITABLE = ("EditText", "AutoCompleteTextView", "MultiAutoCompleteTextView", "SearchView$SearchAutoComplete")
INVALID = (
    "tap('9999')",
    "long_press('9999')",
    "tap()",
    "swipe('sideways')",
    "open_app('not a package')",
    "reboot()",
    "tap(",
)


@dataclass(frozen=True)
class HierarchyNode:
    """One node line of an android observation."""

    id: str
    cls: str
    text: str
    desc: str
    resource_id: str
    states: tuple[str, ...]
    bounds: tuple[int, int, int, int]
    depth: int

    @property
    def enabled(self) -> bool:
        return "disabled" not in self.states

    @property
    def clickable(self) -> bool:
        return self.enabled and "clickable" in self.states

    @property
    def long_clickable(self) -> bool:
        return self.enabled and "long-clickable" in self.states

    @property
    def scrollable(self) -> bool:
        x1, y1, x2, y2 = self.bounds
        return self.enabled and "scrollable" in self.states and x2 - x1 >= 20 and y2 - y1 >= 20

    @property
    def editable(self) -> bool:
        """A text field that can take focus: an editable class, enabled, clickable or already focused."""
        kind = self.cls.rsplit(".", 1)[-1]
        return (
            self.enabled
            and (kind in _EDITABLE or kind.endswith("EditText"))
            and ("clickable" in self.states or "focused" in self.states)
        )

    @property
    def label(self) -> str:
        return " ".join(p for p in (self.text, self.desc, self.resource_id) if p)

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the node across screens (ids are renumbered every turn)."""
        return self.cls, self.label


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def parse_nodes(text: str) -> list[HierarchyNode]:
    """The nodes of an android observation, in screen order (lines that are not nodes are skipped)."""
    nodes = []
    for line in text.split("\n"):  # node text escapes \n only: other line breaks stay inside a line
        m = _NODE_LINE.match(line)
        if not m:
            continue
        labels = _LABELS.match(m.group("rest"))
        if labels:
            node_text = _unescape(labels.group("text") or "")
            desc = _unescape(labels.group("desc") or "")
            rid = labels.group("rid") or ""
        else:  # a label cut inside an escape at the 300-character cap: keep it as written
            node_text, desc, rid = m.group("rest").strip(), "", ""
        nodes.append(
            HierarchyNode(
                id=m.group("id"),
                cls=m.group("cls"),
                text=node_text,
                desc=desc,
                resource_id=rid,
                states=tuple(m.group("states").split(", ")) if m.group("states") else (),
                bounds=(int(m.group("x1")), int(m.group("y1")), int(m.group("x2")), int(m.group("y2"))),
                depth=len(m.group("indent")) // 2,
            )
        )
    return nodes


def field_value(rng: random.Random, node: HierarchyNode, words: OrderedSet) -> str:
    """A value of the kind the field asks for, judged by its resource id and description (its text
    once typed into is what was typed, so only a field with neither is judged by its text)."""
    label = (f"{node.resource_id} {node.desc}".strip() or node.text).lower()
    if any(k in label for k in ("phone", "tel", "mobile", "dial")):
        roll = rng.random()
        # numbers of the 555-0100..0199 block, which North American numbering keeps for fiction
        if roll < 0.6:
            return f"{rng.randint(201, 989)}55501{rng.randint(0, 99):02d}"
        if roll < 0.8:
            return f"555-01{rng.randint(0, 99):02d}"
        return rng.choice(("12ab", "+"))  # a wrong one now and then: the form's errors are data too
    if any(k in label for k in ("hour", "minute", "amount", "number", "quantity", "age", "count", "pin")):
        return str(rng.choice((rng.randint(0, 59), rng.randint(1, 9999), -1)))
    if "search" in label or "find" in label or "query" in label:
        return words.pick(rng, "") or rng.choice(vocab.WORDS)
    if "first" in label:
        return vocab.person(rng)[0].title()
    if "last" in label or "surname" in label:
        return vocab.person(rng)[1].title()
    if "password" in node.states or "password" in label:
        return vocab.slug(rng) + str(rng.randint(10, 99))
    return typed_value(rng, "textbox", label)


class AndroidExplorer(Explorer):
    """Picks among the clickable, long-clickable, scrollable and editable nodes of the last screen."""

    def __init__(self, rng: random.Random, mix: Mix, task: Task, space: ActionSpace) -> None:
        super().__init__(rng, mix, task, space)
        self.nodes: list[HierarchyNode] = []
        self.used: dict[tuple[str, str], int] = {}
        self.packages = OrderedSet(20)
        app = task.domain_config("android").get("app")
        if isinstance(app, str) and _PACKAGE.match(app):
            self.packages.add(app)
        self.pending: HierarchyNode | None = None  # the field tapped last turn: type into it next
        self.labels = OrderedSet(300)  # words of the nodes' texts: what a search field is given
        self.typed = False

    def observe(self, observation: Observation) -> None:
        super().observe(observation)
        self.nodes = parse_nodes(observation.text)
        for n in self.nodes[:200]:
            for word in re.findall(r"[A-Za-z][A-Za-z-]{2,20}", f"{n.text} {n.desc}")[:5]:
                self.labels.add(word.lower())
        head = _HEAD.search(observation.text)
        if head and head.group(1) != "android" and _PACKAGE.match(head.group(1)):
            self.packages.add(head.group(1))
        self.last_error = self.last_error or "\nLast action error: " in observation.text[:2000]

    def _least_used(self, nodes: list[HierarchyNode]) -> HierarchyNode:
        weights = {str(i): 1.0 / (1 + self.used.get(n.key, 0)) ** 2 for i, n in enumerate(nodes)}
        node = nodes[int(_weighted(self.rng, weights))]
        self.used[node.key] = self.used.get(node.key, 0) + 1
        return node

    def _novelty(self, nodes: list[HierarchyNode]) -> float:
        """1 for a node never used, less the more the least used of `nodes` was; 0 for none."""
        return max((1.0 / (1 + self.used.get(n.key, 0)) for n in nodes), default=0.0)

    def act(self) -> tuple[Action, str]:
        rng = self.rng
        pending, self.pending = self.pending, None
        typed, self.typed = self.typed, False
        if rng.random() < self.mix.invalid / 3:
            return _call(rng_choice(rng, INVALID)), "invalid"
        clickable = [n for n in self.nodes if n.clickable]
        if self.last_error and rng.random() < self.mix.react:
            if clickable:
                node = self._least_used(clickable)
                return _call(format_call("tap", [node.id])), "react:tap"
            return _call("back()"), "react:back"
        editable = [n for n in self.nodes if n.editable]
        focused = [n for n in editable if "focused" in n.states]
        # A field tapped last turn takes the text (tapping focuses it); an already focused field now
        # and then, not again straight after typing into it.
        target = pending if pending is not None and rng.random() < 0.85 else None
        if target is None and focused and not typed and rng.random() < 0.3:
            target = focused[0]
        if target is not None:
            self.typed = True
            return _call(format_call("type", [field_value(rng, target, self.labels)])), "type:field"
        if typed and rng.random() < 0.35:
            return _call("enter()"), "enter"
        if not self.nodes or rng.random() < self.mix.navigate:
            return self._navigate()
        long_clickable = [n for n in self.nodes if n.long_clickable]
        scrollable = [n for n in self.nodes if n.scrollable]
        kind = _weighted(
            rng,
            {
                "tap": 4.0 * bool(clickable),
                # typing changes state (`mutate`); a field typed into often is chosen less
                "focus": (0.5 + 6.0 * self.mix.mutate) * self._novelty(editable),
                "long_press": 0.6 * bool(long_clickable),
                "scroll": 1.0 * bool(scrollable),
                "navigate": 0.5,
            },
        )
        if kind == "tap":
            node = self._least_used(clickable)
            return _call(format_call("tap", [node.id])), f"tap:{_kind(node)}"
        if kind == "focus":
            node = self._least_used(editable)
            self.pending = node
            return _call(format_call("tap", [node.id])), "focus:editable"
        if kind == "long_press":
            node = self._least_used(long_clickable)
            return _call(format_call("long_press", [node.id])), f"long_press:{_kind(node)}"
        if kind == "scroll":
            node = rng.choice(scrollable)
            return _call(format_call("swipe", list(_swipe_inside(rng, node)))), "scroll:node"
        return self._navigate()

    def _navigate(self) -> tuple[Action, str]:
        rng = self.rng
        options = {"back": 3.0, "home": 0.8, "swipe": 1.0, "wait": 0.3, "open_app": 1.5 * bool(self.packages)}
        kind = _weighted(rng, options)
        if kind == "open_app":
            return _call(format_call("open_app", [self.packages.pick(rng)])), "navigate:open_app"
        if kind == "swipe":
            direction = rng.choice(("up", "down", "left", "right"))
            return _call(format_call("swipe", [direction])), "navigate:swipe"
        if kind == "wait":
            return _call(format_call("wait", [rng.choice((0.5, 1))])), "navigate:wait"
        return _call(f"{kind}()"), f"navigate:{kind}"


def _call(text: str) -> Action:
    return Action(kind=ActionKind.GUI, text=text)


def _kind(node: HierarchyNode) -> str:
    return node.cls.rsplit(".", 1)[-1] or "node"


def _swipe_inside(rng: random.Random, node: HierarchyNode) -> tuple[int, int, int, int]:
    """A fling from 75% to 25% of the node (either way), along its longer side: it scrolls that node."""
    x1, y1, x2, y2 = node.bounds
    cx, cy = (x1 + x2) // 2, (y1 + y2) // 2
    forward = rng.random() < 0.65  # more often onwards (content moves up / left) than back
    if y2 - y1 >= x2 - x1:
        near, far = y1 + (y2 - y1) * 3 // 4, y1 + (y2 - y1) // 4
        return (cx, near, cx, far) if forward else (cx, far, cx, near)
    near, far = x1 + (x2 - x1) * 3 // 4, x1 + (x2 - x1) // 4
    return (near, cy, far, cy) if forward else (far, cy, near, cy)
