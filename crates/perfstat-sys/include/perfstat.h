/*
 * perfstat.h - layout-neutral declarations of the AIX libperfstat subset used by powerdiag.
 *
 * SPDX-License-Identifier: Apache-2.0
 *
 * Written for powerdiag from public field lists only (clean room):
 *   - IBM documentation, "libperfstat.h File" (Files Reference) and the perfstat subroutine
 *     and interface pages (perfstat_partition_total, perfstat_memory_page, perfstat_process, ...);
 *   - java-native-access/jna contrib/platform/src/com/sun/jna/platform/unix/aix/Perfstat.java
 *     (Apache-2.0 / LGPL-2.1): field order of the cpu, memory, process and config structs;
 *   - power-devops/perfstat (MIT): field names, the MSB-first reading of the partition flags;
 *   - the sizes and offsets recorded in the project notes (shared/notes/os-counters.md 3-5).
 * Nothing here is copied from IBM's own header or from OpenJDK.
 *
 * This is NOT a drop-in libperfstat.h. It declares the same memory layout with types that lay out
 * identically under every clang target we care about (powerpc64-ibm-aix, x86_64, ppc64le,
 * aarch64), so that one bindgen run produces bindings valid for all of them:
 *   - the partition flags union is a plain 32-bit word (`w`); the bitfield view is decoded in
 *     Rust with MSB-first masks, because AIX allocates bitfields from the most significant bit;
 *   - `perfstat_partition_config_t.processorMHz` is 8 raw bytes: as a `double` it sits at offset
 *     340 under AIX "power" alignment but at 344 everywhere else;
 *   - only fixed-width C types (no `long`, no `size_t`, no `time_t`, no system typedefs) are used,
 *     and nothing is included, so the header parses with any clang target and no sysroot.
 * The _Static_asserts below pin every size and key offset; regen.sh compiles this header for
 * both the host and powerpc64-ibm-aix and fails if either disagrees.
 *
 * Calling contract (IBM perfstat subroutine pages): (selector, buffer, sizeof buffer, count);
 * returns the number of structures filled, or -1 with errno set. The size argument is an `int`.
 */
#ifndef POWERDIAG_PERFSTAT_H
#define POWERDIAG_PERFSTAT_H

#define IDENTIFIER_LENGTH 64 /* length of the strings in the structures */
#define CEC_ID_LEN 40        /* length of the hardware (CEC) identifier */

/* Selector naming one element ("cpu0", "<pid>", "" for the first one).
 * Source: IBM "libperfstat.h File"; JNA perfstat_id_t. 64 bytes. */
typedef struct {
    char name[IDENTIFIER_LENGTH];
} perfstat_id_t;

/* Selector for perfstat_memory_page: page size in bytes, FIRST_PSIZE (0) for the first one.
 * Source: IBM "perfstat_memory_page Subroutine". 8 bytes. */
typedef struct {
    unsigned long long psize;
} perfstat_psize_t;

/* Partition properties. In IBM's header a union of `uint w` and a struct of 17 one-bit fields
 * plus `spare:15`; here only the word. Bits, MSB first: smt_capable, smt_enabled, lpar_capable,
 * lpar_enabled, shared_capable, shared_enabled, dlpar_capable, capped, kernel_is_64,
 * pool_util_authority, donate_capable, donate_enabled, ams_capable, ams_enabled, power_save,
 * ame_enabled, shared_extended. Source: IBM "libperfstat.h File"; power-devops/perfstat
 * helpers.go (conf[0] & (1 << 7) is smt_capable). 4 bytes. */
typedef union {
    unsigned int w;
} perfstat_partition_type_t;

/* Online / max / min / desired value of a partition resource.
 * Source: JNA perfstat_value_t; power-devops PartitionValue. 32 bytes. */
typedef struct {
    unsigned long long online;
    unsigned long long max;
    unsigned long long min;
    unsigned long long desired;
} perfstat_value_t;

/* Partition-wide (micro-partitioning) counters, filled by perfstat_partition_total.
 * Source: IBM "libperfstat.h File" (perfstat_partition_total_t members) and the
 * "perfstat_partition_total Interface" page; sizes from the notes: the AIX 6.1 layout ends with
 * `spurrflag` and is 480 bytes, the AIX 7.1 TL1+ layout (CURR_VERSION_PARTITION_TOTAL 5) is 688
 * bytes with purr_counter at 656 and spurr_counter at 664. This is the 688-byte layout; a
 * 480-byte fill leaves everything from `hardwareid` (offset 476) on unset. */
