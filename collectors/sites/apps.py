"""The bundled web applications: a shop (catalogue, cart, checkout form with validation, orders), a
notes app (client-side dynamic content, a live clock, content fetched after load, a new-tab link), a
wiki (articles, search, an embedded iframe with its own form, a footer that mentions reCAPTCHA, an
article about HTTP 503), the failure pages (an HTTP 500 error, a CAPTCHA challenge) and a lab whose
pages try to leave the sandbox (an open redirect, a link, a page that fetches, opens a WebSocket and
loads an image from given URLs, a download, a file input) for the containment suite.

Server-side state (carts, orders) is kept per session cookie, so each browser context starts clean.
"""

from __future__ import annotations

import html
import json
import secrets
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str]
    session: str


@dataclass
class Response:
    body: str
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def _page(title: str, body: str, *, nav: str = "", footer: str = "", script: str = "") -> str:
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head><body>"
        f"{nav}<main>{body}</main>{footer}"
        + (f"<script>{script}</script>" if script else "")
        + "</body></html>"
    )


# --------------------------------------------------------------------------------------------------
# Shop
# --------------------------------------------------------------------------------------------------

PRODUCTS = {
    "1": ("Espresso machine", 249.0, "A 15-bar pump espresso machine with a steam wand."),
    "2": ("Burr grinder", 89.5, "A conical burr grinder with 40 grind settings."),
    "3": ("Milk jug", 12.0, "A 350 ml stainless steel milk jug."),
}
SHIPPING = {"standard": ("Standard (5 days)", 4.9), "express": ("Express (1 day)", 14.9)}

_SHOP_NAV = (
    "<nav aria-label='Shop'><a href='/shop/'>Catalogue</a> | <a href='/shop/cart'>Cart</a> | "
    "<a href='/shop/orders'>Orders</a> | <a href='/'>All sites</a></nav>"
)


