"""The encoding peers, built offline from the repository's ``.tiktoken`` files, and id checks.

Each peer is a pip package (the ``bench`` extra) that can load tiktoken ranks
from a local file, so no vocabulary is ever downloaded:

* ``tiktoken`` itself, the reference every other result is checked against;
* ``fastokens`` (``Tokenizer.from_tiktoken(path, pattern=, special_tokens=)``);
* ``splintr`` (package ``splintr-rs``; ``Tokenizer(path, pattern, special_tokens)``).
  Its regex engine does not backtrack and rejects possessive quantifiers
  (``\\p{L}++``), so it gets the same pattern with them made greedy, which for
  these patterns matches the same pieces: the ids check below confirms it.

* ``riptoken`` (``CoreBPE(ranks, special_tokens, pattern)``, tiktoken's shape);
* ``bpe_openai`` (package ``bpe-openai``, GitHub's ``bpe`` crate): it ships the
  cl100k and o200k ranks and reads no file, so it skips r50k; it refuses a
  text of a million characters or more, or of more than 200,000 ids, so it
  skips the single-text rows and the batch rows (the generated documents
  include one of about 400,000 ids) and joins the short-call ones.

``quicktok`` was considered too: its ``BasicTokenizer`` has no pretokenization
pattern and loads only its own model files, so it cannot reproduce r50k or
cl100k from the ranks; the benchmark that tries it skips with that reason.
``toktok`` on PyPI (0.0.2, 2018) is an unrelated word tokenizer, not a BPE
encoder, so it is not a peer.

A peer's ids are compared with tiktoken's on the benchmark text before it is
timed; :func:`first_difference` says where two id lists part.

Every timed round starts cold, as ours do, and in a process of its own:
:func:`calls_in_fresh_process` builds the encoder in a freshly spawned
process, outside the clock, and times its calls there. A fresh tokenizer in
the same process is not enough: fastokens keeps its piece caches per thread of
its own thread pool (``thread_local!`` in its ``bpe.rs``), not per tokenizer,
so they outlive the tokenizer. After its ids check had encoded the 8 MiB of
o200k code, a fresh fastokens tokenizer encoded the same text at 52-68 MiB/s
where one in a new process ran at 16-25 MiB/s: its "cold" rows were warm.

fastokens also spreads one long text over threads of its own: a fresh one
encoding 8 MiB of o200k prose on this 2-CPU machine used 1.7 CPU-seconds per
second. The single-thread groups therefore pin the fresh process to one CPU
before it imports anything (``cpu=`` of :func:`calls_in_fresh_process`), so
every thread a peer starts inherits the pin, rather than trust a peer to run
on one thread.

>>> possessive_to_greedy(r" ?\\p{L}++|\\p{N}{1,3}+|[^\\r\\n]?+\\p{L}+|\\s++$")
' ?\\\\p{L}+|\\\\p{N}{1,3}|[^\\\\r\\\\n]?\\\\p{L}+|\\\\s+$'
>>> first_difference([1, 2, 3], [1, 2, 3]) is None
True
>>> first_difference([1, 2, 3], [1, 5])
'they differ first at index 1 (5 instead of 2); 2 ids instead of 3'
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import re
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ENCODE_PEERS = ("fastokens", "splintr", "riptoken", "bpe_openai")
#: Every encoder :func:`build_encoder` knows: ours, the reference and the peers.
ENCODERS = ("streambpe", "tiktoken", *ENCODE_PEERS)

# A quantifier (+, *, ?, {n}, {n,}, {n,m}) followed by "+" is possessive.
_POSSESSIVE = re.compile(r"(\+|\*|\?|\{\d+(?:,\d*)?\})\+")


class PeerUnavailable(Exception):
    """The peer is not installed or cannot be built offline from the ranks; the message says why."""


def possessive_to_greedy(pattern: str) -> str:
    """``pattern`` with its possessive quantifiers made greedy (for engines without them)."""
    return _POSSESSIVE.sub(r"\1", pattern)


def ids_digest(ids: Sequence[int]) -> str:
    """A short fingerprint of a token list, to compare results without keeping them."""
    return hashlib.blake2b(array("I", ids).tobytes(), digest_size=16).hexdigest()


def first_difference(reference: Sequence[int], ids: Sequence[int]) -> str | None:
    """None if the lists are equal, else where they first differ (for a skip or a note)."""
    if len(reference) == len(ids) and list(reference) == list(ids):
        return None
    index = next(
        (i for i, (a, b) in enumerate(zip(reference, ids, strict=False)) if a != b),
        min(len(reference), len(ids)),
    )
    found = ids[index] if index < len(ids) else "nothing"
    wanted = reference[index] if index < len(reference) else "nothing"
    return (
        f"they differ first at index {index} ({found} instead of {wanted}); "
        f"{len(ids)} ids instead of {len(reference)}"
    )


@dataclass(frozen=True)
class EncodePeer:
    """A peer tokenizer's calls, shaped like tiktoken's: ``encode`` lets special tokens through."""

    name: str
    encode: Callable[[str], list[int]]
    encode_ordinary: Callable[[str], list[int]]
    encode_batch: Callable[[list[str]], list[list[int]]]
    #: How the peer runs, for the report (threads, caches).
    how: str


def _import_peer(module: str, package: str) -> ModuleType:
    """The peer's module, or :class:`PeerUnavailable` naming the pip package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PeerUnavailable(
            f"{module} is not installed ({exc}); pip install -e '.[bench]' (package {package})"
        ) from exc


