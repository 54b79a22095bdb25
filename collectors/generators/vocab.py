"""Word pools and small seeded helpers the task generators share (names, places, words, timestamps).

Every helper takes the task's own `random.Random`, so a task depends only on its generator, the run's
seed and its index: the same seed gives the same tasks on every machine."""

from __future__ import annotations

import random
import re

FIRST_NAMES = (
    "ada",
    "bo",
    "chen",
    "dara",
    "emil",
    "farah",
    "goran",
    "hana",
    "ines",
    "jonas",
    "kofi",
    "lena",
    "mateo",
    "nadia",
    "oskar",
    "priya",
    "quinn",
    "rosa",
    "sami",
    "tariq",
    "uma",
    "viktor",
    "wen",
    "ximena",
    "yusuf",
    "zoe",
    "amara",
    "bruno",
    "celia",
    "dmitri",
    "elif",
    "felix",
    "greta",
    "hugo",
    "ivana",
    "jamal",
)
LAST_NAMES = (
    "lovelace",
    "hopper",
    "okafor",
    "silva",
    "nakamura",
    "petrov",
    "haddad",
    "kowalski",
    "moreau",
    "larsen",
    "mensah",
    "garcia",
    "ivanova",
    "schmidt",
    "tanaka",
    "oconnor",
    "rossi",
    "novak",
    "dubois",
    "yilmaz",
)
CITIES = (
    "Lisbon",
    "Oslo",
    "Rome",
    "Lyon",
    "Porto",
    "Ghent",
    "Krakow",
    "Tallinn",
    "Seville",
    "Turin",
    "Bergen",
    "Graz",
    "Utrecht",
    "Aarhus",
    "Brno",
    "Cork",
    "Malmo",
    "Bilbao",
    "Leipzig",
    "Split",
)
PRODUCTS = (
    "kettle",
    "toaster",
    "blender",
    "grinder",
    "lamp",
    "desk",
    "chair",
    "monitor",
    "keyboard",
    "headset",
    "backpack",
    "bottle",
    "notebook",
    "stapler",
    "router",
    "charger",
    "speaker",
    "tripod",
    "drill",
    "mug",
)
REGIONS = ("north", "south", "east", "west", "central")
DEPARTMENTS = ("sales", "support", "research", "finance", "legal", "ops", "design", "platform")
SERVICES = (
    "api",
    "auth",
    "billing",
    "cache",
    "db",
    "gateway",
    "mailer",
    "queue",
    "scheduler",
    "search",
    "worker",
)
LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
WORDS = (
    "alpha",
    "amber",
    "anchor",
    "apple",
    "arrow",
    "aspen",
    "badge",
    "basil",
    "beacon",
    "birch",
    "bolt",
    "cedar",
    "cinder",
    "clover",
    "comet",
    "coral",
    "delta",
    "dune",
    "ember",
    "fable",
    "fern",
    "flint",
    "frost",
    "garnet",
    "glade",
    "harbor",
    "hazel",
    "indigo",
    "iris",
    "jade",
    "juniper",
    "kelp",
    "lark",
    "lotus",
    "maple",
    "meadow",
    "nebula",
    "nova",
    "oak",
    "onyx",
    "orbit",
    "pebble",
    "pine",
    "prism",
    "quartz",
    "raven",
    "reef",
    "ridge",
    "sable",
    "sage",
    "slate",
    "spruce",
    "stone",
    "tide",
    "topaz",
    "umber",
    "vale",
    "willow",
    "zephyr",
)
ERROR_MESSAGES = (
    "connection refused",
    "timeout after 30s",
    "disk quota exceeded",
    "invalid token",
    "deadlock detected",
    "upstream returned 502",
    "certificate expired",
    "out of memory",
    "permission denied",
    "malformed request",
)
INFO_MESSAGES = (
    "request served",
    "cache hit",
    "job finished",
    "user logged in",
    "config reloaded",
    "heartbeat ok",
    "connection opened",
    "batch committed",
    "retrying later",
    "health check passed",
)
TIMEZONES = (
    "Europe/Paris",
    "Europe/Lisbon",
    "America/New_York",
    "America/Sao_Paulo",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Australia/Sydney",
    "Africa/Nairobi",
    "America/Denver",
    "Pacific/Auckland",
)


def person(rng: random.Random) -> tuple[str, str]:
    """(first, last) in lower case."""
    return rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)


def full_name(rng: random.Random) -> str:
    first, last = person(rng)
    return f"{first.title()} {last.title()}"


def slug(rng: random.Random, parts: int = 2) -> str:
    return "-".join(rng.sample(WORDS, parts))


def ident(rng: random.Random, parts: int = 2) -> str:
    """A Python identifier made of words: `amber_delta`."""
    return "_".join(rng.sample(WORDS, parts))


def sentence(rng: random.Random, words: int = 8) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def timestamp(rng: random.Random, day: int = 1) -> str:
    """An ISO timestamp in 2026-03 on `day`, at a random second."""
    second = rng.randrange(86400)
    return f"2026-03-{day:02d}T{second // 3600:02d}:{second % 3600 // 60:02d}:{second % 60:02d}Z"


def shell_quote(text: str) -> str:
    """`text` as one POSIX shell word (single quotes)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def pick_weighted(rng: random.Random, options: dict[str, float]) -> str:
    names = sorted(options)
    return rng.choices(names, weights=[options[n] for n in names], k=1)[0]


def regex_word(text: str) -> str:
    """`text` escaped for grep -E / awk patterns."""
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", text)
