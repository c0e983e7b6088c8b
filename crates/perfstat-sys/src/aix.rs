//! Safe wrappers around the extern functions (AIX only).
//!
//! Each wrapper is the contract function from `contract.rs` with the extern call as its
//! closure. `errno` comes from `_Errno()`, AIX libc's accessor for the calling thread's
//! `errno` (what `<errno.h>` expands `errno` to in thread-safe code; Rust's std and the `libc`
//! crate use the same symbol on AIX). Declaring it here keeps the crate free of dependencies.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

use crate::bindings::{
    perfstat_cpu_t, perfstat_cpu_total_t, perfstat_id_t, perfstat_memory_page_t,
    perfstat_memory_total_t, perfstat_partition_config_t, perfstat_process_t, perfstat_psize_t,
};
use crate::contract::{
    Filled, PartitionTotal, count_with, fill_list, fill_list_versioned, fill_versioned,
    partition_total_with,
};
use crate::error::PerfstatError;
use crate::functions::{
    perfstat_cpu, perfstat_cpu_total, perfstat_memory_page, perfstat_memory_total,
    perfstat_partition_config, perfstat_partition_total, perfstat_process,
};
use crate::layout::{MEMORY_PAGE_SIZES, PARTITION_CONFIG_SIZES};
use crate::{FIRST_PSIZE, id_first, id_for_pid};

unsafe extern "C" {
    /// AIX libc: address of the calling thread's `errno`.
    fn _Errno() -> *mut c_int;
}

/// The calling thread's `errno`.
fn errno() -> i32 {
    // SAFETY: `_Errno` takes no arguments and returns the address of the calling thread's
    // errno, which is valid and aligned for the lifetime of the thread; we only read it.
    unsafe { *_Errno() }
}

/// Partition-wide counters (`perfstat_partition_total`), as the newest layout the library
/// accepts: 688 bytes (AIX 7.1 TL1+), else 480 (AIX 6.1).
///
/// # Errors
///
/// [`PerfstatError`] if both sizes fail or the call breaks the contract.
pub fn partition_total() -> Result<PartitionTotal, PerfstatError> {
    partition_total_with(
        |buf, size, n| {
            // SAFETY: the selector may be NULL (IBM perfstat_partition_total page); `buf`
            // points to a live, writable perfstat_partition_total_t and `size` is at most its
            // size (checked by `fill_versioned`); the library writes at most `size` bytes.
            unsafe { perfstat_partition_total(ptr::null_mut(), buf, size, n) }
        },
        errno,
    )
}

/// Fills a single struct with its one declared size.
fn single<T: Default>(
    function: &'static str,
    mut call: impl FnMut(*mut T, c_int, c_int) -> c_int,
) -> Result<T, PerfstatError> {
    let mut out = T::default();
    fill_versioned(function, &mut out, &[size_of::<T>()], &mut call, errno)?;
    Ok(out)
}

/// Partition configuration (`perfstat_partition_config`): 808 bytes (up to
/// `subprocessor_mode`) first, else 800 (up to `targetmemexpsize`, `subprocessor_mode` 0).
///
/// # Errors
///
/// [`PerfstatError`] if the call fails with both sizes or breaks the contract.
pub fn partition_config() -> Result<perfstat_partition_config_t, PerfstatError> {
    let mut out = perfstat_partition_config_t::default();
    fill_versioned(
        "perfstat_partition_config",
        &mut out,
        &PARTITION_CONFIG_SIZES,
        |buf, size, n| {
            // SAFETY: NULL selector as documented for this function; `buf` points to a live,
            // writable perfstat_partition_config_t of at least `size` bytes.
            unsafe { perfstat_partition_config(ptr::null_mut(), buf, size, n) }
        },
        errno,
    )?;
    Ok(out)
}

/// System-wide processor counters (`perfstat_cpu_total`).
///
/// # Errors
///
/// [`PerfstatError`] if the call fails or breaks the contract.
pub fn cpu_total() -> Result<perfstat_cpu_total_t, PerfstatError> {
    single("perfstat_cpu_total", |buf, size, n| {
        // SAFETY: NULL selector as documented for this function; `buf` points to a live,
        // writable perfstat_cpu_total_t of `size` bytes.
        unsafe { perfstat_cpu_total(ptr::null_mut(), buf, size, n) }
    })
}

/// System-wide memory counters (`perfstat_memory_total`).
///
/// # Errors
///
/// [`PerfstatError`] if the call fails or breaks the contract.
pub fn memory_total() -> Result<perfstat_memory_total_t, PerfstatError> {
    single("perfstat_memory_total", |buf, size, n| {
        // SAFETY: NULL selector as documented for this function; `buf` points to a live,
        // writable perfstat_memory_total_t of `size` bytes.
        unsafe { perfstat_memory_total(ptr::null_mut(), buf, size, n) }
    })
}

