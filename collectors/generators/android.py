"""Android tasks over the apps of a stock emulator image (Google APIs, as AndroidWorld runs): Settings
pages and switches, Settings search, Contacts' new-contact form, Clock alarms and timers, Calculator
sums and the Files app's roots.

What the android task format can set before the first action is the app and activity launched
(`android.app`, `android.activity`: an explicit component, as `am start -n` takes it); intents with
extras, seeded app data and device settings are beyond the collector's protocol. So the initial state
varies by the screen a task starts on: a Settings page reached by its own activity, an app's main
screen, or another app's screen from which the plan switches with `open_app` (the device's state is
otherwise whatever it holds). The goal varies with the drawn data (names, numbers, times, pages,
switch positions, search words). Packages and activities are those of AOSP's Settings manifest and
AndroidWorld's app table (android_world/env/adb_utils.py); the labels in the plans are the stock
English ones, and no plan here has run on a device.
"""

from __future__ import annotations

import random
from typing import Any

from collectors.generators import vocab

SETTINGS = "com.android.settings"
CONTACTS = ("com.google.android.contacts", "com.android.contacts.activities.PeopleActivity")
CLOCK = ("com.google.android.deskclock", "com.android.deskclock.DeskClock")
CALCULATOR = ("com.google.android.calculator", "com.android.calculator2.Calculator")
FILES = ("com.google.android.documentsui", "com.android.documentsui.files.FilesActivity")
# Exported Settings activities (AOSP packages/apps/Settings AndroidManifest.xml) and their titles.
SETTINGS_PAGES = (
    ("Settings$NetworkDashboardActivity", "Network & internet"),
    ("Settings$ConnectedDeviceDashboardActivity", "Connected devices"),
    ("Settings$WifiSettingsActivity", "Wi\u2011Fi"),
    ("Settings$NetworkProviderSettingsActivity", "Internet"),
    ("Settings$ConfigureWifiSettingsActivity", "Network preferences"),
    ("Settings$SavedAccessPointsSettingsActivity", "Saved networks"),
    ("Settings$TetherSettingsActivity", "Hotspot & tethering"),
    ("Settings$WifiTetherSettingsActivity", "Wi\u2011Fi hotspot"),
    ("Settings$VpnSettingsActivity", "VPN"),
    ("Settings$DataSaverSummaryActivity", "Data Saver"),
    ("Settings$DateTimeSettingsActivity", "Date & time"),
    ("Settings$LocalePickerActivity", "Languages"),
    ("Settings$LanguageAndInputSettingsActivity", "Languages & input"),
    ("Settings$AvailableVirtualKeyboardActivity", "On-screen keyboard"),
    ("Settings$ManageAssistActivity", "Assist & voice input"),
    ("Settings$PhysicalKeyboardActivity", "Physical keyboard"),
    ("Settings$SpellCheckersSettingsActivity", "Spell checker"),
    ("Settings$UserDictionarySettingsActivity", "Personal dictionary"),
    ("Settings$ZenModeSettingsActivity", "Do Not Disturb"),
    ("Settings$ZenModeAutomationSettingsActivity", "Schedules"),
    ("Settings$WallpaperSettingsActivity", "Wallpaper"),
    ("Settings$DisplaySettingsActivity", "Display"),
    ("Settings$SmartAutoRotateSettingsActivity", "Auto-rotate screen"),
    ("Settings$NightDisplaySettingsActivity", "Night Light"),
    ("Settings$DarkThemeSettingsActivity", "Dark theme"),
    ("Settings$MyDeviceInfoActivity", "About emulated device"),
    ("Settings$ModuleLicensesActivity", "Open source licenses"),
    ("Settings$ManageApplicationsActivity", "All apps"),
    ("Settings$ManageDomainUrlsActivity", "Opening links"),
    ("Settings$AppMemoryUsageActivity", "Memory"),
    ("Settings$HighPowerApplicationsActivity", "Battery optimization"),
)
# The Settings homepage's entries, top to bottom; from the seventh on they sit below the first screen.
HOMEPAGE = (
    "Network & internet",
    "Connected devices",
    "Apps",
    "Notifications",
    "Battery",
    "Storage",
    "Sound & vibration",
    "Display",
    "Wallpaper & style",
    "Accessibility",
    "Location",
    "System",
)
# Pages with one main switch: (activity, the switch's label).
SWITCHES = (
    ("Settings$NetworkDashboardActivity", "Airplane mode"),
    ("Settings$DarkThemeSettingsActivity", "Use Dark theme"),
    ("Settings$NightDisplaySettingsActivity", "Use Night Light"),
    ("Settings$DataSaverSummaryActivity", "Use Data Saver"),
)
APPS = {CONTACTS: "Contacts", CLOCK: "Clock", CALCULATOR: "Calculator", FILES: "Files"}
SEARCH_TERMS = (
    "wifi", "bluetooth", "brightness", "battery saver", "dark theme", "ringtone", "vibration", "location",
    "hotspot", "airplane", "font size", "time zone", "keyboard", "storage", "notifications", "screen timeout",
    "language", "accessibility", "developer options", "backup",
)  # fmt: skip
FILE_ROOTS = ("Downloads", "Images", "Videos", "Audio", "Documents", "Recent")


