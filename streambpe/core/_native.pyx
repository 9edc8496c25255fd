# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Compiled kernels: the pretokenizer, the training merge loop, and piece encoding with a cache.

Same results as the pure-Python modules they replace, for every input:
:func:`learn_merges` matches ``merge_loop.learn_merges_from_words`` and
:class:`BytePairEncoder` matches ``bpe.merge_piece`` followed by an encoder
lookup, behind a cache bounded like ``piece_cache.PieceCache``. The algorithms
live in ``_native_impl.hpp`` and ``_pretokenize_impl.hpp`` (plain C++); this
module converts between Python objects and native arrays and decides when to
hold the GIL.

:class:`NativePretokenizer` runs the hand-written scanner of
``_pretokenize_impl.hpp`` for the GPT-2, cl100k_base or o200k_base pattern
directly on the str's own buffer (1, 2 or 4 bytes per character), without the
GIL. The character classes come from the installed ``regex`` module
(:mod:`streambpe.core.unicode_classes`), so the result is ``regex``'s, for
every string:

>>> import regex
>>> from streambpe.patterns import CL100K
>>> text = "Hello, wörld's 4242!\\n\\n  x"
>>> NativePretokenizer(CL100K).pieces(text) == regex.findall(CL100K, text)
True

:meth:`BytePairEncoder.encode_text` scans and encodes in one pass, without a
str per piece.
"""

from cpython.dict cimport PyDict_Next
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.object cimport PyObject
from libc.stdint cimport INT64_MAX, int64_t, uint8_t, uint32_t, uint64_t
from libcpp cimport bool as cbool
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.vector cimport vector
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from libc.stdint cimport uint16_t
from libcpp.memory cimport unique_ptr

from streambpe.core.unicode_classes import class_table
from streambpe.patterns import CL100K, GPT2, NAMED_PATTERNS, O200K


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
        void count_hit()
        size_t hits()
        size_t misses()
        size_t maxsize()
        size_t size()


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)


cdef extern from *:
    """
    #include <cstdint>

    // How many UTF-8 bytes code units [start, end) of a str take, its units
    // being `kind` bytes wide (a str without lone surrogates).
    static size_t streambpe_utf8_length(int kind, const char* data, size_t start, size_t end) {
        size_t bytes = 0;
        if (kind == 1) {
            const uint8_t* units = reinterpret_cast<const uint8_t*>(data);
            for (size_t i = start; i < end; ++i) bytes += units[i] < 0x80 ? 1 : 2;
        } else if (kind == 2) {
            const uint16_t* units = reinterpret_cast<const uint16_t*>(data);
            for (size_t i = start; i < end; ++i) bytes += units[i] < 0x80 ? 1 : units[i] < 0x800 ? 2 : 3;
        } else {
            const uint32_t* units = reinterpret_cast<const uint32_t*>(data);
            for (size_t i = start; i < end; ++i) {
                const uint32_t cp = units[i];
                bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            }
        }
        return bytes;
    }
    """
    size_t streambpe_utf8_length(int kind, const char* data, size_t start, size_t end) nogil


cdef list _id_list(list ids, const vector[uint32_t]& outputs):
    """The Python ints ``ids[output]`` for each output number, as a new list."""
    cdef list result = PyList_New(outputs.size())
    cdef size_t index
    cdef object token_id
    for index in range(outputs.size()):
        token_id = <object>PyList_GET_ITEM(ids, outputs[index])
        Py_INCREF(token_id)
        PyList_SET_ITEM(result, index, token_id)
    return result


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

    def encode_text(self, str text not None, str pattern not None, pretokenizer, list out not None):
        """Append the ids of ordinary ``text`` (no special tokens) to ``out``.

        For a built-in ``pattern`` the text is scanned here, on the str's own
        buffer, and each piece goes to the cache and BPE as UTF-8 bytes without
        becoming a str; for any other pattern ``pretokenizer.pieces`` cuts it.
        Errors are those of :meth:`encode_pieces`.
        """
        scanned = _PATTERNS.get(pattern)
        if scanned is None:
            self.encode_pieces(pretokenizer.pieces(text), out)
            return
        cdef vector[size_t] ends = _piece_ends(scanned, text)
        cdef int kind = PyUnicode_KIND(text)
        cdef const char* units = <const char*>PyUnicode_DATA(text)
        # The whole text's UTF-8, made once (and kept by the str); a lone
        # surrogate raises UnicodeEncodeError here, as it does per piece.
        cdef Py_ssize_t utf8_size
        cdef const uint8_t* utf8 = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &utf8_size)
        cdef cbool ascii = PyUnicode_IS_ASCII(text)
        cdef size_t start = 0
        cdef size_t end
        cdef size_t byte_start = 0
        cdef size_t size
        cdef uint64_t hash
        cdef const TokenInfo* whole
        cdef vector[uint32_t] outputs
        cdef vector[uint32_t] found
        outputs.reserve(ends.size() + 16)
        for end in ends:
            size = end - start if ascii else streambpe_utf8_length(kind, units, start, end)
            hash = hash_bytes(utf8 + byte_start, size)
            # Most pieces of real text are tokens themselves: answer those from
            # the vocabulary, and keep the cache (and its memory traffic) for
            # the pieces that need BPE, as tiktoken does without any cache.
            whole = self.merger.lookup(utf8 + byte_start, size, hash)
            if whole != NULL and whole.output != NONE32:
                self.cache.count_hit()
                outputs.push_back(whole.output)
            else:
                if not self.cache.get(utf8 + byte_start, size, hash, found):
                    self._encode(utf8 + byte_start, size, hash, found)
                    self.cache.put(utf8 + byte_start, size, hash, found)
                outputs.insert(outputs.end(), found.begin(), found.end())
            start = end
            byte_start += size
        out.extend(_id_list(self.ids, outputs))

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


# --------------------------------------------------------------------------- pretokenizer

cdef extern from "_pretokenize_impl.hpp" namespace "streambpe::pretokenize" nogil:
    enum class Pattern:
        GPT2
        CL100K
        O200K

    cdef cppclass ClassTable:
        ClassTable(const uint16_t* block_of, size_t block_of_length,
                   const uint16_t* blocks, size_t blocks_length) except +
        uint16_t operator()(uint32_t cp)

    void piece_ends(Pattern pattern, const ClassTable& table, int unit_size, const void* data,
                    size_t length, vector[size_t]& ends) except +
    size_t count_pieces(Pattern pattern, const ClassTable& table, int unit_size,
                        const void* data, size_t length) except +


cdef extern from "Python.h":
    # A no-op for every str made by Python 3.3+ APIs; kept for strs built by
    # the deprecated wchar_t APIs, whose code units are not ready before it.
    int PyUnicode_READY(object text) except -1


cdef extern from *:
    """
    #include <cstring>

    // The list of pieces of `text` ending at `ends`: a new reference, or NULL
    // with an exception set.
    //
    // Creating a str per piece dominates the cost, and prose repeats its
    // short pieces (" the", ",", " and") all the time, so a piece equal to a
    // recent one reuses that str object: a direct-mapped cache of recent
    // short pieces, compared by their code units in `text`. It lives for one
    // call, so it holds no object longer than the list does.
    static PyObject* streambpe_piece_list(PyObject* text, const std::vector<size_t>& ends) {
        constexpr size_t MAX_CACHED_LENGTH = 16;
        const int kind = PyUnicode_KIND(text);
        const char* data = static_cast<const char*>(PyUnicode_DATA(text));
        const size_t count = ends.size();
        PyObject* list = PyList_New(static_cast<Py_ssize_t>(count));
        if (list == nullptr) return nullptr;
        size_t slots = 16;
        while (slots < 4096 && slots < count) slots *= 2;
        std::vector<PyObject*> recent(slots, nullptr);  // borrowed from `list`
        std::vector<size_t> recent_start(slots, 0);
        size_t start = 0;
        for (size_t index = 0; index < count; ++index) {
            const size_t end = ends[index];
            const size_t length = end - start;
            const char* units = data + start * kind;
            PyObject* piece = nullptr;
            size_t slot = 0;
            if (length <= MAX_CACHED_LENGTH) {
                uint64_t hash = length;
                for (size_t k = 0; k < length * kind; ++k) {
                    hash = (hash ^ static_cast<unsigned char>(units[k])) * 0x100000001b3ULL;
                }
                slot = static_cast<size_t>(hash >> 40) & (slots - 1);
                PyObject* seen = recent[slot];
                if (seen != nullptr && static_cast<size_t>(PyUnicode_GET_LENGTH(seen)) == length &&
                    std::memcmp(data + recent_start[slot] * kind, units, length * kind) == 0) {
                    Py_INCREF(seen);
                    piece = seen;
                }
            }
            if (piece == nullptr) {
                piece = PyUnicode_Substring(text, static_cast<Py_ssize_t>(start),
                                            static_cast<Py_ssize_t>(end));
                if (piece == nullptr) {
                    Py_DECREF(list);
                    return nullptr;
                }
                if (length <= MAX_CACHED_LENGTH) {
                    recent[slot] = piece;
                    recent_start[slot] = start;
                }
            }
            PyList_SET_ITEM(list, static_cast<Py_ssize_t>(index), piece);
            start = end;
        }
        return list;
    }
    """
    list streambpe_piece_list(str text, const vector[size_t]& ends)


_PATTERNS = {GPT2: Pattern.GPT2, CL100K: Pattern.CL100K, O200K: Pattern.O200K}

cdef unique_ptr[ClassTable] _table


cdef const ClassTable* _shared_table() except NULL:
    """The native copy of :func:`class_table`, built on first use (under the GIL)."""
    global _table
    cdef const uint16_t[::1] block_of
    cdef const uint16_t[::1] blocks
    if not _table:
        python_table = class_table()
        block_of = python_table.block_of
        blocks = python_table.blocks
        _table.reset(new ClassTable(&block_of[0], block_of.shape[0], &blocks[0], blocks.shape[0]))
    return _table.get()


def class_bits(str text):
    """The class bits (see ``unicode_classes.CLASS_BITS``) of each character of ``text``.

    For tests: this is the native lookup the scanners use.

    >>> class_bits("a1 ")
    [17, 2, 4]
    """
    cdef const ClassTable* table = _shared_table()
    return [table[0](<uint32_t>ord(char)) for char in text]


cdef vector[size_t] _piece_ends(Pattern pattern, str text) except *:
    """Where each piece of ``text`` ends (code-unit offsets), scanned without the GIL."""
    PyUnicode_READY(text)
    cdef const ClassTable* table = _shared_table()
    cdef int kind = PyUnicode_KIND(text)
    cdef const void* data = PyUnicode_DATA(text)
    cdef size_t length = PyUnicode_GET_LENGTH(text)
    cdef vector[size_t] ends
    # A piece is at least one character; reserve for typical prose (~4 per piece).
    ends.reserve(length // 4 + 16)
    with nogil:
        piece_ends(pattern, table[0], kind, data, length, ends)
    return ends


cdef class NativePretokenizer:
    """Cuts text into pieces with a built-in pattern, exactly as ``regex.findall``.

    ``pattern`` is one of the pattern strings of :mod:`streambpe.patterns`
    (``GPT2``, ``CL100K``, ``O200K``) or a name for one (``"cl100k_base"``).
    """

    cdef Pattern _pattern
    cdef const ClassTable* _table
    cdef readonly str pattern

    def __init__(self, str pattern):
        resolved = NAMED_PATTERNS.get(pattern.lower(), pattern)
        if resolved not in _PATTERNS:
            raise ValueError(
                "the native pretokenizer only knows the built-in patterns "
                f"(gpt2, cl100k, o200k), not {pattern!r}; use "
                "streambpe.core.pretokenize.Pretokenizer for a custom pattern"
            )
        self.pattern = resolved
        self._pattern = _PATTERNS[resolved]
        self._table = _shared_table()

    cdef vector[size_t] _ends(self, str text) except *:
        return _piece_ends(self._pattern, text)

    def pieces(self, str text):
        """All pieces of ``text``, in order: ``regex.findall(self.pattern, text)``.

        >>> NativePretokenizer("gpt2").pieces("Hello world's  end")
        ['Hello', ' world', "'s", ' ', ' end']
        """
        return streambpe_piece_list(text, self._ends(text))

    def piece_count(self, str text):
        """How many pieces ``text`` has: ``len(self.pieces(text))``, without building them.

        >>> NativePretokenizer("o200k").piece_count("Hello world")
        2
        """
        PyUnicode_READY(text)
        cdef int kind = PyUnicode_KIND(text)
        cdef const void* data = PyUnicode_DATA(text)
        cdef size_t length = PyUnicode_GET_LENGTH(text)
        cdef size_t count
        with nogil:
            count = count_pieces(self._pattern, self._table[0], kind, data, length)
        return count
