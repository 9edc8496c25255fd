# Declarations of _counting_impl.hpp: counting words for training (train/counting.py).

from libc.stdint cimport uint64_t
from libcpp cimport bool as cbool
from libcpp.vector cimport vector

from streambpe.core._pretokenize_impl cimport ClassTable, Pattern


cdef extern from "_counting_impl.hpp" namespace "streambpe" nogil:
    cdef cppclass WordCountsEntry "streambpe::WordCounts::Entry":
        uint64_t count
        size_t offset
        size_t length

    cdef cppclass WordCounts:
        void add_text(Pattern pattern, const ClassTable& table, int unit_size, const void* data,
                      size_t length, cbool ascii) except +
        const vector[WordCountsEntry]& entries()
        const char* keys()