def _fastokens(path: str, pattern: str, special_tokens: dict[str, int]) -> EncodePeer:
    fastokens = _import_peer("fastokens", "fastokens")
    try:
        tokenizer = fastokens.Tokenizer.from_tiktoken(
            path, pattern=pattern, special_tokens=special_tokens
        )
    except Exception as exc:
        raise PeerUnavailable(f"fastokens cannot load {path}: {exc}") from exc

    # ``Encoding.ids`` is already a list of ints, what a user would take:
    # copying it again would charge fastokens for our wrapper.
    def encode(text: str) -> list[int]:
        return tokenizer.encode(text).ids  # type: ignore[no-any-return]

    def encode_ordinary(text: str) -> list[int]:
        return tokenizer.encode_ordinary(text).ids  # type: ignore[no-any-return]

    def encode_batch(texts: list[str]) -> list[list[int]]:
        return [encoding.ids for encoding in tokenizer.encode_batch(texts)]

    return EncodePeer("fastokens", encode, encode_ordinary, encode_batch, "cold cache")


def _splintr(path: str, pattern: str, special_tokens: dict[str, int]) -> EncodePeer:
    splintr = _import_peer("splintr", "splintr-rs")
    try:
        tokenizer = splintr.Tokenizer(path, possessive_to_greedy(pattern), special_tokens)
    except Exception as exc:
        raise PeerUnavailable(f"splintr cannot load {path} with this pattern: {exc}") from exc

    def encode(text: str) -> list[int]:
        # The chunk cache would answer repeated rounds from memory: each call starts empty.
        tokenizer.clear_cache()
        return tokenizer.encode_with_special(text)  # type: ignore[no-any-return]

    def encode_ordinary(text: str) -> list[int]:
        tokenizer.clear_cache()
        return tokenizer.encode_ordinary(text)  # type: ignore[no-any-return]

    def encode_batch(texts: list[str]) -> list[list[int]]:
        tokenizer.clear_cache()
        return tokenizer.encode_batch_with_special(texts)  # type: ignore[no-any-return]

    return EncodePeer("splintr", encode, encode_ordinary, encode_batch, "cold cache")


