"""Checksum and plausibility validators that tell personal numbers from other digits.

A card number passes Luhn and starts with an issuer prefix of its length; an IBAN passes ISO 7064
mod 97-10 and has its country's length and BBAN format (python-stdnum's registry); a phone number
written in international form has a length its country code allows (Google's libphonenumber data,
via `phonenumbers`). Each validator takes the text as matched and says yes or no; none raises.
"""

from __future__ import annotations

import functools
import math
from collections import Counter

# Issuer prefixes (IIN ranges) and the lengths cards with them have: Visa, Mastercard (51-55 and
# 2221-2720), American Express, Discover, Diners Club, JCB, UnionPay, Maestro, Mir, RuPay, Troy.
_IIN: tuple[tuple[int, int, tuple[int, ...]], ...] = (
    (4, 4, (13, 16, 19)),
    (51, 55, (16,)),
    (2221, 2720, (16,)),
    (34, 34, (15,)),
    (37, 37, (15,)),
    (6011, 6011, (16, 19)),
    (644, 649, (16, 19)),
    (65, 65, (16, 19)),
    (300, 305, (14, 16, 19)),
    (36, 36, (14, 16, 19)),
    (38, 39, (14, 16, 19)),
    (3528, 3589, (16, 17, 18, 19)),
    (62, 62, (16, 17, 18, 19)),
    (50, 50, (12, 13, 14, 15, 16, 17, 18, 19)),
    (56, 58, (12, 13, 14, 15, 16, 17, 18, 19)),
    (6304, 6304, (12, 13, 14, 15, 16, 17, 18, 19)),
    (67, 67, (12, 13, 14, 15, 16, 17, 18, 19)),
    (2200, 2204, (16, 17, 18, 19)),
    (60, 60, (16,)),
    (81, 82, (16,)),
    (9792, 9792, (16,)),
)


def luhn_valid(digits: str) -> bool:
    """Whether DIGITS (digits only) pass the Luhn check (ISO/IEC 7812-1)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_number_valid(text: str) -> bool:
    """Whether TEXT (digits with optional single spaces or dashes) is a payment card number: 12 to 19
    digits, an issuer prefix of that length, Luhn, and not one digit repeated."""
    digits = text.replace(" ", "").replace("-", "")
    if not digits.isdigit() or not 12 <= len(digits) <= 19 or len(set(digits)) < 2:
        return False
    if not any(
        lo <= int(digits[: len(str(lo))]) <= hi and len(digits) in lengths for lo, hi, lengths in _IIN
    ):
        return False
    return luhn_valid(digits)


# The brands whose numbers are common enough to redact on the number alone when written without
# separators: Visa (16), Mastercard, American Express, Discover, JCB, Diners Club, UnionPay.
_MAJOR = (
    (4, 4, 16),
    (51, 55, 16),
    (2221, 2720, 16),
    (34, 34, 15),
    (37, 37, 15),
    (6011, 6011, 16),
    (65, 65, 16),
    (3528, 3589, 16),
    (36, 36, 14),
    (62, 62, 16),
)


def major_card_prefix(digits: str) -> bool:
    """Whether DIGITS have a major brand's issuer prefix and that brand's usual length."""
    return any(lo <= int(digits[: len(str(lo))]) <= hi and len(digits) == n for lo, hi, n in _MAJOR)


def iban_valid(text: str) -> bool:
    """Whether TEXT (spaces allowed) is an IBAN: mod 97 and the country's length and format."""
    from stdnum import iban

    compact = text.replace(" ", "").upper()
    if len(compact) < 15 or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    if _mod97(compact) != 1:  # the cheap test first: stdnum's registry lookup costs more
        return False
    # The country's length and BBAN structure, not its national check digits: an IBAN whose mod 97
    # holds is one whichever bank's own check its account number passes.
    try:
        iban.validate(compact, check_country=False)
    except ValueError:
        return False
    return True


def _mod97(compact: str) -> int:
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 if number.isdigit() else -1


@functools.lru_cache(maxsize=4096)
def phone_number_possible(text: str) -> bool:
    """Whether TEXT, a number written with its country code (+CC or 00CC), has a length its country
    allows; national forms (no country code) are read as North American."""
    import phonenumbers

    candidate = "+" + text[2:] if text.startswith("00") else text
    try:
        number = phonenumbers.parse(candidate, "US")
    except phonenumbers.NumberParseException:
        return False
    return bool(phonenumbers.is_possible_number(number))


def shannon_entropy(text: str) -> float:
    """Bits per character of TEXT's character distribution (0 for an empty text)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())
