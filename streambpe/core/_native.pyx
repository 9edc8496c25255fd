# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The compiled backend's glue: Python objects in, native arrays to the kernels, results out.

Each kernel gives the same results as the pure-Python module it mirrors, for
every input, and lives in a plain C++ header (no Python API, so it runs
without the GIL); this module only converts between Python objects and native
arrays and decides when to hold the GIL, as tiktoken's ``py.rs`` does beside
its ``lib.rs``. Each header is declared in the ``.pxd`` of the same name:

- ``_merge_loop_impl.hpp``, :mod:`~streambpe.core.merge_loop`: ``MergeState``,
  behind :func:`learn_merges`.
- ``_pretokenize_impl.hpp``, :mod:`~streambpe.core.pretokenize`: the scanners of
  the built-in patterns and ``ClassTable``, behind :class:`Pretokenizer`.
- ``_pattern_compiler_impl.hpp``, :mod:`~streambpe.core.pattern_compiler`: the
  matcher of compiled programs (``PatternProgram``), behind :class:`Pretokenizer`.
- ``_counting_impl.hpp``, :mod:`streambpe.train.counting`: ``WordCounts``,
  behind :meth:`Pretokenizer.count_into`.
- ``_piece_encoder_impl.hpp``, :mod:`~streambpe.core.piece_encoder`:
  ``TextEncoder`` with its ``PieceCache``, behind :class:`PieceEncoder`;
  ``PieceMerger``, :func:`streambpe.core.bpe.merge_piece`; and ``TokenBytes``,
  :mod:`~streambpe.core.token_decoder`, behind :class:`TokenDecoder`.
- ``_specials_impl.hpp``, :mod:`streambpe.cutting.specials`: special tokens
  found in a str without the GIL, behind :func:`special_matches`.
- ``_hash_table.hpp``, shared by the above: hashing, memory for big tables, and
  the pair table ``U64Map``.
- ``_table_image.hpp``, :mod:`streambpe._support.table_cache`: built tables as
  bytes, which that cache keeps.
- ``_native_glue.hpp``, this module: the Python lists filled from native arrays,
  and :func:`move_id_part` (it alone uses the Python API, with the GIL held).

The native classes carry their Python twins' names. :class:`Pretokenizer` runs
the GPT-2, cl100k_base or o200k_base pattern on a hand-written scanner, directly
on the str's own buffer (1, 2 or 4 bytes per character), and any other pattern
on the compiled matcher. The character classes come from the installed
``regex`` module (:mod:`streambpe.core.unicode_classes`), so the result is
``regex``'s, for every string:

>>> import regex
>>> from streambpe.patterns import CL100K
>>> text = "Hello, wörld's 4242!\\n\\n  x"
>>> Pretokenizer(CL100K).pieces(text) == regex.findall(CL100K, text)
True

