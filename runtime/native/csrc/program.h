/*
 * program.h — the step-list interpreter's entry points (program.c), used by addon.c.
 */
#ifndef KILN_PROGRAM_H
#define KILN_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct KilnProgram KilnProgram;

/* A program over the encoded step list, its kernel functions and copies of its constants;
 * NULL with a message in err on a malformed header or no memory. */
KilnProgram* kiln_program_create(const int64_t* code, int64_t ncode, void* const* fns,
                                 int64_t nfns, const void* const* consts,
                                 const int64_t* const_bytes, int64_t nconsts, char* err,
                                 size_t errcap);
/* Runs the ENTRY on parameter leaves and result buffers; nonzero with a message on failure. */
int kiln_program_run(KilnProgram* p, void* const* params, int64_t nparams, void* const* results,
                     int64_t nresults, char* err, size_t errcap);
/* The profile (seconds and calls per step id) when KILN_NATIVE_PROFILE=1; returns the count. */
int64_t kiln_program_profile(const KilnProgram* p, double* seconds, int64_t* calls, int64_t cap);
void kiln_program_free(KilnProgram* p);

#endif /* KILN_PROGRAM_H */