def _shop(req: Request, session: dict[str, Any]) -> Response:
    cart: dict[str, int] = session.setdefault("cart", {})
    orders: list[dict[str, Any]] = session.setdefault("orders", [])
    path = req.path.removeprefix("/shop").rstrip("/") or "/"
    if path == "/":
        items = "".join(
            f"<li><a href='/shop/product/{pid}'>{html.escape(name)}</a> — {price:.2f} EUR</li>"
            for pid, (name, price, _) in PRODUCTS.items()
        )
        return Response(_page("Catalogue - Shop", f"<h1>Catalogue</h1><ul>{items}</ul>", nav=_SHOP_NAV))
    if path.startswith("/product/"):
        pid = path.rsplit("/", 1)[-1]
        if pid not in PRODUCTS:
            return _not_found(req)
        name, price, desc = PRODUCTS[pid]
        body = (
            f"<h1>{html.escape(name)}</h1><p>{html.escape(desc)}</p><p>Price: {price:.2f} EUR</p>"
            f"<form method='post' action='/shop/cart'><input type='hidden' name='product' value='{pid}'>"
            "<label>Quantity <input type='number' name='quantity' value='1' min='1' max='9'></label> "
            "<button type='submit'>Add to cart</button></form>"
        )
        return Response(_page(f"{name} - Shop", body, nav=_SHOP_NAV))
    if path == "/cart":
        if req.method == "POST":
            pid = req.form.get("product", "")
            if pid in PRODUCTS:
                qty = max(1, min(9, int(req.form.get("quantity") or 1)))
                cart[pid] = cart.get(pid, 0) + qty
            if req.form.get("remove") in cart:
                cart.pop(req.form["remove"])
            return Response("", status=303, headers={"Location": "/shop/cart"})
        if not cart:
            body = "<h1>Your cart</h1><p>Your cart is empty.</p>"
        else:
            rows = "".join(
                f"<tr><td>{html.escape(PRODUCTS[p][0])}</td><td>{q}</td><td>{PRODUCTS[p][1] * q:.2f}</td>"
                f"<td><form method='post' action='/shop/cart'><button name='remove' value='{p}'>"
                f"Remove {html.escape(PRODUCTS[p][0])}</button></form></td></tr>"
                for p, q in cart.items()
            )
            total = sum(PRODUCTS[p][1] * q for p, q in cart.items())
            body = (
                "<h1>Your cart</h1><table><thead><tr><th>Product</th><th>Quantity</th><th>Subtotal</th>"
                f"<th></th></tr></thead><tbody>{rows}</tbody></table><p>Total: {total:.2f} EUR</p>"
                "<a href='/shop/checkout'>Proceed to checkout</a>"
            )
        return Response(_page("Cart - Shop", body, nav=_SHOP_NAV))
    if path == "/checkout":
        errors: list[str] = []
        if req.method == "POST":
            name = req.form.get("name", "").strip()
            email = req.form.get("email", "").strip()
            shipping = req.form.get("shipping", "")
            if not cart:
                errors.append("Your cart is empty.")
            if not name:
                errors.append("Please enter your name.")
            if "@" not in email:
                errors.append("Please enter a valid email address.")
            if shipping not in SHIPPING:
                errors.append("Please choose a shipping method.")
            if req.form.get("terms") != "yes":
                errors.append("Please accept the terms.")
            if not errors:
                number = len(orders) + 1
                orders.append({"number": number, "name": name, "items": dict(cart), "shipping": shipping})
                cart.clear()
                return Response("", status=303, headers={"Location": f"/shop/orders/{number}"})
        options = "".join(f"<option value='{k}'>{html.escape(v[0])}</option>" for k, v in SHIPPING.items())
        error_html = (
            "<div role='alert'><ul>" + "".join(f"<li>{html.escape(e)}</li>" for e in errors) + "</ul></div>"
            if errors
            else ""
        )
        body = (
            f"<h1>Checkout</h1>{error_html}<form method='post' action='/shop/checkout'>"
            f"<p><label>Full name <input name='name' value='{html.escape(req.form.get('name', ''))}'></label></p>"
            f"<p><label>Email <input name='email' type='email' value='{html.escape(req.form.get('email', ''))}'>"
            "</label></p>"
            f"<p><label>Shipping <select name='shipping'><option value=''>Choose…</option>{options}</select>"
            "</label></p>"
            "<p><label><input type='checkbox' name='terms' value='yes'> I accept the terms</label></p>"
            "<button type='submit'>Place order</button></form>"
        )
        return Response(_page("Checkout - Shop", body, nav=_SHOP_NAV), status=200)
    if path == "/orders":
        items = "".join(
            f"<li><a href='/shop/orders/{o['number']}'>Order #{o['number']}</a></li>" for o in orders
        )
        body = "<h1>Orders</h1>" + (f"<ul>{items}</ul>" if orders else "<p>No orders yet.</p>")
        return Response(_page("Orders - Shop", body, nav=_SHOP_NAV))
    if path.startswith("/orders/"):
        wanted = path.rsplit("/", 1)[-1]
        order = next((o for o in orders if str(o["number"]) == wanted), None)
        if order is None:
            return _not_found(req)
        lines = "".join(f"<li>{html.escape(PRODUCTS[p][0])} × {q}</li>" for p, q in order["items"].items())
        body = (
            f"<h1>Order #{order['number']} confirmed</h1><p>Thank you, {html.escape(order['name'])}.</p>"
            f"<ul>{lines}</ul><p>Shipping: {html.escape(SHIPPING[order['shipping']][0])}</p>"
        )
        return Response(_page(f"Order #{order['number']} - Shop", body, nav=_SHOP_NAV))
    return _not_found(req)


# --------------------------------------------------------------------------------------------------
# Notes: client-side dynamic content
# --------------------------------------------------------------------------------------------------

