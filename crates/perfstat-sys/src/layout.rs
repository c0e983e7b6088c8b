//! Struct sizes the library versions by, and compile-time asserts of the key offsets.
//!
//! bindgen's own asserts in `bindings.rs` pin every field of every struct; the asserts here
//! restate the facts the crate depends on, with their reasons, so that a regenerated
//! `bindings.rs` that drifts from them fails to compile on every target.

use core::ffi::c_int;
use core::mem::{offset_of, size_of};

use crate::bindings::{
    perfstat_cpu_t, perfstat_cpu_total_t, perfstat_id_t, perfstat_memory_page_t,
    perfstat_memory_total_t, perfstat_partition_config_t, perfstat_partition_total_t,
    perfstat_process_t, perfstat_psize_t, perfstat_value_t,
};

/// `perfstat_partition_total_t` as of AIX 7.1 TL1 (`CURR_VERSION_PARTITION_TOTAL` 5).
pub const PARTITION_TOTAL_SIZE_AIX71: usize = 688;
/// `perfstat_partition_total_t` as of AIX 6.1: ends with `spurrflag`.
pub const PARTITION_TOTAL_SIZE_AIX61: usize = 480;
/// Bytes of the AIX 6.1 layout that hold fields (the rest is tail padding).
pub const PARTITION_TOTAL_AIX61_END: usize = 476;
/// `perfstat_partition_config_t` up to `subprocessor_mode` (tried first; see the header).
pub const PARTITION_CONFIG_SIZE: usize = 808;
/// `perfstat_partition_config_t` up to `targetmemexpsize` (JNA's layout), the fallback.
pub const PARTITION_CONFIG_SIZE_OLDER: usize = 800;
/// The sizes `perfstat_sys::partition_config` passes, newest first.
pub const PARTITION_CONFIG_SIZES: [usize; 2] = [PARTITION_CONFIG_SIZE, PARTITION_CONFIG_SIZE_OLDER];
/// Offset of `processorMHz`: where AIX puts the `double` (Linux would put it at 344).
pub const PROCESSOR_MHZ_OFFSET: usize = 340;
/// `perfstat_cpu_total_t`.
pub const CPU_TOTAL_SIZE: usize = 696;
/// `perfstat_cpu_t`.
pub const CPU_SIZE: usize = 616;
/// `perfstat_memory_total_t`.
pub const MEMORY_TOTAL_SIZE: usize = 352;
/// `perfstat_memory_page_t` with the compression fields and `real_avail` (tried first).
pub const MEMORY_PAGE_SIZE: usize = 224;
/// `perfstat_memory_page_t` as of AIX 6.1, ending at `virt_active`: the fallback.
pub const MEMORY_PAGE_SIZE_AIX61: usize = 152;
/// The sizes `perfstat_sys::memory_pages` (and its count query) pass, newest first.
pub const MEMORY_PAGE_SIZES: [usize; 2] = [MEMORY_PAGE_SIZE, MEMORY_PAGE_SIZE_AIX61];
/// `perfstat_process_t`.
pub const PROCESS_SIZE: usize = 288;

const _: () = {
    assert!(size_of::<perfstat_id_t>() == crate::IDENTIFIER_LENGTH);
    assert!(size_of::<perfstat_psize_t>() == 8);
    assert!(size_of::<perfstat_value_t>() == 32);

    // Partition total: two versions by size; the 7.1 counters used for frequency.
    assert!(size_of::<perfstat_partition_total_t>() == PARTITION_TOTAL_SIZE_AIX71);
    assert!(offset_of!(perfstat_partition_total_t, spurrflag) + 4 == PARTITION_TOTAL_AIX61_END);
    assert!(PARTITION_TOTAL_AIX61_END <= PARTITION_TOTAL_SIZE_AIX61);
    assert!(offset_of!(perfstat_partition_total_t, hardwareid) == PARTITION_TOTAL_AIX61_END);
    assert!(offset_of!(perfstat_partition_total_t, purr_counter) == 656);
    assert!(offset_of!(perfstat_partition_total_t, spurr_counter) == 664);
    assert!(offset_of!(perfstat_partition_total_t, type_) == 64);

    // Partition config: the processorMHz trap and the 8-aligned field after it.
    assert!(size_of::<perfstat_partition_config_t>() == PARTITION_CONFIG_SIZE);
    assert!(offset_of!(perfstat_partition_config_t, processorMHz) == PROCESSOR_MHZ_OFFSET);
    assert!(offset_of!(perfstat_partition_config_t, numProcessors) == 352);
    assert!(offset_of!(perfstat_partition_config_t, conf) == 136);
    assert!(offset_of!(perfstat_partition_config_t, lcpus) == 576);
    assert!(
        offset_of!(perfstat_partition_config_t, targetmemexpsize) + 8
            == PARTITION_CONFIG_SIZE_OLDER
    );
    assert!(
        offset_of!(perfstat_partition_config_t, subprocessor_mode) == PARTITION_CONFIG_SIZE_OLDER
    );

    assert!(size_of::<perfstat_cpu_total_t>() == CPU_TOTAL_SIZE);
    assert!(size_of::<perfstat_cpu_t>() == CPU_SIZE);
    assert!(size_of::<perfstat_memory_total_t>() == MEMORY_TOTAL_SIZE);
    assert!(size_of::<perfstat_memory_page_t>() == MEMORY_PAGE_SIZE);
    assert!(offset_of!(perfstat_memory_page_t, virt_active) + 8 == MEMORY_PAGE_SIZE_AIX61);

    // Process: both doubles are 8-aligned, so AIX power alignment does not move them.
    assert!(size_of::<perfstat_process_t>() == PROCESS_SIZE);
    assert!(offset_of!(perfstat_process_t, ucpu_time) == 232);
    assert!(offset_of!(perfstat_process_t, scpu_time) == 240);

    // Every size is passed as a C int.
    assert!(PARTITION_CONFIG_SIZE <= c_int::MAX as usize);
};
