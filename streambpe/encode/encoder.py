"""The encoding engine: text to ids and back, identical to tiktoken for the same vocabulary.

Encoding runs special-token scanning (:mod:`~streambpe.cutting.specials`), then
the pretokenizer (:mod:`~streambpe.core.pretokenize`), then the pieces-to-ids
kernel of the active backend (:mod:`streambpe.core`: a piece cache in front of
rank-based BPE). The public :class:`~streambpe.tokenizer.Tokenizer` adds
loading, saving and the streaming entry points on top of this class.

>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"hel"}
>>> encoder = Encoder(vocab, {b"he": 0, b"hel": 1}, ["<|endoftext|>"])
>>> encoder.encode("help<|endoftext|>")
[257, 112, 258]
>>> encoder.decode([257, 112, 258])
'help<|endoftext|>'
"""

from __future__ import annotations

import itertools
import threading
from array import array
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from streambpe import core
from streambpe._support import shared_work
from streambpe._support.pool import resolve_workers
from streambpe._support.text_input import require_text
from streambpe._support.utf8 import NEVER_IN_UTF8
from streambpe.core import Backend, PieceEncoding, Pretokenizing, SpecialSpan, TokenDecoding
from streambpe.core.piece_cache import CacheInfo
from streambpe.core.split_steps import Pretokenization, checked_steps
from streambpe.cutting.specials import SpecialTokenScanner, validate_special_tokens
from streambpe.cutting.splitter import StreamSplitter, bounded_chunks
from streambpe.encode.decode_stream import DecodeStream
from streambpe.encode.text_parts import (
    cut_after,
    part_specials,
    plan_parts,
    plan_parts_clear_of,
)
from streambpe.encode.thread_kernels import ThreadKernels
from streambpe.errors import ParameterError, UnknownTokenError
from streambpe.patterns import GPT2, SPACE_SPLITTABLE_PATTERNS, resolve_pattern
from streambpe.pipeline.text import TextPipeline

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

DEFAULT_CACHE_SIZE = 1 << 19
#: ``(backend, special-token call or None, ordinary call, pattern,
#: pretokenizer, special tokens, their ids)``: see ``Encoder._bind_usual_call``.
_UsualCall = tuple[
    Backend,
    Callable[..., list[int] | None] | None,
    Callable[..., None],
    Pretokenization,
    Pretokenizing,
    tuple[str, ...],
    tuple[int, ...],
]
#: Texts this long or longer are encoded on several threads (``Encoder.encode``).
PARALLEL_MIN_CHARS = 1 << 20
#: The shortest part of a text cut for several threads (the last ones are
#: about this long; see ``_encode_in_parts``).
PARTS_MIN_CHARS = 1 << 17
#: ``iter_id_batches`` encodes a long chunk in blocks of about this many characters.
STREAM_BLOCK_CHARS = 1 << 18
#: The longest slice of a stream's chunk that ``iter_id_batches`` feeds its splitter at once.
FEED_CHARS = 4 * STREAM_BLOCK_CHARS
# Texts up to this long, with up to this many special tokens, are first
# checked for any special token at all with ``in``.
_QUICK_CHECK_CHARS = 1 << 12
_QUICK_CHECK_TOKENS = 8
# Keyword policies an encoder remembers; a caller cycling through more
# (a new set per call, say) has the rest worked out each time.
_MAX_POLICIES = 64
ResultT = TypeVar("ResultT")
#: ``"all"`` or a collection of special-token strings.
SpecialSet = Literal["all"] | Collection[str]


class _Unset:
    """The default of tiktoken's keywords, so that passing either one can be told apart."""

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Final = _Unset()