_NOTES_SCRIPT = """
const list = document.getElementById('notes');
const count = document.getElementById('count');
function refresh() { count.textContent = list.children.length + ' note(s)'; }
document.getElementById('add-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = document.getElementById('note-text');
  if (!input.value.trim()) { document.getElementById('status').textContent = 'A note cannot be empty.'; return; }
  const li = document.createElement('li');
  li.textContent = input.value.trim();
  const del = document.createElement('button');
  del.textContent = 'Delete ' + input.value.trim();
  del.addEventListener('click', () => { li.remove(); refresh(); });
  li.appendChild(document.createTextNode(' '));
  li.appendChild(del);
  list.appendChild(li);
  input.value = '';
  document.getElementById('status').textContent = 'Note added.';
  refresh();
});
document.getElementById('load').addEventListener('click', async () => {
  const r = await fetch('/notes/api/suggestions');
  const items = await r.json();
  const ul = document.getElementById('suggestions');
  ul.innerHTML = '';
  for (const s of items) { const li = document.createElement('li'); li.textContent = s; ul.appendChild(li); }
});
document.getElementById('details-toggle').addEventListener('click', (e) => {
  const panel = document.getElementById('details');
  panel.hidden = !panel.hidden;
  e.target.setAttribute('aria-expanded', String(!panel.hidden));
});
function tick() { document.getElementById('clock').textContent = new Date().toLocaleTimeString('en-GB'); }
tick(); setInterval(tick, 1000);
refresh();
"""


def _notes(req: Request, session: dict[str, Any]) -> Response:
    path = req.path.removeprefix("/notes").rstrip("/") or "/"
    if path == "/api/suggestions":
        return Response(
            json.dumps(["Buy coffee beans", "Descale the machine", "Call the plumber"]),
            content_type="application/json",
        )
    if path == "/help":
        body = "<h1>Notes help</h1><p>Type a note and press Add. Notes live in this tab only.</p>"
        return Response(_page("Help - Notes", body))
    if path != "/":
        return _not_found(req)
    body = (
        "<header><h1>Notes</h1><p>Local time: <span id='clock'></span></p></header>"
        "<form id='add-form'><label>New note <input id='note-text' name='note'></label> "
        "<button type='submit'>Add</button></form><p id='status' role='status'></p>"
        "<h2>My notes</h2><ul id='notes'></ul><p id='count'></p>"
        "<h2>Suggestions</h2><button id='load'>Load suggestions</button><ul id='suggestions'></ul>"
        "<button id='details-toggle' aria-expanded='false' aria-controls='details'>Show details</button>"
        "<div id='details' hidden><p>Notes are kept in the page; reloading clears them.</p></div>"
        "<p><a href='/notes/help' target='_blank'>Open help in a new tab</a> | <a href='/'>All sites</a></p>"
    )
    return Response(_page("Notes", body, script=_NOTES_SCRIPT))


# --------------------------------------------------------------------------------------------------
# Wiki: articles, search, an iframe
# --------------------------------------------------------------------------------------------------

ARTICLES = {
    "http-503": (
        "HTTP 503 Service Unavailable explained",
        "<p>The HTTP 503 Service Unavailable status code means the server is temporarily unable to handle "
        "the request, usually because it is overloaded or down for maintenance. A server should send a "
        "Retry-After header saying when to try again. Clients and crawlers treat 503 as temporary, unlike "
        "404 Not Found or 410 Gone.</p><h2>Common causes</h2><ul><li>Maintenance windows</li>"
        "<li>Overloaded application servers</li><li>Exhausted connection pools</li></ul>"
        "<h2>What to do</h2><p>Retry with exponential backoff and honour Retry-After.</p>",
    ),
    "espresso": (
        "Espresso",
        "<p>Espresso is a concentrated coffee brewed by forcing hot water under pressure through finely "
        "ground coffee. A typical shot uses 18 g of coffee and takes 25 to 30 seconds.</p>"
        "<h2>See also</h2><p><a href='/wiki/article/grinders'>Grinders</a></p>",
    ),
    "grinders": (
        "Grinders",
        "<p>Burr grinders crush beans between two burrs to a uniform size; blade grinders chop them "
        "unevenly. Espresso needs a fine, consistent grind.</p>"
        "<p><a href='/wiki/article/espresso'>Back to Espresso</a></p>",
    ),
}