typedef struct {
    char name[IDENTIFIER_LENGTH];            /* partition name */
    perfstat_partition_type_t type;          /* partition flags (see perfstat_partition_type_t) */
    int lpar_id;                             /* partition number */
    int group_id;                            /* partition group */
    int pool_id;                             /* shared processor pool */
    int online_cpus;                         /* virtual processors online */
    int max_cpus;
    int min_cpus;
    unsigned long long online_memory;        /* MB */
    unsigned long long max_memory;
    unsigned long long min_memory;
    int entitled_proc_capacity;              /* processor units x 100 */
    int max_proc_capacity;
    int min_proc_capacity;
    int proc_capacity_increment;
    int unalloc_proc_capacity;
    int var_proc_capacity_weight;
    int unalloc_var_proc_capacity_weight;
    int online_phys_cpus_sys;
    int max_phys_cpus_sys;
    int phys_cpus_pool;
    unsigned long long puser;                /* PURR ticks, user */
    unsigned long long psys;
    unsigned long long pidle;
    unsigned long long pwait;
    unsigned long long pool_idle_time;
    unsigned long long phantintrs;           /* interrupts meant for another partition */
    unsigned long long invol_virt_cswitch;
    unsigned long long vol_virt_cswitch;
    unsigned long long timebase_last;
    unsigned long long reserved_pages;
    unsigned long long reserved_pagesize;
    unsigned long long idle_donated_purr;
    unsigned long long idle_donated_spurr;
    unsigned long long busy_donated_purr;
    unsigned long long busy_donated_spurr;
    unsigned long long idle_stolen_purr;
    unsigned long long idle_stolen_spurr;
    unsigned long long busy_stolen_purr;
    unsigned long long busy_stolen_spurr;
    unsigned long long shcpus_in_sys;
    unsigned long long max_pool_capacity;
    unsigned long long entitled_pool_capacity;
    unsigned long long pool_max_time;
    unsigned long long pool_busy_time;       /* ns */
    unsigned long long pool_scaled_busy_time;
    unsigned long long shcpu_tot_time;
    unsigned long long shcpu_busy_time;
    unsigned long long shcpu_scaled_busy_time;
    int ams_pool_id;
    int var_mem_weight;
    unsigned long long iome;
    unsigned long long pmem;
    unsigned long long hpi;                  /* AMS hypervisor page-ins */
    unsigned long long hpit;
    unsigned long long hypv_pagesize;        /* KB */
    unsigned int online_lcpus;
    unsigned int smt_thrds;
    unsigned long long puser_spurr;
    unsigned long long psys_spurr;
    unsigned long long pidle_spurr;
    unsigned long long pwait_spurr;
    int spurrflag;
    /* ---- end of the AIX 6.1 layout (480 bytes with tail padding) ---- */
    char hardwareid[CEC_ID_LEN];
    unsigned int power_save_mode;
    unsigned short ame_version;
    unsigned long long true_memory;
    unsigned long long expanded_memory;
    unsigned long long target_memexp_factr;
    unsigned long long current_memexp_factr;
    unsigned long long target_cpool_size;
    unsigned long long max_cpool_size;
    unsigned long long min_ucpool_size;
    unsigned long long ame_deficit_size;
    unsigned long long version;
    unsigned long long cmcs_total_time;
    unsigned long long purr_coalescing;
    unsigned long long spurr_coalescing;
    unsigned long long MemPoolSize;
    unsigned long long IOMemEntInUse;
    unsigned long long IOMemEntFree;
    unsigned long long IOHighWaterMark;
    unsigned long long purr_counter;         /* PURR, user + kernel */
    unsigned long long spurr_counter;        /* SPURR, user + kernel */
    unsigned long long real_free;            /* 4 KB pages */
    unsigned long long real_avail;           /* 4 KB pages */
} perfstat_partition_total_t;

