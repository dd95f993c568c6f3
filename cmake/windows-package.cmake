# Writes the CMake package files of the Windows release (run by
# scripts/package-windows.sh):
#
#   cmake -DROOT=<repo> -DDEST=<release>/lib/cmake/TiledZarr -DSTATIC_LIBS="kernel32;..." -P windows-package.cmake
cmake_minimum_required(VERSION 3.16)
include(CMakePackageConfigHelpers)
file(READ "${ROOT}/Cargo.toml" _cargo_toml)
string(REGEX MATCH "\nversion = \"([0-9]+)\\.([0-9]+)\\.([0-9]+)\"" _ "${_cargo_toml}")
set(PROJECT_VERSION "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}")
set(PROJECT_VERSION_MAJOR "${CMAKE_MATCH_1}")
set(TZ_WINDOWS_STATIC_LIBS "${STATIC_LIBS}")
configure_file("${ROOT}/cmake/TiledZarrConfig.cmake.in" "${DEST}/TiledZarrConfig.cmake" @ONLY)
write_basic_package_version_file("${DEST}/TiledZarrConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMajorVersion)
