# Install rules and the CMake package (docs/cmake-package.md). `cmake --install <build>
# --prefix P` puts under P:
#   include/llmcc/...             the public headers (llmcc::core)
#   include/llmcc_models/models/...  the model headers, spelled "models/gpt2/gpt2.h" as in the tree (llmcc::models)
#   include/llmcc_models/*.grad.h     their generated gradients, spelled "gpt2.grad.h" (llmcc::models)
#   lib/libllmcc_core.a, lib/libllmcc_models.a
#   bin/adgen, bin/llmcc
#   lib/cmake/llmcc/              llmccConfig.cmake, llmccConfigVersion.cmake, llmccTargets.cmake,
#                                 Adgen.cmake (llmcc_adgen(), the same file the tree uses)
# src/models and tools/adgen add llmcc_models and adgen to the export set llmccTargets (tools/llmcc installs
# the llmcc binary, not exported); this file adds the core and the headers and writes the package.
include(CMakePackageConfigHelpers)
set(LLMCC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/llmcc)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/llmcc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

# The GEMM backend is an INTERFACE target the core links privately: a static library's private
# link items are still on its users' link line, so it is exported too (llmcc::gemm_<lib>).
set_target_properties(llmcc_gemm_${LLMCC_GEMM} PROPERTIES EXPORT_NAME gemm_${LLMCC_GEMM})
install(TARGETS llmcc_core llmcc_gemm_${LLMCC_GEMM} EXPORT llmccTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

install(EXPORT llmccTargets NAMESPACE llmcc:: DESTINATION ${LLMCC_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/llmccConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/llmccConfig.cmake
                              INSTALL_DESTINATION ${LLMCC_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/llmccConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/llmccConfig.cmake ${PROJECT_BINARY_DIR}/llmccConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/Adgen.cmake
        DESTINATION ${LLMCC_INSTALL_CMAKEDIR})