/* Partition configuration, filled by perfstat_partition_config.
 * Source: JNA perfstat_partition_config_t (field order, up to targetmemexpsize: 800 bytes, an
 * older size the library still accepts); `subprocessor_mode` after it from the order in which
 * two programs compiled against IBM's header read it (power-devops/perfstat's
 * perfstatpartitionconfig2partitionconfig and njmon's partition-config section): 808 bytes
 * with the tail padding, tried first. Not checked against an IBM header: if the library does
 * not know 808 it refuses it and the 800-byte layout is used (src/aix.rs). `processorMHz` is a C double stored as 8 raw bytes: read it with
 * f64::from_ne_bytes. With the byte array it is at offset 340 on every target, as the double is
 * on AIX; the following perfstat_value_t is 8-aligned at 352 everywhere. */
typedef struct {
    unsigned long long version;
    char partitionname[64];
    char nodename[64];
    perfstat_partition_type_t conf;
    unsigned int partitionnum;
    unsigned int groupid;
    char processorFamily[64];
    char processorModel[64];
    char machineID[64];
    unsigned char processorMHz[8];           /* C double, native byte order */
    perfstat_value_t numProcessors;
    char OSName[64];
    char OSVersion[64];
    char OSBuild[64];
    unsigned int lcpus;
    unsigned int smtthreads;
    unsigned int drives;
    unsigned int nw_adapters;
    perfstat_value_t cpucap;
    unsigned int cpucap_weightage;
    unsigned int entitled_proc_capacity;     /* processor units x 100 */
    perfstat_value_t vcpus;
    unsigned int processor_poolid;
    unsigned int activecpusinpool;
    unsigned int cpupool_weightage;
    unsigned int sharedpcpu;
    unsigned int maxpoolcap;
    unsigned int entpoolcap;
    perfstat_value_t mem;
    unsigned int mem_weightage;
    unsigned long long totiomement;
    int mempoolid;
    unsigned long long hyperpgsize;
    perfstat_value_t exp_mem;
    unsigned long long targetmemexpfactor;
    unsigned long long targetmemexpsize;
    unsigned int subprocessor_mode;          /* split-core mode: 0 unsupported, 1 capable, 2 SMT2, 4 SMT4 */
} perfstat_partition_config_t;

/* System-wide processor counters, filled by perfstat_cpu_total.
 * Source: JNA perfstat_cpu_total_t (field order); IBM "libperfstat.h File". 696 bytes.
 * `lbolt` is a time_t (64-bit on 64-bit AIX). */
typedef struct {
    int ncpus;
    int ncpus_cfg;
    char description[IDENTIFIER_LENGTH];
    unsigned long long processorHZ;
    unsigned long long user;
    unsigned long long sys;
    unsigned long long idle;
    unsigned long long wait;
    unsigned long long pswitch;
    unsigned long long syscall;
    unsigned long long sysread;
    unsigned long long syswrite;
    unsigned long long sysfork;
    unsigned long long sysexec;
    unsigned long long readch;
    unsigned long long writech;
    unsigned long long devintrs;
    unsigned long long softintrs;
    long long lbolt;
    unsigned long long loadavg[3];
    unsigned long long runque;
    unsigned long long swpque;
    unsigned long long bread;
    unsigned long long bwrite;
    unsigned long long lread;
    unsigned long long lwrite;
    unsigned long long phread;
    unsigned long long phwrite;
    unsigned long long runocc;
    unsigned long long swpocc;
    unsigned long long iget;
    unsigned long long namei;
    unsigned long long dirblk;
    unsigned long long msg;
    unsigned long long sema;
    unsigned long long rcvint;
    unsigned long long xmtint;
    unsigned long long mdmint;
    unsigned long long tty_rawinch;
    unsigned long long tty_caninch;
    unsigned long long tty_rawoutch;
    unsigned long long ksched;
    unsigned long long koverf;
    unsigned long long kexit;
    unsigned long long rbread;
    unsigned long long rcread;
    unsigned long long rbwrt;
    unsigned long long rcwrt;
    unsigned long long traps;
    int ncpus_high;
    unsigned long long puser;
    unsigned long long psys;
    unsigned long long pidle;
    unsigned long long pwait;
    unsigned long long decrintrs;
    unsigned long long mpcrintrs;
    unsigned long long mpcsintrs;
    unsigned long long phantintrs;
    unsigned long long idle_donated_purr;
    unsigned long long idle_donated_spurr;
    unsigned long long busy_donated_purr;
    unsigned long long busy_donated_spurr;
    unsigned long long idle_stolen_purr;
    unsigned long long idle_stolen_spurr;
    unsigned long long busy_stolen_purr;
    unsigned long long busy_stolen_spurr;
    short iowait;
    short physio;
    long long twait;
    unsigned long long hpi;
    unsigned long long hpit;
    unsigned long long puser_spurr;
    unsigned long long psys_spurr;
    unsigned long long pidle_spurr;
    unsigned long long pwait_spurr;
    int spurrflag;
    unsigned long long version;
    unsigned long long tb_last;
    unsigned long long purr_coalescing;
    unsigned long long spurr_coalescing;
} perfstat_cpu_total_t;

