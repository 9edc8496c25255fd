# The CPython API that _native.pyx calls and Cython's own cpython.* modules
# lack, or declare without the error return it needs.

from cpython.object cimport PyObject


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    str PyUnicode_DecodeUTF8(const char* data, Py_ssize_t size, const char* errors)
    # A borrowed reference, or NULL: absent (no error set) or failed (error set).
    PyObject* PyDict_GetItemWithError(object mapping, object key) except? NULL
    bint PyUnicode_IS_ASCII(object text)
    long long PyLong_AsLongLongAndOverflow(object number, int* overflow) except? -1
    # A no-op for every str made by Python 3.3+ APIs; kept for strs built by
    # the deprecated wchar_t APIs, whose code units are not ready before it.
    int PyUnicode_READY(object text) except -1
    bint PyObject_CheckBuffer(object item)
    # Out of and back into the cyclic collector's sight (a list of ids
    # holds no cycle; see PieceEncoder.encode_many).
    void PyObject_GC_UnTrack(object container)
    void PyObject_GC_Track(object container)
    # The first index of ``ch`` in text[start:end] (direction 1), -1 if it
    # is not there, -2 with an exception set on error.
    Py_ssize_t PyUnicode_FindChar(
        object text, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end, int direction
    ) except -2
    Py_UCS4 PyUnicode_READ_CHAR(object text, Py_ssize_t index)
    # Lets go of the GIL and takes it back: a thread waiting for it gets a
    # turn between two parts of a long hand-over (PieceEncoder._hand_over).
    ctypedef struct PyThreadState
    PyThreadState* PyEval_SaveThread()
    void PyEval_RestoreThread(PyThreadState* state)
