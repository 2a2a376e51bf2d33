# The CPU executor's build (included by CMakeLists.txt with ELI_DEVICE_SOURCES = this folder's *.c).
# SIMD kernels: only these files get the ISA flags; kernels.c calls them after a CPUID / HWCAP check.
# kernels_avx2.c / tquant_avx2.c and kernels_avx512.c / tquant_avx512.c are x86 only; kernels_neon.c and
# tquant_neon.c need no flag (NEON is baseline on aarch64, their dotprod functions carry a target
# attribute) and compile to nothing elsewhere.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64|i[3-6]86")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/kernels_avx2.c ${CMAKE_CURRENT_LIST_DIR}/tquant_avx2.c
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/kernels_avx512.c ${CMAKE_CURRENT_LIST_DIR}/tquant_avx512.c
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512vnni")
else()
  list(REMOVE_ITEM ELI_DEVICE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels_avx2.c ${CMAKE_CURRENT_LIST_DIR}/kernels_avx512.c
       ${CMAKE_CURRENT_LIST_DIR}/tquant_avx2.c ${CMAKE_CURRENT_LIST_DIR}/tquant_avx512.c)
endif()
