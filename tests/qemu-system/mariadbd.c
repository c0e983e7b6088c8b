/* A stand-in for MariaDB's server in tests/qemu-system.sh's guests: a static program named
 * `mariadbd` that holds MIB MiB of touched (resident, anonymous) memory and THREADS idle
 * threads, so the process facts (RSS, anonymous memory, threads, THP eligibility, CPU
 * affinity) have a real process of the right name to read. No MariaDB runs in the guests.
 *
 * Usage: mariadbd [MIB [THREADS]]   (default 64 MiB, 8 threads; runs until killed)
 * Built by tests/qemu-system.sh with zig cc for each guest's musl target. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *idle(void *arg) {
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv) {
    unsigned long mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    long threads = argc > 2 ? strtol(argv[2], NULL, 10) : 8;
    size_t bytes = (size_t)mib << 20;
    /* volatile: the compiler may not drop writes nobody reads. */
    volatile char *p = malloc(bytes);
    if (p == NULL) {
        fprintf(stderr, "mariadbd stand-in: cannot allocate %lu MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < bytes; i += 512)
        p[i] = 1;
    for (long i = 0; i < threads; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, idle, NULL) != 0) {
            fprintf(stderr, "mariadbd stand-in: cannot start thread %ld\n", i);
            return 1;
        }
    }
    for (;;)
        pause();
}
