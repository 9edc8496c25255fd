# Declarations of _piece_encoder_impl.hpp: pieces to ids (piece_encoder.py, with
# bpe.merge_piece as PieceMerger) and ids to bytes (token_decoder.py).

from libc.stdint cimport uint8_t, uint32_t
from libcpp cimport bool as cbool
from libcpp.memory cimport shared_ptr
from libcpp.string cimport string
from libcpp.vector cimport vector

from streambpe.core._pretokenize_impl cimport ClassTable, Pattern


cdef extern from "_piece_encoder_impl.hpp" namespace "streambpe" nogil:
    cdef cppclass PieceMerger:
        void add_output(const uint8_t* token, size_t n, uint32_t output)
        void add_rank(const uint8_t* token, size_t n, uint32_t rank)
        void finish() except +
        string save() except +
        cbool load(const uint8_t* data, size_t size) except +
        uint32_t unit_output(uint32_t unit)
        const uint8_t* unit_bytes(uint32_t unit)
        size_t unit_length(uint32_t unit)
        size_t atom_characters()

    cdef cppclass SegmentStore:
        size_t found()
        size_t stored()
        size_t bytes()
        size_t generation_bytes()

    cdef cppclass PieceCache:
        SegmentStore& segments()
        void clear()
        size_t hits()
        size_t misses()
        size_t maxsize()
        size_t size()
        size_t short_slots_in_use()

    enum class EncodeOutcome:
        OK
        LONE_SURROGATE
        MISSING_PART
        PIECE_TOO_LONG

    cdef cppclass EncodeProblem:
        EncodeOutcome outcome
        size_t position
        uint32_t unit
        size_t stopped
        size_t counted

    cdef cppclass TextEncoder:
        TextEncoder(shared_ptr[const PieceMerger] merger, size_t cache_size) except +
        const shared_ptr[const PieceMerger]& merger()
        PieceCache& cache()
        cbool encode_piece(const uint8_t* piece, size_t n, vector[uint32_t]& out,
                           EncodeProblem& problem)
        EncodeProblem encode_text(Pattern pattern, const ClassTable& table, int unit_size,
                                  const void* data, size_t length, cbool ascii,
                                  vector[uint32_t]& out, size_t start, size_t budget,
                                  cbool count_only) except +

    cdef cppclass TokenBytes:
        void add(uint32_t id, const uint8_t* bytes, size_t n) except +
        void finish() except +
        size_t measure(const uint32_t* ids, size_t count, size_t& unknown)
        void write(const uint32_t* ids, size_t count, uint8_t* out, const uint8_t* end)
