// Sanitizer defaults of every fuzz target (ASAN_OPTIONS in the environment still overrides
// them). Fake stacks for use-after-return detection are off: llmcc refuses bad input by
// throwing, and ASan collects its fake stack frames on every unwind, which took most of a run's
// time (errors are the common case when fuzzing).
extern "C" const char* __asan_default_options() { return "detect_stack_use_after_return=0"; }
