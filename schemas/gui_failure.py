"""The paper's GUI environment-failure rule (section 3.1.2): a GUI trajectory whose screen is an error
state (an HTTP error page, a CAPTCHA wall, a browser error, a missing app state) is not world-model
data, and leaves with `env_failure` / `gui_env_failure`.

One rule, three readers that see different evidence, each with its own entry point here:

- `detect_page_failure` (collectors, a live page): the HTTP status of the main document, the title,
  the first heading and the amount of text; a page counts only when it *is* the error or challenge.
- `trace_failure_marker` (the cleaner's score stage, public GUI traces): any failure phrase in an
  observation's first 20,000 characters.
- `error_state_marker` (the pools' filter, with the configurable `POOL_FAILURE_MARKERS`): a marker
  that is most of a title-like line, or a short statement on a short screen.

They are kept apart because each is tuned to its evidence (a live page has a status code, a trace
has only text) and the data built from them must not change; they live together so that a new
marker is added, and reviewed, in one place.
"""

from __future__ import annotations

import re

# --------------------------------------------------------------------------------------------------
# A live page (collectors): only when the page / app IS an error state
# --------------------------------------------------------------------------------------------------

HTTP_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
# A title or top heading that is nothing but an error status ("503 Service Unavailable", "Error 500",
# "HTTP Error 404 - Not Found", "Internal Server Error"): a page *about* an error has more words.
_ERROR_TITLE = re.compile(
    r"^\s*(?:(?:http\s+)?(?:error|status)\s*[:#-]?\s*)?(?:(?P<code>[45]\d\d)\s*[:.\-–]?\s*)?"
    r"(?P<phrase>bad request|unauthori[sz]ed|forbidden|access denied|not found|page not found|request timeout|"
    r"too many requests|internal server error|server error|bad gateway|service (?:temporarily )?unavailable|"
    r"gateway time-?out)?\s*$",
    re.I,
)
# Chromium's own error pages (net::ERR_*) and crash page.
_BROWSER_ERROR = re.compile(
    r"(?:this site can.t be reached|this page isn.t working|aw, snap!|err_[a-z_]+|"
    r"your connection is not private|took too long to respond|refused to connect)",
    re.I,
)
# A challenge page: its title or main heading *is* the challenge.
_CAPTCHA_TITLE = re.compile(
    r"^\s*(?:captcha(?:\s+(?:check|challenge|verification))?|verify(?:ing)? (?:that )?you are (?:a )?human|"
    r"are you a (?:human|robot)\??|i.m not a robot|attention required!?.*|just a moment\.*|"
    r"security check|human verification|please verify you are a human|one more step)\s*$",
    re.I,
)
_CAPTCHA_WIDGET = re.compile(r"\b(?:i.m not a robot|verify you are human)\b", re.I)
# Main-content size under which a page is "nothing but" its error or challenge.
ERROR_PAGE_MAX_CHARS = 600


def error_title_status(title: str) -> str | None:
    """The error a title/heading consists of ("503 Service Unavailable"), or None when it says more."""
    title = title.strip()
    if not title or len(title) > 80:
        return None
    m = _ERROR_TITLE.match(title)
    if not m or not (m.group("code") or m.group("phrase")):
        return None
    return title


def detect_page_failure(
    *, status: int | None, title: str, headings: list[str], text: str, url: str = ""
) -> str | None:
    """Why a loaded page is an environment failure, or None.

    The HTTP status of the main document decides when known (>= 400). Otherwise a page counts as an
    error or CAPTCHA page only when its title or first heading *is* the error/challenge and the page
    holds little else: a footer "protected by reCAPTCHA" or an article about HTTP 503 is not one."""
    if status is not None and status >= 400:
        reason = HTTP_REASONS.get(status, "error")
        return f"HTTP {status} {reason} at {url or 'the page'}"
    short = len(text.strip()) <= ERROR_PAGE_MAX_CHARS
    candidates = [title] + headings[:1]
    if _BROWSER_ERROR.search(title) or (short and any(_BROWSER_ERROR.search(h) for h in headings[:1])):
        return f"browser error page at {url or 'the page'}: {title or headings[0]}"
    if short:
        for candidate in candidates:
            if error_title_status(candidate):
                return f"error page at {url or 'the page'}: {candidate.strip()}"
            if _CAPTCHA_TITLE.match(candidate.strip()):
                return f"CAPTCHA page at {url or 'the page'}: {candidate.strip()}"
        if _CAPTCHA_WIDGET.search(text) and len(text.strip()) <= ERROR_PAGE_MAX_CHARS // 2:
            return f"CAPTCHA page at {url or 'the page'}: a human-verification widget is all it shows"
    return None


