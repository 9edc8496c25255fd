"""Encodings by name: the seven OpenAI ones, ``tiktoken_ext`` plugins, and your own.

``get_encoding(name)`` builds an encoding once per process (under a lock, so
threads asking at once share one build) and returns that same object from
then on. Names come from three places:

- the OpenAI encodings (:mod:`streambpe.tiktoken.openai_public`);
- plugin modules ``tiktoken_ext.*`` that declare ``ENCODING_CONSTRUCTORS``,
  as third-party tiktoken plugins do (tiktoken's own ``tiktoken_ext.openai_public``
  is skipped: the first source replaces it);
- :func:`register_encoding`, at run time; for example an encoding trained
  with streambpe.

A constructor returns ``Encoding``'s keyword arguments (tiktoken's contract)
or an :class:`~streambpe.tiktoken.core.Encoding`.

A registered encoding pickles as its name (plus, for one registered at run
time, a reference to its constructor, so a fresh process can build it), in
well under a hundred bytes; any other pickles its ranks.

>>> "cl100k_base" in list_encoding_names()
True
>>> ranks = {bytes([i]): i for i in range(256)}
>>> register_encoding("bytes_only", lambda: {"name": "bytes_only", "pat_str": r"\\S+|\\s+",
...                   "mergeable_ranks": ranks, "special_tokens": {}})
>>> get_encoding("bytes_only").encode("hi")
[104, 105]
>>> get_encoding("bytes_only") is get_encoding("bytes_only")
True
"""

from __future__ import annotations

import copyreg
import importlib
import pkgutil
import sys
import threading
from collections.abc import Callable
from typing import Any

from streambpe.tiktoken import openai_public
from streambpe.tiktoken.core import Encoding
from streambpe.tiktoken.openai_public import EncodingSpec

#: Builds an encoding: returns ``Encoding``'s keyword arguments, or an ``Encoding``.
EncodingConstructor = Callable[[], EncodingSpec | Encoding]

#: tiktoken's own plugin module, which the built-in table replaces.
_TIKTOKEN_OPENAI_PLUGIN = "tiktoken_ext.openai_public"

_lock = threading.RLock()
#: Encodings built so far, by name.
ENCODINGS: dict[str, Encoding] = {}
#: Every known constructor by name; None until first needed (finding plugins imports them).
ENCODING_CONSTRUCTORS: dict[str, EncodingConstructor] | None = None
#: The constructors given to :func:`register_encoding`.
_REGISTERED_AT_RUN_TIME: dict[str, EncodingConstructor] = {}


def _plugin_modules() -> list[str]:
    """The ``tiktoken_ext.*`` modules on ``sys.path``, tiktoken's own excepted."""
    try:
        import tiktoken_ext  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return []
    found = pkgutil.iter_modules(tiktoken_ext.__path__, "tiktoken_ext.")
    return sorted(name for _, name, _ in found if name != _TIKTOKEN_OPENAI_PLUGIN)


def _constructors() -> dict[str, EncodingConstructor]:
    """Every constructor, finding the plugins on first use."""
    global ENCODING_CONSTRUCTORS
    with _lock:
        if ENCODING_CONSTRUCTORS is not None:
            return ENCODING_CONSTRUCTORS
        found: dict[str, EncodingConstructor] = dict(openai_public.ENCODING_CONSTRUCTORS)
        for module_name in _plugin_modules():
            module = importlib.import_module(module_name)
            constructors = getattr(module, "ENCODING_CONSTRUCTORS", None)
            if constructors is None:
                raise ValueError(
                    f"tiktoken plugin {module_name} does not define ENCODING_CONSTRUCTORS"
                )
            for name, constructor in constructors.items():
                if name in found:
                    raise ValueError(
                        f"Duplicate encoding name {name} in tiktoken plugin {module_name}"
                    )
                found[name] = constructor
        found.update(_REGISTERED_AT_RUN_TIME)
        ENCODING_CONSTRUCTORS = found
        return found


def get_encoding(encoding_name: str) -> Encoding:
    """The encoding called ``encoding_name``, built on first use and shared afterwards.

    An unknown name raises ``ValueError`` listing the plugins and the known names.
    """
    if not isinstance(encoding_name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(encoding_name)}")
    encoding = ENCODINGS.get(encoding_name)
    if encoding is not None:
        return encoding
    with _lock:
        encoding = ENCODINGS.get(encoding_name)
        if encoding is not None:
            return encoding
        constructors = _constructors()
        constructor = constructors.get(encoding_name)
        if constructor is None:
            raise ValueError(
                f"Unknown encoding {encoding_name}.\n"
                f"Plugins found: {_plugin_modules()}\n"
                f"Known encodings: {', '.join(sorted(constructors))}"
            )
        made = constructor()
        encoding = made if isinstance(made, Encoding) else Encoding(**made)
        ENCODINGS[encoding_name] = encoding
        return encoding


def list_encoding_names() -> list[str]:
    """The names :func:`get_encoding` knows: built in, from plugins, and registered."""
    return list(_constructors())


def register_encoding(name: str, constructor: EncodingConstructor) -> None:
    """Make ``get_encoding(name)`` build an encoding with ``constructor`` (called on first use).

    A name that is already known raises ``ValueError``. A constructor that is
    a module-level function lets the encoding pickle by name even into a
    fresh process; a lambda or closure makes it pickle its ranks instead.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"an encoding name must be a non-empty str, got {name!r}")
    if not callable(constructor):
        raise TypeError(
            f"register_encoding takes a constructor (a function returning Encoding's keyword "
            f"arguments or an Encoding), got {constructor!r}"
        )
    with _lock:
        constructors = _constructors()
        if name in constructors:
            raise ValueError(
                f"an encoding called {name!r} is already registered; choose another name"
            )
        constructors[name] = constructor
        _REGISTERED_AT_RUN_TIME[name] = constructor


def _get_or_register(name: str, constructor: EncodingConstructor) -> Encoding:
    """Unpickle an encoding registered at run time, registering it first in a new process."""
    with _lock:
        if name not in _constructors():
            register_encoding(name, constructor)
    return get_encoding(name)


def _importable(function: Callable[..., Any]) -> bool:
    """Whether pickle can find ``function`` again by its module and name."""
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    target: Any = module
    for part in getattr(function, "__qualname__", "<lambda>").split("."):
        target = getattr(target, part, None)
    return target is function


def _reduce_encoding(encoding: Encoding) -> tuple[Any, ...]:
    if ENCODINGS.get(encoding.name) is encoding:
        constructor = _REGISTERED_AT_RUN_TIME.get(encoding.name)
        if constructor is None:
            return (get_encoding, (encoding.name,))
        if _importable(constructor):
            return (_get_or_register, (encoding.name, constructor))
    by_value: tuple[Any, ...] = encoding.__reduce_ex__(2)  # type: ignore[assignment]
    return by_value


# Pickling by name needs the registry, which ``Encoding`` cannot import
# (the registry imports it), so the registry installs the reducer.
copyreg.pickle(Encoding, _reduce_encoding)
