# The package tests' driver (cmake -P), one step per call:
#
#   -DSTEP=install -DBUILD_DIR=<llmcc build> -DPREFIX=<dir>
#       installs the build into a fresh PREFIX (`cmake --install`) and checks the package files.
#   -DSTEP=project -DSOURCE=<project dir> -DNAME=<name> -DPREFIX=<dir> -DWORK=<dir>
#                  -DGENERATOR=<g> [-DMAKE_PROGRAM=<p>] -DCXX=<compiler> [-DBUILD_TYPE=<t>]
#       configures SOURCE (an outside project: find_package(llmcc)) against PREFIX in a fresh
#       WORK/NAME with llmcc's compiler, builds it with -j2, and runs its executable with
#       --check (in WORK/NAME): the one named NAME, else the only one the project defines.
#
# Every command is printed before it runs; a failing step ends with "package test: ..." saying
# which step failed and where to look.
cmake_minimum_required(VERSION 3.25)

function(fail what)
  message(FATAL_ERROR "package test: ${what}")
endfunction()

# Runs a command (in RUN_DIR when set), printed first; fails with `what` when it exits nonzero.
function(run what)
  string(JOIN " " shown ${ARGN})
  set(where "")
  if(RUN_DIR)
    set(where WORKING_DIRECTORY ${RUN_DIR})
    set(shown "(cd ${RUN_DIR} && ${shown})")
  endif()
  message("package: $ ${shown}")
  execute_process(COMMAND ${ARGN} ${where} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    fail("${what} failed (exit ${rc}): ${shown}")
  endif()
endfunction()

if(STEP STREQUAL "install")
  foreach(var BUILD_DIR PREFIX)
    if(NOT ${var})
      fail("STEP=install needs -D${var}=...")
    endif()
  endforeach()
  file(REMOVE_RECURSE ${PREFIX})
  run("installing the llmcc build ${BUILD_DIR} (is it built? the install needs every target)"
      ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
  foreach(f lib/cmake/llmcc/llmccConfig.cmake lib/cmake/llmcc/llmccConfigVersion.cmake
            lib/cmake/llmcc/llmccTargets.cmake lib/cmake/llmcc/Adgen.cmake
            include/llmcc/tensor.h lib/libllmcc_core.a)
    if(NOT EXISTS ${PREFIX}/${f})
      fail("the install has no ${f} (cmake/Install.cmake)")
    endif()
  endforeach()
  message("package: llmcc installed in ${PREFIX}")

elseif(STEP STREQUAL "project")
  foreach(var SOURCE NAME PREFIX WORK GENERATOR CXX)
    if(NOT ${var})
      fail("STEP=project needs -D${var}=...")
    endif()
  endforeach()
  if(NOT EXISTS ${PREFIX}/lib/cmake/llmcc/llmccConfig.cmake)
    fail("no llmcc installed in ${PREFIX}: the fixture test package.install runs first")
  endif()
  if(NOT BUILD_TYPE)
    set(BUILD_TYPE Release)
  endif()
  set(build ${WORK}/${NAME})
  file(REMOVE_RECURSE ${build})
  # Ask CMake's file API for the project's targets, to find the executable to run.
  file(WRITE ${build}/.cmake/api/v1/query/codemodel-v2 "")
  set(make_program "")
  if(MAKE_PROGRAM)
    set(make_program -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
  endif()
  run("configuring ${NAME} (${SOURCE}) against the installed llmcc"
      ${CMAKE_COMMAND} -S ${SOURCE} -B ${build} -G ${GENERATOR} ${make_program}
      -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_PREFIX_PATH=${PREFIX})
  run("building ${NAME} (${SOURCE})" ${CMAKE_COMMAND} --build ${build} --parallel 2)

  # The executables the project defines (file API: codemodel-v2 -> one file per target).
  file(GLOB index ${build}/.cmake/api/v1/reply/index-*.json)
  if(NOT index)
    fail("CMake wrote no file-API reply in ${build}/.cmake/api/v1/reply")
  endif()
  list(GET index 0 index)
  file(READ ${index} json)
  string(JSON codemodel GET "${json}" reply codemodel-v2 jsonFile)
  file(READ ${build}/.cmake/api/v1/reply/${codemodel} json)
  string(JSON targets GET "${json}" configurations 0 targets)
  string(JSON count LENGTH "${targets}")
  set(exes "")
  set(chosen "")
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON target_file GET "${targets}" ${i} jsonFile)
      file(READ ${build}/.cmake/api/v1/reply/${target_file} target)
      string(JSON type GET "${target}" type)
      if(type STREQUAL "EXECUTABLE")
        string(JSON name GET "${target}" name)
        string(JSON path GET "${target}" artifacts 0 path)
        if(NOT IS_ABSOLUTE ${path})
          set(path ${build}/${path})
        endif()
        list(APPEND exes ${name})
        if(name STREQUAL NAME)
          set(chosen ${path})
        endif()
        set(only ${path})
      endif()
    endforeach()
  endif()
  list(LENGTH exes n_exes)
  if(NOT chosen AND n_exes EQUAL 1)
    set(chosen ${only})
  endif()
  if(NOT chosen)
    fail("${SOURCE} defines executables [${exes}]: expected one, or one named '${NAME}' to run "
         "with --check")
  endif()
  set(RUN_DIR ${build})  # files the program writes stay in its build directory
  run("running ${NAME}'s self-check" ${chosen} --check)
  message("package: ${NAME} built against the installed llmcc and passed its check")

else()
  fail("unknown STEP '${STEP}': expected install or project")
endif()
