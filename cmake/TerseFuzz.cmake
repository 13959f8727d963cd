# TERSE_FUZZ=ON: the libFuzzer targets of tests/fuzz (tests/fuzz/README.md). Every parser of
# outside bytes (codec messages, codec specs, policy YAML, bootstrap messages) gets a target
# that feeds it arbitrary bytes under AddressSanitizer and UBSan.
#
# libFuzzer ships with clang only, and the fuzz build is a CPU build (a decoder's host path is
# what parses bytes from the network; nvcc does not take these flags), so both are required.
# All of terse's code in this build is compiled with coverage instrumentation
# (-fsanitize=fuzzer-no-link) and the sanitizers; system libraries (yaml-cpp, OpenBLAS) are not.
#
# Adding a target, from any CMakeLists.txt once this file is included:
#   terse_add_fuzz_target(fuzz_bootstrap_messages
#                         ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_bootstrap_messages.cpp
#                         ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/fuzz_bootstrap_messages
#                         LINK terse_transport)
# The source defines LLVMFuzzerTestOneInput; the corpus directory holds the committed seeds.
# tests/fuzz/run_fuzzers.sh then builds and runs it with the others (it reads the list of
# targets this file writes to <build>/fuzz_targets.txt).

if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR
          "TERSE_FUZZ=ON needs clang (libFuzzer ships with it); this build uses "
          "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER}. Configure a separate build directory "
          "with CC=clang CXX=clang++, as tests/fuzz/run_fuzzers.sh does.")
endif()
if(NOT TERSE_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "TERSE_FUZZ=ON is a CPU build: add -DTERSE_CUDA=OFF")
endif()

include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=fuzzer,address,undefined")
check_cxx_source_compiles(
    "#include <cstddef>
     #include <cstdint>
     extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }"
    TERSE_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NOT TERSE_HAVE_LIBFUZZER)
  message(FATAL_ERROR
          "TERSE_FUZZ=ON: ${CMAKE_CXX_COMPILER} cannot link -fsanitize=fuzzer,address,undefined "
          "(on Debian 12: apt-get install clang libclang-rt-14-dev)")
endif()

# Everything compiled from here on: coverage for libFuzzer, and the sanitizers stop at the first
# report (a report must be a crash, or the fuzzer would run past it).
add_compile_options(
    $<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link,address,undefined>
    $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=all>
    $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
    $<$<COMPILE_LANGUAGE:C,CXX>:-g1>)
add_link_options(-fsanitize=address,undefined)
# One body per hot loop instead of per-ISA clones (common/host_device.h): clang does not clone
# templates, and the fuzzer needs the one body that runs, not three.
add_compile_definitions(TERSE_NO_CLONES)

# terse_add_fuzz_target(<name> <source> <corpus_dir> [LINK <libraries>...])
#   An executable <name> from <source> (and tests/fuzz/fuzz_support.h), linked with libFuzzer's
#   main and with terse_codecs plus LINK. <corpus_dir> holds its committed seed corpus; it is
#   recorded, with the binary, in <build>/fuzz_targets.txt for tests/fuzz/run_fuzzers.sh.
#   A file <corpus_dir>.dict, when present, is passed as the libFuzzer dictionary.
function(terse_add_fuzz_target name source corpus_dir)
  cmake_parse_arguments(PARSE_ARGV 3 FUZZ "" "" "LINK")
  if(FUZZ_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "terse_add_fuzz_target(${name}): unexpected ${FUZZ_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT IS_ABSOLUTE "${corpus_dir}")
    set(corpus_dir "${CMAKE_CURRENT_SOURCE_DIR}/${corpus_dir}")
  endif()
  if(NOT IS_DIRECTORY "${corpus_dir}")
    message(WARNING "terse_add_fuzz_target(${name}): no seed corpus at ${corpus_dir} yet; "
                    "the fuzzer starts from nothing (tests/fuzz/README.md: seeds)")
  endif()
  add_executable(${name} ${source})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/fuzz)
  target_link_libraries(${name} PRIVATE terse_codecs ${FUZZ_LINK})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  set(dict "")
  if(EXISTS "${corpus_dir}.dict")
    set(dict "${corpus_dir}.dict")
  endif()
  set_property(GLOBAL APPEND PROPERTY TERSE_FUZZ_TARGETS
               "${name}\t$<TARGET_FILE:${name}>\t${corpus_dir}\t${dict}")
  add_dependencies(terse_fuzz_targets ${name})
endfunction()

# `cmake --build <dir> --target terse_fuzz_targets` builds every fuzz target.
add_custom_target(terse_fuzz_targets)

# Written once every directory has added its targets: one line per target,
# "name<TAB>binary<TAB>corpus_dir<TAB>dictionary (or empty)".
function(_terse_write_fuzz_target_list)
  get_property(targets GLOBAL PROPERTY TERSE_FUZZ_TARGETS)
  list(JOIN targets "\n" content)
  file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/fuzz_targets.txt" CONTENT "${content}\n")
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _terse_write_fuzz_target_list)