/* Per logical CPU counters, filled by perfstat_cpu.
 * Source: JNA perfstat_cpu_t (field order); power-devops helpers.go (names). 616 bytes. */
typedef struct {
    char name[IDENTIFIER_LENGTH];
    unsigned long long user;
    unsigned long long sys;
    unsigned long long idle;
    unsigned long long wait;
    unsigned long long pswitch;
    unsigned long long syscall;
    unsigned long long sysread;
    unsigned long long syswrite;
    unsigned long long sysfork;
    unsigned long long sysexec;
    unsigned long long readch;
    unsigned long long writech;
    unsigned long long bread;
    unsigned long long bwrite;
    unsigned long long lread;
    unsigned long long lwrite;
    unsigned long long phread;
    unsigned long long phwrite;
    unsigned long long iget;
    unsigned long long namei;
    unsigned long long dirblk;
    unsigned long long msg;
    unsigned long long sema;
    unsigned long long minfaults;
    unsigned long long majfaults;
    unsigned long long puser;
    unsigned long long psys;
    unsigned long long pidle;
    unsigned long long pwait;
    unsigned long long redisp_sd0;
    unsigned long long redisp_sd1;
    unsigned long long redisp_sd2;
    unsigned long long redisp_sd3;
    unsigned long long redisp_sd4;
    unsigned long long redisp_sd5;
    unsigned long long migration_push;
    unsigned long long migration_S3grq;
    unsigned long long migration_S3pul;
    unsigned long long invol_cswitch;
    unsigned long long vol_cswitch;
    unsigned long long runque;
    unsigned long long bound;
    unsigned long long decrintrs;
    unsigned long long mpcrintrs;
    unsigned long long mpcsintrs;
    unsigned long long devintrs;
    unsigned long long softintrs;
    unsigned long long phantintrs;
    unsigned long long idle_donated_purr;
    unsigned long long idle_donated_spurr;
    unsigned long long busy_donated_purr;
    unsigned long long busy_donated_spurr;
    unsigned long long idle_stolen_purr;
    unsigned long long idle_stolen_spurr;
    unsigned long long busy_stolen_purr;
    unsigned long long busy_stolen_spurr;
    unsigned long long hpi;
    unsigned long long hpit;
    unsigned long long puser_spurr;
    unsigned long long psys_spurr;
    unsigned long long pidle_spurr;
    unsigned long long pwait_spurr;
    int spurrflag;
    unsigned long long localdispatch;
    unsigned long long neardispatch;
    unsigned long long fardispatch;
    unsigned long long cswitches;
    unsigned long long version;
    unsigned long long tb_last;
} perfstat_cpu_t;

/* System-wide memory counters (4 KB pages unless noted), filled by perfstat_memory_total.
 * Source: JNA perfstat_memory_total_t (field order); IBM "perfstat_memory_total Interface".
 * 352 bytes. */
