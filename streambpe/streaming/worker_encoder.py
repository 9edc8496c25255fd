"""The encoder a worker encodes with, delivered once per worker process, never with each task.

Shipping the encoder with every task would pickle its tables each time. Two
ways avoid that:

* a pool this package starts installs the encoder with its initializer
  (:func:`install`), and tasks look it up (:func:`installed`);
* a caller's executor (a Dask cluster, say) has no initializer, so the encoder
  is staged once as a file the workers can read (:func:`staged`), and each
  task carries only an :class:`EncoderRef`: its fingerprint and that file's
  path. A worker process loads the file on its first task and keeps the
  encoder, keyed by fingerprint, for the tasks that follow.

The staged file is JSON (token bytes in base64), not a pickle: loading it runs
no code, whoever could write to the folder it sits in.

>>> install(Encoder({i: bytes([i]) for i in range(256)}, {}))
>>> installed().encode("hi")
[104, 105]
>>> import tempfile
>>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {}, {"<|x|>": 256})
>>> with staged(encoder, tempfile.mkdtemp()) as ref:
...     ref.get().encode("hi<|x|>")
[104, 105, 256]
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from streambpe._support.atomic import atomic_write
from streambpe.core.split_steps import Pretokenization, steps_from_data, steps_to_data
from streambpe.encode.encoder import Encoder
from streambpe.pipeline.documents import pipeline_document, pipeline_from_document

_encoder: Encoder | None = None

#: Encoders loaded from staged files in this process, by fingerprint, most recent last.
_loaded: OrderedDict[str, Encoder] = OrderedDict()
#: A long-lived worker serving many jobs keeps only this many vocabularies.
MAX_LOADED = 2
_loading = threading.Lock()

#: Fingerprints of the encoders seen in this process, for as long as each lives.
_fingerprints: weakref.WeakKeyDictionary[Encoder, str] = weakref.WeakKeyDictionary()

#: Tells a staged encoder file apart from any other JSON.
_FORMAT = "streambpe-encoder/1"


def install(encoder: Encoder) -> None:
    """Make ``encoder`` this process's worker encoder (a pool initializer)."""
    global _encoder
    _encoder = encoder


def installed() -> Encoder:
    """This worker's encoder; raises if no pool initializer installed one."""
    if _encoder is None:
        raise RuntimeError("this process has no worker encoder installed")
    return _encoder


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _pattern_data(pattern: Pretokenization) -> object:
    # A chain of split steps is a list of objects; a pattern stays a string.
    return pattern if isinstance(pattern, str) else steps_to_data(pattern)


def _pattern_from_data(data: object) -> Pretokenization:
    return data if isinstance(data, str) else steps_from_data(data)


def encoder_document(encoder: Encoder) -> bytes:
    """The encoder as canonical JSON: equal encoders give equal bytes, whatever their history.

    It holds exactly what rebuilds the encoder (``Encoder.__getstate__``),
    sorted, so it doubles as the input of :func:`encoder_fingerprint`.
    """
    state = encoder.__getstate__()
    document = {
        "format": _FORMAT,
        "pattern": _pattern_data(state["pattern"]),
        "cache_size": state["cache_size"],
        "special_tokens": sorted(state["special_tokens"].items()),
        "vocab": sorted((token_id, _b64(token)) for token_id, token in state["vocab"].items()),
        "ranks": sorted((_b64(token), rank) for token, rank in state["ranks"].items()),
    }
    if state["pipeline"] is not None:
        # Only when present, so other encoders keep the fingerprints they had.
        document["pipeline"] = pipeline_document(state["pipeline"])
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def encoder_fingerprint(encoder: Encoder) -> str:
    """A hash of what decides the ids: vocabulary, ranks, special tokens and pattern.

    An encoder never changes after it is built, so its fingerprint is computed
    once (a fraction of a second for a 100k vocabulary) and remembered for as
    long as the encoder lives.

    >>> a = Encoder({i: bytes([i]) for i in range(256)}, {})
    >>> b = Encoder({i: bytes([i]) for i in range(256)}, {}, pattern="cl100k")
    >>> encoder_fingerprint(a) == encoder_fingerprint(a), encoder_fingerprint(a) == encoder_fingerprint(b)
    (True, False)
    """
    fingerprint = _fingerprints.get(encoder)
    if fingerprint is None:
        fingerprint = _fingerprints[encoder] = _fingerprint_of(encoder_document(encoder))
    return fingerprint


def _fingerprint_of(document: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(document)


def _encoder_from_document(document: bytes, origin: str) -> Encoder:
    fields: dict[str, Any] = json.loads(document)
    if fields.get("format") != _FORMAT:
        raise ValueError(f"{origin} is not a staged streambpe encoder")
    encoder = Encoder.__new__(Encoder)
    encoder.__setstate__(
        {
            "vocab": {token_id: base64.b64decode(token) for token_id, token in fields["vocab"]},
            "ranks": {base64.b64decode(token): rank for token, rank in fields["ranks"]},
            "special_tokens": dict(fields["special_tokens"]),
            "pattern": _pattern_from_data(fields["pattern"]),
            "cache_size": fields["cache_size"],
            "pipeline": (
                pipeline_from_document(fields["pipeline"]) if "pipeline" in fields else None
            ),
        }
    )
    return encoder


@dataclass(frozen=True)
class EncoderRef:
    """A small, picklable stand-in for an encoder staged in a file workers can read."""

    fingerprint: str
    path: str

    def get(self) -> Encoder:
        """The encoder, loaded from :attr:`path` on first use in this process, then kept."""
        with _loading:
            encoder = _loaded.get(self.fingerprint)
            if encoder is None:
                document = Path(self.path).read_bytes()
                # A file rewritten with another encoder must not pass for this one.
                if _fingerprint_of(document) != self.fingerprint:
                    raise RuntimeError(
                        f"{self.path} no longer holds the encoder this task was planned with"
                    )
                encoder = _encoder_from_document(document, self.path)
                _loaded[self.fingerprint] = encoder
                while len(_loaded) > MAX_LOADED:
                    _loaded.popitem(last=False)
            _loaded.move_to_end(self.fingerprint)
            return encoder


@contextmanager
def staged(encoder: Encoder, folder: str | os.PathLike[str] | None) -> Iterator[EncoderRef]:
    """Write ``encoder`` into ``folder`` (or a new temporary folder) for the block's duration.

    The file's path is absolute, so workers running in another directory find it.
    """
    with ExitStack() as cleanup:
        if folder is None:
            folder = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="streambpe-"))
        document = encoder_document(encoder)
        fingerprint = _fingerprint_of(document)
        path = Path(folder).absolute() / f".streambpe-encoder-{fingerprint}.json"
        with atomic_write(path) as sink:
            sink.write(document)
        cleanup.callback(path.unlink, missing_ok=True)
        yield EncoderRef(fingerprint, str(path))