_WIKI_NAV = (
    "<nav aria-label='Wiki'><a href='/wiki/'>Wiki home</a> | <a href='/wiki/embed'>Embedded widget</a> | "
    "<a href='/'>All sites</a></nav>"
)
_WIKI_FOOTER = (
    "<footer><p>This site is protected by reCAPTCHA and the Google Privacy Policy and Terms of Service "
    "apply.</p></footer>"
)


def _wiki(req: Request, session: dict[str, Any]) -> Response:
    path = req.path.removeprefix("/wiki").rstrip("/") or "/"
    if path == "/":
        items = "".join(
            f"<li><a href='/wiki/article/{slug}'>{html.escape(title)}</a></li>"
            for slug, (title, _) in ARTICLES.items()
        )
        body = (
            "<h1>Coffee wiki</h1><form action='/wiki/search'><label>Search <input name='q'></label> "
            f"<button>Search</button></form><h2>Articles</h2><ul>{items}</ul>"
        )
        return Response(_page("Coffee wiki", body, nav=_WIKI_NAV, footer=_WIKI_FOOTER))
    if path.startswith("/article/"):
        slug = path.rsplit("/", 1)[-1]
        if slug not in ARTICLES:
            return _not_found(req)
        title, text = ARTICLES[slug]
        return Response(
            _page(
                f"{title} - Coffee wiki",
                f"<article><h1>{html.escape(title)}</h1>{text}</article>",
                nav=_WIKI_NAV,
                footer=_WIKI_FOOTER,
            )
        )
    if path == "/search":
        q = req.query.get("q", "").strip().lower()
        hits = [(s, t) for s, (t, body) in ARTICLES.items() if q and (q in t.lower() or q in body.lower())]
        items = "".join(f"<li><a href='/wiki/article/{s}'>{html.escape(t)}</a></li>" for s, t in hits)
        body = f"<h1>Search results for “{html.escape(q)}”</h1>" + (
            f"<ul>{items}</ul>" if hits else "<p>No articles match.</p>"
        )
        return Response(_page("Search - Coffee wiki", body, nav=_WIKI_NAV, footer=_WIKI_FOOTER))
    if path == "/embed":
        body = (
            "<h1>Embedded widget</h1><p>The converter below is an iframe.</p>"
            "<iframe src='/wiki/frame' title='Unit converter' width='420' height='160'></iframe>"
        )
        return Response(_page("Embedded widget - Coffee wiki", body, nav=_WIKI_NAV, footer=_WIKI_FOOTER))
    if path == "/frame":
        script = (
            "document.getElementById('convert').addEventListener('click', () => {"
            "const g = parseFloat(document.getElementById('grams').value || '0');"
            "document.getElementById('result').textContent = (g / 28.35).toFixed(2) + ' oz'; });"
        )
        body = (
            "<label>Grams <input id='grams' type='number'></label> <button id='convert'>Convert</button>"
            "<p>Result: <output id='result'>none</output></p>"
        )
        return Response(_page("Unit converter", body, script=script))
    return _not_found(req)


# --------------------------------------------------------------------------------------------------
# Failure pages and the index
# --------------------------------------------------------------------------------------------------


def _not_found(req: Request) -> Response:
    return Response(
        _page("404 Not Found", f"<h1>Not Found</h1><p>{html.escape(req.path)} does not exist.</p>"),
        status=404,
    )


def _index(req: Request, session: dict[str, Any]) -> Response:
    body = (
        "<h1>Local sites</h1><ul><li><a href='/shop/'>Shop</a></li><li><a href='/notes/'>Notes</a></li>"
        "<li><a href='/wiki/'>Coffee wiki</a></li><li><a href='/status/'>Status dashboard</a></li></ul>"
    )
    return Response(_page("Local sites", body))


