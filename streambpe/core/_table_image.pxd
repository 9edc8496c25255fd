# Declarations of _table_image.hpp: built tables as bytes, for the table cache.


cdef extern from "_table_image.hpp" namespace "streambpe" nogil:
    const char* image_tag()