def _riptoken(path: str, pattern: str, special_tokens: dict[str, int]) -> EncodePeer:
    riptoken = _import_peer("riptoken", "riptoken")
    try:
        core = riptoken.CoreBPE(riptoken.load_tiktoken_bpe(path), special_tokens, pattern)
    except Exception as exc:
        raise PeerUnavailable(f"riptoken cannot load {path}: {exc}") from exc
    allowed = set(special_tokens)

    def encode(text: str) -> list[int]:
        return core.encode(text, allowed)  # type: ignore[no-any-return]

    def encode_ordinary(text: str) -> list[int]:
        return core.encode_ordinary(text)  # type: ignore[no-any-return]

    def encode_batch(texts: list[str]) -> list[list[int]]:
        return core.encode_batch(texts, allowed)  # type: ignore[no-any-return]

    return EncodePeer("riptoken", encode, encode_ordinary, encode_batch, "no cache")


def _bpe_openai(path: str, pattern: str, special_tokens: dict[str, int]) -> EncodePeer:
    """The ``bpe`` crate's encoder; it ships its own cl100k and o200k ranks and patterns.

    It loads no file and takes no pattern, so ``pattern`` goes unused here.

    Its ids are checked against tiktoken's on every text like any peer's, which
    is what shows its vocabulary is the same as the file's.
    """
    bpe_openai = _import_peer("bpe_openai", "bpe-openai")
    data = _import_peer("bpe_openai.data", "bpe-openai")
    name = Path(path).name.removesuffix(".tiktoken")
    bundled = Path(data.__file__).parent / f"{name}.tiktoken.gz"
    if not bundled.is_file():
        raise PeerUnavailable(
            f"bpe-openai ships the ranks of cl100k_base and o200k_base only, not {name} "
            "(it would download them)"
        )
    encoding = bpe_openai.get_encoding(name)

    def encode(text: str) -> list[int]:
        return encoding.encode(text, allowed_special="all")  # type: ignore[no-any-return]

    def encode_ordinary(text: str) -> list[int]:
        return encoding.encode_ordinary(text)  # type: ignore[no-any-return]

    def encode_batch(texts: list[str]) -> list[list[int]]:
        return encoding.encode_batch(texts, allowed_special="all")  # type: ignore[no-any-return]

    return EncodePeer("bpe_openai", encode, encode_ordinary, encode_batch, "no cache")


_BUILDERS: dict[str, Callable[[str, str, dict[str, int]], EncodePeer]] = {
    "fastokens": _fastokens,
    "splintr": _splintr,
    "riptoken": _riptoken,
    "bpe_openai": _bpe_openai,
}


def build_encode_peer(
    name: str, path: str, pattern: str, special_tokens: dict[str, int]
) -> EncodePeer:
    """Peer ``name`` built from the ``.tiktoken`` file at ``path``, or :class:`PeerUnavailable`."""
    return _BUILDERS[name](path, pattern, special_tokens)


def _streambpe(
    path: str, pattern: str, special_tokens: dict[str, int], backend: str | None
) -> EncodePeer:
    """Our ``Tokenizer``, its kernel for ``backend`` built here, before any clock starts."""
    import streambpe
    from streambpe.core import active_backend, using_backend

    tokenizer = streambpe.Tokenizer.from_tiktoken(
        path, pattern=pattern, special_tokens=special_tokens
    )

    def under_backend(call: Callable[[Any], Any]) -> Callable[[Any], Any]:
        # The bound method itself when the backend is the one in use: a
        # wrapper (a frame and a context manager) cost about 0.3 us of a
        # short call.
        if backend is None or backend == active_backend().name:
            return call

        def run(argument: Any) -> Any:
            with contextlib.nullcontext() if backend is None else using_backend(backend):
                return call(argument)

        return run

    under_backend(lambda _: tokenizer.cache_info())(None)  # builds the backend's kernel
    return EncodePeer(
        "streambpe",
        under_backend(tokenizer.encode),
        under_backend(tokenizer.encode_ordinary),
        under_backend(tokenizer.encode_batch),
        "cold cache" if backend is None else f"cold cache, {backend}",
    )


