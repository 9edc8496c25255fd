# Declarations of _native_glue.hpp: Python lists filled from native arrays.

from libc.stdint cimport uint32_t
from libcpp.string cimport string
from libcpp.vector cimport vector


cdef extern from "_native_glue.hpp" namespace "streambpe::glue":
    list piece_list(str text, const vector[size_t]& starts, const vector[size_t]& ends)
    int extend_ids(
        list out, list ids, list specials, const uint32_t* outputs, size_t count,
        const uint32_t* values,
    ) except -1
    int move_part(list joined, list parts, Py_ssize_t index) except -1
    list unmade_ints(Py_ssize_t count)
    int reserve_ids(list out, Py_ssize_t count) except -1
    cdef cppclass RecordWriter:
        RecordWriter(string& content, size_t expected)
        void put(uint32_t value, const char* data, uint32_t length)
        void finish()
