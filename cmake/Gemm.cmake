# The GEMM library behind src/kernels/cpu/gemm.cpp. Chosen by measurement (docs/perf.md);
# every library is from Debian and installed by scripts/setup.sh.
set(LLMCC_OPENBLAS_DIR /usr/lib/x86_64-linux-gnu/openblas-openmp)
find_library(LLMCC_OPENBLAS_LIB NAMES openblas PATHS ${LLMCC_OPENBLAS_DIR} NO_DEFAULT_PATH)
find_path(LLMCC_OPENBLAS_INCLUDE cblas.h PATHS /usr/include/x86_64-linux-gnu/openblas-openmp NO_DEFAULT_PATH)
if(NOT LLMCC_OPENBLAS_LIB OR NOT LLMCC_OPENBLAS_INCLUDE)
  message(FATAL_ERROR "OpenBLAS (OpenMP build) not found: run scripts/setup.sh "
                      "(apt-get install libopenblas-openmp-dev)")
endif()
add_library(llmcc_gemm_backend INTERFACE)
target_include_directories(llmcc_gemm_backend INTERFACE ${LLMCC_OPENBLAS_INCLUDE})
target_link_libraries(llmcc_gemm_backend INTERFACE ${LLMCC_OPENBLAS_LIB})
target_compile_definitions(llmcc_gemm_backend INTERFACE LLMCC_GEMM_OPENBLAS=1)