def _tiktoken(path: str, pattern: str, special_tokens: dict[str, int]) -> EncodePeer:
    """tiktoken itself over the ranks of ``path``: the reference, timed like the others."""
    tiktoken = _import_peer("tiktoken", "tiktoken")
    load = _import_peer("tiktoken.load", "tiktoken")
    encoding = tiktoken.Encoding(
        Path(path).name.removesuffix(".tiktoken"),
        pat_str=pattern,
        mergeable_ranks=load.load_tiktoken_bpe(path),
        special_tokens=special_tokens,
    )

    def encode(text: str) -> list[int]:
        return encoding.encode(text, allowed_special="all")  # type: ignore[no-any-return]

    def encode_batch(texts: list[str]) -> list[list[int]]:
        return encoding.encode_batch(texts, allowed_special="all")  # type: ignore[no-any-return]

    return EncodePeer("tiktoken", encode, encoding.encode_ordinary, encode_batch, "8 threads")


def build_encoder(
    name: str,
    path: str,
    pattern: str,
    special_tokens: dict[str, int],
    backend: str | None = None,
) -> EncodePeer:
    """Any of :data:`ENCODERS`: ours (under ``backend``), tiktoken or a peer."""
    if name == "streambpe":
        return _streambpe(path, pattern, special_tokens, backend)
    if name == "tiktoken":
        return _tiktoken(path, pattern, special_tokens)
    return build_encode_peer(name, path, pattern, special_tokens)


#: What every encoder encodes once, untimed, before its timed calls.
WARM_UP = "Hello, world! 123"


@dataclass(frozen=True)
class TimedCalls:
    """What :func:`calls_in_fresh_process` measured, or why the encoder would not run."""

    #: Wall time of each call, in order: the first one met an empty cache.
    seconds: list[float]
    #: :func:`ids_digest` of the last call's ids (flattened for ``encode_batch``).
    digest: str
    tokens: int
    #: Set when the peer cannot be built or refused the input (bpe-openai's size limits).
    refused: str | None = None


def _pinned_encoder(
    name: str,
    path: str,
    pattern: str,
    special_tokens: dict[str, int],
    cpu: int | None,
    backend: str | None,
) -> EncodePeer:
    """Pin this process to ``cpu`` (unless None), then :func:`build_encoder`.

    Pinned first, before any peer is imported, so the threads a peer starts
    are pinned too.
    """
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    return build_encoder(name, path, pattern, special_tokens, backend)


def calls_in_fresh_process(
    name: str,
    path: str,
    pattern: str,
    special_tokens: dict[str, int],
    method: str,
    argument: str | list[str],
    calls: int,
    cpu: int | None = None,
    backend: str | None = None,
) -> TimedCalls:
    """Build encoder ``name`` and time ``calls`` calls of ``method(argument)``.

    Meant to run in a freshly spawned process (``peak_memory.run_in_child``),
    so no cache of an earlier tokenizer, in any thread, can answer a piece.
    With ``cpu`` the process is pinned to that CPU first, before any peer is
    imported, so the threads a peer starts are pinned too.
    """
    try:
        encoder = _pinned_encoder(name, path, pattern, special_tokens, cpu, backend)
    except PeerUnavailable as exc:
        return TimedCalls([], "", 0, refused=str(exc))
    call = getattr(encoder, method)
    # First-use setup (a thread pool, a lazily compiled regex) is loading, not
    # encoding: as tiktoken's tables are built before its clock, it runs here,
    # on a few words, before the first timed call.
    try:
        call(WARM_UP if method != "encode_batch" else [WARM_UP])
    except ValueError as exc:
        return TimedCalls([], "", 0, refused=f"{name} {method} refuses a short text: {exc}")
    seconds: list[float] = []
    result: Any = None
    for _ in range(calls):
        del result
        started = time.perf_counter()
        try:
            result = call(argument)
        except ValueError as exc:  # bpe-openai refuses a million characters or 200,000 ids
            return TimedCalls(seconds, "", 0, refused=f"{name} {method} refuses the input: {exc}")
        seconds.append(time.perf_counter() - started)
    ids = [i for each in result for i in each] if method == "encode_batch" else result
    return TimedCalls(seconds, ids_digest(ids), len(ids))