def fix_surrogates(text: str) -> str:
    """tiktoken's rule: lone surrogates become U+FFFD; a valid surrogate pair, its character.

    >>> fix_surrogates("a\\ud800b")
    'a\\ufffdb'
    """
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Encoder:
    """A byte-level BPE encoder over an id -> bytes vocabulary and merge ranks.

    Args:
        vocab: id -> token bytes; must contain all 256 single bytes.
        ranks: token bytes -> merge rank (the lower merges first).
        special_tokens: strings never split or merged. A list takes the ids the
            vocab already has for them, appending any missing one with the next
            free id; a mapping gives each its id.
        pattern: pretokenization regex or name (``"gpt2"``, ``"cl100k"``, ``"o200k"``),
            or a chain of split steps (:data:`~streambpe.core.split_steps.SplitSteps`).
        cache_size: piece-cache capacity in entries (0 disables the cache).
        pipeline: a ``tokenizer.json``'s steps around the model (normalizer,
            added tokens with their options, template); the special tokens
            are then its added tokens, found as it says.
        token_ids: ``vocab`` turned around (token bytes -> id), if the caller
            built ``vocab`` from it and so holds it already (``from_ranks``);
            used only when it has as many entries as ``vocab``.
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        ranks: Mapping[bytes, int],
        special_tokens: Sequence[str] | Mapping[str, int] | None = None,
        *,
        pattern: Pretokenization = GPT2,
        cache_size: int = DEFAULT_CACHE_SIZE,
        pipeline: TextPipeline | None = None,
        token_ids: Mapping[bytes, int] | None = None,
    ) -> None:
        self.pattern: Pretokenization = (
            resolve_pattern(pattern) if isinstance(pattern, str) else checked_steps(pattern)
        )
        if cache_size < 0:
            raise ParameterError(f"cache_size must be >= 0, got {cache_size}")
        self._cache_size = cache_size
        self._ranks = dict(ranks)
        self._decoder: dict[int, bytes] = dict(vocab)
        self._special_ids = _assign_special_ids(self._decoder, special_tokens)
        special_id_set = set(self._special_ids.values())
        # Special tokens are reachable only through the scanner, never as ordinary text.
        if any(token_id in vocab for token_id in special_id_set):
            self._ordinary_vocab = {i: b for i, b in vocab.items() if i not in special_id_set}
        else:
            self._ordinary_vocab = dict(vocab)
        if (
            token_ids is not None
            and len(token_ids) == len(vocab)
            and len(self._ordinary_vocab) == len(vocab)
        ):
            # vocab is token_ids turned around, one id per token and no
            # special id among them: a copy of token_ids is the inverse,
            # without building it again (29 ms for o200k, cProfile).
            self._encoder: dict[bytes, int] = dict(token_ids)
        else:
            self._encoder = _lowest_id_of_each_token(self._ordinary_vocab)
        missing = [
            byte
            for byte in range(256)
            if bytes([byte]) not in self._encoder and byte not in NEVER_IN_UTF8
        ]
        if missing:
            raise ParameterError(
                f"the vocabulary lacks {len(missing)} single-byte token(s) (first: byte "
                f"0x{missing[0]:02x}); a byte-level BPE vocabulary needs every byte "
                "that UTF-8 text can hold"
            )
        for token, token_id in self._special_ids.items():
            self._decoder[token_id] = token.encode("utf-8")
        self.pipeline = pipeline
        if pipeline is not None:
            self._decoder.update(pipeline.decoded)
        self._scanner = SpecialTokenScanner(self._special_ids)
        # The special tokens that encode()'s one-call path checks for with
        # ``in``; None where there are too many for that (Llama 3 has 256).
        self._quick_specials: tuple[str, ...] | None = (
            self._scanner.tokens if self._kernel_asked(self._scanner) else None
        )
        # The id of each of the scanner's tokens, in its order (for the kernel).
        self._scanner_ids = tuple(self._special_ids[token] for token in self._scanner.tokens)
        # Resolved keyword policies (see _specials_policy), by _policy_key.
        self._policies: dict[tuple[Hashable, Hashable], tuple[SpecialTokenScanner, frozenset[str]]]
        self._policies = {}
        # One set of kernels per backend: switching backends (tests, benchmarks)
        # never mixes one backend's cache into another's results.
        self._kernels: dict[str, ThreadKernels] = {}
        # Per thread: encode()'s usual call, bound (see _bind_usual_call).
        self._usual_call = threading.local()
        self._token_decoders: dict[str, TokenDecoding] = {}
        # The active backend's are built now, as tiktoken and tokenizers build
        # theirs while loading: the first encode then costs only its text, not
        # the tables (o200k: 35 ms from the table cache, most of a second
        # without it), and a load that fails on them fails here. Another
        # backend's are built when it is first used.
        self._thread_kernels()

    # ----------------------------------------------------------------- pickling

    def __getstate__(self) -> dict[str, Any]:
        # What rebuilds the encoder, not its cache or compiled objects.
        return {
            "vocab": self._ordinary_vocab,
            "ranks": self._ranks,
            "special_tokens": self._special_ids,
            "pattern": self.pattern,
            "cache_size": self._cache_size,
            "pipeline": self.pipeline,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        Encoder.__init__(
            self,
            state["vocab"],
            state["ranks"],
            state["special_tokens"],
            pattern=state["pattern"],
            cache_size=state["cache_size"],
            pipeline=state.get("pipeline"),
        )

    # ----------------------------------------------------------------- properties

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special token -> id."""
        return dict(self._special_ids)

    @property
    def special_tokens_set(self) -> set[str]:
        """The special-token strings (tiktoken's name)."""
        return set(self._special_ids)

    @property
    def n_vocab(self) -> int:
        """One more than the largest id (tiktoken's definition)."""
        return max(self._decoder) + 1

    @property
    def eot_token(self) -> int | None:
        """The id of ``<|endoftext|>``, or None if there is no such special token."""
        return self._special_ids.get("<|endoftext|>")

    @property
    def releases_gil(self) -> bool:
        """Whether encoding runs without the GIL, so threads encode in parallel.

        True on the compiled backend, unless the pattern is outside what its
        matcher runs (``pretokenizer_engine``): then it goes through
        ``regex``, which holds the GIL.

        >>> Encoder({i: bytes([i]) for i in range(256)}, {}).releases_gil in (True, False)
        True
        """
        return self.pretokenizer_engine == "native"

    @property
    def pretokenizer_engine(self) -> str:
        """``"native"`` if the compiled matcher cuts the text, ``"regex"`` if the ``regex`` module does.

        :attr:`pretokenizer_fallback` says why a pattern is not native.

        >>> Encoder({i: bytes([i]) for i in range(256)}, {}, pattern=r"\\w+").pretokenizer_engine
        'regex'
        """
        return core.pretokenizer_engine(self.pattern)[0]

    @property
    def pretokenizer_fallback(self) -> str | None:
        """Why the pattern runs through ``regex`` instead of the compiled matcher (None if it does not).

        >>> Encoder({i: bytes([i]) for i in range(256)}, {}, pattern=r"a\\b").pretokenizer_fallback
        ... # doctest: +ELLIPSIS
        '...'
        """
        return core.pretokenizer_engine(self.pattern)[1]

    def _thread_kernels(self) -> ThreadKernels:
        backend = core.active_backend()
        kernels = self._kernels.get(backend.name)
        if kernels is None:
            # setdefault: two threads racing here keep the same one.
            kernels = self._kernels.setdefault(
                backend.name,
                ThreadKernels(backend, self.pattern, self._encoder, self._ranks, self._cache_size),
            )
        return kernels

    def _kernel(self) -> tuple[Pretokenizing, PieceEncoding]:
        """The calling thread's pretokenizer and piece encoder, on the active backend."""
        kernels = self._kernels.get(core.active_backend().name) or self._thread_kernels()
        return kernels.pretokenizer, kernels.piece_encoder()

    def cache_info(self) -> CacheInfo:
        """Piece-cache hits, misses and size, added up over the threads' caches.

        Each thread that encodes has a cache of its own, of ``cache_size``
        entries; this counts the active backend's. The compiled backend also
        answers text it has seen twice from a segment store beside the cache
        (``docs/design.md``, "Text encoded again"): each piece of a segment
        found there counts as a hit, so hits + misses is still the number of
        pieces encoded.
        """
        return CacheInfo(*self._thread_kernels().cache_info())

    def clear_cache(self) -> None:
        """Empty the piece caches (and segment stores) and zero their counts, for cold measurements."""
        for kernels in list(self._kernels.values()):
            kernels.clear_caches()

    # ----------------------------------------------------------------- encoding

    def _encode_ordinary_into(self, text: str, out: list[int]) -> None:
        # The thread's kernel call, bound once, as in encode(): found call by
        # call, encode_ordinary("hi") took 6,190 instructions; bound, 4,980
        # (callgrind).
        try:
            backend, _, encode_text, pattern, pretokenizer, _, _ = self._usual_call.bound
        except AttributeError:
            backend = None
        if backend is not core.active_backend():
            backend, _, encode_text, pattern, pretokenizer, _, _ = self._bind_usual_call()
        if self.pipeline is not None:
            require_text(text)
            text = self.pipeline.prepare_ordinary(text)
        encode_text(text, pattern, pretokenizer, out)

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` treating special tokens as plain text.

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
        >>> encoder.encode_ordinary("hi")
        [104, 105]
        """
        out: list[int] = []
        try:
            self._encode_ordinary_into(text, out)
        except UnicodeEncodeError:
            out.clear()
            self._encode_ordinary_into(fix_surrogates(text), out)
        return out

    def _specials_policy(
        self, allowed_special: SpecialSet | _Unset, disallowed_special: SpecialSet | _Unset
    ) -> tuple[SpecialTokenScanner, frozenset[str]]:
        """The scanner for allowed specials, and the set of disallowed ones.

        With neither keyword, every special is allowed (CS336). With either one,
        the other takes tiktoken's default, so a call written for tiktoken gets
        tiktoken's ids: ``allowed_special=set()``, ``disallowed_special="all"``.
        """
        if isinstance(allowed_special, _Unset) and isinstance(disallowed_special, _Unset):
            return self._scanner, frozenset()
        # Callers pass the same few policies again and again ("all", a set of
        # one token): working one out each time took more than encoding a chat
        # message (1.7 of 3.3 us for allowed_special="all" on 37 characters).
        key = (_policy_key(allowed_special), _policy_key(disallowed_special))
        policy = self._policies.get(key)
        if policy is None:
            policy = self._resolve_policy(allowed_special, disallowed_special)
            if len(self._policies) < _MAX_POLICIES:
                self._policies[key] = policy
        return policy

    def _resolve_policy(
        self, allowed_special: SpecialSet | _Unset, disallowed_special: SpecialSet | _Unset
    ) -> tuple[SpecialTokenScanner, frozenset[str]]:
        if self.pipeline is not None:
            raise ParameterError(
                "allowed_special and disallowed_special do not apply to a tokenizer.json's "
                "added tokens, which are always found as tokenizers finds them; "
                "use encode_ordinary to encode text without them"
            )
        allowed_arg: SpecialSet = set() if isinstance(allowed_special, _Unset) else allowed_special
        disallowed_arg: SpecialSet = (
            "all" if isinstance(disallowed_special, _Unset) else disallowed_special
        )
        known = self._special_ids.keys()
        allowed = frozenset(known) if allowed_arg == "all" else frozenset(allowed_arg)
        unknown = allowed - known
        if unknown:
            raise ParameterError(
                f"allowed_special names {sorted(unknown)!r}, which are not special tokens of "
                f"this tokenizer (it has {sorted(known)!r})"
            )
        if disallowed_arg == "all":
            disallowed = frozenset(known - allowed)
        else:
            disallowed = frozenset(disallowed_arg)
        scanner = self._scanner if allowed == known else _scanner_for(allowed)
        return scanner, disallowed

    @staticmethod
    def _check_disallowed(text: str, disallowed: frozenset[str]) -> None:
        if not disallowed:
            return
        found = _scanner_for(disallowed).first_match(text)
        if found is not None:
            token = found.token
            raise ParameterError(
                f"the text contains the special token {token!r}, which is disallowed.\n"
                f"To encode it as a special token, pass allowed_special={{{token!r}}} "
                "(or allowed_special='all').\n"
                "To encode it as ordinary text, pass disallowed_special=() "
                f"(or leave {token!r} out of disallowed_special)."
            )

    def encode(
        self,
        text: str,
        *,
        allowed_special: SpecialSet | _Unset = UNSET,
        disallowed_special: SpecialSet | _Unset = UNSET,
        add_special_tokens: bool = False,
        threads: int | None = None,
    ) -> list[int]:
        """Encode ``text``; with no keyword, every special token is recognized (CS336).

        With either of tiktoken's keywords the behaviour is tiktoken's, the
        other keyword taking tiktoken's default: special tokens not in
        ``allowed_special`` (default: none) are plain text, and any in
        ``disallowed_special`` (default ``"all"``: every special not allowed)
        raise ``ValueError``.

        ``add_special_tokens=True`` puts the ids of a ``tokenizer.json``'s
        post-processor template around the result (a BOS token, say); a
        tokenizer without a template adds nothing.

        A text of :data:`PARALLEL_MIN_CHARS` characters or more is cut at safe
        places and its parts encoded on ``threads`` threads when the kernel
        runs without the GIL (and no ``tokenizer.json`` pipeline rewrites the
        text); the ids are the same for any number of threads. By default the
        main thread uses one thread per available core and any other thread
        (a worker of a pool) only itself; ``threads=1`` keeps to the calling
        thread.

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {}, ["<s>"])
        >>> encoder.encode("a<s>"), encoder.encode("a<s>", disallowed_special=())
        ([97, 256], [97, 60, 115, 62])
        """
        try:
            short = len(text) < PARALLEL_MIN_CHARS
        except TypeError:
            require_text(text)
            raise
        if allowed_special is UNSET and disallowed_special is UNSET and threads is None and short:
            # The usual call, a chat message or a document, in as few Python
            # steps as it can take: the thread's kernel call, bound once (see
            # _bind_usual_call). Through the steps below, encode("hi") took
            # 7,950 instructions, 4,480 more than the kernel call alone; this
            # way it takes 5,870, and a chat-sized o200k call (263 bytes on
            # average) 24,000 instead of 26,000 (callgrind, warm cache).
            try:
                backend, encode_usual, _, pattern, pretokenizer, tokens, ids = (
                    self._usual_call.bound
                )
            except AttributeError:
                backend = None
            if backend is not core.active_backend():
                backend, encode_usual, _, pattern, pretokenizer, tokens, ids = (
                    self._bind_usual_call()
                )
            if encode_usual is not None:
                try:
                    usual_ids: list[int] | None = encode_usual(
                        text, pattern, pretokenizer, tokens, ids
                    )
                except UnicodeEncodeError:
                    usual_ids = None  # a lone surrogate: the general path replaces it
                if usual_ids is not None:
                    return usual_ids
        if self._quick_specials is not None and (threads == 1 or (threads is None and short)):
            # A short text with keywords, threads=1, or the pure backend: one
            # kernel call still finds the special tokens (the compiled kernel;
            # the pure one declines a text that has any) and encodes. The steps of
            # _run_with_policy in Python took as long as encoding a short
            # message (1.2 of 1.8 us for "hello there").
            if allowed_special is UNSET and disallowed_special is UNSET:
                scanner = self._scanner
            else:
                scanner, disallowed = self._specials_policy(allowed_special, disallowed_special)
                self._check_disallowed(text, disallowed)
            try:
                return self._encode_recognizing(scanner, text)
            except UnicodeEncodeError:
                return self._encode_recognizing(scanner, fix_surrogates(text))
        if (
            allowed_special is UNSET
            and disallowed_special is UNSET
            and threads is None
            and self.pipeline is None
            and short
        ):
            # Many special tokens to look for: the steps of _run_with_policy,
            # without its calls.
            try:
                return self._encode_with(self._scanner, text)
            except UnicodeEncodeError:
                return self._encode_with(self._scanner, fix_surrogates(text))
        if threads is not None and threads < 1:
            raise ParameterError(f"threads must be at least 1, got {threads}")
        run = self._encode_recognizing
        if not short and threads != 1 and self.pipeline is None and self.releases_gil:
            # Unasked, only the main thread spreads out: a worker of a pool
            # (encode_batch, encode_file) already has the other cores busy.
            workers = threads or (
                resolve_workers(None)
                if threading.current_thread() is threading.main_thread()
                else 1
            )
            if workers > 1:
                # A partial, not a closure: a closure over ``self`` made it a
                # cell, created on every call, short ones included.
                run = partial(self._encode_in_parts, workers=workers)

        ids = self._run_with_policy(run, text, allowed_special, disallowed_special)
        template = self.pipeline.template if self.pipeline is not None else None
        if add_special_tokens and template is not None:
            return template.apply(ids)
        return ids

    def _encode_in_parts(self, scanner: SpecialTokenScanner, text: str, workers: int) -> list[int]:
        """``_encode_with`` on ``workers`` threads: the text cut where no piece crosses."""
        # Parts that shrink, from a quarter of the text for two threads down
        # to PARTS_MIN_CHARS: a thread that drew slow text takes fewer, and
        # the last parts are short, so the threads finish together.
        share = 2 * workers
        if self.space_cuts and self._kernel_finds(scanner):
            # Each part finds its own special tokens: the cuts keep clear of
            # every occurrence, so the parts find what the whole text holds,
            # and no (start, end, id) tuple is made per special token.
            parts = plan_parts_clear_of(
                text, scanner.tokens, part_chars=PARTS_MIN_CHARS, share=share
            )
            specials: list[SpecialSpan] | None = None
        else:
            specials = self._special_spans(scanner, text)
            parts = plan_parts(
                text,
                specials,
                part_chars=PARTS_MIN_CHARS,
                space_cuts=self.space_cuts,
                share=share,
            )

        def encode_part(bounds: tuple[int, int]) -> list[int]:
            start, end = bounds
            if specials is None:
                return self._encode_recognizing(scanner, text[start:end])
            kernels = self._thread_kernels()
            out: list[int] = []
            kernels.piece_encoder().encode_text(
                text[start:end],
                self.pattern,
                kernels.pretokenizer,
                out,
                part_specials(specials, start, end),
            )
            return out

        if len(parts) == 1:
            return encode_part(parts[0])
        # Each part's ids join the ones before as soon as it is done, here,
        # while the threads encode what is left: joined only at the end, they
        # kept both threads idle for 7 % of the time (move_part in
        # core/_native_glue.hpp). The results list alone holds a part until
        # then, so its ids move rather than being copied.
        results: list[list[int] | None] = [None] * len(parts)

        def encode_into_results(index: int) -> None:
            results[index] = encode_part(parts[index])

        move_id_part = core.active_backend().move_id_part
        joined: list[int] = []
        # This thread encodes parts too, and joins each between its own.
        for index in shared_work.in_order(len(parts), encode_into_results, threads=workers):
            move_id_part(joined, results, index)
        return joined

    def _bind_usual_call(self) -> _UsualCall:
        """The calling thread's kernel calls for ``encode(text)`` and ``encode_ordinary``, bound once.

        ``(backend, usual, ordinary, pattern, pretokenizer, tokens, ids)``:
        ``usual(text, pattern, pretokenizer, tokens, ids)`` gives the ids of
        ``text`` with every special token recognized, or None where the
        general path must decide; ``ordinary(text, pattern, pretokenizer,
        out)`` appends the ids of ``text`` with none recognized. ``usual`` is
        None where there is no such call: the backend has no special-token
        matcher of its own (the pure one), or ``encode`` may not hand it the
        special tokens (a pipeline, or too many of them). Kept per thread,
        since each thread encodes through its own kernel
        (:mod:`~streambpe.encode.thread_kernels`), until another backend
        becomes the active one.
        """
        backend = core.active_backend()
        kernels = self._thread_kernels()
        kernel = kernels.piece_encoder()
        finds_specials = self._quick_specials is not None and backend.special_matches is not None
        usual = kernel.encode_with_specials if finds_specials else None
        bound: _UsualCall = (
            backend,
            usual,
            kernel.encode_text,
            self.pattern,
            kernels.pretokenizer,
            self._scanner.tokens,
            self._scanner_ids,
        )
        self._usual_call.bound = bound
        return bound

    def _kernel_finds(self, scanner: SpecialTokenScanner) -> bool:
        """Whether the kernel finds ``scanner``'s special tokens itself (its compiled matcher)."""
        return self._kernel_asked(scanner) and core.active_backend().special_matches is not None

    def _kernel_asked(self, scanner: SpecialTokenScanner) -> bool:
        """Whether ``encode_with_specials`` may be given ``scanner``'s tokens: few, no pipeline."""
        return self.pipeline is None and len(scanner.tokens) <= _QUICK_CHECK_TOKENS

    def _encode_recognizing(self, scanner: SpecialTokenScanner, text: str) -> list[int]:
        """``_encode_with``, the kernel finding ``scanner``'s special tokens where it can.

        The compiled kernel keeps the matches to itself (see
        ``PieceEncoder.encode_with_specials``). A kernel without a matcher is
        still asked first for a short text, which mostly holds none: it
        declines one that has any, which then takes :meth:`_encode_with`.
        """
        # _kernel_finds and _kernel_asked, written out: this runs on every
        # short encode, and the two calls took about 100 ns of the 900 that
        # encode("hi") took.
        backend = core.active_backend()
        tokens = scanner.tokens
        if (
            self.pipeline is None
            and len(tokens) <= _QUICK_CHECK_TOKENS
            and (backend.special_matches is not None or len(text) <= _QUICK_CHECK_CHARS)
        ):
            kernels = self._kernels.get(backend.name) or self._thread_kernels()
            ids = kernels.piece_encoder().encode_with_specials(
                text,
                self.pattern,
                kernels.pretokenizer,
                tokens,
                self._scanner_ids
                if tokens is self._scanner.tokens
                else tuple(self._special_ids[token] for token in tokens),
            )
            if ids is not None:
                return ids
        return self._encode_with(scanner, text)

    def _run_with_policy(
        self,
        run: Callable[[SpecialTokenScanner, str], ResultT],
        text: str,
        allowed_special: SpecialSet | _Unset,
        disallowed_special: SpecialSet | _Unset,
    ) -> ResultT:
        """``run(scanner, text)`` under tiktoken's keywords: the shared steps of every output.

        A disallowed special token raises first; a lone surrogate (which has no
        UTF-8) makes the kernel raise, and the text is then run again with
        :func:`fix_surrogates` applied, tiktoken's rule.
        """
        require_text(text)
        if allowed_special is UNSET and disallowed_special is UNSET:
            # The usual call; resolving the keywords was a tenth of a short encode.
            scanner = self._scanner
        else:
            scanner, disallowed = self._specials_policy(allowed_special, disallowed_special)
            self._check_disallowed(text, disallowed)
        try:
            return run(scanner, text)
        except UnicodeEncodeError:
            return run(scanner, fix_surrogates(text))

    def _special_spans(self, scanner: SpecialTokenScanner, text: str) -> list[SpecialSpan]:
        """``(start, end, id)`` of each special token ``scanner`` finds in ``text``, in order.

        The kernel encodes the text between them: one call per text, and no
        slice of it (a call per stretch had cost a sixth of encoding prose
        with a special token per document).
        """
        if not scanner:
            return []
        tokens = scanner.tokens
        special_ids = self._special_ids
        if len(tokens) <= _QUICK_CHECK_TOKENS and len(text) <= _QUICK_CHECK_CHARS:
            # Most short texts hold no special token, and most others one kind:
            # str's own search says so, and finds them, in a fraction of the
            # scanner's cost (a third of a chat-sized encode). The loop first:
            # a comprehension is a call of its own, and most texts stop here.
            for token in tokens:
                if token in text:
                    break
            else:
                return []
            present = [token for token in tokens if token in text]
            if len(present) == 1:
                # With one token the leftmost-longest parse is each occurrence
                # in turn, from the end of the one before.
                token = present[0]
                token_id = special_ids[token]
                spans = []
                start = text.find(token)
                while start >= 0:
                    spans.append((start, start + len(token), token_id))
                    start = text.find(token, start + len(token))
                return spans
        native_matches = core.active_backend().special_matches
        if native_matches is not None:
            return [
                (start, end, special_ids[tokens[index]])
                for start, end, index in native_matches(text, tokens)
            ]
        return [
            (match.start, match.end, special_ids[match.token]) for match in scanner.matches(text)
        ]

    def _encode_with(self, scanner: SpecialTokenScanner, text: str) -> list[int]:
        # _append_with, unrolled: every Python call here is a few per cent of
        # encoding a chat message.
        kernels = self._kernels.get(core.active_backend().name) or self._thread_kernels()
        text, specials = self._prepared(scanner, text)
        out: list[int] = []
        kernels.piece_encoder().encode_text(text, self.pattern, kernels.pretokenizer, out, specials)
        return out

    def _prepared(self, scanner: SpecialTokenScanner, text: str) -> tuple[str, list[SpecialSpan]]:
        """The text the kernel encodes and its special spans (a pipeline's rewrites applied)."""
        if self.pipeline is not None:
            return self.pipeline.prepare(text)
        return text, self._special_spans(scanner, text)

    def _append_with(self, scanner: SpecialTokenScanner, text: str, out: list[int]) -> None:
        pretokenizer, pieces = self._kernel()
        text, specials = self._prepared(scanner, text)
        pieces.encode_text(text, self.pattern, pretokenizer, out, specials)

    def encode_each(
        self,
        texts: Sequence[str],
        *,
        allowed_special: SpecialSet | _Unset = UNSET,
        disallowed_special: SpecialSet | _Unset = UNSET,
    ) -> list[list[int]]:
        """``[self.encode(text, ...) for text in texts]`` (same keywords), in this thread.

        The compiled kernel encodes all the texts in one call, with the GIL
        released once rather than once per text: this is what each thread of
        ``encode_batch`` runs. The keywords are checked against every text
        first, so a disallowed special token raises for the first text that
        holds one, as ``encode`` text by text would. A text of
        :data:`PARALLEL_MIN_CHARS` characters or more, a lone surrogate or a
        ``tokenizer.json`` pipeline takes :meth:`encode` text by text.

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {}, ["<s>"])
        >>> encoder.encode_each(["a<s>", "b"])
        [[97, 256], [98]]
        >>> encoder.encode_each(["a<s>"], disallowed_special=())
        [[97, 60, 115, 62]]
        """
        for text in texts:
            require_text(text)
        if self.pipeline is None and all(len(text) < PARALLEL_MIN_CHARS for text in texts):
            if allowed_special is UNSET and disallowed_special is UNSET:
                scanner, special_ids = self._scanner, self._scanner_ids
            else:
                scanner, disallowed = self._specials_policy(allowed_special, disallowed_special)
                for text in texts:
                    self._check_disallowed(text, disallowed)
                special_ids = tuple(self._special_ids[token] for token in scanner.tokens)
            kernels = self._kernels.get(core.active_backend().name) or self._thread_kernels()
            try:
                ids = kernels.piece_encoder().encode_many(
                    list(texts),
                    self.pattern,
                    kernels.pretokenizer,
                    tuple(scanner.tokens),
                    special_ids,
                )
            except UnicodeEncodeError:
                ids = None  # encode() repairs the surrogates text by text
            if ids is not None:
                return ids
        return [
            self.encode(
                text, allowed_special=allowed_special, disallowed_special=disallowed_special
            )
            for text in texts
        ]

    def encode_into(
        self,
        text: str,
        out: list[int],
        *,
        allowed_special: SpecialSet | _Unset = UNSET,
        disallowed_special: SpecialSet | _Unset = UNSET,
    ) -> int:
        """Append the ids of ``text`` to ``out``; returns how many were appended.

        The ids are :meth:`encode`'s (same keywords), written straight into
        ``out``: a caller that gathers the ids of many texts in one list saves
        building a list per text and copying it over. On any error ``out`` is
        left as it was.

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {}, ["<s>"])
        >>> ids = [1]
        >>> encoder.encode_into("a<s>", ids), ids
        (2, [1, 97, 256])
        """
        if not isinstance(out, list):
            raise TypeError(f"encode_into appends to a list, got {type(out).__name__}")
        start = len(out)

        def append(scanner: SpecialTokenScanner, text: str) -> int:
            # A run stopped by a lone surrogate has appended part of its ids;
            # the policy then runs again on the repaired text.
            del out[start:]
            self._append_with(scanner, text, out)
            return len(out) - start

        try:
            return self._run_with_policy(append, text, allowed_special, disallowed_special)
        except BaseException:
            del out[start:]
            raise

    def encode_to_array(
        self,
        text: str,
        *,
        allowed_special: SpecialSet | _Unset = UNSET,
        disallowed_special: SpecialSet | _Unset = UNSET,
    ) -> array[int]:
        """``encode`` into an ``array('I')`` of uint32 ids, without a Python int per id.

        The array supports the buffer protocol (``memoryview``, ``numpy.frombuffer``,
        ``file.write``); the keywords are those of :meth:`encode`.

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {}, ["<s>"])
        >>> encoder.encode_to_array("a<s>")
        array('I', [97, 256])
        """
        return self._run_with_policy(
            self._encode_to_array_with, text, allowed_special, disallowed_special
        )

    def _encode_to_array_with(self, scanner: SpecialTokenScanner, text: str) -> array[int]:
        out = array("I")
        pretokenizer, pieces = self._kernel()
        text, specials = self._prepared(scanner, text)
        pieces.encode_text_array(text, self.pattern, pretokenizer, out, specials)
        return out

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: SpecialSet | _Unset = UNSET,
        disallowed_special: SpecialSet | _Unset = UNSET,
    ) -> npt.NDArray[np.uint32]:
        """``encode`` into a numpy ``uint32`` array (tiktoken's method; needs numpy).

        The array shares the memory of :meth:`encode_to_array`'s result: no copy.

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
        >>> encoder.encode_to_numpy("hi").tolist()
        [104, 105]
        """
        try:
            import numpy as np
        except ImportError:
            raise ImportError(
                "encode_to_numpy needs numpy: pip install numpy "
                "(or use encode_to_array, which needs nothing)"
            ) from None
        ids = self.encode_to_array(
            text, allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        return np.frombuffer(ids, dtype=np.uint32)

    def count_tokens(
        self,
        text: str,
        *,
        allowed_special: SpecialSet | _Unset = UNSET,
        disallowed_special: SpecialSet | _Unset = UNSET,
    ) -> int:
        """``len(encode(text))``, without building the ids; the keywords are :meth:`encode`'s.

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {}, ["<s>"])
        >>> encoder.count_tokens("ab<s>"), encoder.count_tokens("ab<s>", disallowed_special=())
        (3, 5)
        """
        return self._run_with_policy(self._count_with, text, allowed_special, disallowed_special)

    def _count_with(self, scanner: SpecialTokenScanner, text: str) -> int:
        pretokenizer, pieces = self._kernel()
        text, specials = self._prepared(scanner, text)
        return pieces.count_text(text, self.pattern, pretokenizer, specials)

    def encode_single_piece(self, piece: bytes) -> list[int]:
        """BPE on ``piece`` as one piece: no pattern split, no special tokens.

        >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"he"}
        >>> Encoder(vocab, {b"he": 0}).encode_single_piece(b"he he")
        [256, 32, 256]
        """
        return self._kernel()[1].encode_bytes(piece)

    def stream_splitter(self, min_release: int | None = None) -> StreamSplitter:
        """A :class:`StreamSplitter` matching this encoder's specials, pattern and pipeline.

        ``min_release`` overrides the splitter's default (tests cut tiny texts).
        """
        options: dict[str, Any] = {} if min_release is None else {"min_release": min_release}
        if self.pipeline is None:
            return StreamSplitter(list(self._special_ids), space_cuts=self.space_cuts, **options)
        return StreamSplitter(
            [token.content for token in self.pipeline.raw_tokens],
            space_cuts=self.space_cuts,
            cut_tokens=self.cut_tokens,
            safe_start=self.pipeline.is_safe_start,
            **options,
        )

    @property
    def space_cuts(self) -> bool:
        """Whether streams and files may be cut inside text, not only at special tokens.

        Only under a built-in pattern, and only where a ``tokenizer.json``'s
        steps allow it (:meth:`TextPipeline.cuts_inside_stretches`).
        """
        if self.pattern not in SPACE_SPLITTABLE_PATTERNS:
            return False
        return self.pipeline is None or self.pipeline.cuts_inside_stretches()

    @property
    def cut_tokens(self) -> list[str]:
        """The special tokens at whose start a stream or file may be cut.

        Every special token, except that a ``tokenizer.json``'s added token
        is one only when it is matched in the raw text and no added token
        looks at the text next to it (``lstrip``, ``rstrip``, ``single_word``):
        otherwise a cut could change what such a token takes.
        """
        if self.pipeline is None:
            return list(self._special_ids)
        raw = self.pipeline.raw_tokens
        if any(token.looks_around for token in self.pipeline.added_tokens):
            return []
        return [token.content for token in raw]

    def iter_id_batches(self, iterable: Iterable[str]) -> Iterator[list[int]]:
        """Encode a stream of text chunks, yielding the ids a block of text at a time.

        The ids equal ``encode`` of the concatenated text, however it is sliced,
        and memory stays bounded.

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
        >>> list(encoder.iter_id_batches(["a\\n", "\\n b"]))
        [[97, 10, 10, 32, 98]]
        """
        splitter = self.stream_splitter()
        for chunk in bounded_chunks(iterable, FEED_CHARS):
            ready = splitter.feed(chunk)
            if ready:
                yield from self._encode_in_blocks(ready)
        rest = splitter.finish()
        if rest:
            yield from self._encode_in_blocks(rest)

    def _encode_in_blocks(self, text: str) -> Iterator[list[int]]:
        """The ids of ``text``, a block of about :data:`STREAM_BLOCK_CHARS` characters at a time.

        A stream handed over in one huge chunk still gets its first ids as
        soon as its first block is encoded, not once the whole chunk is.
        """
        if len(text) <= STREAM_BLOCK_CHARS or self.pipeline is not None:
            yield self.encode(text, threads=1)
            return
        scanner, special_ids = self._scanner, self._special_ids
        start = 0
        while len(text) - start > STREAM_BLOCK_CHARS:
            # Special tokens are looked for a window at a time, so the first
            # block does not wait for a scan of the whole text.
            window_end = min(len(text), start + 2 * STREAM_BLOCK_CHARS)
            spans = [
                (match.start, match.end, special_ids[match.token])
                for match in scanner.matches(text, start, window_end)
            ]
            cut = cut_after(text, spans, start + STREAM_BLOCK_CHARS, space_cuts=self.space_cuts)
            if cut + scanner.max_length > window_end and window_end < len(text):
                break  # no cut the window can vouch for: plan the rest at once
            yield self.encode(text[start:cut], threads=1)
            start = cut
        rest = text[start:]
        parts = plan_parts(
            rest,
            self._special_spans(scanner, rest),
            part_chars=STREAM_BLOCK_CHARS,
            space_cuts=self.space_cuts,
        )
        for first, end in parts:
            yield self.encode(rest[first:end], threads=1)

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode a stream of text chunks (a file object, lines, any slices).

        Memory stays bounded and the ids equal ``encode`` of the concatenated text,
        however the text is sliced.

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
        >>> list(encoder.encode_iterable(["a\\n", "\\n b"])) == encoder.encode("a\\n\\n b")
        True
        """
        # chain steps through each batch in C; a generator's ``yield from``
        # re-entered Python once per id, which cost as much as the encoding.
        return itertools.chain.from_iterable(self.iter_id_batches(iterable))

    # ----------------------------------------------------------------- decoding

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of ``ids``; an unknown id raises :class:`UnknownTokenError` naming it.

        >>> Encoder({i: bytes([i]) for i in range(256)}, {}).decode_bytes([104, 105])
        b'hi'
        """
        try:
            return self._token_decoder().decode_bytes(ids)
        except KeyError as exc:
            raise UnknownTokenError(exc.args[0], self.n_vocab) from None

    def _token_decoder(self) -> TokenDecoding:
        """The active backend's decoding kernel (it keeps no state, so threads share it)."""
        backend = core.active_backend()
        decoder = self._token_decoders.get(backend.name)
        if decoder is None:
            decoder = self._token_decoders.setdefault(
                backend.name, backend.token_decoder(self._decoder)
            )
        return decoder

    def decode(
        self, ids: Iterable[int], errors: str = "replace", *, skip_special_tokens: bool = False
    ) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD by default.

        ``skip_special_tokens`` leaves out special tokens (for a ``tokenizer.json``,
        its added tokens marked ``special``; the others are decoded).

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {}, ["<s>"])
        >>> encoder.decode([256, 104, 105]), encoder.decode([256, 104], skip_special_tokens=True)
        ('<s>hi', 'h')
        """
        if skip_special_tokens:
            skipped = (
                self.pipeline.special_ids
                if self.pipeline is not None
                else frozenset(self._special_ids.values())
            )
            ids = [token_id for token_id in ids if token_id not in skipped]
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token id."""
        return self.decode_bytes([token_id])

    def decode_stream(self, errors: str = "replace") -> DecodeStream:
        """An incremental decoder: feed ids one at a time, get text once it is whole UTF-8.

        For streaming generation, where a character may be split over
        several tokens (see :class:`~streambpe.encode.decode_stream.DecodeStream`).

        >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
        >>> stream = encoder.decode_stream()
        >>> [stream.step(i) for i in "é!".encode()]
        [None, 'é', '!']
        """
        return DecodeStream(self._decoder, self.n_vocab, errors=errors)


def _assign_special_ids(
    vocab: Mapping[int, bytes], special_tokens: Sequence[str] | Mapping[str, int] | None
) -> dict[str, int]:
    if isinstance(special_tokens, Mapping):
        validate_special_tokens(special_tokens)
        for token, token_id in special_tokens.items():
            known = vocab.get(token_id)
            if known is not None and known != token.encode("utf-8"):
                raise ParameterError(
                    f"special token {token!r} is given id {token_id}, which the vocabulary "
                    f"already uses for {known!r}"
                )
        return dict(special_tokens)
    ids: dict[str, int] = {}
    next_id = max(vocab, default=-1) + 1
    # A single byte stays an ordinary token: a special spelled like one gets a new id.
    id_of = {token: token_id for token_id, token in vocab.items() if len(token) > 1}
    for token in validate_special_tokens(special_tokens):
        existing = id_of.get(token.encode("utf-8"))
        if existing is None:
            existing, next_id = next_id, next_id + 1
        ids[token] = existing
    return ids


def _lowest_id_of_each_token(vocab: Mapping[int, bytes]) -> dict[bytes, int]:
    """Token bytes -> id; where several ids share the same bytes, the lowest.

    >>> _lowest_id_of_each_token({7: b"a", 3: b"a", 5: b"b"})
    {b'a': 3, b'b': 5}
    """
    inverse = dict(zip(vocab.values(), vocab.keys(), strict=True))
    if len(inverse) == len(vocab):
        # No bytes twice, so nothing to choose: this skips a sort of the whole
        # vocabulary, a fifth of loading o200k.
        return inverse
    return {token: token_id for token_id, token in sorted(vocab.items(), reverse=True)}


def _policy_key(value: SpecialSet | _Unset) -> Hashable:
    """``value`` as a key of Encoder._policies: a set (unhashable) as its frozenset."""
    return value if isinstance(value, (str, frozenset, _Unset)) else frozenset(value)


@lru_cache(maxsize=64)
def _scanner_for(tokens: frozenset[str]) -> SpecialTokenScanner:
    # Sorted so that the same set always builds the same automaton.
    return SpecialTokenScanner(sorted(tokens))