typedef struct {
    unsigned long long virt_total;
    unsigned long long real_total;
    unsigned long long real_free;
    unsigned long long real_pinned;
    unsigned long long real_inuse;
    unsigned long long pgbad;
    unsigned long long pgexct;
    unsigned long long pgins;
    unsigned long long pgouts;
    unsigned long long pgspins;
    unsigned long long pgspouts;
    unsigned long long scans;
    unsigned long long cycles;
    unsigned long long pgsteals;
    unsigned long long numperm;
    unsigned long long pgsp_total;
    unsigned long long pgsp_free;
    unsigned long long pgsp_rsvd;
    unsigned long long real_system;
    unsigned long long real_user;
    unsigned long long real_process;
    unsigned long long virt_active;
    unsigned long long iome;                 /* bytes */
    unsigned long long iomu;                 /* bytes */
    unsigned long long iohwm;                /* bytes */
    unsigned long long pmem;                 /* bytes */
    unsigned long long comprsd_total;
    unsigned long long comprsd_wseg_pgs;
    unsigned long long cpgins;
    unsigned long long cpgouts;
    unsigned long long true_size;
    unsigned long long expanded_memory;
    unsigned long long comprsd_wseg_size;
    unsigned long long target_cpool_size;    /* bytes */
    unsigned long long max_cpool_size;       /* bytes */
    unsigned long long min_ucpool_size;      /* bytes */
    unsigned long long cpool_size;           /* bytes */
    unsigned long long ucpool_size;          /* bytes */
    unsigned long long cpool_inuse;          /* bytes */
    unsigned long long ucpool_inuse;         /* bytes */
    unsigned long long version;
    unsigned long long real_avail;
    unsigned long long bytes_coalesced;
    unsigned long long bytes_coalesced_mempool;
} perfstat_memory_total_t;

/* Per page size memory counters (pages of `psize` bytes), filled by perfstat_memory_page.
 * Source: power-devops/perfstat MemoryPage (field order and names); IBM
 * "perfstat_memory_page Subroutine". Two sizes, newest first (src/aix.rs):
 *   224 bytes: the compression (AME) fields and real_avail after virt_active, in the order
 *     njmon, power-devops/perfstat and an AIX Prometheus exporter read them, with `version`
 *     before real_avail as in perfstat_memory_total_t (none of the three reads `version`, so
 *     its place is inferred, not checked against an IBM header);
 *   152 bytes: the AIX 6.1 layout, ending at virt_active (as an IBM AIX 6.1 libperfstat.h,
 *     bos61J 1.4.4.21, copied into a public repository, declares it).
 * The library accepts only sizes it knows: a wrong newest size is refused and the 152-byte
 * layout is used, with the later fields zero. */
typedef struct {
    unsigned long long psize;                /* page size in bytes */
    unsigned long long real_total;
    unsigned long long real_free;
    unsigned long long real_pinned;
    unsigned long long real_inuse;
    unsigned long long pgexct;
    unsigned long long pgins;
    unsigned long long pgouts;
    unsigned long long pgspins;
    unsigned long long pgspouts;
    unsigned long long scans;
    unsigned long long cycles;
    unsigned long long pgsteals;
    unsigned long long numperm;
    unsigned long long numpgsp;
    unsigned long long real_system;
    unsigned long long real_user;
    unsigned long long real_process;
    unsigned long long virt_active;
    unsigned long long comprsd_total;        /* pages of this size compressed */
    unsigned long long comprsd_wseg_pgs;     /* compressed working storage pages */
    unsigned long long cpgins;               /* page-ins to the compressed pool */
    unsigned long long cpgouts;              /* page-outs from the compressed pool */
    unsigned long long cpool_inuse;          /* compressed size in the compressed pool */
    unsigned long long ucpool_size;          /* uncompressed pool size, bytes */
    unsigned long long comprsd_wseg_size;    /* compressed working storage, bytes */
    unsigned long long version;
    unsigned long long real_avail;           /* 4 KB pages available without paging out */
} perfstat_memory_page_t;

/* Per process counters, filled by perfstat_process (selector name = decimal pid).
 * Source: JNA perfstat_process_t (field order); IBM "perfstat_process interfaces". 288 bytes.
 * Both doubles sit at 8-aligned offsets, so AIX power alignment does not move them. */
typedef struct {
    unsigned long long version;
    unsigned long long pid;
    char proc_name[64];
    int proc_priority;
    unsigned long long num_threads;
    unsigned long long proc_uid;
    unsigned long long proc_classid;
    unsigned long long proc_size;            /* KB */
    unsigned long long proc_real_mem_data;   /* KB */
    unsigned long long proc_real_mem_text;   /* KB */
    unsigned long long proc_virt_mem_data;   /* KB */
    unsigned long long proc_virt_mem_text;   /* KB */
    unsigned long long shared_lib_data_size; /* KB */
    unsigned long long heap_size;            /* KB */
    unsigned long long real_inuse;           /* KB */
    unsigned long long virt_inuse;           /* KB */
    unsigned long long pinned;               /* KB */
    unsigned long long pgsp_inuse;           /* KB */
    unsigned long long filepages;            /* KB */
    unsigned long long real_inuse_map;       /* KB */
    unsigned long long virt_inuse_map;       /* KB */
    unsigned long long pinned_inuse_map;     /* KB */
    double ucpu_time;                        /* ms from perfstat_process */
    double scpu_time;                        /* ms from perfstat_process */
    unsigned long long last_timebase;
    unsigned long long inBytes;
    unsigned long long outBytes;
    unsigned long long inOps;
    unsigned long long outOps;
} perfstat_process_t;