def each_digest(results: Sequence[Sequence[int]]) -> str:
    """:func:`ids_digest` of a list of id lists, each list's length counted in."""
    lengths = [len(ids) for ids in results]
    return ids_digest([*lengths, *(i for ids in results for i in ids)])


def short_calls_in_fresh_process(
    name: str,
    path: str,
    pattern: str,
    special_tokens: dict[str, int],
    strings: list[str],
    rounds: int,
    cpu: int | None = None,
    backend: str | None = None,
) -> TimedCalls:
    """Build encoder ``name``, then time ``rounds`` passes of ``encode`` over ``strings``, one call each.

    A server's tokenizer is warm, so one untimed pass comes first; its ids
    give the digest (:func:`each_digest`). In the timed passes each result is
    dropped at once, as a server sends it off: kept, 100,000 lists had the
    cyclic garbage collector walk them (and whatever else the process
    held) in whichever encoder's rounds its passes fell. ``seconds`` holds
    each pass's time. Like :func:`calls_in_fresh_process`, meant for a
    freshly spawned process, pinned to ``cpu``.

    Each timed pass encodes new ``str`` objects equal to ``strings``, made
    before its clock starts, as a server's messages are new objects decoded
    from its requests. CPython keeps a ``str``'s UTF-8 in the object once
    something has asked for it, so an encoder that takes its text as UTF-8
    (fastokens, tiktoken) found it there from the second call with the same
    object on: counted with callgrind on 10,000 of the strings, fastokens'
    passes took 19,500 instructions a call over the same objects and 21,500
    over new ones.
    """
    try:
        encoder = _pinned_encoder(name, path, pattern, special_tokens, cpu, backend)
    except PeerUnavailable as exc:
        return TimedCalls([], "", 0, refused=str(exc))
    encode = encoder.encode
    warm = [encode(string) for string in strings]
    digest, tokens = each_digest(warm), sum(map(len, warm))
    del warm
    seconds: list[float] = []
    for _ in range(rounds):
        # Equal strings in new objects, with no UTF-8 kept in them yet.
        fresh = [(string + " ")[:-1] for string in strings]
        started = time.perf_counter()
        for string in fresh:
            encode(string)
        seconds.append(time.perf_counter() - started)
        del fresh
    return TimedCalls(seconds, digest, tokens)


def conversation_in_fresh_process(
    name: str,
    path: str,
    pattern: str,
    special_tokens: dict[str, int],
    turns: list[str],
    cpu: int | None = None,
    backend: str | None = None,
) -> TimedCalls:
    """Build encoder ``name`` and time ``encode_ordinary`` of a conversation, turn by turn.

    At turn ``k`` the first ``k`` turns, joined, are encoded: a chat server
    re-encodes the history with every request. ``seconds`` holds each
    turn's time; the digest is of the whole conversation's ids. Like
    :func:`calls_in_fresh_process`, meant for a freshly spawned process.
    """
    try:
        encoder = _pinned_encoder(name, path, pattern, special_tokens, cpu, backend)
    except PeerUnavailable as exc:
        return TimedCalls([], "", 0, refused=str(exc))
    encoder.encode_ordinary(WARM_UP)
    seconds: list[float] = []
    ids: list[int] = []
    for turn in range(1, len(turns) + 1):
        conversation = "".join(turns[:turn])
        started = time.perf_counter()
        try:
            ids = encoder.encode_ordinary(conversation)
        except ValueError as exc:
            return TimedCalls(seconds, "", 0, refused=f"{name} refuses the conversation: {exc}")
        seconds.append(time.perf_counter() - started)
    return TimedCalls(seconds, ids_digest(ids), len(ids))


