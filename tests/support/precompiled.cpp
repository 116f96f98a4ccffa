// The source of llmcc_test_pch (cmake/Tests.cmake): the test program, with no tests, that builds
// the other test programs' shared precompiled header.
