# Declarations of _pretokenize_impl.hpp: the scanners (pretokenize.py).

from libc.stdint cimport uint16_t, uint32_t
from libcpp.vector cimport vector

from streambpe.core._pattern_compiler_impl cimport PatternProgram


cdef extern from "_pretokenize_impl.hpp" namespace "streambpe::pretokenize" nogil:
    enum class Builtin:
        GPT2
        CL100K
        O200K
        COMPILED

    cdef cppclass Pattern:
        Builtin kind
        size_t window

    Pattern builtin_pattern(Builtin kind)
    Pattern compiled_pattern(const PatternProgram* program, size_t window)

    cdef cppclass ClassTable:
        ClassTable(const uint16_t* block_of, size_t block_of_length,
                   const uint16_t* blocks, size_t blocks_length) except +
        uint16_t operator()(uint32_t cp)

    void piece_ends(Pattern pattern, const ClassTable& table, int unit_size, const void* data,
                    size_t length, vector[size_t]& starts, vector[size_t]& ends) except +
    size_t count_pieces(Pattern pattern, const ClassTable& table, int unit_size,
                        const void* data, size_t length) except +