def rounds_in_fresh_processes(
    name: str,
    path: str,
    pattern: str,
    special_tokens: dict[str, int],
    method: str,
    argument: str | list[str],
    *,
    rounds: int,
    calls: int = 1,
    one_cpu: bool = False,
    backend: str | None = None,
) -> list[TimedCalls]:
    """:func:`calls_in_fresh_process` in ``rounds`` spawned processes, one after the other.

    Stops at the first round whose encoder refused (that round is returned
    alone, with the reason). The memory sampler of ``run_in_child`` looks
    only twice a second: it runs in this process, beside the timed one.
    """
    from peak_memory import run_in_child

    cpu = single_cpu() if one_cpu else None
    results: list[TimedCalls] = []
    for _ in range(rounds):
        measured = run_in_child(
            calls_in_fresh_process,
            name,
            path,
            pattern,
            special_tokens,
            method,
            argument,
            calls,
            cpu,
            backend,
            interval=0.5,
        )
        if measured.result.refused is not None:
            return [measured.result]
        results.append(measured.result)
    return results


def single_cpu() -> int:
    """The CPU a one-CPU measurement runs on: the lowest this process may use."""
    return min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


def quicktok_unavailable_reason() -> str:
    """Why quicktok cannot be an exact peer here (checked against the installed package)."""
    import quicktok

    tokenizer_class: Any = quicktok.BasicTokenizer
    loaders = [n for n in dir(tokenizer_class) if "tiktoken" in n.lower() or "rank" in n.lower()]
    return (
        "quicktok.BasicTokenizer has no pretokenization pattern and loads only its own "
        f"model files (methods: load, train, encode; tiktoken/rank loaders: {loaders or 'none'}), "
        "so it cannot reproduce r50k or cl100k from the .tiktoken ranks"
    )


def merges_digest(merges: Sequence[tuple[bytes, bytes]]) -> str:
    """A fingerprint of a merge list (order and the split of every pair count)."""
    digest = hashlib.blake2b(digest_size=16)
    for left, right in merges:
        digest.update(len(left).to_bytes(4, "little") + left)
        digest.update(len(right).to_bytes(4, "little") + right)
    return digest.hexdigest()


def read_ffbpe_merges(path: str) -> list[tuple[bytes, bytes]]:
    """Merges from an ffbpe ``merges.txt`` in its ``gpt2`` format (``left right => count``)."""
    from streambpe.formats.byte_unicode import decode_token

    merges: list[tuple[bytes, bytes]] = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            pair = line.split(" => ", 1)[0]
            left, right = pair.split(" ")
            merges.append((decode_token(left), decode_token(right)))
    return merges


def train_ffbpe_merges(
    path: str, vocab_size: int, special_tokens: Sequence[str], pattern: str
) -> list[tuple[bytes, bytes]]:
    """Train with ffbpe, CS336 tie-break (``tie_break="largest_content"``), and return its merges.

    Words are counted by ffbpe's native pretokenizer with our pattern;
    ``vocab_size`` counts the 256 bytes and the special tokens, as ours does.
    """
    import tempfile

    import ffbpe

    specials = list(special_tokens)
    pretokenizer = ffbpe.PreTokenizer(specials, specials[0] if specials else None, pat_str=pattern)
    words = pretokenizer.get_words_from_file(path)
    trainer = ffbpe.BpeTrainer(
        specials, unit="byte", initial_alphabet="byte_level", tie_break="largest_content"
    )
    trainer.add_words(words)
    del words
    trainer.train(vocab_size)
    model = trainer.validate_model()
    with tempfile.TemporaryDirectory() as folder:
        merges_path = Path(folder) / "merges.txt"
        model.save_files(Path(folder) / "vocab.json", merges_path, format="gpt2")
        return read_ffbpe_merges(str(merges_path))
