# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Compiled kernels: the training merge loop and piece encoding with a piece cache.

Same results as the pure-Python modules they replace, for every input:
:func:`learn_merges` matches ``merge_loop.learn_merges_from_words`` and
:class:`BytePairEncoder` matches ``bpe.merge_piece`` followed by an encoder
lookup, behind a cache bounded like ``piece_cache.PieceCache``. The algorithms
live in ``_native_impl.hpp`` (plain C++); this module converts between Python
objects and native arrays and decides when to hold the GIL.
"""

from cpython.dict cimport PyDict_Next
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from libc.stdint cimport INT64_MAX, int64_t, uint8_t, uint32_t, uint64_t
from libcpp cimport bool as cbool
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.vector cimport vector


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


cdef extern from "_native_impl.hpp" namespace "streambpe" nogil:
    uint32_t NONE32
    uint64_t hash_bytes(const uint8_t* data, size_t n)

    cdef cppclass MergeLoop:
        void add_word(const uint8_t* word, size_t n, int64_t count)
        void build()
        cbool step()
        size_t run(size_t limit)
        vector[pair[uint32_t, uint32_t]]& merges()
        const string& token(uint32_t token_id)

    cdef cppclass TokenInfo "streambpe::PieceMerger::TokenInfo":
        uint32_t unit
        uint32_t output

    cdef cppclass PieceMerger:
        void add_output(const uint8_t* token, size_t n, uint32_t output)
        void add_rank(const uint8_t* token, size_t n, uint32_t rank)
        void finish()
        const TokenInfo* lookup(const uint8_t* token, size_t n, uint64_t hash)
        void merge(const uint8_t* piece, size_t n, vector[uint32_t]& units)
        uint32_t unit_output(uint32_t unit)
        const uint8_t* unit_bytes(uint32_t unit)
        size_t unit_length(uint32_t unit)

    cdef cppclass PieceCache:
        PieceCache(size_t maxsize)
        cbool get(const uint8_t* piece, size_t n, uint64_t hash, vector[uint32_t]& found)
        void put(const uint8_t* piece, size_t n, uint64_t hash, const vector[uint32_t]& outputs)
        void clear()
        size_t hits()
        size_t misses()
        size_t maxsize()
        size_t size()


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
    cdef MergeLoop loop
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


cdef class BytePairEncoder:
    """Encodes pieces to token ids like ``bpe.merge_piece`` plus an encoder lookup.

    ``encoder`` maps token bytes to ids (below 2**32); ``ranks`` maps mergeable
    token bytes to ranks (below 2**32; lower merges first). A piece that is a
    key of ``encoder`` is that one id; otherwise it is split by rank-based BPE
    and each part looked up in ``encoder`` (a missing part raises ``KeyError``).

    Results are cached per piece, at most ``cache_size`` pieces (0 disables the
    cache), evicted in two generations exactly like ``PieceCache``, so
    :meth:`cache_info` counts what a ``PieceCache`` would.
    """

    cdef PieceMerger merger
    cdef PieceCache* cache
    # Token ids as Python ints, indexed by "output" numbers; the native side
    # returns output numbers and encode_pieces appends these shared objects.
    cdef list ids
    cdef vector[uint32_t] units  # scratch for _encode, reused to save allocations

    def __cinit__(self, dict encoder not None, dict ranks not None, Py_ssize_t cache_size):
        if cache_size < 0:
            raise ValueError(f"cache size must be >= 0, got {cache_size}")
        self.ids = []
        cdef bytes token
        cdef uint32_t number
        for token, token_id in encoder.items():
            number = _checked_u32(token_id, "token id", token)
            self.merger.add_output(<const uint8_t*><char*>token, len(token), len(self.ids))
            self.ids.append(int(number))
        for token, rank in ranks.items():
            number = _checked_u32(rank, "rank", token)
            self.merger.add_rank(<const uint8_t*><char*>token, len(token), number)
        self.merger.finish()
        self.cache = new PieceCache(cache_size)

    def __dealloc__(self):
        del self.cache

    def encode_pieces(self, list pieces not None, list out not None):
        """Append the ids of each piece (a ``str``) to ``out``, in order.

        A piece with a lone surrogate raises ``UnicodeEncodeError``, and a piece
        whose parts are not all in the encoder raises ``KeyError``; either way
        ``out`` keeps the ids of the pieces before it, so a caller that retries
        must clear ``out`` first.
        """
        cdef Py_ssize_t i = 0
        cdef Py_ssize_t size
        cdef const uint8_t* data
        cdef uint64_t hash
        cdef uint32_t output
        # Local, and the length re-read each time: appending can run arbitrary
        # code (a finalizer during garbage collection) that might re-enter.
        cdef vector[uint32_t] outputs
        while i < PyList_GET_SIZE(pieces):
            data = <const uint8_t*>PyUnicode_AsUTF8AndSize(<object>PyList_GET_ITEM(pieces, i), &size)
            hash = hash_bytes(data, size)
            if not self.cache.get(data, size, hash, outputs):
                self._encode(data, size, hash, outputs)
                self.cache.put(data, size, hash, outputs)
            for output in outputs:
                PyList_Append(out, <object>PyList_GET_ITEM(self.ids, output))
            i += 1

    def encode_bytes(self, bytes piece not None):
        """The ids of one piece given as bytes, bypassing the cache."""
        cdef const uint8_t* data = <const uint8_t*><char*>piece
        cdef vector[uint32_t] outputs
        self._encode(data, len(piece), hash_bytes(data, len(piece)), outputs)
        return [self.ids[output] for output in outputs]

    def cache_info(self):
        """``(hits, misses, maxsize, currsize)``; hits are lookups that ran no BPE."""
        return (self.cache.hits(), self.cache.misses(), self.cache.maxsize(), self.cache.size())

    def clear_cache(self):
        """Drop every cached piece and zero the counts."""
        self.cache.clear()

    cdef int _encode(
        self, const uint8_t* data, Py_ssize_t size, uint64_t hash, vector[uint32_t]& outputs
    ) except -1:
        """Set ``outputs`` to the output numbers of one piece (``hash`` is its hash_bytes)."""
        outputs.clear()
        cdef const TokenInfo* whole = self.merger.lookup(data, size, hash)
        if whole != NULL and whole.output != NONE32:
            outputs.push_back(whole.output)
            return 0
        if size >= NONE32:
            raise ValueError("pieces of 4 GiB or more are not supported")
        self.units.clear()
        self.merger.merge(data, size, self.units)
        cdef uint32_t unit, output
        for unit in self.units:
            output = self.merger.unit_output(unit)
            if output == NONE32:
                raise KeyError(
                    (<const char*>self.merger.unit_bytes(unit))[:self.merger.unit_length(unit)]
                )
            outputs.push_back(output)
        return 0


cdef uint32_t _checked_u32(object number, str what, bytes token) except? 0xFFFFFFFF:
    if not 0 <= number < 2**32:
        raise ValueError(f"{what} {number!r} of token {token!r} is outside 0 .. 2**32 - 1")
    return number