/// Counters of one process (`perfstat_process`, selector = decimal pid).
///
/// # Errors
///
/// [`PerfstatError::Failed`] if the process does not exist or the call fails.
pub fn process(pid: u64) -> Result<perfstat_process_t, PerfstatError> {
    let mut id = id_for_pid(pid);
    single("perfstat_process", |buf, size, n| {
        // SAFETY: `id` is a live, NUL-terminated selector the library may update; `buf`
        // points to a live, writable perfstat_process_t of `size` bytes.
        unsafe { perfstat_process(&raw mut id, buf, size, n) }
    })
}

/// The `perfstat_cpu` call for `fill_list`/`count_with`: NULL selector for the count query,
/// `FIRST_CPU` (`""`) for the data.
fn cpu_call(id: &mut perfstat_id_t) -> impl FnMut(*mut perfstat_cpu_t, c_int, c_int) -> c_int {
    move |buf, size, n| {
        let name: *mut perfstat_id_t = if buf.is_null() {
            ptr::null_mut()
        } else {
            &raw mut *id
        };
        // SAFETY: for the count query both pointers are NULL and n is 0 (IBM perfstat_cpu
        // page); otherwise `name` points to a live selector and `buf` to at least `n` live,
        // writable perfstat_cpu_t, each `size` bytes (`fill_list` passes size_of exactly).
        unsafe { perfstat_cpu(name, buf, size, n) }
    }
}

/// Number of logical CPUs `perfstat_cpu` reports (the count query).
///
/// # Errors
///
/// [`PerfstatError`] if the count query fails.
pub fn cpu_count() -> Result<usize, PerfstatError> {
    let mut id = id_first();
    count_with("perfstat_cpu", cpu_call(&mut id), errno)
}

/// Per logical CPU counters into the front of `out` (count query first).
///
/// # Errors
///
/// [`PerfstatError`] if either call fails or breaks the contract.
pub fn cpus(out: &mut [perfstat_cpu_t]) -> Result<Filled, PerfstatError> {
    let mut id = id_first();
    fill_list("perfstat_cpu", out, cpu_call(&mut id), errno)
}

/// The `perfstat_memory_page` call: NULL selector for the count query, `FIRST_PSIZE` for data.
fn page_call(
    psize: &mut perfstat_psize_t,
) -> impl FnMut(*mut perfstat_memory_page_t, c_int, c_int) -> c_int {
    move |buf, size, n| {
        let sel: *mut perfstat_psize_t = if buf.is_null() {
            ptr::null_mut()
        } else {
            // Every data call starts at the first page size: the library moves the selector
            // on, and a refused size is retried with an older one.
            psize.psize = FIRST_PSIZE;
            &raw mut *psize
        };
        // SAFETY: for the count query both pointers are NULL and n is 0 (IBM
        // perfstat_memory_page page); otherwise `sel` points to a live selector and `buf` to at
        // least `n` live, writable perfstat_memory_page_t of `size` bytes each.
        unsafe { perfstat_memory_page(sel, buf, size, n) }
    }
}

/// Number of page sizes `perfstat_memory_page` reports (the count query, with the sizes
/// [`memory_pages`] tries: a library that knows only the older layout refuses the newer size
/// for the count as well).
///
/// # Errors
///
/// [`PerfstatError`] if the count query fails with both sizes.
pub fn memory_page_count() -> Result<usize, PerfstatError> {
    let mut psize = perfstat_psize_t { psize: FIRST_PSIZE };
    fill_list_versioned(
        "perfstat_memory_page",
        &mut [],
        &MEMORY_PAGE_SIZES,
        page_call(&mut psize),
        errno,
    )
    .map(|(filled, _)| filled.available)
}

/// Per page size memory counters into the front of `out` (count query first): the 224-byte
/// layout first, else the AIX 6.1 one (152 bytes, spread to `out`'s stride, the later
/// fields zero).
///
/// # Errors
///
/// [`PerfstatError`] if the calls fail with both sizes or break the contract.
pub fn memory_pages(out: &mut [perfstat_memory_page_t]) -> Result<Filled, PerfstatError> {
    let mut psize = perfstat_psize_t { psize: FIRST_PSIZE };
    fill_list_versioned(
        "perfstat_memory_page",
        out,
        &MEMORY_PAGE_SIZES,
        page_call(&mut psize),
        errno,
    )
    .map(|(filled, _)| filled)
}
