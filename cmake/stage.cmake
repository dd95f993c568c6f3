# Copies cargo's output into the staged install layout, with the versioned
# shared library and its soname links. Run by the build with -P.
file(MAKE_DIRECTORY "${STAGE}/lib" "${STAGE}/include")
file(COPY_FILE "${OUT}/libtiledzarr.so" "${STAGE}/lib/${SO_REAL}" ONLY_IF_DIFFERENT)
file(COPY_FILE "${OUT}/libtiledzarr.a" "${STAGE}/lib/libtiledzarr.a" ONLY_IF_DIFFERENT)
file(CREATE_LINK "${SO_REAL}" "${STAGE}/lib/${SO_MAJOR}" SYMBOLIC)
file(CREATE_LINK "${SO_MAJOR}" "${STAGE}/lib/libtiledzarr.so" SYMBOLIC)
file(COPY_FILE "${ROOT}/include/tiledzarr.h" "${STAGE}/include/tiledzarr.h" ONLY_IF_DIFFERENT)
file(COPY_FILE "${ROOT}/examples/cpp/tiledzarr.hpp" "${STAGE}/include/tiledzarr.hpp" ONLY_IF_DIFFERENT)
