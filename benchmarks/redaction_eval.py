"""Recall and look-alike damage per class of the shared redaction core, and of the libraries measured
against it, on the labelled corpus (tests/helpers/redaction_corpus.py: the hand-written samples and the
generated corpus, many seeds).

    .venv/bin/python benchmarks/redaction_eval.py --seeds 20

A planted secret counts as caught when its value no longer appears in the output; a look-alike is
damaged when it no longer appears intact. Library detectors report spans rather than rewriting text:
a secret is caught when a reported value covers it (or lies inside it, for a value of 6+ characters),
and a look-alike is damaged when a reported value of 6+ characters lies inside it. Look-alikes of
samples that name their kind (program messages, placeholders) are tallied under it.

- detect-secrets (Yelp): every default plugin, keyword and high-entropy detectors included, line by
  line as its scanner reads files.
- phonenumbers (libphonenumber): PhoneNumberMatcher over each text, for the phone class.
- python-stdnum: IBAN and Luhn validators over candidate digit runs, for the iban and card classes.
presidio-analyzer is not measured: its recognisers need a spaCy language model, which cannot be
downloaded on this machine.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.redaction_corpus import Sample, build_corpus, generated_corpus
from worldline.redaction import redact_text_or_json

Result = tuple[Counter[str], Counter[str], Counter[str], Counter[str], float]


def lookalike_kind(text: str) -> str:
    """The look-alike category a string falls in, for the damage table."""
    if re.fullmatch(r"[0-9a-f]{7,64}", text) or text.startswith(("sha256:", "app:build-", "image@")):
        return "hash"
    if re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", text):
        return "uuid"
    if text.startswith(("sha512-", "data:")) or re.fullmatch(r"[A-Za-z0-9+/]{40,}={0,2}", text):
        return "base64"
    if re.fullmatch(r"\d{4}-\d\d-\d\d[T ][\d:.,]+Z?", text) or re.fullmatch(r"1[6-7]\d{8,17}", text):
        return "timestamp"
    if re.search(r"\d+\.\d+\.\d+", text) or text.startswith("python"):
        return "version"
    if re.search(r"(?:localhost|0\.0\.0\.0):\d+|-p \d+", text):
        return "port"
    if re.search(r"\d{3,}", text):
        return "number"
    return "code/identifier"


def _tally(samples: list[Sample], caught_of: Callable[[Sample], tuple[list[bool], list[bool]]]) -> Result:
    caught: Counter[str] = Counter()
    total: Counter[str] = Counter()
    damaged: Counter[str] = Counter()
    looks: Counter[str] = Counter()
    start = time.perf_counter()
    for s in samples:
        hits, harms = caught_of(s)
        for (kind, _), hit in zip(s.secrets, hits, strict=True):
            total[kind] += 1
            caught[kind] += hit
        for la, harm in zip(s.lookalikes, harms, strict=True):
            kind = s.lookalike_kind or lookalike_kind(la)
            looks[kind] += 1
            damaged[kind] += harm
    return caught, total, damaged, looks, time.perf_counter() - start


def ours(samples: list[Sample]) -> Result:
    def one(s: Sample) -> tuple[list[bool], list[bool]]:
        out = redact_text_or_json(s.text, Counter(), s.pii)
        return [v not in out for _, v in s.secrets], [la not in out for la in s.lookalikes]

    return _tally(samples, one)


def _span_result(s: Sample, found: list[str]) -> tuple[list[bool], list[bool]]:
    hits = [any(v in f or (len(f) >= 6 and f in v) for f in found) for _, v in s.secrets]
    harms = [any(len(f) >= 6 and f in la for f in found) for la in s.lookalikes]
    return hits, harms


def detect_secrets_scan(samples: list[Sample]) -> Result:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    with default_settings():

        def one(s: Sample) -> tuple[list[bool], list[bool]]:
            found = [
                str(p.secret_value)
                for line in s.text.replace("\r\n", "\n").split("\n")
                for p in scan_line(line)
                if p.secret_value
            ]
            return _span_result(s, found)

        return _tally(samples, one)


def phonenumbers_scan(samples: list[Sample]) -> Result:
    import phonenumbers

    def one(s: Sample) -> tuple[list[bool], list[bool]]:
        found = [m.raw_string for m in phonenumbers.PhoneNumberMatcher(s.text, "US")]
        return _span_result(s, found)

    return _tally(samples, one)


_DIGIT_RUN = re.compile(
    r"(?<![\w])(?:[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,8}(?: ?[A-Z0-9]{1,3})?|\d(?:[ -]?\d){11,18})(?!\w)"
)


def stdnum_scan(samples: list[Sample]) -> Result:
    from stdnum import iban, luhn

    def one(s: Sample) -> tuple[list[bool], list[bool]]:
        found = []
        for m in _DIGIT_RUN.finditer(s.text):
            text = m.group(0)
            compact = text.replace(" ", "").replace("-", "")
            if (compact[:2].isalpha() and iban.is_valid(compact)) or (
                compact.isdigit() and luhn.is_valid(compact)
            ):
                found.append(text)
        return _span_result(s, found)

    return _tally(samples, one)


LIBRARIES: dict[str, tuple[Callable[[list[Sample]], Result], set[str] | None]] = {
    "detect-secrets": (detect_secrets_scan, None),
    "phonenumbers": (phonenumbers_scan, {"phone"}),
    "python-stdnum": (stdnum_scan, {"card", "iban"}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    samples = [s for seed in range(args.seeds) for s in (*build_corpus(seed), *generated_corpus(seed))]
    results: dict[str, Result] = {"ours": ours(samples)}
    scope: dict[str, set[str] | None] = {"ours": None}
    for name, (scan, classes) in LIBRARIES.items():
        try:
            results[name] = scan(samples)
            scope[name] = classes
        except ImportError:
            print(f"{name} is not installed; `pip install {name}` to compare")
    names = list(results)
    planted = sum(results["ours"][1].values())
    print(
        f"{len(samples)} samples, {planted} planted secrets, {sum(results['ours'][3].values())} look-alikes"
    )
    print()
    print(f"{'secret class':<22}" + "".join(f"{n + ' recall':>24}" for n in names))
    for kind in sorted(results["ours"][1]):
        row = f"{kind:<22}"
        for n in names:
            classes = scope[n]
            if classes is not None and kind not in classes:
                row += f"{'-':>24}"
                continue
            hit, planted_kind = results[n][0][kind], results[n][1][kind]
            row += f"{hit:>11}/{planted_kind:<5} {hit / planted_kind:6.1%}"
        print(row)
    print()
    print(f"{'look-alike kind':<22}" + "".join(f"{n + ' damaged':>24}" for n in names))
    for kind in sorted(results["ours"][3]):
        row = f"{kind:<22}"
        for n in names:
            bad, seen = results[n][2][kind], results[n][3][kind]
            row += f"{bad:>11}/{seen:<5} {bad / seen:6.1%}"
        print(row)
    print()
    for n in names:
        caught, total, damaged, looks, secs = results[n]
        classes = scope[n]
        c = sum(v for k, v in caught.items() if classes is None or k in classes)
        t = sum(v for k, v in total.items() if classes is None or k in classes)
        d, lt = sum(damaged.values()), sum(looks.values())
        where = "all classes" if classes is None else ", ".join(sorted(classes))
        print(
            f"TOTAL {n} ({where}): recall {c}/{t} = {c / t:.1%}, look-alikes damaged {d}/{lt} = {d / lt:.1%}, "
            f"{secs * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
