# Copies cargo's output into the staged install layout, with the versioned
# shared library, its soname (written by patchelf where the build found
# it) and its soname links. Run by the build with -P.
file(MAKE_DIRECTORY "${STAGE}/lib" "${STAGE}/include")
file(COPY_FILE "${OUT}/libtiledzarr.so" "${STAGE}/lib/${SO_REAL}")
if(PATCHELF)
  execute_process(COMMAND "${PATCHELF}" --set-soname "${SO_MAJOR}" "${STAGE}/lib/${SO_REAL}"
                  RESULT_VARIABLE patched)
  if(NOT patched EQUAL 0)
    message(FATAL_ERROR "patchelf could not set the soname of ${SO_REAL}: ${patched}")
  endif()
endif()
file(COPY_FILE "${OUT}/libtiledzarr.a" "${STAGE}/lib/libtiledzarr.a" ONLY_IF_DIFFERENT)
file(CREATE_LINK "${SO_REAL}" "${STAGE}/lib/${SO_MAJOR}" SYMBOLIC)
file(CREATE_LINK "${SO_MAJOR}" "${STAGE}/lib/libtiledzarr.so" SYMBOLIC)
file(COPY_FILE "${ROOT}/include/tiledzarr.h" "${STAGE}/include/tiledzarr.h" ONLY_IF_DIFFERENT)
file(COPY_FILE "${ROOT}/examples/cpp/tiledzarr.hpp" "${STAGE}/include/tiledzarr.hpp" ONLY_IF_DIFFERENT)
