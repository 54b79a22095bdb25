"""Web tasks: flows over the bundled sites (collectors/sites/): checkouts with chosen products,
quantities, shipping and customers (some first submitted incomplete, so the validation errors are
seen), wiki searches that hit or miss, the embedded converter, the notes app's dynamic content, and
navigation between the sites. The sites' own state is per browser context, so what varies before the
first action is the start page; the goal and the plan vary with the drawn data."""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import quote

from collectors.generators import vocab
from collectors.sites.apps import ARTICLES, PRODUCTS, SHIPPING


def _el(action: str, role: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"action": action, "role": role, "name": name, **extra}


def _checkout(rng: random.Random) -> dict[str, Any]:
    pid = rng.choice(sorted(PRODUCTS))
    product = PRODUCTS[pid][0]
    quantity = rng.randint(1, 9)
    shipping = rng.choice(sorted(SHIPPING))
    customer = vocab.full_name(rng)
    email = customer.lower().replace(" ", ".") + "@example.org"
    from_product = rng.random() < 0.5
    plan: list[Any] = [] if from_product else [_el("click", "link", product)]
    plan += [
        _el("fill", "spinbutton", "Quantity", value=str(quantity)),
        _el("click", "button", "Add to cart"),
        _el("click", "link", "Proceed to checkout"),
    ]
    incomplete = rng.random() < 0.5
    if incomplete:
        plan.append(_el("click", "button", "Place order"))  # shows the validation errors
    plan += [
        _el("fill", "textbox", "Full name", value=customer),
        _el("fill", "textbox", "Email", value=email),
        _el("select_option", "combobox", "Shipping", options=SHIPPING[shipping][0]),
        _el("check", "checkbox", "I accept the terms"),
        _el("click", "button", "Place order"),
    ]
    total = PRODUCTS[pid][1] * quantity
    return {
        "instruction": f"Buy {quantity} x {product} with {SHIPPING[shipping][0].split(' (')[0].lower()} shipping as {customer} ({email}).",
        "web": {"start_url": f"{{sites}}/shop/product/{pid}" if from_product else "{sites}/shop/"},
        "actions": plan,
        "goal": {
            "kind": "checkout",
            "answer": "Order #1 confirmed",
            "subtotal": round(total, 2),
            "incomplete_first": incomplete,
        },
    }


def _wiki_search(rng: random.Random) -> dict[str, Any]:
    slug = rng.choice(sorted(ARTICLES))
    title, body = ARTICLES[slug]
    words = sorted({w for w in body.replace("<", " <").split() if w.isalpha() and len(w) > 4})
    hit = rng.random() < 0.7
    term = rng.choice(words).lower() if hit else rng.choice(vocab.WORDS) + str(rng.randint(10, 99))
    from_results = rng.random() < 0.4
    plan: list[Any] = []
    start = f"{{sites}}/wiki/search?q={quote(term)}" if from_results else "{sites}/wiki/"
    if not from_results:
        plan += [
            _el("fill", "textbox", "Search", value=term),
            _el("press", "textbox", "Search", key_comb="Enter"),
        ]
    matches = sorted(t for t, b in ARTICLES.values() if term in t.lower() or term in b.lower())
    if matches:
        plan += [_el("click", "link", matches[0]), "scroll(0, 300)", "go_back()"]
    else:
        plan += ['send_msg_to_user("No article matches.")']
    return {
        "instruction": f"Search the coffee wiki for \u201c{term}\u201d and open the first matching article, if any.",
        "web": {"start_url": start},
        "actions": plan,
        "goal": {"kind": "wiki-search", "answer": matches[0] if matches else "(no match)"},
    }


def _converter(rng: random.Random) -> dict[str, Any]:
    grams = rng.choice((rng.randint(1, 2000), round(rng.uniform(0.5, 500), 1)))
    return {
        "instruction": f"Convert {grams} g to ounces with the wiki's embedded converter.",
        "web": {
            "start_url": rng.choice(("{sites}/wiki/", "{sites}/wiki/embed", "{sites}/wiki/article/espresso"))
        },
        "actions": [
            _el("click", "link", "Embedded widget"),
            _el("fill", "spinbutton", "Grams", value=str(grams)),
            _el("click", "button", "Convert"),
        ],
        "goal": {"kind": "convert", "answer": f"{grams / 28.35:.2f} oz"},
    }


def _notes(rng: random.Random) -> dict[str, Any]:
    notes = [vocab.sentence(rng, rng.randint(2, 5)).rstrip(".") for _ in range(rng.randint(1, 4))]
    plan: list[Any] = []
    for note in notes:
        plan += [_el("fill", "textbox", "New note", value=note), _el("click", "button", "Add")]
    if rng.random() < 0.5:
        plan.append(_el("click", "button", f"Delete {notes[0]}"))
    if rng.random() < 0.5:
        plan += [_el("click", "button", "Load suggestions"), "noop(300)"]
    if rng.random() < 0.3:
        plan.append(_el("click", "button", "Add"))  # an empty note: the app says it cannot be empty
    return {
        "instruction": "In the notes app add these notes: "
        + "; ".join(f"\u201c{n}\u201d" for n in notes)
        + ".",
        "web": {"start_url": "{sites}/notes/"},
        "actions": plan,
        "goal": {"kind": "notes", "answer": notes},
    }


def _navigate(rng: random.Random) -> dict[str, Any]:
    slug = rng.choice(sorted(ARTICLES))
    title = ARTICLES[slug][0]
    start = rng.choice(
        ("{sites}/", "{sites}/shop/cart", "{sites}/shop/orders", "{sites}/status/", "{sites}/notes/help")
    )
    plan: list[Any] = []
    if start != "{sites}/":
        plan.append('goto("{sites}/")')
    plan += [_el("click", "link", "Coffee wiki"), _el("click", "link", title), "go_back()", "go_forward()"]
    return {
        "instruction": f"From where you are, get to the wiki article \u201c{title}\u201d.",
        "web": {"start_url": start},
        "actions": plan,
        "goal": {"kind": "navigate", "answer": title},
    }


FAMILIES = {
    "checkout": _checkout,
    "wiki-search": _wiki_search,
    "converter": _converter,
    "notes": _notes,
    "navigate": _navigate,
}
