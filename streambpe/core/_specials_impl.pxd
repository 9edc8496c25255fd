# Declarations of _specials_impl.hpp: special tokens found in a str's code units
# (cutting/specials.py's SpecialTokenScanner.matches).

from libc.stdint cimport uint32_t
from libcpp.vector cimport vector


cdef extern from "_specials_impl.hpp" namespace "streambpe::specials" nogil:
    cdef cppclass Match:
        size_t start
        size_t end
        uint32_t token

    void find_matches_of_kind(int unit_size, const void* text, size_t length,
                              const vector[vector[uint32_t]]& tokens, vector[Match]& out) except +
