# llmcc_adgen(TARGET <target> SOURCES <model headers...> [ROOT <dir>] [OUTPUT_DIR <dir>]
#             [DEPENDS <files...>])
#
# For each source, runs adgen with the target's include directories, definitions and C++
# standard, writing <OUTPUT_DIR>/<name>.grad.h and .grad.cpp (OUTPUT_DIR defaults to
# <current binary dir>/adgen), adds the .cpp to the target and the directory to its include path
# (generated code includes "<name>.grad.h"). ROOT (default: the calling project's source dir) is
# what the generated files name their source relative to.
#
# One file for llmcc's own build and for the installed package (lib/cmake/llmcc/Adgen.cmake):
# whoever includes it names the adgen to run and llmcc's core library with llmcc_adgen_setup():
#   llmcc's CMakeLists.txt:  llmcc_adgen_setup(EXECUTABLE adgen CORE llmcc_core
#                                              FALLBACK_DIR <source>/generated)
#   llmccConfig.cmake:       llmcc_adgen_setup(EXECUTABLE llmcc::adgen CORE llmcc::core)
# EXECUTABLE is an executable target or a path. adgen is given -I for CORE's interface include
# directories besides the target's own, so the generated code includes llmcc's headers by their
# public names ("llmcc/ops/linear.h") even when the target does not link CORE directly.
# FALLBACK_DIR: when the EXECUTABLE target does not exist (LLMCC_BUILD_ADGEN=OFF, no Clang
# development packages), the committed <FALLBACK_DIR>/<name>.grad.{h,cpp} are used instead.
#
# The settings are global properties, so llmcc_adgen() called from a parent project that added
# llmcc with add_subdirectory uses llmcc's adgen too.
function(llmcc_adgen_setup)
  cmake_parse_arguments(ARG "" "EXECUTABLE;CORE;FALLBACK_DIR" "" ${ARGN})
  if(NOT ARG_EXECUTABLE)
    message(FATAL_ERROR "llmcc_adgen_setup: EXECUTABLE (a target or a path) is required")
  endif()
  set_property(GLOBAL PROPERTY LLMCC_ADGEN_EXECUTABLE "${ARG_EXECUTABLE}")
  set_property(GLOBAL PROPERTY LLMCC_ADGEN_CORE "${ARG_CORE}")
  set_property(GLOBAL PROPERTY LLMCC_ADGEN_FALLBACK_DIR "${ARG_FALLBACK_DIR}")
endfunction()

