# llmcc_adgen(TARGET <target> SOURCES <model sources...> [ROOT <dir>])
#
# For each source, runs adgen with the target's include directories, definitions and C++
# standard, writing <binary dir>/adgen/<name>.grad.h and .grad.cpp, adds the .cpp to the target
# and the directory to its include path (generated code includes "<name>.grad.h").
# With LLMCC_BUILD_ADGEN=OFF (no Clang development packages), the committed copies under
# generated/ are used instead when they exist.
function(llmcc_adgen)
  cmake_parse_arguments(ARG "" "TARGET;ROOT;OUTPUT_DIR" "SOURCES;DEPENDS" ${ARGN})
  if(NOT ARG_TARGET OR NOT ARG_SOURCES)
    message(FATAL_ERROR "llmcc_adgen: TARGET and SOURCES are required")
  endif()
  if(NOT ARG_ROOT)
    set(ARG_ROOT ${PROJECT_SOURCE_DIR})
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/adgen)
  endif()
  file(MAKE_DIRECTORY ${ARG_OUTPUT_DIR})
  set(incs "$<TARGET_PROPERTY:${ARG_TARGET},INCLUDE_DIRECTORIES>")
  set(defs "$<TARGET_PROPERTY:${ARG_TARGET},COMPILE_DEFINITIONS>")
  # The target's C++ standard (CXX_STANDARD, else CMAKE_CXX_STANDARD); adgen's own default is
  # -std=c++20, and the last -std on its command line wins.
  set(std "$<TARGET_PROPERTY:${ARG_TARGET},CXX_STANDARD>")
  foreach(src ${ARG_SOURCES})
    get_filename_component(abs ${src} ABSOLUTE)
    get_filename_component(name ${src} NAME_WE)
    set(out_h ${ARG_OUTPUT_DIR}/${name}.grad.h)
    set(out_cpp ${ARG_OUTPUT_DIR}/${name}.grad.cpp)
    if(TARGET adgen)
      add_custom_command(
        OUTPUT ${out_h} ${out_cpp}
        COMMAND adgen ${abs} --out-header ${out_h} --out-source ${out_cpp} --root ${ARG_ROOT}
                --depfile ${ARG_OUTPUT_DIR}/${name}.grad.d --
                "$<$<BOOL:${incs}>:-I$<JOIN:${incs},;-I>>" "$<$<BOOL:${defs}>:-D$<JOIN:${defs},;-D>>"
                "$<$<BOOL:${std}>:-std=c++${std}>"
                -I${ARG_OUTPUT_DIR}
        DEPENDS adgen ${abs} ${ARG_DEPENDS}
        DEPFILE ${ARG_OUTPUT_DIR}/${name}.grad.d
        COMMENT "adgen ${src}"
        COMMAND_EXPAND_LISTS VERBATIM)
    elseif(EXISTS ${PROJECT_SOURCE_DIR}/generated/${name}.grad.cpp)
      configure_file(${PROJECT_SOURCE_DIR}/generated/${name}.grad.h ${out_h} COPYONLY)
      configure_file(${PROJECT_SOURCE_DIR}/generated/${name}.grad.cpp ${out_cpp} COPYONLY)
    else()
      message(FATAL_ERROR "llmcc_adgen: ${src} needs adgen (LLMCC_BUILD_ADGEN=ON with clang-19 "
                          "development packages) or a committed generated/${name}.grad.cpp")
    endif()
    target_sources(${ARG_TARGET} PRIVATE ${out_cpp})
  endforeach()
  target_include_directories(${ARG_TARGET} PRIVATE ${ARG_OUTPUT_DIR})
endfunction()
