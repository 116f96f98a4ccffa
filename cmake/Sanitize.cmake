# LLMCC_SANITIZE: AddressSanitizer and UndefinedBehaviorSanitizer on everything this build
# compiles and links (llmcc's libraries, tools and tests). Any finding aborts the process
# (-fno-sanitize-recover=all), so a test that triggers one fails instead of printing and passing.
# Used by scripts/test_sanitized.sh (docs/testing.md); clang-19 and GCC both work.
option(LLMCC_SANITIZE "Build with -fsanitize=address,undefined (scripts/test_sanitized.sh)" OFF)
if(LLMCC_SANITIZE)
  set(LLMCC_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all
                           -fno-omit-frame-pointer)
  add_compile_options(${LLMCC_SANITIZE_FLAGS})
  add_link_options(${LLMCC_SANITIZE_FLAGS})
  # The checks ASan puts on every load and store keep loops from vectorising, so Clang's
  # "loop not vectorized" on `omp simd` loops (-Wpass-failed) says nothing about the real build.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-Wno-pass-failed)
  endif()
endif()