def _status(req: Request, session: dict[str, Any]) -> Response:
    path = req.path.removeprefix("/status").rstrip("/") or "/"
    if path == "/report":
        body = "<h1>Internal Server Error</h1><p>The report generator crashed.</p>"
        return Response(_page("500 Internal Server Error", body), status=500)
    if path == "/verify":
        body = (
            "<h1>Verify you are human</h1><form><label><input type='checkbox'> I'm not a robot</label>"
            "<button>Continue</button></form>"
        )
        return Response(_page("Just a moment...", body))
    body = (
        "<h1>Status dashboard</h1><ul><li><a href='/status/report'>Monthly report</a></li>"
        "<li><a href='/status/verify'>Partner portal</a></li></ul>"
    )
    return Response(_page("Status dashboard", body))


# --------------------------------------------------------------------------------------------------
# Lab: pages that try to leave the sandbox (the containment suite points them at forbidden URLs)
# --------------------------------------------------------------------------------------------------


def _js(value: str) -> str:
    return json.dumps(value).replace("</", "<\\/")


def _lab(req: Request, session: dict[str, Any]) -> Response:
    path = req.path.removeprefix("/lab").rstrip("/") or "/"
    to = req.query.get("to", "")
    if path == "/redirect":  # an open redirect: allowed page -> whatever `to` names
        return Response(_page("Redirecting", "<p>Redirecting.</p>"), status=302, headers={"Location": to})
    if path == "/link":
        body = f"<h1>Link</h1><p><a href='{html.escape(to, quote=True)}'>Open the target</a></p>"
        return Response(_page("Link - Lab", body))
    if path == "/probe":  # the page itself fetches, opens a WebSocket to and loads an image from URLs
        fetch, ws, img = (req.query.get(k, "") for k in ("fetch", "ws", "img"))
        script = (
            "const out = (id, text) => { document.getElementById(id).textContent = text; };"
            f"if ({_js(fetch)}) fetch({_js(fetch)}).then(r => r.text())"
            ".then(t => out('fetch', 'fetched: ' + t.slice(0, 200)), e => out('fetch', 'fetch failed: ' + e));"
            f"if ({_js(ws)}) {{ const s = new WebSocket({_js(ws)});"
            "s.onmessage = m => out('ws', 'ws message: ' + m.data); s.onopen = () => out('ws', 'ws open');"
            "s.onclose = e => out('ws', 'ws closed: ' + e.code); }"
        )
        image = f"<img alt='probe image' src='{html.escape(img, quote=True)}'>" if img else ""
        body = (
            "<h1>Probe</h1><p id='fetch'>fetch: idle</p><p id='ws'>ws: idle</p>"
            f"{image}<p id='done'>probe page</p>"
        )
        return Response(_page("Probe - Lab", body, script=script))
    if path == "/file":  # served as an attachment: clicking its link is a download
        return Response(
            "downloaded file\n",
            content_type="application/octet-stream",
            headers={"Content-Disposition": "attachment; filename=report.bin"},
        )
    if path == "/downloads":
        body = "<h1>Downloads</h1><p><a href='/lab/file'>Download the report</a></p>"
        return Response(_page("Downloads - Lab", body))
    if path == "/upload":
        body = "<h1>Upload</h1><label>Attachment <input type='file' name='attachment'></label>"
        return Response(_page("Upload - Lab", body))
    return _not_found(req)


APPS = {"shop": _shop, "notes": _notes, "wiki": _wiki, "status": _status, "lab": _lab}


def route(req: Request, state: dict[str, dict[str, Any]]) -> Response:
    """Dispatch a request to its app; a request without a session cookie gets a new session."""
    headers: dict[str, str] = {}
    sid = req.session if req.session in state else ""
    if not sid:
        sid = secrets.token_hex(8)
        state[sid] = {}
        headers["Set-Cookie"] = f"wl_session={sid}; Path=/; HttpOnly; SameSite=Lax"
    app = req.path.strip("/").split("/", 1)[0]
    handler = APPS.get(app, _index if app == "" else None)
    response = handler(req, state[sid]) if handler is not None else _not_found(req)
    response.headers.update(headers)
    return response