:meth:`PieceEncoder.encode_text` scans and encodes in one pass, without a str
per piece. Its cache is bounded like the reference's but built otherwise
(``PieceCache``, set-associative, where the reference's ``TwoGenerationCache``
keeps two generations): what each evicts, and so its hit counts, may differ;
the ids never do.
"""

from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_Check,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from cpython.dict cimport PyDict_Next, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.unicode cimport (
    PyUnicode_DATA,
    PyUnicode_FromObject,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
)
from libc.stdint cimport INT64_MAX, UINT32_MAX, int64_t, uint8_t, uint16_t, uint32_t
from libc.string cimport memcpy
from libcpp cimport bool as cbool
from libcpp.memory cimport make_shared, shared_ptr, unique_ptr
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.vector cimport vector

from streambpe.core._counting_impl cimport WordCounts, WordCountsEntry
from streambpe.core._merge_loop_impl cimport MergeState
from streambpe.core._native_glue cimport (
    RecordWriter,
    extend_ids,
    reserve_ids,
    move_part,
    piece_list,
    unmade_ints,
)
from streambpe.core._pattern_compiler_impl cimport BaseTable, PatternProgram, Regex
from streambpe.core._piece_encoder_impl cimport (
    EncodeOutcome, EncodeProblem, PieceCache, PieceMerger, SegmentStore, TextEncoder, TokenBytes,
)
from streambpe.core._table_memory cimport advise_huge_pages
from streambpe.core._table_memory cimport kept_table_memory as _keep_table_memory
from streambpe.core._specials_impl cimport Match, find_matches_of_kind
from streambpe.core._pretokenize_impl cimport (
    Builtin, ClassTable, Pattern, builtin_pattern, compiled_pattern, count_pieces, piece_ends,
)
from streambpe.core._python_api cimport (
    PyDict_GetItemWithError, PyEval_RestoreThread, PyEval_SaveThread,
    PyLong_AsLongLongAndOverflow, PyObject_CheckBuffer, PyObject_GC_Track, PyObject_GC_UnTrack,
    PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8, PyUnicode_FindChar, PyUnicode_IS_ASCII,
    PyUnicode_READ_CHAR, PyUnicode_READY,
)
from streambpe.core._table_image cimport image_tag

import operator
from array import array

from streambpe._support.table_cache import content_key, read_table, write_table
from streambpe._support.text_input import not_text_error
from streambpe.core.unicode_classes import base_table, class_table
from streambpe.patterns import CL100K, GPT2, NAMED_PATTERNS, O200K


def learn_merges(word_counts, Py_ssize_t max_merges, on_merge=None):
    """Learn up to ``max_merges`` merges, in order, from word counts ``{word: count}``.

    Gives exactly what ``merge_loop.learn_merges_from_words`` gives for the same
    words spelled as UTF-8 bytes (words under two bytes hold no pair and are
    skipped): the most frequent pair first, ties to the greater
    ``(left_bytes, right_bytes)``; stops early when no pair is left.

    **Consumes** ``word_counts``: once every word is copied into native arrays
    the dict is cleared, so only one copy of the words is alive at the peak.
    ``word_counts`` is a ``dict`` (a ``Counter`` will do); counts must be
    positive integers. A word with a lone surrogate raises
    ``UnicodeEncodeError`` (before the dict is cleared).

    The loop runs without the GIL. If ``on_merge`` is given, it is called with
    the GIL once after each merge; an exception from it stops the loop and
    propagates (that is how Ctrl-C and cancellation get in). Without it the
    whole loop runs in one stretch that cannot be interrupted.
    """
    if not isinstance(word_counts, dict):
        raise TypeError(f"word_counts must be a dict, not {type(word_counts).__name__}")
    if max_merges < 0:
        raise ValueError(f"max_merges must be >= 0, got {max_merges}")
    cdef MergeState loop
    cdef Py_ssize_t position = 0
    cdef PyObject* key
    cdef PyObject* value
    cdef const char* data
    cdef Py_ssize_t size
    cdef int64_t count
    cdef int64_t total = 0  # pair occurrences weighted by count: bounds every pair count
    while PyDict_Next(word_counts, &position, &key, &value):
        data = PyUnicode_AsUTF8AndSize(<object>key, &size)
        if size < 2:
            continue
        count = <object>value
        if count < 1:
            raise ValueError(f"word counts must be positive; {<object>key!r} has {count}")
        if count > (INT64_MAX - total) // (size - 1):
            raise OverflowError("the word counts add up to more than 2**63 - 1 pairs")
        total += count * (size - 1)
        loop.add_word(<const uint8_t*>data, size, count)
    word_counts.clear()

    cdef size_t made = 0
    cdef cbool found
    with nogil:
        loop.build()
    if on_merge is None:
        with nogil:
            made = loop.run(max_merges)
    else:
        while made < <size_t>max_merges:
            with nogil:
                found = loop.step()
            if not found:
                break
            made += 1
            on_merge()

    cdef list merges = []
    cdef bytes left, right
    cdef pair[uint32_t, uint32_t] merge
    for merge in loop.merges():
        left = loop.token(merge.first)
        right = loop.token(merge.second)
        merges.append((left, right))
    return merges


cdef uint32_t _checked_u32(object number, str what, bytes token) except? 0xFFFFFFFF:
    if not 0 <= number < 2**32:
        raise ValueError(f"{what} {number!r} of token {token!r} is outside 0 .. 2**32 - 1")
    return number


# --------------------------------------------------------------------------- pretokenizer

_PATTERNS = {GPT2: Builtin.GPT2, CL100K: Builtin.CL100K, O200K: Builtin.O200K}

cdef unique_ptr[ClassTable] _table
cdef unique_ptr[ClassTable] _no_classes
cdef unique_ptr[BaseTable] _base


cdef const ClassTable* _shared_table() except NULL:
    """The native copy of :func:`class_table`, built on first use (under the GIL)."""
    global _table
    cdef const uint16_t[::1] block_of
    cdef const uint16_t[::1] blocks
    if not _table:
        # Building runs Python code, so another thread may build one meanwhile;
        # the first one stored stays (a reset would free a table in use).
        python_table = class_table()
        block_of = python_table.block_of
        blocks = python_table.blocks
        if not _table:
            _table.reset(
                new ClassTable(&block_of[0], block_of.shape[0], &blocks[0], blocks.shape[0])
            )
    return _table.get()


cdef const ClassTable* _empty_table() except NULL:
    """A class table with no class: what a compiled program, which has its own, is handed."""
    global _no_classes
    cdef vector[uint16_t] block_of = vector[uint16_t](0x110000 // 256, 0)
    cdef vector[uint16_t] blocks = vector[uint16_t](256, 0)
    if not _no_classes:
        _no_classes.reset(new ClassTable(block_of.data(), block_of.size(), blocks.data(), blocks.size()))
    return _no_classes.get()


cdef const BaseTable* _shared_base() except NULL:
    """The native copy of :func:`~streambpe.core.unicode_classes.base_table` (built once)."""
    global _base
    cdef const uint16_t[::1] block_of
    cdef const uint8_t[::1] blocks
    if not _base:
        python_table = base_table()
        block_of = python_table.block_of
        blocks = python_table.blocks
        if not _base:
            _base.reset(new BaseTable(&block_of[0], block_of.shape[0], &blocks[0], blocks.shape[0]))
    return _base.get()


cdef int _add_regex(PatternProgram* program, compiled) except -1:
    """Copy one :class:`~streambpe.core.pattern_compiler.Program` into ``program``."""
    cdef Regex* regex = &program.add_regex()
    cdef const uint32_t[::1] code = array("I", compiled.code)
    for klass in compiled.classes:
        regex.add_class(klass.base_mask, klass.negated)
        for low, high in klass.ranges:
            regex.add_range(low, high)
    regex.set_code(&code[0], code.shape[0])
    for first, start in compiled.branches:
        regex.add_branch(first, start)
    return 0


# Characters a chain scans per call before it may hand its ids over (see
# PatternProgram::scan: a chain can only pause where its first step cuts).
cdef size_t _CHAIN_WINDOW = 1 << 16


cdef inline str _plain_str(object text):
    """``text`` as an exact str: a str subclass (``numpy.str_``, say) as a copy.

    The entry points below read the str's buffer, which any str has, but a
    ``str`` parameter in Cython admits only exact strs; tiktoken and HF
    ``tokenizers`` take subclasses, so these do too. Anything else is a
    TypeError that names its type (``_support/text_input``'s, the message of
    every entry point).
    """
    if type(text) is str:
        return <str>text
    if isinstance(text, str):
        return PyUnicode_FromObject(text)
    raise not_text_error(text)


def class_bits(str text):
    """The class bits (see ``unicode_classes.CLASS_BITS``) of each character of ``text``.

    For tests: this is the native lookup the scanners use.

    >>> class_bits("a1 ")
    [17, 2, 4]
    """
    cdef const ClassTable* table = _shared_table()
    return [table[0](<uint32_t>ord(char)) for char in text]


cdef int _piece_spans(
    Pattern pattern, const ClassTable* table, str text, vector[size_t]& starts,
    vector[size_t]& ends,
) except -1:
    """Where each piece of ``text`` starts and ends (code-unit offsets), scanned without the GIL.

    ``starts`` stays empty when the pieces cover the text (the built-in patterns).
    """
    PyUnicode_READY(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef const void* data = PyUnicode_DATA(text)
    cdef size_t length = PyUnicode_GET_LENGTH(text)
    # A piece is at least one character; reserve for typical prose (~4 per piece).
    ends.reserve(length // 4 + 16)
    with nogil:
        piece_ends(pattern, table[0], kind, data, length, starts, ends)
    return 0


cdef class Pretokenizer:
    """Cuts text into pieces exactly as ``regex.findall``, or as a chain of split steps.

    ``pattern`` is one of the pattern strings of :mod:`streambpe.patterns`
    (``GPT2``, ``CL100K``, ``O200K``) or a name for one (``"cl100k_base"``),
    which run on hand-written scanners; any other pattern string, or a
    :data:`~streambpe.core.split_steps.SplitSteps` chain, is compiled by
    :mod:`~streambpe.core.pattern_compiler`, which raises
    ``UnsupportedPatternError`` for what it cannot run.

    >>> Pretokenizer(r"\\p{L}+|\\p{N}{1,2}").pieces("ab 123 c")
    ['ab', '12', '3', 'c']
    """

    cdef Pattern _pattern
    cdef const ClassTable* _table
    cdef unique_ptr[PatternProgram] _program
    cdef readonly object pattern

    def __init__(self, pattern):
        cdef PatternProgram* program
        resolved = NAMED_PATTERNS.get(pattern.lower(), pattern) if isinstance(pattern, str) else pattern
        self.pattern = resolved
        if isinstance(resolved, str) and resolved in _PATTERNS:
            self._pattern = builtin_pattern(_PATTERNS[resolved])
            self._table = _shared_table()
            return
        # Imported here: the built-in patterns never need the compiler.
        from streambpe.core.pattern_compiler import compile_pretokenizer

        compiled = compile_pretokenizer(resolved)
        self._program.reset(new PatternProgram())
        program = self._program.get()
        for regex in compiled.programs:
            _add_regex(program, regex)
        for index, behavior, invert in compiled.steps:
            program.add_step(index, behavior, invert)
        program.finish(_shared_base()[0])
        self._pattern = compiled_pattern(program, <size_t>-1)
        self._table = _empty_table()

    cdef Pattern _encoding_pattern(self):
        """The pattern for the fused encoder, which hands ids over a block at a time."""
        cdef Pattern pattern = self._pattern
        if self._program and self._program.get().is_chain():
            pattern.window = _CHAIN_WINDOW
        return pattern

    cdef cbool _is_chain(self):
        return <cbool>self._program and self._program.get().is_chain()


    def pieces(self, text_object):
        """All pieces of ``text``, in order: ``regex.findall(self.pattern, text)``.

        >>> Pretokenizer("gpt2").pieces("Hello world's  end")
        ['Hello', ' world', "'s", ' ', ' end']
        """
        cdef str text = _plain_str(text_object)
        cdef vector[size_t] starts, ends
        _piece_spans(self._pattern, self._table, text, starts, ends)
        return piece_list(text, starts, ends)

    def count_into(self, texts, counts not None):
        """Add how often each piece of the strs ``texts`` occurs to ``counts`` (``{piece: count}``).

        The same as ``counts[piece] = counts.get(piece, 0) + 1`` for each piece
        of each text, but every text is scanned and its pieces counted without
        the GIL, and only distinct pieces (over all the texts) become strs.
        ``texts`` is any iterable of strs, consumed once (one document each,
        so that no piece spans two).

        >>> counts = {"the": 1}
        >>> Pretokenizer("gpt2").count_into(["the cat", "the"], counts)
        >>> sorted(counts.items())
        [(' cat', 1), ('the', 3)]
        """
        if not isinstance(counts, dict):
            raise TypeError(f"counts must be a dict, not {type(counts).__name__}")
        cdef unique_ptr[WordCounts] words
        words.reset(new WordCounts())
        cdef int kind
        cdef const void* data
        cdef size_t length
        cdef cbool ascii
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strs, not {type(text).__name__}")
            PyUnicode_READY(text)
            kind = PyUnicode_KIND(text)
            data = PyUnicode_DATA(text)
            length = PyUnicode_GET_LENGTH(text)
            ascii = PyUnicode_IS_ASCII(text)
            with nogil:
                words.get().add_text(self._pattern, self._table[0], kind, data, length, ascii)
        cdef const vector[WordCountsEntry]* entries = &words.get().entries()
        cdef const char* keys = words.get().keys()
        cdef size_t index
        cdef const WordCountsEntry* entry
        cdef PyObject* known
        for index in range(entries.size()):
            entry = &entries[0][index]
            if entry.count == 0:
                continue
            piece = PyUnicode_DecodeUTF8(keys + entry.offset, entry.length, "surrogatepass")
            known = PyDict_GetItemWithError(counts, piece)
            if known == NULL:
                PyDict_SetItem(counts, piece, <object>entry.count)
            else:
                PyDict_SetItem(counts, piece, <object>known + <object>entry.count)

    def piece_count(self, text_object):
        """How many pieces ``text`` has: ``len(self.pieces(text))``, without building them.

        >>> Pretokenizer("o200k").piece_count("Hello world")
        2
        """
        cdef str text = _plain_str(text_object)
        PyUnicode_READY(text)
        cdef int kind = PyUnicode_KIND(text)
        cdef const void* data = PyUnicode_DATA(text)
        cdef size_t length = PyUnicode_GET_LENGTH(text)
        cdef size_t count
        with nogil:
            count = count_pieces(self._pattern, self._table[0], kind, data, length)
        return count


# --------------------------------------------------------------------------- encoding

# Texts shorter than this (in characters) are searched holding the GIL.
cdef size_t _SEARCH_WITH_GIL = 1 << 12
# From this many characters on, encode_with_specials searches for every
# special token with the compiled matcher, without first asking ``in``
# which of them the text holds.
cdef size_t _MATCH_EVERY_TOKEN = 1 << 16


cdef int _searched_tokens(tuple tokens, vector[vector[uint32_t]]& searched) except -1:
    """Append each of ``tokens`` (non-empty strings, else ValueError) as code points."""
    cdef vector[uint32_t] code_points
    for token in tokens:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special tokens must be non-empty strings, got {token!r}")
        code_points.clear()
        for char in <str>token:
            code_points.push_back(<uint32_t>ord(char))
        searched.push_back(code_points)
    return 0


def special_matches(text_object, tuple tokens not None):
    """``(start, end, index)`` of each match of ``tokens`` in ``text``, without the GIL.

    The compiled twin of :meth:`streambpe.cutting.specials.SpecialTokenScanner.matches`
    (``index`` says which token): leftmost first, the longest where several
    start at one place, none overlapping. Tokens must be non-empty strings.

    >>> special_matches("xabcd ab", ("ab", "abc", "bcd"))
    [(1, 4, 1), (6, 8, 0)]
    """
    cdef str text = _plain_str(text_object)
    cdef vector[vector[uint32_t]] searched
    _searched_tokens(tokens, searched)
    PyUnicode_READY(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef const void* data = PyUnicode_DATA(text)
    cdef size_t length = PyUnicode_GET_LENGTH(text)
    cdef vector[Match] found
    if length >= _SEARCH_WITH_GIL:
        with nogil:
            find_matches_of_kind(kind, data, length, searched, found)
    else:
        find_matches_of_kind(kind, data, length, searched, found)
    return [(match.start, match.end, match.token) for match in found]


def move_id_part(list joined not None, list parts not None, Py_ssize_t index):
    """Appends the ids of ``parts[index]`` to ``joined`` and puts None in its place.

    The compiled twin of :func:`streambpe.core.piece_encoder.move_id_part`:
    a part that nothing else holds gives its items up without a reference
    count changing, and a big one is copied without the GIL, so ``joined``
    must be the caller's own list (see ``move_part`` in ``_native_glue.hpp``).

    >>> joined, parts = [], [[1, 2], [3]]
    >>> move_id_part(joined, parts, 0); move_id_part(joined, parts, 1)
    >>> joined, parts
    ([1, 2, 3], [None, None])
    """
    move_part(joined, parts, index)


# What PieceEncoder._run does with the ids: append them to a list or an
# array('I'), or only count them.
cdef enum:
    _LIST, _ARRAY, _COUNT

# Ids produced per stretch without the GIL for a list, then handed over
# with it. A text of up to about four times as many characters is encoded
# in one stretch, and its ids reach the list only after: writing them
# block by block between stretches of encoding (65,536 ids, as before) let
# each side push the other's tables and int objects out of the caches.
# Cold o200k, 8 MiB of prose (2.77 M ids), seven fresh tokenizers a
# process, perf: the hand-over took 15-21 ms a call against 8-10, and BPE
# 75 against 69.
cdef size_t _LIST_BLOCK = 1 << 22
# Ids written into a list between two chances for other threads to take the
# GIL, so handing over a long stretch does not stall them for its length;
# and ids produced per stretch for an array or a count, which make no int
# objects to lose from the caches.
cdef size_t _HAND_OVER = 1 << 16


def id_block_sizes(block=None, hand_over=None):
    """The pair (:data:`_LIST_BLOCK`, :data:`_HAND_OVER`); each value given (above 0) replaces its own.

    For tests, which shrink both to reach, on small texts, the paths of
    texts with millions of ids; returns the pair in force before the call.

    >>> before = id_block_sizes(block=100)
    >>> id_block_sizes(*before)[0]
    100
    """
    global _LIST_BLOCK, _HAND_OVER
    previous = (_LIST_BLOCK, _HAND_OVER)
    for value in (block, hand_over):
        if value is not None and value < 1:
            raise ValueError(f"block sizes must be at least 1, got {value}")
    if block is not None:
        _LIST_BLOCK = block
    if hand_over is not None:
        _HAND_OVER = hand_over
    return previous


def kept_table_memory(limit=None):
    """The pair (bytes of freed table memory kept now, the most kept); ``limit`` sets the most.

    Freed tables' memory is kept, up to the limit (128 MiB unless set), for
    the next table of the same size: a new tokenizer, a new thread's cache
    or a cache after ``clear_cache`` then reuses pages the process already
    has instead of faulting in fresh ones. ``kept_table_memory(0)`` hands
    everything kept back to the system and keeps nothing more. Where tables
    are not mapped on their own (outside Linux) nothing is kept: ``(0, 0)``.

    >>> limit = kept_table_memory()[1]
    >>> kept_table_memory(0)
    (0, 0)
    >>> kept_table_memory(limit)[1] == limit
    True
    """
    cdef size_t limit_now = 0
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be at least 0, got {limit}")
    cdef size_t wanted = <size_t>-1 if limit is None else <size_t>limit
    kept = _keep_table_memory(wanted, limit_now)
    return kept, limit_now

# Texts shorter than this (in characters) are encoded holding the GIL, which
# only saves its hand-over. It was 4,096: then a third of the text of an
# encode_batch of documents (median 3,400 characters) held the GIL, and two
# threads used 1.45 CPUs instead of 1.6 (10 % slower); on chat-sized calls
# the hand-over did not show.
cdef size_t _SHORT_TEXT = 1 << 8


# Vocabularies of this many ranked tokens or more keep their built tables in
# the table cache (streambpe._support.table_cache); smaller ones build in
# well under a millisecond, quicker than a file is read.
IMAGE_MIN_TOKENS = 4096
# Which build wrote an image: another build's tables may be laid out otherwise.
_IMAGE_TAG = (<bytes>image_tag()).decode("ascii")


cdef inline uint32_t _u32_of(object number, str what, object token) except? 0xFFFFFFFF:
    """``number`` as a 32-bit value, or the ValueError of :func:`_checked_u32`."""
    cdef long long value
    cdef int overflow = 0
    if type(number) is int:
        value = PyLong_AsLongLongAndOverflow(number, &overflow)
        if overflow == 0 and 0 <= value <= UINT32_MAX:
            return <uint32_t>value
    return _checked_u32(number, what, token)


cdef inline int _put_record(RecordWriter* writer, object token, uint32_t value) except -1:
    """Write ``value``, the length of ``token`` (bytes) and its bytes as the next record."""
    if not PyBytes_Check(token):
        raise TypeError(f"tokens must be bytes, got {type(token).__name__}")
    cdef Py_ssize_t length = PyBytes_GET_SIZE(token)
    if length > UINT32_MAX:
        raise ValueError("tokens of 4 GiB or more are not supported")
    writer.put(value, PyBytes_AS_STRING(token), <uint32_t>length)
    return 0


cdef void _add_records(PieceMerger* merger, const string& content, size_t outputs) noexcept nogil:
    """Give ``merger`` the records of ``content``: ``outputs`` token ids, then the ranks."""
    cdef const char* at = content.data()
    cdef const char* end = at + content.size()
    cdef uint32_t header[2]
    cdef size_t index = 0
    while at < end:
        memcpy(header, at, sizeof(header))
        at += sizeof(header)
        if index < outputs:
            merger.add_output(<const uint8_t*>at, header[1], <uint32_t>index)
        else:
            merger.add_rank(<const uint8_t*>at, header[1], header[0])
        at += header[1]
        index += 1


cdef cbool _load_image(PieceMerger* merger, image) except *:
    """Load the tables from ``image`` (a buffer or None); False if there is none or it is not whole."""
    if image is None:
        return False
    cdef const uint8_t[::1] data = image
    if data.shape[0] == 0:
        return False
    return merger.load(&data[0], data.shape[0])


cdef cbool _encode_block(
    TextEncoder* state, Pattern pattern, const ClassTable* table, int kind, const void* data,
    size_t length, cbool ascii, cbool count_only, size_t block, size_t budget,
    const vector[size_t]& special_starts, const vector[size_t]& special_ends,
    const vector[uint32_t]& special_outputs, size_t& start, size_t& next_special, size_t& counted,
    vector[uint32_t]& outputs, EncodeProblem& problem,
) except * nogil:
    """Encode from ``start`` until about ``block`` outputs are in ``outputs``.

    ``budget`` is what the kernel may produce before it pauses (``block``,
    or no limit for a scan that pauses by itself).

    One step of :meth:`PieceEncoder._run`: the stretches of ordinary text
    between the special tokens (``special_starts``/``special_ends``), and the
    special tokens themselves as the output numbers ``special_outputs``.
    Advances ``start``, ``next_special`` and ``counted``; True once the text
    is done or ``problem`` stopped it.
    """
    cdef size_t special_count = special_starts.size()
    cdef size_t stretch_end
    while True:
        stretch_end = special_starts[next_special] if next_special < special_count else length
        if start < stretch_end:
            problem = state.encode_text(
                pattern, table[0], kind, data, stretch_end, ascii, outputs, start, budget,
                count_only,
            )
            counted += problem.counted
            if problem.outcome != EncodeOutcome.OK:
                return True
            start = problem.stopped
            if start < stretch_end:  # the block is full, the stretch is not done
                return False
        if next_special == special_count:
            return True
        if count_only:
            counted += 1
        else:
            outputs.push_back(special_outputs[next_special])
        start = special_ends[next_special]
        next_special += 1
        if outputs.size() >= block:
            return False


cdef class _Vocabulary:
    """The immutable part of a :class:`PieceEncoder`, shared by its forks.

    Holds the native merger and the token ids as Python ints (the native side
    speaks in "output" numbers, indexes into ``ids``), and as 32-bit values for
    buffer results.
    """

    cdef shared_ptr[const PieceMerger] merger
    cdef list ids
    cdef vector[uint32_t] id_values

    def __cinit__(self, dict encoder not None, dict ranks not None):
        self.ids = []
        # Out of the cyclic collector's sight for good: it holds only ints, so
        # no cycle, and tracked it had every full collection of the process
        # walk its items (200,000 for o200k) for as long as the tokenizer lived.
        PyObject_GC_UnTrack(self.ids)
        # Everything the tables are built from, in one string: the input of a
        # build, and what names its image in the table cache.
        cdef string content
        # Room for records of tokens of up to eight bytes, most of them.
        cdef unique_ptr[RecordWriter] writer = unique_ptr[RecordWriter](
            new RecordWriter(content, 16 * (len(encoder) + len(ranks)))
        )
        cdef Py_ssize_t position = 0
        cdef PyObject* key_object
        cdef PyObject* value_object
        cdef uint32_t number
        # PyDict_Next, not items(): a tuple per entry also woke the garbage
        # collector, which then walked every object of the process.
        while PyDict_Next(encoder, &position, &key_object, &value_object):
            number = _u32_of(<object>value_object, "token id", <object>key_object)
            _put_record(writer.get(), <object>key_object, number)
            self.ids.append(<object>value_object if type(<object>value_object) is int
                            else int(number))
            self.id_values.push_back(number)
        cdef size_t outputs = self.id_values.size()
        position = 0
        while PyDict_Next(ranks, &position, &key_object, &value_object):
            number = _u32_of(<object>value_object, "rank", <object>key_object)
            _put_record(writer.get(), <object>key_object, number)
        writer.get().finish()
        cdef shared_ptr[PieceMerger] building = make_shared[PieceMerger]()
        key = None
        if len(ranks) >= IMAGE_MIN_TOKENS:
            key = content_key(
                "vocabulary", PyBytes_FromStringAndSize(content.data(), content.size())
            )
            if _load_image(building.get(), read_table(key, _IMAGE_TAG)):
                self.merger = <shared_ptr[const PieceMerger]>building
                return
            building = make_shared[PieceMerger]()
        # Most of the build (sorting, every split of every token) touches no
        # Python object: an event loop or other threads keep running meanwhile.
        with nogil:
            _add_records(building.get(), content, outputs)
            building.get().finish()
        self.merger = <shared_ptr[const PieceMerger]>building
        if key is not None:
            image = building.get().save()
            write_table(key, _IMAGE_TAG, PyBytes_FromStringAndSize(image.data(), image.size()))

    cdef object missing_part(self, uint32_t unit):
        """The ``KeyError`` for a BPE part the encoder has no id for."""
        cdef const PieceMerger* merger = self.merger.get()
        return KeyError((<const char*>merger.unit_bytes(unit))[:merger.unit_length(unit)])


cdef class PieceEncoder:
    """Encodes pieces to token ids like ``bpe.merge_piece`` plus an encoder lookup.

    ``encoder`` maps token bytes to ids (below 2**32); ``ranks`` maps mergeable
    token bytes to ranks (below 2**32; lower merges first). A piece that is a
    key of ``encoder`` is that one id; otherwise it is split by rank-based BPE
    and each part looked up in ``encoder`` (a missing part raises ``KeyError``).

    Results of BPE are cached per piece, at most ``cache_size`` pieces (0
    disables the cache), least recently used out first within each small set
    of entries (see ``PieceCache`` in ``_piece_encoder_impl.hpp``).

    One object serves one thread at a time: :meth:`encode_text` works without
    the GIL, on this object's own cache. :meth:`fork` makes another for another
    thread, sharing the (read-only) vocabulary; a second thread entering a
    busy object gets ``RuntimeError`` rather than a corrupted cache.

    >>> encoder = {bytes([i]): i for i in range(256)} | {b"ab": 256}
    >>> kernel = PieceEncoder(encoder, {b"ab": 0}, 8)
    >>> out = []
    >>> kernel.encode_text("abc ab", GPT2, None, out)
    >>> out, kernel.count_text("abc ab", GPT2, None)
    ([256, 99, 32, 256], 4)
    """

    cdef _Vocabulary vocabulary
    cdef unique_ptr[TextEncoder] state
    cdef Py_ssize_t cache_size
    cdef cbool busy
    cdef cbool clear_when_done
    # The int objects this encoder puts in lists: the vocabulary's, or, in a
    # fork, copies of its own, each made the first time it is used (see
    # _id_objects and _extend).
    cdef list ids
    # What _native_scan resolved last, for these very objects: an encoder
    # passes the same pattern and pretokenizer on every call, and resolving
    # them again (dictionary lookups, the class table) was a fifth of the
    # kernel's work on a short text.
    cdef object scan_pattern
    cdef object scan_pretokenizer
    cdef Pattern scanned
    cdef const ClassTable* scan_table
    cdef object __weakref__

    def __cinit__(self, dict encoder, dict ranks, Py_ssize_t cache_size, *, _Vocabulary shared=None):
        if cache_size < 0:
            raise ValueError(f"cache size must be >= 0, got {cache_size}")
        if shared is None:
            if encoder is None or ranks is None:
                raise TypeError("encoder and ranks must be dicts")
            shared = _Vocabulary(encoder, ranks)
            self.ids = shared.ids
        else:
            self.ids = None  # a fork: its own id objects, made on first use
        self.vocabulary = shared
        self.cache_size = cache_size
        self.state.reset(new TextEncoder(shared.merger, cache_size))

    cdef list _id_objects(self):
        """The id objects to put in lists: the vocabulary's, or a fork's own copies.

        Every id put in a list has its reference count written. Two threads
        handing out the same int objects wrote the same cache lines from two
        cores, turn by turn: two threads encoding to lists ran 1.16-1.36x as
        fast as one, against 1.77-1.91x with objects of their own (r50k,
        warm, measured). A fork therefore has its own: each id's int is made
        the first time the fork puts that id in a list, 32 bytes an id used;
        equal ints, so no caller can tell but by ``is`` (``unmade_ints`` and
        ``extend_ids`` in ``_native_glue.hpp``, small ints included). The
        list holds NULL for the ints not made yet, so it never leaves this
        class.
        """
        if self.ids is None:
            self.ids = unmade_ints(self.vocabulary.id_values.size())
        return self.ids

    cdef int _extend(self, list out, list specials, const uint32_t* outputs, size_t count) except -1:
        """Append to ``out`` the ids of ``count`` output numbers (``specials`` as in ``extend_ids``)."""
        cdef list ids = self._id_objects()
        # A fork's own list makes its ints as they are first used.
        cdef const uint32_t* values = NULL
        if ids is not self.vocabulary.ids:
            values = self.vocabulary.id_values.data()
        return extend_ids(out, ids, specials, outputs, count, values)

    cdef int _hand_over(
        self, list out, list specials, const uint32_t* outputs, size_t count, cbool release,
    ) except -1:
        """:meth:`_extend`, :data:`_HAND_OVER` ids at a time, letting go of the GIL between.

        The GIL is let go only if ``release``: a short text's ids are one hand-over anyway.
        Room for all ``count`` ids is made first (``reserve_ids``), in one allocation.
        """
        cdef size_t done = 0
        cdef size_t step
        if count > _HAND_OVER:
            reserve_ids(out, count)
        while True:
            step = min(count - done, _HAND_OVER)
            self._extend(out, specials, outputs + done, step)
            done += step
            if done == count:
                return 0
            if release:
                PyEval_RestoreThread(PyEval_SaveThread())

    def fork(self):
        """A new encoder for another thread: the same vocabulary, an empty cache of the same size."""
        return PieceEncoder(None, None, self.cache_size, shared=self.vocabulary)

    cdef int _enter(self) except -1:
        if self.busy:
            raise RuntimeError(
                "this PieceEncoder is in use by another thread; give each thread its own "
                "(PieceEncoder.fork)"
            )
        self.busy = True
        return 0

    cdef void _leave(self):
        self.busy = False
        if self.clear_when_done:
            self.clear_when_done = False
            self.state.get().cache().clear()

    def encode_pieces(self, list pieces not None, list out not None):
        """Append the ids of each piece (a ``str``) to ``out``, in order.

        A piece with a lone surrogate raises ``UnicodeEncodeError``, and a piece
        whose parts are not all in the encoder raises ``KeyError``; either way
        ``out`` keeps the ids of the pieces before it, so a caller that retries
        must clear ``out`` first.
        """
        self._enter()
        cdef vector[uint32_t] outputs
        cdef EncodeProblem problem
        cdef Py_ssize_t i = 0
        cdef Py_ssize_t size
        cdef const uint8_t* data
        try:
            # The length is re-read each time: the conversion below can run
            # arbitrary code (a finalizer during garbage collection).
            while i < PyList_GET_SIZE(pieces):
                data = <const uint8_t*>PyUnicode_AsUTF8AndSize(<object>PyList_GET_ITEM(pieces, i), &size)
                if not self.state.get().encode_piece(data, size, outputs, problem):
                    break
                i += 1
        finally:
            self._leave()
            self._extend(out, [], outputs.data(), outputs.size())
        self._raise_for(problem, None)

    cdef size_t _run(
        self, str text, Pattern scanned, const ClassTable* table, object out, int mode,
        list specials,
    ) except? 0:
        """Encode ``text`` scanned natively: append ids to ``out`` or, for COUNT, count them.

        ``specials`` (or None) lists the special tokens in ``text`` as ``(start,
        end, id)``, in order: the text between them is ordinary, and each one's
        id comes between the ids of its neighbours. The text is never sliced:
        the stretches between special tokens are encoded in place, one after
        the other without the GIL, and a special token is an output number
        past the vocabulary's in the same block of outputs. A call, a copy and
        a hand-over per stretch had cost a sixth of encoding prose with a
        special token per document.
        """
        PyUnicode_READY(text)
        cdef size_t length = PyUnicode_GET_LENGTH(text)
        # The spans are checked and copied before the text is read without the GIL.
        cdef vector[size_t] special_starts, special_ends
        cdef vector[uint32_t] special_values
        cdef list special_ids = []
        if specials is not None:
            _read_specials(
                specials, length, special_starts, special_ends, special_values, special_ids
            )
        cdef size_t special_count = special_starts.size()
        # Output numbers from here on stand for the special tokens, one per occurrence.
        cdef size_t first_special = self.vocabulary.id_values.size()
        if first_special + special_count > UINT32_MAX:
            raise ValueError("too many special tokens in one text for 32-bit output numbers")
        cdef vector[uint32_t] special_outputs
        cdef size_t occurrence
        for occurrence in range(special_count):
            special_outputs.push_back(<uint32_t>(first_special + occurrence))
        return self._run_spans(
            text, scanned, table, out, mode, special_starts, special_ends, special_outputs,
            special_values, special_ids,
        )

    cdef size_t _run_spans(
        self, str text, Pattern scanned, const ClassTable* table, object out, int mode,
        const vector[size_t]& special_starts, const vector[size_t]& special_ends,
        const vector[uint32_t]& special_outputs, const vector[uint32_t]& special_values,
        list special_ids,
    ) except? 0:
        """:meth:`_run` with the special tokens given as checked, in-order spans.

        Special token ``k`` spans ``special_starts[k]:special_ends[k]`` and is
        output number ``special_outputs[k]``; output number ``v + n`` past the
        vocabulary's ``n`` is the id ``special_ids[v]`` (``special_values[v]``
        as a 32-bit value).

        The ids are produced in blocks without the GIL (of about
        :data:`_LIST_BLOCK` for a list, :data:`_HAND_OVER` otherwise), and
        each block is handed to ``out`` with it, so memory beyond ``out``
        stays within 16 MiB however long the text is (a list holds 8 bytes
        an id itself).
        """
        cdef size_t block = _LIST_BLOCK if mode == _LIST else _HAND_OVER
        # A chain pauses by itself (at a window's end), never when a block fills.
        cdef size_t budget = block if scanned.window == <size_t>-1 else <size_t>-1
        cdef int kind = PyUnicode_KIND(text)
        cdef const void* data = PyUnicode_DATA(text)
        cdef size_t length = PyUnicode_GET_LENGTH(text)
        cdef cbool ascii = PyUnicode_IS_ASCII(text)
        cdef TextEncoder* state = self.state.get()
        cdef EncodeProblem problem
        cdef vector[uint32_t] outputs
        cdef size_t start = 0
        cdef size_t counted = 0
        cdef cbool count_only = mode == _COUNT
        cdef cbool done = False
        cdef size_t next_special = 0
        # A short text is encoded sooner than the GIL is handed over and back,
        # and its ids (about one per four characters) fit one allocation.
        cdef cbool release = length >= _SHORT_TEXT
        if not count_only:
            outputs.reserve(length // 2 + 16 if length < 2 * block else block + 16)
            # Written once, from the start: see advise_huge_pages.
            advise_huge_pages(outputs.data(), outputs.capacity() * sizeof(uint32_t))
        self._enter()
        try:
            while not done:
                if release:
                    with nogil:
                        done = _encode_block(
                            state, scanned, table, kind, data, length, ascii, count_only, block,
                            budget, special_starts, special_ends, special_outputs, start,
                            next_special, counted, outputs, problem,
                        )
                else:
                    done = _encode_block(
                        state, scanned, table, kind, data, length, ascii, count_only, block,
                        budget, special_starts, special_ends, special_outputs, start,
                        next_special, counted, outputs, problem,
                    )
                if mode == _LIST:
                    self._hand_over(out, special_ids, outputs.data(), outputs.size(), release)
                elif mode == _ARRAY:
                    out.frombytes(_id_bytes(self.vocabulary, special_values, outputs))
                outputs.clear()
        finally:
            self._leave()
        self._raise_for(problem, text)
        return counted

    cdef int _raise_for(self, EncodeProblem problem, str text) except -1:
        if problem.outcome == EncodeOutcome.OK:
            return 0
        if problem.outcome == EncodeOutcome.LONE_SURROGATE:
            raise UnicodeEncodeError(
                "utf-8", text, problem.position, problem.position + 1, "surrogates not allowed"
            )
        if problem.outcome == EncodeOutcome.MISSING_PART:
            raise self.vocabulary.missing_part(problem.unit)
        raise ValueError("pieces of 4 GiB or more are not supported")

    cdef int _native_scan(self, pattern, pretokenizer, Pattern* scanned,
                          const ClassTable** table) except -1:
        """1 and the pattern to scan with if ``text`` is scanned here, 0 if ``pretokenizer`` cuts it."""
        if self.scan_table != NULL and pattern is self.scan_pattern and (
            pretokenizer is self.scan_pretokenizer
        ):
            scanned[0] = self.scanned
            table[0] = self.scan_table
            return 1
        if isinstance(pattern, str) and pattern in _PATTERNS:
            scanned[0] = builtin_pattern(_PATTERNS[pattern])
            table[0] = _shared_table()
        elif isinstance(pretokenizer, Pretokenizer):
            scanned[0] = (<Pretokenizer>pretokenizer)._encoding_pattern()
            table[0] = (<Pretokenizer>pretokenizer)._table
        else:
            return 0
        # Both objects are held, so neither the identities nor the
        # pretokenizer's program and table can go while this is kept.
        self.scan_pattern = pattern
        self.scan_pretokenizer = pretokenizer
        self.scanned = scanned[0]
        self.scan_table = table[0]
        return 1

    def encode_text(
        self, text_object, pattern not None, pretokenizer, list out not None,
        list specials=None,
    ):
        """Append the ids of ``text`` to ``out``.

        ``specials`` lists the special tokens in ``text`` as ``(start, end,
        id)`` tuples, in order and not overlapping; the rest is ordinary text.
        For a built-in ``pattern``, or when ``pretokenizer`` is a
        :class:`Pretokenizer` (which then must be ``pattern``'s), the
        text is scanned here, on the str's own buffer and without the GIL, and
        each piece goes to the cache and BPE as UTF-8 bytes without becoming a
        str; otherwise ``pretokenizer.pieces`` cuts it. Errors are those of
        :meth:`encode_pieces`; ``out`` may then hold part of the ids before
        the error (a caller that retries must clear it first).
        """
        self._encode_into(_plain_str(text_object), pattern, pretokenizer, out, specials)

    def encode_with_specials(
        self, text_object, pattern not None, pretokenizer, tuple special_tokens not None,
        tuple special_ids not None,
    ):
        """The ids of ``text`` as a new list, each of ``special_tokens`` (id in ``special_ids``) recognized.

        ``Encoder.encode``'s usual call in one step, for a chat message as for
        a long document: a few ``in`` checks say which special tokens occur,
        the compiled matcher finds those (leftmost first, the longest where
        several start at one place, as :func:`special_matches`), and the text
        is encoded around them. The steps in Python had cost 3 us on a message
        with a special token, about a fifth of encoding it. The matches stay
        in C++: a ``(start, end, id)`` tuple per match, kept alive through the
        encode, had the cyclic garbage collector run (and walk the last result
        the caller still held, 2.8 million ids: 30-80 ms) during a third of the
        encodes of 8 MiB of prose with 3,872 special tokens. Never None on
        this backend.

        >>> kernel = PieceEncoder({bytes([i]): i for i in range(256)}, {}, 8)
        >>> kernel.encode_with_specials("a<s>b", GPT2, None, ("<s>",), (256,))
        [97, 256, 98]
        """
        cdef str text = _plain_str(text_object)
        if len(special_ids) != len(special_tokens):
            raise ValueError("special_ids must give one id per special token")
        cdef list out = []
        cdef Pattern scanned
        cdef const ClassTable* table
        cdef Py_ssize_t index
        # Which tokens occur, in a C vector: most texts hold none, and a
        # tuple and a list built for nothing were a tenth of a short call.
        cdef vector[Py_ssize_t] present
        cdef Py_ssize_t text_length = PyUnicode_GET_LENGTH(text)
        if <size_t>text_length >= _MATCH_EVERY_TOKEN:
            # A long text: the compiled matcher looks for every token in one
            # pass, faster than one ``in`` each before it (8 MiB of source
            # code, o200k's two tokens, none there: 0.84 ms against 2.83).
            for index in range(len(special_tokens)):
                present.push_back(index)
        else:
            for index in range(len(special_tokens)):
                token = special_tokens[index]
                # A token whose first character the text lacks is not in it:
                # one search for a character (memchr) where ``in`` ran its
                # substring search, which took 900 of the 27,600 instructions
                # of a chat-sized call with two special tokens (callgrind).
                if type(token) is str and PyUnicode_GET_LENGTH(token) > 0 and PyUnicode_FindChar(
                    text, PyUnicode_READ_CHAR(token, 0), 0, text_length, 1
                ) == -1:
                    continue
                if token in text:
                    present.push_back(index)
        if not self._native_scan(pattern, pretokenizer, &scanned, &table):
            self._encode_by_pieces(text, pretokenizer, out, _special_tuples(
                text, special_tokens, special_ids, tuple([index for index in present])
            ))
            return out
        PyUnicode_READY(text)
        cdef vector[size_t] special_starts, special_ends
        cdef vector[uint32_t] special_outputs, special_values
        cdef list special_id_list = [special_ids[index] for index in present]
        for token_id in special_id_list:
            special_values.push_back(_u32_of(token_id, "special token id", None))
        cdef vector[vector[uint32_t]] searched
        cdef int kind = PyUnicode_KIND(text)
        cdef const void* data = PyUnicode_DATA(text)
        cdef size_t length = PyUnicode_GET_LENGTH(text)
        cdef uint32_t first_special = <uint32_t>self.vocabulary.id_values.size()
        if not present.empty():
            _searched_tokens(tuple([special_tokens[index] for index in present]), searched)
            if length >= _SEARCH_WITH_GIL:
                with nogil:
                    _special_spans_of(
                        kind, data, length, searched, first_special, special_starts,
                        special_ends, special_outputs,
                    )
            else:
                _special_spans_of(
                    kind, data, length, searched, first_special, special_starts, special_ends,
                    special_outputs,
                )
        self._run_spans(
            text, scanned, table, out, _LIST, special_starts, special_ends, special_outputs,
            special_values, special_id_list,
        )
        return out

    def encode_many(
        self, list texts not None, pattern not None, pretokenizer, tuple special_tokens not None,
        tuple special_ids not None,
    ):
        """The ids of each of ``texts`` (a list of lists), each of ``special_tokens`` recognized.

        ``special_ids`` holds the tokens' ids, in the same order. The texts
        are encoded one after the other in one stretch without the GIL, the
        special tokens found by the compiled matcher (as
        :func:`special_matches`), and each text's list is built afterwards:
        ``encode_batch``'s threads took the GIL back once per text before, and
        waited for it a fifth of the time. None if ``pattern`` is not scanned
        here (the caller then encodes each text its own way); errors are
        :meth:`encode_text`'s, for the first text that has one.

        >>> kernel = PieceEncoder({bytes([i]): i for i in range(256)}, {}, 8)
        >>> kernel.encode_many(["ab", "a<s>"], GPT2, None, ("<s>",), (256,))
        [[97, 98], [97, 256]]
        """
        cdef Pattern scanned
        cdef const ClassTable* table
        if not self._native_scan(pattern, pretokenizer, &scanned, &table):
            return None
        # Own references (exact strs: see _plain_str): the texts are read
        # without the GIL.
        cdef tuple held = tuple([_plain_str(item) for item in texts])
        cdef Py_ssize_t count = len(held)
        cdef vector[int] kinds
        cdef vector[const void*] buffers
        cdef vector[size_t] lengths
        cdef vector[cbool] asciis
        cdef str text
        for item in held:
            text = <str>item
            PyUnicode_READY(text)
            kinds.push_back(PyUnicode_KIND(text))
            buffers.push_back(PyUnicode_DATA(text))
            lengths.push_back(PyUnicode_GET_LENGTH(text))
            asciis.push_back(PyUnicode_IS_ASCII(text))
        cdef vector[vector[uint32_t]] searched
        _searched_tokens(special_tokens, searched)
        if len(special_ids) != len(special_tokens):
            raise ValueError("special_ids must give one id per special token")
        cdef list special_id_list = list(special_ids)
        # A special token's output number: past the vocabulary's, by token.
        cdef uint32_t first_special = <uint32_t>self.vocabulary.id_values.size()
        cdef TextEncoder* state = self.state.get()
        cdef EncodeProblem problem
        cdef vector[uint32_t] outputs
        cdef vector[size_t] ends  # where each text's outputs end in ``outputs``
        cdef vector[size_t] special_starts, special_ends
        cdef vector[uint32_t] special_outputs
        cdef size_t start, next_special, counted
        cdef Py_ssize_t index
        cdef cbool done
        cdef Py_ssize_t failed = -1
        self._enter()
        try:
            with nogil:
                for index in range(count):
                    _special_spans_of(
                        kinds[index], buffers[index], lengths[index], searched, first_special,
                        special_starts, special_ends, special_outputs,
                    )
                    start = 0
                    next_special = 0
                    counted = 0
                    done = False
                    while not done:
                        done = _encode_block(
                            state, scanned, table, kinds[index], buffers[index], lengths[index],
                            asciis[index], False, <size_t>-1, <size_t>-1, special_starts,
                            special_ends, special_outputs, start, next_special, counted, outputs,
                            problem,
                        )
                    if problem.outcome != EncodeOutcome.OK:
                        failed = index
                        break
                    ends.push_back(outputs.size())
        finally:
            self._leave()
        if failed >= 0:
            self._raise_for(problem, held[failed])
        # Each list is out of the cyclic collector's sight while the others
        # are made: the collections that making a thousand lists sets off
        # walked every id of the young ones (20-40 ms for 2 million o200k
        # ids, measured with gc.callbacks), for lists that hold no cycle.
        # They are ordinary, tracked lists again once all are made.
        cdef list results = []
        cdef list ids
        cdef size_t begin = 0
        for index in range(count):
            ids = []
            PyObject_GC_UnTrack(ids)
            results.append(ids)
            self._extend(ids, special_id_list, outputs.data() + begin, ends[index] - begin)
            begin = ends[index]
        for ids in results:
            PyObject_GC_Track(ids)
        return results

    cdef int _encode_into(self, str text, pattern, pretokenizer, list out, list specials) except -1:
        """:meth:`encode_text`, callable from here without a Python call."""
        cdef Pattern scanned
        cdef const ClassTable* table
        if self._native_scan(pattern, pretokenizer, &scanned, &table):
            self._run(text, scanned, table, out, _LIST, specials)
        else:
            self._encode_by_pieces(text, pretokenizer, out, specials)
        return 0

    def encode_text_array(
        self, text_object, pattern not None, pretokenizer, out not None,
        list specials=None,
    ):
        """Append the ids of ``text`` to ``out``, an ``array.array('I')`` (``specials`` as above).

        No Python int is made per id: this is what ``encode_to_numpy`` builds on.
        """
        cdef str text = _plain_str(text_object)
        cdef Pattern scanned
        cdef const ClassTable* table
        if self._native_scan(pattern, pretokenizer, &scanned, &table):
            self._run(text, scanned, table, out, _ARRAY, specials)
            return
        ids = []
        self._encode_by_pieces(text, pretokenizer, ids, specials)
        out.extend(ids)

    def count_text(self, text_object, pattern not None, pretokenizer, list specials=None):
        """How many ids ``text`` encodes to, without building them (``specials`` as above)."""
        cdef str text = _plain_str(text_object)
        cdef Pattern scanned
        cdef const ClassTable* table
        if self._native_scan(pattern, pretokenizer, &scanned, &table):
            return self._run(text, scanned, table, None, _COUNT, specials)
        ids = []
        self._encode_by_pieces(text, pretokenizer, ids, specials)
        return len(ids)

    cdef int _encode_by_pieces(self, str text, pretokenizer, list out, list specials) except -1:
        # A pattern the native scanner does not know: its pretokenizer cuts
        # each ordinary stretch, given as a slice.
        cdef vector[size_t] special_starts, special_ends
        cdef vector[uint32_t] special_values
        cdef list special_ids = []
        if specials is not None:
            _read_specials(
                specials, len(text), special_starts, special_ends, special_values, special_ids
            )
        cdef size_t start = 0
        cdef size_t index
        for index in range(special_starts.size()):
            if special_starts[index] > start:
                self.encode_pieces(pretokenizer.pieces(text[start : special_starts[index]]), out)
            out.append(special_ids[index])
            start = special_ends[index]
        if start < <size_t>len(text):
            self.encode_pieces(pretokenizer.pieces(text[start:]), out)
        return 0

    def encode_bytes(self, bytes piece not None):
        """The ids of one piece given as bytes, bypassing the cache."""
        cdef vector[uint32_t] outputs
        cdef EncodeProblem problem
        cdef unique_ptr[TextEncoder] uncached
        uncached.reset(new TextEncoder(self.vocabulary.merger, 0))
        uncached.get().encode_piece(<const uint8_t*><char*>piece, len(piece), outputs, problem)
        self._raise_for(problem, None)
        ids = []
        self._extend(ids, [], outputs.data(), outputs.size())
        return ids

    def atom_characters(self):
        """How many characters BPE may start from as their own tokens, not as bytes.

        0 when the vocabulary does not allow it (two tokens share a rank, or
        some merge's result ranks before an operand). For tests and
        diagnostics; ``_char_atoms.hpp`` says when starting from a character's
        token is exact.
        """
        return self.vocabulary.merger.get().atom_characters()

    def cache_info(self):
        """``(hits, misses, maxsize, currsize)``; hits are lookups that ran no BPE."""
        cdef PieceCache* cache = &self.state.get().cache()
        return (cache.hits(), cache.misses(), self.cache_size, cache.size())

    def short_table_slots(self):
        """Entries the table of short pieces has room for now (0 before its first piece).

        It starts at 4,096 entries and, each time it is half full, moves to one
        32 times larger, up to its full size (see ``ShortPieces`` in
        ``_short_pieces.hpp``). For tests and diagnostics.

        >>> kernel = PieceEncoder({bytes([i]): i for i in range(256)}, {}, 1 << 16)
        >>> kernel.short_table_slots()
        0
        """
        return self.state.get().cache().short_slots_in_use()

    def segment_info(self):
        """``(found, stored, bytes, generation_bytes)`` of the segment store.

        Segments found and stored since the cache was last cleared, the bytes
        the store holds, and the bound of one of its two generations (0: no
        store, below 4,096 cache entries). The compiled kernel's own figures,
        for tests and diagnostics; the pure-Python kernel has no such store.
        """
        cdef SegmentStore* segments = &self.state.get().cache().segments()
        return (segments.found(), segments.stored(), segments.bytes(), segments.generation_bytes())

    def clear_cache(self):
        """Drop every cached piece and zero the counts.

        Called while another thread encodes with this object (the tokenizer's
        ``clear_cache`` reaches every thread's kernel), the cache is emptied
        as that call ends: emptying it under the running encode, which reads
        it without the GIL, handed that encode torn entries and wrong ids.
        """
        if self.busy:
            self.clear_when_done = True
        else:
            self.state.get().cache().clear()


cdef void _special_spans_of(
    int kind, const void* data, size_t length, const vector[vector[uint32_t]]& searched,
    uint32_t first_special, vector[size_t]& starts, vector[size_t]& ends,
    vector[uint32_t]& outputs,
) noexcept nogil:
    """Replace ``starts``/``ends``/``outputs`` with the matches of ``searched`` in a str buffer.

    Token ``k``'s matches get output number ``first_special + k``: special
    token ids by token, past the vocabulary's (``_run_spans``).
    """
    cdef vector[Match] found
    starts.clear()
    ends.clear()
    outputs.clear()
    if searched.size() == 0:
        return
    find_matches_of_kind(kind, data, length, searched, found)
    cdef size_t index
    for index in range(found.size()):
        starts.push_back(found[index].start)
        ends.push_back(found[index].end)
        outputs.push_back(first_special + found[index].token)


cdef list _special_tuples(str text, tuple tokens, tuple ids, tuple present):
    """``(start, end, id)`` of each of ``tokens[present]`` in ``text``, as :func:`special_matches`."""
    if not present:
        return None
    cdef tuple searched = tuple([tokens[index] for index in present])
    return [
        (start, end, ids[present[which]]) for start, end, which in special_matches(text, searched)
    ]


cdef int _read_specials(
    list specials, Py_ssize_t length, vector[size_t]& starts, vector[size_t]& ends,
    vector[uint32_t]& values, list ids,
) except -1:
    """Check ``specials``, in-order, non-overlapping ``(start, end, id)``, and copy them out.

    Raises ValueError first if any is wrong: the text is read at these offsets
    without the GIL, so they are checked, and read once. ``ids`` gets the ids
    as Python ints, ``values`` as 32-bit values.
    """
    cdef Py_ssize_t previous_end = 0
    for special in specials:
        if type(special) is not tuple or len(special) != 3:
            raise ValueError(f"a special token must be a (start, end, id) tuple, got {special!r}")
        start, end, token_id = special
        if not (previous_end <= start <= end <= length):
            raise ValueError(
                f"special token spans must be in order, within the text and not overlap; "
                f"got {start}..{end} after {previous_end} in {length} characters"
            )
        if not 0 <= token_id < 2**32:
            raise ValueError(f"special token ids must be in 0..2**32-1, got {token_id}")
        previous_end = end
        starts.push_back(start)
        ends.push_back(end)
        values.push_back(token_id)
        ids.append(token_id)
    return 0


cdef bytes _id_bytes(
    _Vocabulary vocabulary, const vector[uint32_t]& specials, const vector[uint32_t]& outputs
):
    """The token ids of ``outputs`` as native-endian uint32 values, packed.

    Output numbers past the vocabulary's are the call's ``specials``, as in
    ``extend_ids`` (``_native_glue.hpp``).
    """
    cdef bytes packed = PyBytes_FromStringAndSize(NULL, 4 * outputs.size())
    cdef uint32_t* values = <uint32_t*>PyBytes_AS_STRING(packed)
    cdef size_t vocabulary_size = vocabulary.id_values.size()
    cdef size_t index, output
    for index in range(outputs.size()):
        output = outputs[index]
        if output < vocabulary_size:
            values[index] = vocabulary.id_values[output]
        else:
            values[index] = specials[output - vocabulary_size]
    return packed


# --------------------------------------------------------------------------- decoding

# Decoding this many ids or more runs without the GIL (fewer take less time
# than handing the GIL over and back).
cdef size_t _DECODE_WITHOUT_GIL = 1 << 14


cdef int _append_id(vector[uint32_t]& values, object item) except -1:
    """Append ``item`` (an int, or anything with ``__index__``) as a 32-bit id.

    An int outside 0 .. 2**32 - 1 names no token: ``KeyError(item)``.
    """
    cdef long long value
    cdef int overflow = 0
    if type(item) is not int:
        try:
            item = operator.index(item)
        except TypeError:
            raise TypeError(f"token ids must be ints, got {item!r}") from None
    value = PyLong_AsLongLongAndOverflow(item, &overflow)
    if overflow != 0 or not 0 <= value <= UINT32_MAX:
        raise KeyError(item)
    values.push_back(<uint32_t>value)
    return 0


cdef int _read_ids(object ids, vector[uint32_t]& values) except -1:
    """Copy the token ids ``ids`` (any iterable of ints, or an integer array) into ``values``."""
    cdef Py_ssize_t index
    cdef const uint32_t[::1] packed
    if type(ids) is list:
        values.reserve(PyList_GET_SIZE(ids))
        index = 0
        # The size is read again each time: __index__ may run code that changes the list.
        while index < PyList_GET_SIZE(ids):
            _append_id(values, <object>PyList_GET_ITEM(ids, index))
            index += 1
        return 0
    if PyObject_CheckBuffer(ids):
        view = memoryview(ids)
        if view.ndim == 1 and view.itemsize == 4 and view.format in ("I", "=I", "<I", "@I", "L"):
            packed = view
            if packed.shape[0] > 0:
                values.assign(&packed[0], &packed[0] + packed.shape[0])
            return 0
    if type(ids) is not tuple:
        ids = list(ids)
    for item in ids:
        _append_id(values, item)
    return 0


cdef class TokenDecoder:
    """Token ids to bytes: ``b"".join(decoder[i] for i in ids)``, in one compiled pass.

    ``decoder`` maps every id (special tokens included) to its bytes. An id
    it lacks raises ``KeyError(id)``, a value that is not an integer
    ``TypeError``; ids may be any iterable of ints or an integer array
    (``array('I')``, a numpy ``uint32`` array are read without a Python int
    per id). Long inputs are decoded without the GIL.

    >>> TokenDecoder({0: b"he", 1: b"llo", 7: b"!"}).decode_bytes([0, 1, 1, 7])
    b'hellollo!'
    """

    cdef TokenBytes table

    def __cinit__(self, dict decoder not None):
        cdef Py_ssize_t position = 0
        cdef PyObject* key_object
        cdef PyObject* value_object
        cdef size_t stored = 0
        while PyDict_Next(decoder, &position, &key_object, &value_object):
            token = <bytes?>(<object>value_object)
            stored += len(token)
            if stored >= UINT32_MAX:
                raise ValueError("a vocabulary of 4 GiB of token bytes or more is not supported")
            self.table.add(
                _u32_of(<object>key_object, "token id", token),
                <const uint8_t*><char*>token,
                len(token),
            )
        self.table.finish()

    def decode_bytes(self, ids):
        """The bytes of ``ids``, one token after another."""
        cdef vector[uint32_t] values
        _read_ids(ids, values)
        cdef size_t count = values.size()
        cdef size_t unknown = 0
        cdef size_t total
        cdef cbool release = count >= _DECODE_WITHOUT_GIL
        if release:
            with nogil:
                total = self.table.measure(values.data(), count, unknown)
        else:
            total = self.table.measure(values.data(), count, unknown)
        if unknown < count:
            raise KeyError(values[unknown])
        cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
        cdef uint8_t* start = <uint8_t*>PyBytes_AS_STRING(out)
        if release:
            with nogil:
                self.table.write(values.data(), count, start, start + total)
        else:
            self.table.write(values.data(), count, start, start + total)
        return out
