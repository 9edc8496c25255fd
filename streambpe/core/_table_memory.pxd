# Declarations of _table_memory.hpp: the big tables' memory.


cdef extern from "_table_memory.hpp" namespace "streambpe" nogil:
    void advise_huge_pages(void* data, size_t bytes)
    size_t kept_table_memory(size_t limit, size_t& limit_now) except +
