/*
 * vmlimit.c - the address-space limit and the process's mapped size.
 */
#include "vmlimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

uint64_t tr_vm_limit(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
    return (uint64_t)r.rlim_cur;
}

/* The kB figure of the line that starts with key in a /proc file, in bytes. */
static uint64_t proc_kb(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(key);
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) {
            kb = strtoull(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return kb << 10;
}

uint64_t tr_vm_size(void) { return proc_kb("/proc/self/status", "VmSize:"); }

uint64_t tr_vm_available(void) { return proc_kb("/proc/meminfo", "MemAvailable:"); }