def _tap(**target: str) -> dict[str, Any]:
    return {"action": "tap", **target}


def _settings_page(rng: random.Random) -> dict[str, Any]:
    activity, title = rng.choice(SETTINGS_PAGES)
    return {"app": SETTINGS, "activity": f"{SETTINGS}.{activity}", "title": title}


def _task(
    sentence: str, where: str, android: dict[str, Any], plan: list[str], goal: dict[str, Any]
) -> dict[str, Any]:
    """A task body: the instruction (saying where it starts unless on the app's own main screen), the
    android start, the scripted plan and the goal."""
    start = "." if where == "its main screen" else f" (you start on {where})."
    return {"instruction": sentence + start, "android": android, "actions": plan, "goal": goal}


def _start(
    rng: random.Random, app: tuple[str, str], own: float = 0.5
) -> tuple[dict[str, str], list[Any], str]:
    """Where a task in `app` starts: its main screen (probability `own`), else a Settings page or
    another app, from which the plan opens the app. (android config, plan prefix, where in words)."""
    package, activity = app
    if rng.random() < own:
        return {"app": package, "activity": activity}, [], "its main screen"
    if rng.random() < 0.7:
        page = _settings_page(rng)
        where = f"the {page['title']} settings page"
        return {"app": SETTINGS, "activity": page["activity"]}, [f"open_app({package!r})"], where
    other = rng.choice([a for a in APPS if a != app])
    return {"app": other[0], "activity": other[1]}, [f"open_app({package!r})"], f"the {APPS[other]} app"


def _settings_navigate(rng: random.Random) -> dict[str, Any]:
    start = _settings_page(rng)
    index = rng.randrange(len(HOMEPAGE))
    target = HOMEPAGE[index]
    plan: list[Any] = [f"open_app({SETTINGS!r})"]
    plan += ["swipe('up')"] * (index >= 6)
    plan += [_tap(text=target), "wait(1)"]
    return {
        "instruction": f"From the {start['title']} settings page, go to the {target} page of Settings.",
        "android": {"app": SETTINGS, "activity": start["activity"]},
        "actions": plan,
        "goal": {"kind": "settings-navigate", "answer": target, "start": start["title"]},
    }


def _settings_switch(rng: random.Random) -> dict[str, Any]:
    """Flip a page's main switch once (the other way) or twice (back as it was): the plan is right
    whatever position the device holds, which the task format cannot set."""
    activity, label = rng.choice(SWITCHES)
    twice = rng.random() < 0.3
    back = rng.random() < 0.4
    plan: list[Any] = [_tap(text=label), "wait(1)"] * (1 + twice) + ["back()"] * back
    what = "off and on again (or on and off), ending as it was" if twice else "the other way"
    return {
        "instruction": f"Switch \u201c{label}\u201d {what}" + (", then leave the page." if back else "."),
        "android": {"app": SETTINGS, "activity": f"{SETTINGS}.{activity}"},
        "actions": plan,
        "goal": {"kind": "settings-switch", "answer": "unchanged" if twice else "flipped", "switch": label},
    }


def _settings_search(rng: random.Random) -> dict[str, Any]:
    term = rng.choice(SEARCH_TERMS)
    if rng.random() < 0.5:
        android: dict[str, str] = {"app": SETTINGS}
        plan: list[Any] = []
        where = "the Settings homepage"
    else:
        page = _settings_page(rng)
        android = {"app": SETTINGS, "activity": page["activity"]}
        plan = [f"open_app({SETTINGS!r})"]
        where = f"the {page['title']} page"
    plan += [_tap(text="Search settings"), f"type({term!r})", "enter()", "wait(1)"]
    return {
        "instruction": f"Starting from {where}, search the settings for \u201c{term}\u201d and open the first result.",
        "android": android,
        "actions": plan,
        "goal": {"kind": "settings-search", "answer": term},
    }


