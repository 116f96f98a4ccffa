# Every tests/<dir>/test_*.cpp is one GoogleTest executable. Folders that mirror the sources
# (io, text, tensor, train, models; cli for tools/llmcc) hold unit tests, label `unit`, except
# the model-against-reference tests named *_parity.cpp, label `model`; the other folders are
# named for their kind, which is their label (kernels, e2e, adgen, mpi). Op tests (tests/ops)
# hold three kinds of suites, told apart by name, so each kind gets its own label:
#   <Op>Kernel.*  fast kernel against the reference kernel        -> label kernels
#   <Op>Grad.*    reference backward against finite differences   -> label grad
#   <Op>Api.*     front-end validation, accumulation, null skips  -> label unit
# A suite named otherwise runs too, labelled unit.
find_package(GTest REQUIRED)
include(GoogleTest)

# Every test runs the GEMM with its built-in cache blocking (llmcc::GemmTune::Off): no test
# process measures one, on a machine other tests are loading, and writes it into the user's cache.
# The autotuner's own tests (tests/kernels/test_gemm_blocking.cpp) choose their mode and cache.
set(LLMCC_TEST_ENVIRONMENT "LLMCC_GEMM_TUNE=off")

add_library(llmcc_test_support INTERFACE)
target_include_directories(llmcc_test_support INTERFACE ${PROJECT_SOURCE_DIR}/tests/support
                                                        ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(llmcc_test_support INTERFACE llmcc_core GTest::gtest GTest::gtest_main)
# GCC 12's range analysis reports std::string's inlined copies in the tests' string building as
# out of bounds (-Wstringop-overflow, -Warray-bounds, false positives) once the standard headers
# come from the precompiled header; the same sources compile clean when they include the headers
# themselves. The sanitizer build (clang) checks the tests' memory accesses as they run.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(llmcc_test_support INTERFACE -Wno-stringop-overflow -Wno-array-bounds)
endif()
# Tests link the library (the core and the model families); the llmcc binary's path is there for
# tests that run it as a user would. Only a test that calls the command line's own code
# (namespace llmcc::cli) links llmcc_cli as well (llmcc_test_program).
target_link_libraries(llmcc_test_support INTERFACE llmcc_models)
if(TARGET llmcc)
  target_compile_definitions(llmcc_test_support INTERFACE
    LLMCC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" LLMCC_BINARY="$<TARGET_FILE:llmcc>")
else()
  target_compile_definitions(llmcc_test_support INTERFACE LLMCC_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()

# Test sources compile at -O1: the optimizer takes about half of their compile time at -O3, and
# what the tests spend their time in (the library's kernels and the models) is compiled with the
# library's own flags. CMAKE_CXX_FLAGS_<CONFIG> come first on the command line, so this -O1 wins.
if(CMAKE_BUILD_TYPE STREQUAL "Release")
  target_compile_options(llmcc_test_support INTERFACE -O1)
endif()
# The sanitizer build's test sources compile at -O0: with ASan and UBSan, Clang's optimizer takes
# more than half of their compile time, and the sanitizers check their memory accesses at any level.
if(LLMCC_SANITIZE)
  target_compile_options(llmcc_test_support INTERFACE -O0)
endif()
# The tests' arithmetic that costs run time (the GEMM tests' double-precision reference) lives in
# this library, compiled with the library's own optimisation, not the test sources' level above.
add_library(llmcc_test_reference STATIC ${PROJECT_SOURCE_DIR}/tests/support/naive_gemm.cpp)
target_include_directories(llmcc_test_reference PUBLIC ${PROJECT_SOURCE_DIR}/tests/support)
target_link_libraries(llmcc_test_support INTERFACE llmcc_test_reference)

# Every test program's sources start from one precompiled header of GoogleTest and the standard
# headers most tests include: parsing them takes 2.5 s of each test source's compile with GCC 12,
# about as long as the rest of most tests' compile. Project headers stay out of it, so a change
# to one rebuilds only the tests that include it. CMAKE_DISABLE_PRECOMPILE_HEADERS=ON turns it off.
# The header is built by a test program of no tests (GoogleTest's main), so that it is compiled
# with exactly the flags of the programs that reuse it (-fPIE among them).
add_executable(llmcc_test_pch ${PROJECT_SOURCE_DIR}/tests/support/precompiled.cpp)
target_link_libraries(llmcc_test_pch PRIVATE llmcc_test_support)
target_precompile_headers(llmcc_test_pch PRIVATE
  <gtest/gtest.h> <algorithm> <array> <chrono> <cmath> <cstdint> <cstdio> <cstdlib> <cstring>
  <filesystem> <fstream> <functional> <limits> <map> <random> <sstream> <string> <vector>)

# llmcc_test_program(name source...): a GoogleTest executable with the test support library and
# the shared precompiled header. The caller registers its tests (gtest_discover_tests).
function(llmcc_test_program name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE llmcc_test_support)
  target_precompile_headers(${name} REUSE_FROM llmcc_test_pch)
  foreach(source ${ARGN})
    get_filename_component(path ${source} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    file(READ ${path} text)
    if(text MATCHES "llmcc::cli::" AND TARGET llmcc_cli)
      target_link_libraries(${name} PRIVATE llmcc_cli)
    endif()
  endforeach()
endfunction()

set(LLMCC_SOURCE_MIRROR_TEST_DIRS io text tensor train models cli)
# A test directory with its own CMakeLists.txt (tests that need generated code, fixtures or
# extra libraries) is added as a subdirectory and globbed no further.
file(GLOB LLMCC_TEST_DIRS LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/tests/*)
set(LLMCC_TEST_FILES "")
foreach(dir ${LLMCC_TEST_DIRS})
  if(EXISTS ${dir}/CMakeLists.txt)
    add_subdirectory(${dir})
  elseif(IS_DIRECTORY ${dir})
    file(GLOB dir_tests CONFIGURE_DEPENDS ${dir}/test_*.cpp)
    list(APPEND LLMCC_TEST_FILES ${dir_tests})
  endif()
endforeach()
# Test programs that train for a while with a thread per core run alone (RUN_SERIAL): beside
# another such test under `ctest -j2` both spend most of their time waiting for cores the other
# holds (e2e.TrainBf16's 600 steps took 230 s there against 80 s alone).
set(LLMCC_SERIAL_TESTS test_train_e2e test_train_bf16)
foreach(test_file ${LLMCC_TEST_FILES})
  get_filename_component(test_name ${test_file} NAME_WE)
  get_filename_component(test_dir ${test_file} DIRECTORY)
  get_filename_component(test_label ${test_dir} NAME)
  if(test_label IN_LIST LLMCC_SOURCE_MIRROR_TEST_DIRS)
    if(test_name MATCHES "_parity$")
      set(test_label model)
    else()
      set(test_label unit)
    endif()
  endif()
  llmcc_test_program(${test_name} ${test_file})
  if(TARGET llmcc)
    add_dependencies(${test_name} llmcc)  # tests that run the binary must not see a stale one
  endif()
  if(test_label STREQUAL "ops")
    gtest_discover_tests(${test_name} TEST_FILTER "*Kernel.*" TEST_PREFIX "kernels."
                         PROPERTIES LABELS kernels ENVIRONMENT ${LLMCC_TEST_ENVIRONMENT} DISCOVERY_TIMEOUT 60)
    gtest_discover_tests(${test_name} TEST_FILTER "*Grad.*" TEST_PREFIX "grad."
                         PROPERTIES LABELS grad ENVIRONMENT ${LLMCC_TEST_ENVIRONMENT} DISCOVERY_TIMEOUT 60)
    gtest_discover_tests(${test_name} TEST_FILTER "*Api.*" TEST_PREFIX "unit."
                         PROPERTIES LABELS unit ENVIRONMENT ${LLMCC_TEST_ENVIRONMENT} DISCOVERY_TIMEOUT 60)
    gtest_discover_tests(${test_name} TEST_FILTER "-*Kernel.*:*Grad.*:*Api.*" TEST_PREFIX "unit."
                         PROPERTIES LABELS unit ENVIRONMENT ${LLMCC_TEST_ENVIRONMENT} DISCOVERY_TIMEOUT 60)
  elseif(test_name IN_LIST LLMCC_SERIAL_TESTS)
    gtest_discover_tests(${test_name} TEST_PREFIX "${test_label}."
                         PROPERTIES LABELS ${test_label} RUN_SERIAL TRUE ENVIRONMENT ${LLMCC_TEST_ENVIRONMENT}
                         DISCOVERY_TIMEOUT 60)
  else()
    gtest_discover_tests(${test_name} TEST_PREFIX "${test_label}."
                         PROPERTIES LABELS ${test_label} ENVIRONMENT ${LLMCC_TEST_ENVIRONMENT} DISCOVERY_TIMEOUT 60)
  endif()
endforeach()

# Every relative link in the Markdown files resolves inside the repository (file and #anchor).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME unit.docs_links COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check_doc_links.py
                                        ${PROJECT_SOURCE_DIR})
  set_tests_properties(unit.docs_links PROPERTIES LABELS unit)
endif()

# cpu::gemv_rows_int8 has a path per instruction set (src/kernels/cpu/gemv_int8.cpp) and a build
# compiles the one its -march allows. Each path is also compiled alone, with the -march of a CPU
# that has exactly its instructions, into a program of tests/kernels/int8_path_check.cpp (itself
# compiled for this machine), which runs the paths this CPU has and skips the others by name.
foreach(path portable:x86-64: avx2:haswell:avx2 avx-vnni:alderlake:avxvnni avx512-vnni:icelake-server:avx512vnni)
  string(REPLACE ":" ";" parts "${path}")
  list(GET parts 0 name)
  list(GET parts 1 arch)
  list(GET parts 2 feature)
  string(REPLACE "-" "_" target_name "test_int8_path_${name}")
  add_library(${target_name}_kernel OBJECT ${PROJECT_SOURCE_DIR}/src/kernels/cpu/gemv_int8.cpp
                                           ${PROJECT_SOURCE_DIR}/src/kernels/cpu/int8_rows.cpp)
  target_include_directories(${target_name}_kernel PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${target_name}_kernel PRIVATE -march=${arch} -mtune=generic)
  target_link_libraries(${target_name}_kernel PRIVATE OpenMP::OpenMP_CXX)
  add_executable(${target_name} ${PROJECT_SOURCE_DIR}/tests/kernels/int8_path_check.cpp
                                $<TARGET_OBJECTS:${target_name}_kernel>)
  target_include_directories(${target_name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(${target_name} PRIVATE LLMCC_INT8_PATH="${name}")
  if(feature)
    target_compile_definitions(${target_name} PRIVATE LLMCC_INT8_CPU_FEATURE="${feature}")
  endif()
  target_link_libraries(${target_name} PRIVATE GTest::gtest GTest::gtest_main OpenMP::OpenMP_CXX)
  gtest_discover_tests(${target_name} TEST_PREFIX "kernels.${name}."
                       PROPERTIES LABELS kernels ENVIRONMENT ${LLMCC_TEST_ENVIRONMENT} DISCOVERY_TIMEOUT 60)
endforeach()