/* Prototypes: IBM's header declares the size as `int sizeof_userbuff` (the subroutine pages
 * print size_t; JNA binds int). Return: number of structures filled, or -1 with errno. */
int perfstat_partition_total(perfstat_id_t *name, perfstat_partition_total_t *userbuff,
                             int sizeof_userbuff, int desired_number);
int perfstat_partition_config(perfstat_id_t *name, perfstat_partition_config_t *userbuff,
                              int sizeof_userbuff, int desired_number);
int perfstat_cpu_total(perfstat_id_t *name, perfstat_cpu_total_t *userbuff, int sizeof_userbuff,
                       int desired_number);
int perfstat_cpu(perfstat_id_t *name, perfstat_cpu_t *userbuff, int sizeof_userbuff,
                 int desired_number);
int perfstat_memory_total(perfstat_id_t *name, perfstat_memory_total_t *userbuff,
                          int sizeof_userbuff, int desired_number);
int perfstat_memory_page(perfstat_psize_t *psize, perfstat_memory_page_t *userbuff,
                         int sizeof_userbuff, int desired_number);
int perfstat_process(perfstat_id_t *name, perfstat_process_t *userbuff, int sizeof_userbuff,
                     int desired_number);

/* Layout pins, checked by `clang -fsyntax-only` for the host and for powerpc64-ibm-aix. */
#define PD_OFFSETOF(t, f) __builtin_offsetof(t, f)
_Static_assert(sizeof(perfstat_id_t) == 64, "perfstat_id_t");
_Static_assert(sizeof(perfstat_psize_t) == 8, "perfstat_psize_t");
_Static_assert(sizeof(perfstat_partition_type_t) == 4, "perfstat_partition_type_t");
_Static_assert(sizeof(perfstat_value_t) == 32, "perfstat_value_t");
_Static_assert(sizeof(perfstat_partition_total_t) == 688, "partition_total: 7.1 TL1+ size");
_Static_assert(PD_OFFSETOF(perfstat_partition_total_t, spurrflag) + 4 == 476, "6.1 end");
_Static_assert(PD_OFFSETOF(perfstat_partition_total_t, hardwareid) == 476, "hardwareid");
_Static_assert(PD_OFFSETOF(perfstat_partition_total_t, purr_counter) == 656, "purr_counter");
_Static_assert(PD_OFFSETOF(perfstat_partition_total_t, spurr_counter) == 664, "spurr_counter");
_Static_assert(sizeof(perfstat_partition_config_t) == 808, "partition_config size");
_Static_assert(PD_OFFSETOF(perfstat_partition_config_t, processorMHz) == 340, "processorMHz");
_Static_assert(PD_OFFSETOF(perfstat_partition_config_t, numProcessors) == 352, "numProcessors");
_Static_assert(PD_OFFSETOF(perfstat_partition_config_t, targetmemexpsize) == 792, "800-byte end");
_Static_assert(PD_OFFSETOF(perfstat_partition_config_t, subprocessor_mode) == 800, "subprocessor_mode");
_Static_assert(sizeof(perfstat_cpu_total_t) == 696, "cpu_total size");
_Static_assert(sizeof(perfstat_cpu_t) == 616, "cpu size");
_Static_assert(sizeof(perfstat_memory_total_t) == 352, "memory_total size");
_Static_assert(sizeof(perfstat_memory_page_t) == 224, "memory_page size");
_Static_assert(PD_OFFSETOF(perfstat_memory_page_t, virt_active) + 8 == 152, "memory_page 6.1 end");
_Static_assert(sizeof(perfstat_process_t) == 288, "process size");
_Static_assert(PD_OFFSETOF(perfstat_process_t, ucpu_time) == 232, "ucpu_time");
#undef PD_OFFSETOF

#endif /* POWERDIAG_PERFSTAT_H */