function(llmcc_adgen)
  cmake_parse_arguments(ARG "" "TARGET;ROOT;OUTPUT_DIR" "SOURCES;DEPENDS" ${ARGN})
  if(NOT ARG_TARGET OR NOT ARG_SOURCES)
    message(FATAL_ERROR "llmcc_adgen: TARGET and SOURCES are required")
  endif()
  if(NOT TARGET ${ARG_TARGET})
    message(FATAL_ERROR "llmcc_adgen: '${ARG_TARGET}' is not a target (call add_executable or "
                        "add_library first)")
  endif()
  get_property(exe GLOBAL PROPERTY LLMCC_ADGEN_EXECUTABLE)
  get_property(core GLOBAL PROPERTY LLMCC_ADGEN_CORE)
  get_property(fallback GLOBAL PROPERTY LLMCC_ADGEN_FALLBACK_DIR)
  if(NOT exe)
    message(FATAL_ERROR "llmcc_adgen: no adgen configured (find_package(llmcc) or "
                        "add_subdirectory(llmcc) first)")
  endif()
  # The command: a target's file (an ALIAS resolved to its target), or a path.
  set(adgen_cmd "")
  if(TARGET ${exe})
    get_target_property(real ${exe} ALIASED_TARGET)
    if(real)
      set(exe ${real})
    endif()
    set(adgen_cmd ${exe})  # add_custom_command turns an executable target into its path
  elseif(EXISTS ${exe} AND NOT IS_DIRECTORY ${exe})
    set(adgen_cmd ${exe})
  endif()

  if(NOT ARG_ROOT)
    set(ARG_ROOT ${PROJECT_SOURCE_DIR})
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/adgen)
  endif()
  file(MAKE_DIRECTORY ${ARG_OUTPUT_DIR})
  # The target's include directories (the $<TARGET_PROPERTY> form includes its link
  # dependencies' interface directories), llmcc's own and the output directory, without empties
  # or repeats. Generated code includes each header it needs by its shortest spelling relative
  # to these ("llmcc/ops/linear.h", "models/gpt2/gpt2.h"); a model header under none of them is included
  # by a path relative to OUTPUT_DIR, so put its directory on the target's include path.
  set(incs "$<TARGET_PROPERTY:${ARG_TARGET},INCLUDE_DIRECTORIES>")
  if(core AND TARGET ${core})
    string(APPEND incs ";$<TARGET_PROPERTY:${core},INTERFACE_INCLUDE_DIRECTORIES>")
  endif()
  string(APPEND incs ";${ARG_OUTPUT_DIR}")
  set(incs "$<REMOVE_DUPLICATES:$<FILTER:${incs},INCLUDE,.>>")
  set(defs "$<TARGET_PROPERTY:${ARG_TARGET},COMPILE_DEFINITIONS>")
  # The target's C++ standard (CXX_STANDARD, else CMAKE_CXX_STANDARD); adgen's own default is
  # -std=c++20, and the last -std on its command line wins.
  set(std "$<TARGET_PROPERTY:${ARG_TARGET},CXX_STANDARD>")
  foreach(src ${ARG_SOURCES})
    get_filename_component(abs ${src} ABSOLUTE)
    get_filename_component(name ${src} NAME_WE)
    set(out_h ${ARG_OUTPUT_DIR}/${name}.grad.h)
    set(out_cpp ${ARG_OUTPUT_DIR}/${name}.grad.cpp)
    if(adgen_cmd)
      add_custom_command(
        OUTPUT ${out_h} ${out_cpp}
        COMMAND ${adgen_cmd} ${abs} --out-header ${out_h} --out-source ${out_cpp} --root ${ARG_ROOT}
                --depfile ${ARG_OUTPUT_DIR}/${name}.grad.d --
                "$<$<BOOL:${incs}>:-I$<JOIN:${incs},;-I>>" "$<$<BOOL:${defs}>:-D$<JOIN:${defs},;-D>>"
                "$<$<BOOL:${std}>:-std=c++${std}>"
        DEPENDS ${adgen_cmd} ${abs} ${ARG_DEPENDS}
        DEPFILE ${ARG_OUTPUT_DIR}/${name}.grad.d
        COMMENT "adgen ${src}"
        COMMAND_EXPAND_LISTS VERBATIM)
    elseif(fallback AND EXISTS ${fallback}/${name}.grad.cpp)
      configure_file(${fallback}/${name}.grad.h ${out_h} COPYONLY)
      configure_file(${fallback}/${name}.grad.cpp ${out_cpp} COPYONLY)
    elseif(fallback)
      message(FATAL_ERROR "llmcc_adgen: ${src} needs adgen (LLMCC_BUILD_ADGEN=ON with clang-19 "
                          "development packages) or a committed ${fallback}/${name}.grad.cpp")
    else()
      message(FATAL_ERROR "llmcc_adgen: ${src} needs adgen, and '${exe}' is neither a target nor "
                          "a file (this llmcc was installed without adgen: LLMCC_BUILD_ADGEN=OFF "
                          "or no clang-19 development packages)")
    endif()
    target_sources(${ARG_TARGET} PRIVATE ${out_cpp})
  endforeach()
  target_include_directories(${ARG_TARGET} PRIVATE ${ARG_OUTPUT_DIR})
endfunction()
