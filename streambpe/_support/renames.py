"""Old public names that keep working after a rename, and warnings that name the caller's line.

Each old name (a keyword, or a whole function) still does exactly what the
new one does and emits a ``DeprecationWarning`` that names the new spelling.
A wrapper adds a frame between the caller and the function, so warnings
raised deeper find the caller's line with :func:`user_stacklevel`.

>>> import warnings
>>> @renamed_keyword("input_path", "inputs")
... def size(inputs: str) -> int:
...     return len(inputs)
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     size(input_path="abc"), str(caught[0].message)
(3, "size(): the keyword 'input_path' is deprecated; pass 'inputs' instead")
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar

ParamsT = ParamSpec("ParamsT")
ResultT = TypeVar("ResultT")

#: The package's folder: frames in files under it are streambpe's own.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the calling function name the user's line.

    It counts the frames above the caller up to the first one outside the
    streambpe package, however many of the package's own calls (wrappers
    included) stand between.
    """
    level = 1
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


def renamed_keyword(
    old: str, new: str
) -> Callable[[Callable[ParamsT, ResultT]], Callable[ParamsT, ResultT]]:
    """Let callers still pass the parameter ``new`` under its old keyword ``old``.

    Passing both is a ``TypeError``, as passing one argument twice is.
    """

    def decorate(function: Callable[ParamsT, ResultT]) -> Callable[ParamsT, ResultT]:
        signature = inspect.signature(function)

        @wraps(function)
        def call(*args: ParamsT.args, **kwargs: ParamsT.kwargs) -> ResultT:
            if old in kwargs:
                keywords: dict[str, Any] = dict(kwargs)
                value = keywords.pop(old)
                if new in signature.bind_partial(*args, **keywords).arguments:
                    raise TypeError(
                        f"{function.__name__}() got both {old!r} (the old name) and {new!r}; "
                        f"pass only {new!r}"
                    )
                warnings.warn(
                    f"{function.__name__}(): the keyword {old!r} is deprecated; pass {new!r} instead",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return function(*args, **{**keywords, new: value})
            return function(*args, **kwargs)

        return call

    return decorate


def renamed_function(
    function: Callable[ParamsT, ResultT], old_name: str
) -> Callable[ParamsT, ResultT]:
    """``function`` under its old name ``old_name``, warning on each call.

    >>> import warnings
    >>> def total(values: list[int]) -> int:
    ...     return sum(values)
    >>> old_total = renamed_function(total, "old_total")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old_total([1, 2]), str(caught[0].message)
    (3, 'old_total is deprecated; use total, which does the same')
    """

    @wraps(function)
    def call(*args: ParamsT.args, **kwargs: ParamsT.kwargs) -> ResultT:
        warnings.warn(
            f"{old_name} is deprecated; use {function.__name__}, which does the same",
            DeprecationWarning,
            stacklevel=2,
        )
        return function(*args, **kwargs)

    call.__name__ = call.__qualname__ = old_name
    call.__doc__ = f"Deprecated: the old name of :func:`{function.__name__}`, which does the same."
    return call
