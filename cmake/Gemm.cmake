# The GEMM library behind src/kernels/cpu/gemm.cpp, chosen by measurement (docs/perf.md, "GEMM:
# the choice of library").
# Default: llmcc's own packed GEMM (src/kernels/cpu/gemm_packed.cpp), the only backend that
# allocates nothing after a thread's first call, so a steady-state training step allocates
# nothing (tests/models/test_no_alloc_steady_state.cpp holds it to zero), and at least as fast as
# the libraries on a training step's shapes. Its micro-kernel is picked at compile time for the
# instruction set -march allows (src/kernels/cpu/gemm_microkernel.h): 14 x 32 with AVX-512,
# 6 x 16 with AVX2 + FMA, a portable one otherwise.
# -DLLMCC_GEMM=onednn (oneDNN's dnnl_sgemm), openblas or blis switch to a library (for
# comparison; every library is from Debian, installed by scripts/setup.sh, and passes
# tests/kernels/test_gemm.cpp).
#
# One INTERFACE target per library that is found (llmcc_gemm_openblas, llmcc_gemm_blis,
# llmcc_gemm_onednn): include path, library and the LLMCC_GEMM_<LIB> definition that selects
# the code path in gemm.cpp. bench/ builds gemm.cpp against each of them; llmcc_core links the
# one named by LLMCC_GEMM through the alias llmcc_gemm_backend.
set(LLMCC_GEMM "own" CACHE STRING "GEMM library for cpu::gemm: onednn, own, openblas or blis")
set_property(CACHE LLMCC_GEMM PROPERTY STRINGS onednn own openblas blis)

# llmcc's own packed GEMM (src/kernels/cpu/gemm_packed.cpp, always compiled into llmcc_core):
# no library, only the definition that makes gemm.cpp call it.
add_library(llmcc_gemm_own INTERFACE)
target_compile_definitions(llmcc_gemm_own INTERFACE LLMCC_GEMM_OWN=1)

set(_mt /usr/lib/x86_64-linux-gnu)
set(_it /usr/include/x86_64-linux-gnu)

# OpenBLAS, OpenMP build (libopenblas-openmp-dev).
find_library(LLMCC_OPENBLAS_LIB NAMES openblas PATHS ${_mt}/openblas-openmp NO_DEFAULT_PATH)
find_path(LLMCC_OPENBLAS_INCLUDE cblas.h PATHS ${_it}/openblas-openmp NO_DEFAULT_PATH)
if(LLMCC_OPENBLAS_LIB AND LLMCC_OPENBLAS_INCLUDE)
  add_library(llmcc_gemm_openblas INTERFACE)
  target_include_directories(llmcc_gemm_openblas SYSTEM INTERFACE ${LLMCC_OPENBLAS_INCLUDE})
  target_link_libraries(llmcc_gemm_openblas INTERFACE ${LLMCC_OPENBLAS_LIB})
  target_compile_definitions(llmcc_gemm_openblas INTERFACE LLMCC_GEMM_OPENBLAS=1)
endif()

# BLIS, OpenMP build (libblis-openmp-dev), called through its native typed API.
find_library(LLMCC_BLIS_LIB NAMES blis PATHS ${_mt}/blis-openmp NO_DEFAULT_PATH)
find_path(LLMCC_BLIS_INCLUDE blis.h PATHS ${_it}/blis-openmp NO_DEFAULT_PATH)
if(LLMCC_BLIS_LIB AND LLMCC_BLIS_INCLUDE)
  add_library(llmcc_gemm_blis INTERFACE)
  target_include_directories(llmcc_gemm_blis SYSTEM INTERFACE ${LLMCC_BLIS_INCLUDE})
  target_link_libraries(llmcc_gemm_blis INTERFACE ${LLMCC_BLIS_LIB})
  target_compile_definitions(llmcc_gemm_blis INTERFACE LLMCC_GEMM_BLIS=1)
endif()

# oneDNN (libdnnl-dev, built on OpenMP), called through dnnl_sgemm.
find_library(LLMCC_DNNL_LIB NAMES dnnl)
find_path(LLMCC_DNNL_INCLUDE oneapi/dnnl/dnnl.h)
if(LLMCC_DNNL_LIB AND LLMCC_DNNL_INCLUDE)
  add_library(llmcc_gemm_onednn INTERFACE)
  target_include_directories(llmcc_gemm_onednn SYSTEM INTERFACE ${LLMCC_DNNL_INCLUDE})
  target_link_libraries(llmcc_gemm_onednn INTERFACE ${LLMCC_DNNL_LIB})
  target_compile_definitions(llmcc_gemm_onednn INTERFACE LLMCC_GEMM_ONEDNN=1)
endif()

set(_apt_own "(nothing: it is part of llmcc)")
set(_apt_openblas libopenblas-openmp-dev)
set(_apt_blis libblis-openmp-dev)
set(_apt_onednn libdnnl-dev)
if(NOT DEFINED _apt_${LLMCC_GEMM})
  message(FATAL_ERROR "LLMCC_GEMM is '${LLMCC_GEMM}', expected onednn, own, openblas or blis")
endif()
if(NOT TARGET llmcc_gemm_${LLMCC_GEMM})
  message(FATAL_ERROR "GEMM library '${LLMCC_GEMM}' not found: run scripts/setup.sh "
                      "(apt-get install ${_apt_${LLMCC_GEMM}})")
endif()
add_library(llmcc_gemm_backend ALIAS llmcc_gemm_${LLMCC_GEMM})
message(STATUS "llmcc: cpu::gemm uses ${LLMCC_GEMM}")