# --------------------------------------------------------------------------------------------------
# A public trace's observation (the cleaner's score stage)
# --------------------------------------------------------------------------------------------------

TRACE_FAILURE = re.compile(
    r"(?i)\b(?:captcha|are you a robot|verify you are human|access denied|403 forbidden|404 not found|"
    r"502 bad gateway|503 service unavailable|504 gateway time-?out|err_connection_refused|err_name_not_resolved|"
    r"this site can.t be reached|no such file or directory: .*(?:state|snapshot))"
)
TRACE_FAILURE_SCAN_CHARS = 20_000  # the part of an observation that is searched


def trace_failure_marker(text: str) -> str | None:
    """The failure phrase an observation of a GUI trace shows (`TRACE_FAILURE`), or None."""
    m = TRACE_FAILURE.search(text[:TRACE_FAILURE_SCAN_CHARS])
    return m.group(0) if m else None


# --------------------------------------------------------------------------------------------------
# A pool input's screen (the pools' filter, markers from the config)
# --------------------------------------------------------------------------------------------------

# Substrings that mark a GUI observation as an environment failure even when the collector did not set
# status=env_failure (public traces rarely do); `pipelines.config.FilterConfig.gui_failure_markers`
# starts from these.
POOL_FAILURE_MARKERS: tuple[str, ...] = (
    "captcha",
    "are you a robot",
    "err_connection",
    "err_name_not_resolved",
    "502 bad gateway",
    "503 service unavailable",
    "504 gateway timeout",
    "state file not found",
    "no such file: state",
)

_TITLE_LINE = re.compile(
    r"(RootWebArea|WebArea|heading|title|<title>|window|frame|dialog|alert)", re.IGNORECASE
)
_QUOTED = re.compile(r"""['"]([^'"]{1,300})['"]""")


def _title_names(text: str) -> list[str]:
    """The names on title-like lines of a screen: page title, headings, window titles, dialogs."""
    names: list[str] = []
    for line in text.splitlines()[:400]:
        if _TITLE_LINE.search(line):
            quoted = _QUOTED.findall(line)
            names.extend(quoted or [line.strip()])
    return names


def _screen_names(text: str) -> list[str]:
    """Every accessible name (quoted) of a screen, and what each line says outside its quotes (roles
    and bare text)."""
    names: list[str] = []
    for line in text.splitlines()[:400]:
        names.extend(_QUOTED.findall(line))
        names.append(_QUOTED.sub(" ", line).strip())
    return names


_WORD = re.compile(r"[a-z0-9]+")


def _marker_is_the_name(marker: str, name: str, share: float) -> bool:
    """The marker makes up at least `share` of the name's words ("HTTP Error 503 Service Unavailable"
    for "503 service unavailable", not "What does 503 Service Unavailable mean?")."""
    if marker not in name:
        return False
    return len(_WORD.findall(marker)) >= share * max(1, len(_WORD.findall(name)))


def error_state_marker(text: str, markers: list[str], max_words: int) -> str | None:
    """The failure marker that puts this screen in an error state, or None.

    A marker counts when the screen *is* an error page, not when a page mentions it: the marker is
    most (>= 60% of the words) of the page title / a heading / a window or dialog name, or, on a short
    screen (at most `max_words` words: a CAPTCHA wall, a 503 page, a missing-state message), a short
    statement (at most five words, not a question) such as "Please complete the captcha". A reCAPTCHA
    notice in a footer, or an article or a question about HTTP 503, is neither.
    """
    lowered = text.lower()
    found = [m for m in (mk.lower() for mk in markers) if m in lowered]
    if not found:
        return None
    for name in _title_names(lowered):
        for marker in found:
            if _marker_is_the_name(marker, name, 0.6):
                return marker
    if len(lowered.split()) <= max_words:
        for name in _screen_names(lowered):
            stripped = name.strip()
            if stripped.endswith("?") or len(_WORD.findall(stripped)) > 5:
                continue
            for marker in found:
                if marker in stripped:
                    return marker
    return None
