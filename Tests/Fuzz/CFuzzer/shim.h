#ifndef GATTWAY_CFUZZER_SHIM_H
#define GATTWAY_CFUZZER_SHIM_H
// libFuzzer's driver entry point, declared weak: in a build with `-sanitize=fuzzer` it is
// libFuzzer's (coverage-guided fuzzing); in an ordinary build it stays NULL and gattway-fuzz
// falls back to its own seeded mutational loop, so `swift build` of the whole package links.
#include <stddef.h>
#include <stdint.h>

typedef int (*gattway_fuzz_callback)(const uint8_t *data, size_t size);

extern int LLVMFuzzerRunDriver(int *argc, char ***argv, gattway_fuzz_callback callback) __attribute__((weak));

/// Whether libFuzzer is linked into this binary.
static inline int gattway_libfuzzer_linked(void) { return LLVMFuzzerRunDriver != NULL; }

/// Runs libFuzzer's driver; only valid when gattway_libfuzzer_linked().
static inline int gattway_libfuzzer_run(int *argc, char ***argv, gattway_fuzz_callback callback) {
    return LLVMFuzzerRunDriver(argc, argv, callback);
}
#endif
