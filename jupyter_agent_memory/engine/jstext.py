"""JavaScript's string and JSON rules, where results shared with Cherry Studio (written in
TypeScript) depend on them: ``trim``, line terminators, UTF-16 ``.length``, ``String(value)``
and ``JSON.stringify``'s key order, numbers and escapes.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

# What trim() removes (ECMAScript WhiteSpace and LineTerminator); str.strip() differs.
JS_WHITESPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# What ends a line for ^, $ and . in a JavaScript regular expression.
JS_LINE_TERMINATORS = "\n\r\u2028\u2029"

_SURROGATE = re.compile("[\ud800-\udfff]")
_ARRAY_INDEX = re.compile(r"^(?:0|[1-9][0-9]*)$")
_MAX_ARRAY_INDEX = 2**32 - 2


def js_trim(text: str) -> str:
    """``text.trim()`` as JavaScript does it."""
    return text.strip(JS_WHITESPACE)


def utf16_length(text: str) -> int:
    """``text.length`` in JavaScript: UTF-16 code units (an emoji counts 2)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def js_string(value: Any, missing: bool = False) -> str:
    """``String(value)`` for a JSON value; ``missing`` spells an absent one (``undefined``)."""
    if missing:
        return "undefined"
    if value is None or isinstance(value, bool):
        return json.dumps(value)  # null, true, false
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def js_ordered(value: Any) -> Any:
    """``value`` with object keys in JavaScript's order: integer-like ascending, then the rest."""
    if isinstance(value, dict):
        first = {k for k in value if _ARRAY_INDEX.match(k) and int(k) <= _MAX_ARRAY_INDEX}
        keys = sorted(first, key=int) + [k for k in value if k not in first]
        return {k: js_ordered(value[k]) for k in keys}
    if isinstance(value, list):
        return [js_ordered(item) for item in value]
    return value


def js_number(value: int | float) -> str:
    """A JSON number as JavaScript writes it (a double: ``1.0`` is ``1``, ``1e21`` is
    ``1e+21``, an integer beyond 2**53 comes out rounded, as ``JSON.parse`` left it)."""
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        return "null"
    if number == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(number)).normalize().as_tuple()
    text = "".join(map(str, digits))
    size, point = len(text), len(text) + int(exponent)
    if size <= point <= 21:
        body = text + "0" * (point - size)
    elif 0 < point <= 21:
        body = f"{text[:point]}.{text[point:]}"
    elif -6 < point <= 0:
        body = "0." + "0" * -point + text
    else:
        power = point - 1
        mantissa = text if size == 1 else f"{text[0]}.{text[1:]}"
        body = f"{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"
    return ("-" if sign else "") + body


def js_json(value: Any) -> str:
    """``JSON.stringify(value)``: compact, keys and numbers as JavaScript has them, non-ASCII
    kept and lone surrogates escaped (so the text stays encodable in UTF-8)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", _stringify(js_ordered(value)))


def _stringify(value: Any) -> str:
    if value is None or value is True or value is False:
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, dict):
        items = (f"{_stringify(str(k))}:{_stringify(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_stringify(item) for item in value) + "]"
    raise TypeError(f"{type(value).__name__} is not a JSON value")
