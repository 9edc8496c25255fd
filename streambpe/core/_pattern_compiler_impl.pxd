# Declarations of _pattern_compiler_impl.hpp: the matcher of the programs that
# pattern_compiler.py compiles.

from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libcpp cimport bool as cbool


cdef extern from "_pattern_compiler_impl.hpp" namespace "streambpe::pretokenize" nogil:
    cdef cppclass BaseTable:
        BaseTable(const uint16_t* block_of, size_t block_of_length,
                  const uint8_t* blocks, size_t blocks_length) except +

    cdef cppclass Regex:
        void add_class(uint64_t base_mask, cbool negated) except +
        void add_range(uint32_t low, uint32_t high) except +
        void set_code(const uint32_t* code, size_t length)
        void add_branch(uint32_t first, uint32_t start)

    cdef cppclass PatternProgram:
        Regex& add_regex()
        void add_step(size_t index, int behavior, cbool invert) except +
        void finish(const BaseTable& base) except +
        cbool is_chain()
