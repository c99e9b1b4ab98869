/* fake-cudnn.h - what the stand-in libcudnn (fake-cudnn.c) tells its test:
 * the last execution's variant pack and plan. */
#ifndef SA1B_TESTS_FAKE_CUDNN_H
#define SA1B_TESTS_FAKE_CUDNN_H

#include <stdint.h>

typedef struct fake_cudnn_exec {
    int n;             /* tensors in the variant pack */
    int64_t uids[16];
    void *ptrs[16];
    void *ws;          /* its workspace */
    float scale;       /* the by-value scale (uid 6) as it was at execution */
    int engine;        /* the plan's engine config: its place in FAKE_CUDNN_ENGINES */
    int runs;          /* executions so far */
} fake_cudnn_exec;

const fake_cudnn_exec *fake_cudnn_last(void);

#endif
