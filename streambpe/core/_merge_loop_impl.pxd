# Declarations of _merge_loop_impl.hpp: the training merge loop (merge_loop.py).

from libc.stdint cimport int64_t, uint8_t, uint32_t
from libcpp cimport bool as cbool
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.vector cimport vector


cdef extern from "_merge_loop_impl.hpp" namespace "streambpe" nogil:
    cdef cppclass MergeState:
        void add_word(const uint8_t* word, size_t n, int64_t count)
        void build()
        cbool step()
        size_t run(size_t limit)
        vector[pair[uint32_t, uint32_t]]& merges()
        const string& token(uint32_t token_id)
