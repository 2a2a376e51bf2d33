# Cross toolchain for aarch64 Linux (Debian/Ubuntu: gcc-aarch64-linux-gnu libc6-dev-arm64-cross).
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# Override the compiler prefix with -DELI_CROSS_PREFIX=... (default aarch64-linux-gnu-), or use clang with
# -DELI_CROSS_CLANG=ON (then the GNU cross binutils/libc are still used for the sysroot and linking).
# Test binaries run through qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR) when ctest is used.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(ELI_CROSS_PREFIX "aarch64-linux-gnu-" CACHE STRING "cross compiler prefix")
set(ELI_CROSS_SYSROOT "/usr/aarch64-linux-gnu" CACHE PATH "target libc root (headers, libs, ld.so)")
option(ELI_CROSS_CLANG "cross compile with clang --target=aarch64-linux-gnu" OFF)

if(ELI_CROSS_CLANG)
  set(CMAKE_C_COMPILER clang)
  set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
else()
  set(CMAKE_C_COMPILER ${ELI_CROSS_PREFIX}gcc)
endif()

set(CMAKE_FIND_ROOT_PATH ${ELI_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(ELI_QEMU_AARCH64 qemu-aarch64)
if(ELI_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${ELI_QEMU_AARCH64} -L ${ELI_CROSS_SYSROOT})
endif()