def _contacts_add(rng: random.Random) -> dict[str, Any]:
    first, last = (part.title() for part in vocab.person(rng))
    phone = f"{rng.randint(201, 989)}55501{rng.randint(0, 99):02d}"  # the 555-01xx block kept for fiction
    android, plan, where = _start(rng, CONTACTS)
    plan += [
        _tap(description="Create contact"),
        _tap(text="First name"),
        f"type({first!r})",
        _tap(text="Last name"),
        f"type({last!r})",
        _tap(text="Phone"),
        f"type({phone!r})",
        _tap(text="Save"),
        "wait(1)",
    ]
    return _task(
        f"Add a contact named {first} {last} with the phone number {phone} in Contacts",
        where,
        android,
        plan,
        {"kind": "contacts-add", "answer": f"{first} {last}", "phone": phone},
    )


def _clock_alarm(rng: random.Random) -> dict[str, Any]:
    hour, minute = rng.randint(0, 23), rng.choice((0, 5, 10, 15, 20, 30, 40, 45, 50, rng.randint(0, 59)))
    label = rng.choice(("", "", vocab.sentence(rng, 2).rstrip(".")))
    android, plan, where = _start(rng, CLOCK)
    clock12 = f"{(hour - 1) % 12 + 1}:{minute:02d} {'AM' if hour < 12 else 'PM'}"
    plan += [
        _tap(text="Alarm"),
        _tap(description="Add alarm"),
        _tap(description="Switch to text input mode for the time input."),
        f"type({str((hour - 1) % 12 + 1)!r})",
        _tap(text="Minute"),
        f"type({f'{minute:02d}'!r})",
        _tap(text="AM" if hour < 12 else "PM"),
        _tap(text="OK"),
    ]
    if label:
        plan += [_tap(text="Add label"), f"type({label!r})", _tap(text="OK")]
    sentence = f"Set an alarm for {clock12} in the Clock app" + (
        f" labelled \u201c{label}\u201d" if label else ""
    )
    return _task(
        sentence,
        where,
        android,
        plan,
        {"kind": "clock-alarm", "answer": f"{hour:02d}:{minute:02d}", "label": label},
    )


def _clock_timer(rng: random.Random) -> dict[str, Any]:
    minutes = rng.randint(1, 59)
    seconds = rng.randint(1, 59) if rng.random() < 0.6 else 0
    digits = f"{minutes}{seconds:02d}"
    android, plan, where = _start(rng, CLOCK)
    plan += [_tap(text="Timer")]
    plan += [_tap(resource_id=f"timer_setup_digit_{d}") for d in digits]
    plan += [_tap(description="Start"), "wait(2)"]
    return _task(
        f"Start a timer for {minutes} min {seconds:02d} s in the Clock app",
        where,
        android,
        plan,
        {"kind": "clock-timer", "answer": f"{minutes:02d}:{seconds:02d}"},
    )


_CALC_KEYS = {"+": "op_add", "-": "op_sub", "*": "op_mul", "/": "op_div"}


def _calculator(rng: random.Random) -> dict[str, Any]:
    numbers = [rng.randint(1, 999)] + [rng.randint(1, 99) for _ in range(rng.randint(1, 3))]
    ops = [rng.choice("+-*/") for _ in numbers[1:]]
    expression = str(numbers[0]) + "".join(f"{op}{n}" for op, n in zip(ops, numbers[1:], strict=True))
    value = eval(expression, {"__builtins__": {}})  # digits and + - * / only, drawn above
    android, plan, where = _start(rng, CALCULATOR)
    for ch in expression:
        plan.append(_tap(resource_id=_CALC_KEYS.get(ch, f"digit_{ch}")))
    plan += [_tap(resource_id="eq"), "wait(0.5)"]
    shown = expression.replace("*", "\u00d7").replace("/", "\u00f7").replace("-", "\u2212")
    return _task(
        f"Compute {shown} with the Calculator app",
        where,
        android,
        plan,
        {"kind": "calculate", "answer": f"{value:.10g}", "expression": expression},
    )


def _files_root(rng: random.Random) -> dict[str, Any]:
    root = rng.choice(FILE_ROOTS)
    grid = rng.random() < 0.3
    android, plan, where = _start(rng, FILES)
    plan += [_tap(description="Show roots"), _tap(text=root), "wait(1)"]
    if grid:
        plan.append(_tap(description="Grid view"))
    sentence = f"Open {root} in the Files app" + (" and show it as a grid" if grid else "")
    return _task(sentence, where, android, plan, {"kind": "files-root", "answer": root, "grid": grid})


FAMILIES = {
    "settings-navigate": _settings_navigate,
    "settings-switch": _settings_switch,
    "settings-search": _settings_search,
    "contacts-add": _contacts_add,
    "clock-alarm": _clock_alarm,
    "clock-timer": _clock_timer,
    "calculator": _calculator,
    "files-root": _files_root,
}
