"""The one check every encoding entry makes of its text: that it is a str.

A subclass of str (``numpy.str_``, say) is a str, as it is to tiktoken and
HF ``tokenizers``; anything else, bytes included, is a ``TypeError`` that
names what was passed, rather than whatever the first use of it raises.

>>> require_text("hi")
>>> require_text(b"hi")
Traceback (most recent call last):
TypeError: text must be a str, got bytes
"""

from __future__ import annotations


def require_text(text: object) -> None:
    """Raise ``TypeError`` unless ``text`` is a str (or a subclass of str)."""
    if not isinstance(text, str):
        raise not_text_error(text)


def not_text_error(value: object) -> TypeError:
    """The ``TypeError`` for ``value`` given where a str was expected (the compiled kernel raises it too)."""
    return TypeError(f"text must be a str, got {type(value).__name__}")
