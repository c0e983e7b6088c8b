//! The libperfstat calling contract, independent of the C call.
//!
//! Every `perfstat_*` function has the shape `(selector, buffer, sizeof, count) -> int`. The
//! functions here take that call as a closure `FnMut(*mut T, c_int, c_int) -> c_int` receiving
//! (buffer, struct size, count), with the selector captured by the closure, plus a closure that
//! reads `errno`. On AIX the closures wrap the extern functions and `_Errno`; in tests they are
//! fakes, so the retry and count logic is exercised on every target.
//!
//! - Single structs ([`fill_versioned`]): the library infers the caller's struct version from
//!   the size, so pass the newest size first and, on -1, retry with older ones (OpenJDK does
//!   this for `perfstat_partition_total`: 688, then 480). The buffer is zeroed before every
//!   attempt, so fields beyond an older size read as 0.
//! - Lists ([`count_with`], [`fill_list`], [`fill_list_versioned`]): first the count query
//!   `(NULL, NULL, sizeof, 0)`, then at most that many elements. The library lays the elements
//!   out with the size argument as stride: a list filled with an older size is spread in place
//!   to the struct's stride, the later fields zero.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

use crate::bindings::perfstat_partition_total_t;
use crate::error::PerfstatError;
use crate::layout::{
    PARTITION_TOTAL_AIX61_END, PARTITION_TOTAL_SIZE_AIX61, PARTITION_TOTAL_SIZE_AIX71,
};

/// `size` as the C `int` size argument for a buffer of `T`, if the buffer can hold it.
fn size_arg<T>(function: &'static str, size: usize) -> Result<c_int, PerfstatError> {
    if size == 0 || size > size_of::<T>() {
        return Err(PerfstatError::InvalidSize { function, size });
    }
    c_int::try_from(size).map_err(|_| PerfstatError::InvalidSize { function, size })
}

/// Fills one struct, trying `sizes` in order (newest first) until a call returns 1.
///
/// `call(buffer, size, 1)` must perform the C call with that buffer and size; `errno()` is
/// read right after a call that returned -1. Returns the size that succeeded. Every size must
/// be at most `size_of::<T>()`.
///
/// # Errors
///
/// [`PerfstatError::Failed`] with the last `errno` if every size failed;
/// [`PerfstatError::UnexpectedReturn`] if a call returned neither 1 nor -1 (no further sizes
/// are tried); [`PerfstatError::InvalidSize`] if `sizes` is empty or a size does not fit.
pub fn fill_versioned<T: Default>(
    function: &'static str,
    out: &mut T,
    sizes: &[usize],
    mut call: impl FnMut(*mut T, c_int, c_int) -> c_int,
    mut errno: impl FnMut() -> i32,
) -> Result<usize, PerfstatError> {
    if sizes.is_empty() {
        return Err(PerfstatError::InvalidSize { function, size: 0 });
    }
    let mut last_errno = 0;
    for &size in sizes {
        let size_c = size_arg::<T>(function, size)?;
        *out = T::default();
        match call(ptr::from_mut(out), size_c, 1) {
            1 => return Ok(size),
            -1 => last_errno = errno(),
            returned => return Err(PerfstatError::UnexpectedReturn { function, returned }),
        }
    }
    Err(PerfstatError::Failed {
        function,
        errno: last_errno,
    })
}

/// Number of elements available, from the count query `call(NULL, size_of::<T>(), 0)`.
///
/// The closure receives a null buffer for the count query and must then pass a null selector
/// too, as the perfstat pages require.
///
/// # Errors
///
/// [`PerfstatError::Failed`] on -1, [`PerfstatError::UnexpectedReturn`] on another negative
/// value.
pub fn count_with<T>(
    function: &'static str,
    mut call: impl FnMut(*mut T, c_int, c_int) -> c_int,
    mut errno: impl FnMut() -> i32,
) -> Result<usize, PerfstatError> {
    let size_c = size_arg::<T>(function, size_of::<T>())?;
    match call(ptr::null_mut(), size_c, 0) {
        -1 => Err(PerfstatError::Failed {
            function,
            errno: errno(),
        }),
        returned => usize::try_from(returned)
            .map_err(|_| PerfstatError::UnexpectedReturn { function, returned }),
    }
}

/// Result of [`fill_list`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Filled {
    /// Elements the count query reported.
    pub available: usize,
    /// Elements written to the front of the caller's slice.
    pub filled: usize,
}

impl Filled {
    /// Whether the slice was too short for everything the count query reported.
    pub fn truncated(&self) -> bool {
        self.filled < self.available
    }
}

/// Counts, then fills the front of `out` with at most `min(count, out.len())` elements.
///
/// `call` is invoked twice: `(NULL, size_of::<T>(), 0)` for the count (pass a null selector
/// then) and `(out, size_of::<T>(), n)` for the data (pass the first selector, e.g. `""` or
/// `FIRST_PSIZE`, then). The elements written are zeroed first.
///
/// # Errors
///
/// As [`count_with`], and for the second call [`PerfstatError::Failed`] on -1 or
/// [`PerfstatError::UnexpectedReturn`] if it reports more elements than requested.
pub fn fill_list<T: Default + Copy>(
    function: &'static str,
    out: &mut [T],
    call: impl FnMut(*mut T, c_int, c_int) -> c_int,
    errno: impl FnMut() -> i32,
) -> Result<Filled, PerfstatError> {
    fill_list_versioned(function, out, &[size_of::<T>()], call, errno).map(|(f, _)| f)
}

/// [`fill_list`] for a struct with several sizes, newest first (at most `size_of::<T>()`
/// each): the count query and the data call use the first size the library accepts, and the
/// size that worked is returned. The library lays the elements out with the size argument as
/// stride, so a list filled with an older size is spread in place to `T`'s stride (from the
/// last record to the first, so no record overwrites one not yet moved) and each record's
/// later fields are zero.
///
/// `T` must be plain old data (integer and byte-array fields, as every perfstat struct):
/// the library's bytes are reinterpreted as `T`.
///
/// # Errors
///
/// [`PerfstatError::Failed`] with the last `errno` when every size failed, else as
/// [`fill_list`].
pub fn fill_list_versioned<T: Default + Copy>(
    function: &'static str,
    out: &mut [T],
    sizes: &[usize],
    mut call: impl FnMut(*mut T, c_int, c_int) -> c_int,
    mut errno: impl FnMut() -> i32,
) -> Result<(Filled, usize), PerfstatError> {
    if sizes.is_empty() {
        return Err(PerfstatError::InvalidSize { function, size: 0 });
    }
    let mut last_errno = 0;
    for &size in sizes {
        let size_c = size_arg::<T>(function, size)?;
        let available = match call(ptr::null_mut(), size_c, 0) {
            -1 => {
                last_errno = errno();
                continue;
            }
            returned => usize::try_from(returned)
                .map_err(|_| PerfstatError::UnexpectedReturn { function, returned })?,
        };
        let want = available.min(out.len());
        if want == 0 {
            return Ok((
                Filled {
                    available,
                    filled: 0,
                },
                size,
            ));
        }
        let want_c = c_int::try_from(want).map_err(|_| PerfstatError::InvalidSize {
            function,
            size: want,
        })?;
        let dst = &mut out[..want];
        dst.iter_mut().for_each(|e| *e = T::default());
        let filled = match call(dst.as_mut_ptr(), size_c, want_c) {
            -1 => {
                last_errno = errno();
                continue;
            }
            returned => match usize::try_from(returned) {
                Ok(filled) if filled <= want => filled,
                _ => return Err(PerfstatError::UnexpectedReturn { function, returned }),
            },
        };
        restride(&mut dst[..filled], size);
        return Ok((Filled { available, filled }, size));
    }
    Err(PerfstatError::Failed {
        function,
        errno: last_errno,
    })
}

/// Spreads `out.len()` records written back to back with `size` bytes each (`size <=
/// size_of::<T>()`) to `T`'s stride, zeroing each record's bytes past `size`.
fn restride<T: Copy>(out: &mut [T], size: usize) {
    let stride = size_of::<T>();
    if size >= stride {
        return;
    }
    let base = out.as_mut_ptr().cast::<u8>();
    for i in (0..out.len()).rev() {
        // SAFETY: both ranges lie inside `out` (i * size + size <= i * stride + stride <=
        // out.len() * stride); `ptr::copy` allows them to overlap, and going from the last
        // record down never overwrites a record that has not moved yet (its destination
        // starts at or after its source).
        unsafe {
            let dst = base.add(i * stride);
            ptr::copy(base.add(i * size), dst, size);
            ptr::write_bytes(dst.add(size), 0, stride - size);
        }
    }
}

/// The version of `perfstat_partition_total_t` the library filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartitionTotalLayout {
    /// AIX 7.1 TL1 and later: 688 bytes, up to `real_avail` (`purr_counter`, `spurr_counter`,
    /// AME and coalescing fields included).
    Aix71,
    /// AIX 6.1: 480 bytes, up to `spurrflag`; later fields are zero.
    Aix61,
}

impl PartitionTotalLayout {
    /// Newest first: the order in which [`partition_total_with`] tries them.
    pub const NEWEST_FIRST: [Self; 2] = [Self::Aix71, Self::Aix61];

    /// The size argument of this version.
    pub const fn size(self) -> usize {
        match self {
            Self::Aix71 => PARTITION_TOTAL_SIZE_AIX71,
            Self::Aix61 => PARTITION_TOTAL_SIZE_AIX61,
        }
    }

    /// The version with this size argument.
    pub const fn from_size(size: usize) -> Option<Self> {
        match size {
            PARTITION_TOTAL_SIZE_AIX71 => Some(Self::Aix71),
            PARTITION_TOTAL_SIZE_AIX61 => Some(Self::Aix61),
            _ => None,
        }
    }

    /// Bytes from the start of the struct that hold fields of this version.
    pub const fn valid_bytes(self) -> usize {
        match self {
            Self::Aix71 => PARTITION_TOTAL_SIZE_AIX71,
            Self::Aix61 => PARTITION_TOTAL_AIX61_END,
        }
    }

    /// Whether the field at `offset` with `len` bytes was filled by this version, e.g.
    /// `covers(offset_of!(perfstat_partition_total_t, purr_counter), 8)`.
    pub const fn covers(self, offset: usize, len: usize) -> bool {
        offset + len <= self.valid_bytes()
    }
}

/// `perfstat_partition_total_t` and the version it was filled as.
#[derive(Debug, Clone, Copy)]
pub struct PartitionTotal {
    /// The counters; fields the version does not cover are zero.
    pub data: perfstat_partition_total_t,
    /// The version the library accepted.
    pub layout: PartitionTotalLayout,
}

/// `perfstat_partition_total` by the calling contract: 688 bytes first, then 480.
///
/// `call(buffer, size, 1)` performs the C call with a NULL selector. On AIX,
/// `perfstat_sys::partition_total` passes the extern function.
///
/// # Errors
///
/// As [`fill_versioned`].
pub fn partition_total_with(
    call: impl FnMut(*mut perfstat_partition_total_t, c_int, c_int) -> c_int,
    errno: impl FnMut() -> i32,
) -> Result<PartitionTotal, PerfstatError> {
    const FUNCTION: &str = "perfstat_partition_total";
    const SIZES: [usize; 2] = [
        PartitionTotalLayout::Aix71.size(),
        PartitionTotalLayout::Aix61.size(),
    ];
    let mut data = perfstat_partition_total_t::default();
    let size = fill_versioned(FUNCTION, &mut data, &SIZES, call, errno)?;
    let layout = PartitionTotalLayout::from_size(size).ok_or(PerfstatError::InvalidSize {
        function: FUNCTION,
        size,
    })?;
    if layout == PartitionTotalLayout::Aix61 {
        // The 6.1 struct's tail padding (476..480) overlaps `hardwareid`; it holds no data.
        data.hardwareid = [0; 40];
    }
    Ok(PartitionTotal { data, layout })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::{perfstat_cpu_t, perfstat_memory_page_t, perfstat_partition_config_t};
    use crate::layout::{MEMORY_PAGE_SIZES, PARTITION_CONFIG_SIZES};
    use core::cell::Cell;
    use core::mem::offset_of;
    use std::vec::Vec;

    const EINVAL: i32 = 22;
    const EFAULT: i32 = 14;

    // The fakes below stand in for the C function; each records (size, count, buffer is null)
    // per call.

    #[test]
    fn partition_total_newest_size_succeeds() {
        let mut calls = Vec::new();
        let total = partition_total_with(
            |buf: *mut perfstat_partition_total_t, size, n| {
                calls.push((size, n, buf.is_null()));
                // SAFETY: `buf` points to the live struct passed by `fill_versioned`.
                let t = unsafe { &mut *buf };
                t.purr_counter = 1234;
                t.spurrflag = 1;
                1
            },
            || unreachable!("errno read after a successful call"),
        )
        .unwrap();
        assert_eq!(calls, [(688, 1, false)]);
        assert_eq!(total.layout, PartitionTotalLayout::Aix71);
        assert_eq!(total.data.purr_counter, 1234);
        let purr = offset_of!(perfstat_partition_total_t, purr_counter);
        assert!(total.layout.covers(purr, 8));
    }

    #[test]
    fn partition_total_falls_back_to_the_61_size() {
        let mut calls = Vec::new();
        let errno_reads = Cell::new(0);
        let total = partition_total_with(
            |buf: *mut perfstat_partition_total_t, size, n| {
                calls.push((size, n, buf.is_null()));
                if size == 688 {
                    return -1;
                }
                // An AIX 6.1 library writes 480 bytes, including the 4 bytes of tail padding
                // that overlap `hardwareid` in the 7.1 layout.
                // SAFETY: `buf` points to the live struct passed by `fill_versioned`.
                let t = unsafe { &mut *buf };
                t.online_cpus = 4;
                t.spurrflag = 1;
                t.hardwareid[..4].copy_from_slice(&[0x55; 4]);
                1
            },
            || {
                errno_reads.set(errno_reads.get() + 1);
                EINVAL
            },
        )
        .unwrap();
        assert_eq!(calls, [(688, 1, false), (480, 1, false)]);
        assert_eq!(errno_reads.get(), 1);
        assert_eq!(total.layout, PartitionTotalLayout::Aix61);
        assert_eq!(total.data.online_cpus, 4);
        assert_eq!(total.data.spurrflag, 1);
        assert_eq!(total.data.hardwareid, [0; 40]);
        assert_eq!(total.data.purr_counter, 0);
        let purr = offset_of!(perfstat_partition_total_t, purr_counter);
        assert!(!total.layout.covers(purr, 8));
        let spurrflag = offset_of!(perfstat_partition_total_t, spurrflag);
        assert!(total.layout.covers(spurrflag, 4));
    }

    #[test]
    fn partition_total_all_sizes_fail() {
        let mut sizes = Vec::new();
        let mut errnos = [EINVAL, EFAULT].into_iter();
        let err = partition_total_with(
            |_, size, _| {
                sizes.push(size);
                -1
            },
            || errnos.next().unwrap(),
        )
        .unwrap_err();
        assert_eq!(sizes, [688, 480]);
        // The errno of the last (oldest) attempt.
        let expected = PerfstatError::Failed {
            function: "perfstat_partition_total",
            errno: EFAULT,
        };
        assert_eq!(err, expected);
    }

    #[test]
    fn unexpected_return_stops_the_retries() {
        let mut sizes = Vec::new();
        let err = partition_total_with(
            |_, size, _| {
                sizes.push(size);
                0
            },
            || unreachable!(),
        )
        .unwrap_err();
        assert_eq!(sizes, [688]);
        let expected = PerfstatError::UnexpectedReturn {
            function: "perfstat_partition_total",
            returned: 0,
        };
        assert_eq!(err, expected);
    }

    #[test]
    fn buffer_is_zeroed_before_each_attempt() {
        let mut out = perfstat_partition_total_t {
            pool_id: 99,
            ..Default::default()
        };
        let mut seen = Vec::new();
        let size = fill_versioned(
            "f",
            &mut out,
            &[688, 480],
            |buf: *mut perfstat_partition_total_t, size, _| {
                // SAFETY: `buf` points to `out`, alive for the whole call.
                let t = unsafe { &mut *buf };
                seen.push(t.pool_id);
                t.pool_id = 7;
                if size == 688 { -1 } else { 1 }
            },
            || EINVAL,
        );
        assert_eq!(size, Ok(480));
        assert_eq!(seen, [0, 0]);
        assert_eq!(out.pool_id, 7);
    }

    #[test]
    fn sizes_are_checked_before_any_call() {
        let mut out = 0u64;
        let called = Cell::new(0);
        let mut call = |_: *mut u64, _, _| {
            called.set(called.get() + 1);
            1
        };
        for sizes in [&[][..], &[16][..], &[0][..]] {
            let err = fill_versioned("f", &mut out, sizes, &mut call, || 0).unwrap_err();
            assert!(
                matches!(err, PerfstatError::InvalidSize { function: "f", .. }),
                "{sizes:?}"
            );
        }
        assert_eq!(called.get(), 0);
        assert_eq!(fill_versioned("f", &mut out, &[8], &mut call, || 0), Ok(8));
        assert_eq!(called.get(), 1);
    }

    #[test]
    fn count_query_passes_null_buffer_and_count_zero() {
        let mut calls = Vec::new();
        let n = count_with::<perfstat_cpu_t>(
            "perfstat_cpu",
            |buf, size, n| {
                calls.push((size, n, buf.is_null()));
                8
            },
            || unreachable!(),
        );
        assert_eq!(n, Ok(8));
        assert_eq!(calls, [(616, 0, true)]);
    }

    #[test]
    fn count_query_errors() {
        let err = count_with::<perfstat_cpu_t>("perfstat_cpu", |_, _, _| -1, || EFAULT);
        let expected = PerfstatError::Failed {
            function: "perfstat_cpu",
            errno: EFAULT,
        };
        assert_eq!(err, Err(expected));
        let err = count_with::<perfstat_cpu_t>("perfstat_cpu", |_, _, _| -2, || 0);
        let expected = PerfstatError::UnexpectedReturn {
            function: "perfstat_cpu",
            returned: -2,
        };
        assert_eq!(err, Err(expected));
    }

    /// A fake `perfstat_memory_page` with three page sizes.
    fn fake_pages(
        calls: &mut Vec<(c_int, c_int, bool)>,
    ) -> impl FnMut(*mut perfstat_memory_page_t, c_int, c_int) -> c_int + '_ {
        const PSIZES: [u64; 3] = [0x1000, 0x1_0000, 0x100_0000];
        move |buf, size, n| {
            calls.push((size, n, buf.is_null()));
            if buf.is_null() {
                assert_eq!(n, 0);
                return 3;
            }
            let want = usize::try_from(n).unwrap().min(PSIZES.len());
            // SAFETY: `fill_list` passes the front of the caller's slice with at least `n`
            // elements, and `want <= n`.
            let pages = unsafe { core::slice::from_raw_parts_mut(buf, want) };
            for (page, psize) in pages.iter_mut().zip(PSIZES) {
                page.psize = psize;
                page.real_total = psize / 0x1000;
            }
            c_int::try_from(want).unwrap()
        }
    }

    /// A fake `perfstat_memory_page` of a library that knows only the 152-byte layout: it
    /// refuses other sizes with EINVAL and writes 152-byte records back to back.
    fn fake_old_pages(
        calls: &mut Vec<(c_int, c_int, bool)>,
    ) -> impl FnMut(*mut perfstat_memory_page_t, c_int, c_int) -> c_int + '_ {
        move |buf, size, n| {
            calls.push((size, n, buf.is_null()));
            if size != 152 {
                return -1;
            }
            if buf.is_null() {
                return 3;
            }
            let base = buf.cast::<u8>();
            for (i, psize) in [0x1000u64, 0x1_0000, 0x100_0000].into_iter().enumerate() {
                let mut rec = [0xAAu8; 152];
                rec[..8].copy_from_slice(&psize.to_ne_bytes());
                rec[144..].copy_from_slice(&(i as u64 + 7).to_ne_bytes()); // virt_active
                // SAFETY: the caller's buffer holds at least n >= 3 records of the newest size,
                // more than 3 × 152 bytes.
                unsafe { core::ptr::copy_nonoverlapping(rec.as_ptr(), base.add(i * 152), 152) };
            }
            3
        }
    }

    #[test]
    fn an_older_list_layout_is_spread_to_the_newest_stride() {
        let mut calls = Vec::new();
        let mut out = [perfstat_memory_page_t::default(); 4];
        out.iter_mut().for_each(|p| p.real_avail = 99);
        let got = fill_list_versioned(
            "perfstat_memory_page",
            &mut out,
            &[224, 152],
            fake_old_pages(&mut calls),
            || EINVAL,
        );
        assert_eq!(
            got,
            Ok((
                Filled {
                    available: 3,
                    filled: 3
                },
                152
            ))
        );
        assert_eq!(calls, [(224, 0, true), (152, 0, true), (152, 3, false)]);
        for (i, psize) in [0x1000u64, 0x1_0000, 0x100_0000].into_iter().enumerate() {
            assert_eq!(out[i].psize, psize, "record {i}");
            assert_eq!(out[i].virt_active, i as u64 + 7, "record {i}");
            assert_eq!(out[i].real_total, 0xAAAA_AAAA_AAAA_AAAA, "record {i}");
            // Past the older layout: zero, whatever was in the buffer.
            assert_eq!(
                (out[i].comprsd_total, out[i].real_avail),
                (0, 0),
                "record {i}"
            );
        }
        assert_eq!(out[3].psize, 0, "zeroed before the call");

        // Every size refused: the last errno.
        let mut calls = Vec::new();
        let got = fill_list_versioned(
            "perfstat_memory_page",
            &mut out,
            &[224, 200],
            fake_old_pages(&mut calls),
            || EINVAL,
        );
        assert_eq!(
            got,
            Err(PerfstatError::Failed {
                function: "perfstat_memory_page",
                errno: EINVAL
            })
        );
        // The newest size accepted: no spreading.
        let mut calls = Vec::new();
        let mut out = [perfstat_memory_page_t::default(); 4];
        let got = fill_list_versioned(
            "perfstat_memory_page",
            &mut out,
            &[224, 152],
            fake_pages(&mut calls),
            || EINVAL,
        );
        assert_eq!(got.map(|(f, s)| (f.filled, s)), Ok((3, 224)));
        assert_eq!(out[1].psize, 0x1_0000);
    }

    /// The count query alone (`memory_page_count`: an empty slice) with the sizes
    /// `memory_pages` tries: an old library refuses the newest size for the count as well.
    #[test]
    fn versioned_count_query_falls_back_too() {
        let mut calls = Vec::new();
        let got = fill_list_versioned::<perfstat_memory_page_t>(
            "perfstat_memory_page",
            &mut [],
            &MEMORY_PAGE_SIZES,
            fake_old_pages(&mut calls),
            || EINVAL,
        );
        let expected = Filled {
            available: 3,
            filled: 0,
        };
        assert_eq!(got, Ok((expected, 152)));
        assert_eq!(calls, [(224, 0, true), (152, 0, true)]);
        // A library that knows the newest size: one count query, nothing else.
        let mut calls = Vec::new();
        let got = fill_list_versioned::<perfstat_memory_page_t>(
            "perfstat_memory_page",
            &mut [],
            &MEMORY_PAGE_SIZES,
            fake_pages(&mut calls),
            || unreachable!("errno read after a successful call"),
        );
        assert_eq!(got, Ok((expected, 224)));
        assert_eq!(calls, [(224, 0, true)]);
    }

    /// The count query accepts the newest size but the data call refuses it: both are redone
    /// with the older size, into the same buffer, and the records are spread.
    #[test]
    fn newest_size_refused_by_the_data_call_only() {
        let mut calls = Vec::new();
        let mut passed = Vec::new();
        let mut out = [perfstat_memory_page_t::default(); 4];
        let got = {
            let mut old = fake_old_pages(&mut calls);
            let fake = |buf: *mut perfstat_memory_page_t, size, n| {
                passed.push((size, n, buf.is_null()));
                // The count query works with any size; the data call only with 152.
                old(buf, if buf.is_null() { 152 } else { size }, n)
            };
            fill_list_versioned(
                "perfstat_memory_page",
                &mut out,
                &MEMORY_PAGE_SIZES,
                fake,
                || EINVAL,
            )
        };
        assert_eq!(got.map(|(f, s)| (f.filled, s)), Ok((3, 152)));
        assert_eq!(
            passed,
            [
                (224, 0, true),
                (224, 3, false),
                (152, 0, true),
                (152, 3, false)
            ]
        );
        assert_eq!(out[2].psize, 0x100_0000);
        assert_eq!((out[2].virt_active, out[2].comprsd_total), (9, 0));
    }

    /// Both sizes refused by the count query: the errno of the last (oldest) attempt, and
    /// nothing written.
    #[test]
    fn versioned_list_both_sizes_refused() {
        let mut sizes = Vec::new();
        let mut errnos = [EINVAL, EFAULT].into_iter();
        let mut out = [perfstat_memory_page_t::default(); 2];
        out[0].psize = 5;
        let got = fill_list_versioned(
            "perfstat_memory_page",
            &mut out,
            &MEMORY_PAGE_SIZES,
            |buf: *mut perfstat_memory_page_t, size, _| {
                sizes.push((size, buf.is_null()));
                -1
            },
            || errnos.next().unwrap(),
        );
        let expected = PerfstatError::Failed {
            function: "perfstat_memory_page",
            errno: EFAULT,
        };
        assert_eq!(got, Err(expected));
        assert_eq!(sizes, [(224, true), (152, true)]);
        assert_eq!(out[0].psize, 5);
    }

    /// `partition_config`'s sizes: 808 (with `subprocessor_mode`) first, else 800, whose
    /// library leaves `subprocessor_mode` 0 whatever the buffer held.
    #[test]
    fn partition_config_sizes_newest_first() {
        let fake = |accept: c_int| {
            move |buf: *mut perfstat_partition_config_t, size: c_int, n: c_int| {
                assert_eq!(n, 1);
                if size != accept && size != 800 {
                    return -1;
                }
                // SAFETY: `buf` points to the live struct passed by `fill_versioned`, of at
                // least `size` bytes.
                let c = unsafe { &mut *buf };
                c.targetmemexpsize = 42;
                if size == 808 {
                    c.subprocessor_mode = 2;
                }
                1
            }
        };
        let mut out = perfstat_partition_config_t {
            subprocessor_mode: 7,
            ..Default::default()
        };
        let size = fill_versioned(
            "perfstat_partition_config",
            &mut out,
            &PARTITION_CONFIG_SIZES,
            fake(808),
            || unreachable!(),
        );
        assert_eq!(size, Ok(808));
        assert_eq!((out.targetmemexpsize, out.subprocessor_mode), (42, 2));

        out.subprocessor_mode = 7;
        let size = fill_versioned(
            "perfstat_partition_config",
            &mut out,
            &PARTITION_CONFIG_SIZES,
            fake(800),
            || EINVAL,
        );
        assert_eq!(size, Ok(800));
        assert_eq!((out.targetmemexpsize, out.subprocessor_mode), (42, 0));

        let err = fill_versioned(
            "perfstat_partition_config",
            &mut out,
            &PARTITION_CONFIG_SIZES,
            |_: *mut perfstat_partition_config_t, _, _| -1,
            || EINVAL,
        );
        let expected = PerfstatError::Failed {
            function: "perfstat_partition_config",
            errno: EINVAL,
        };
        assert_eq!(err, Err(expected));
    }

    #[test]
    fn list_counts_then_fills() {
        let mut calls = Vec::new();
        let mut out = [perfstat_memory_page_t::default(); 8];
        let filled = fill_list(
            "perfstat_memory_page",
            &mut out,
            fake_pages(&mut calls),
            || 0,
        );
        assert_eq!(
            filled,
            Ok(Filled {
                available: 3,
                filled: 3
            })
        );
        assert_eq!(calls, [(224, 0, true), (224, 3, false)]);
        assert_eq!(out[0].psize, 0x1000);
        assert_eq!(out[2].psize, 0x100_0000);
        assert_eq!(out[3].psize, 0);
    }

    #[test]
    fn list_into_a_short_slice_is_truncated() {
        let mut calls = Vec::new();
        let mut out = [perfstat_memory_page_t::default(); 2];
        let filled = fill_list(
            "perfstat_memory_page",
            &mut out,
            fake_pages(&mut calls),
            || 0,
        );
        let filled = filled.unwrap();
        assert_eq!(
            filled,
            Filled {
                available: 3,
                filled: 2
            }
        );
        assert!(filled.truncated());
        assert_eq!(calls, [(224, 0, true), (224, 2, false)]);
        assert_eq!(out[1].psize, 0x1_0000);
    }

    #[test]
    fn list_with_empty_slice_or_nothing_available_makes_one_call() {
        let mut calls = Vec::new();
        let mut out: [perfstat_memory_page_t; 0] = [];
        let filled = fill_list(
            "perfstat_memory_page",
            &mut out,
            fake_pages(&mut calls),
            || 0,
        );
        assert_eq!(
            filled,
            Ok(Filled {
                available: 3,
                filled: 0
            })
        );
        assert_eq!(calls.len(), 1);

        let mut out = [perfstat_cpu_t::default(); 2];
        let filled = fill_list("perfstat_cpu", &mut out, |_, _, _| 0, || 0);
        assert_eq!(
            filled,
            Ok(Filled {
                available: 0,
                filled: 0
            })
        );
    }

    #[test]
    fn list_fill_errors() {
        let mut out = [perfstat_cpu_t::default(); 4];
        let count_then = |fill: c_int| {
            move |buf: *mut perfstat_cpu_t, _, n: c_int| {
                if buf.is_null() {
                    4
                } else if fill == i32::MAX {
                    n + 1
                } else {
                    fill
                }
            }
        };
        // The fill call fails.
        let err = fill_list("perfstat_cpu", &mut out, count_then(-1), || EINVAL);
        let expected = PerfstatError::Failed {
            function: "perfstat_cpu",
            errno: EINVAL,
        };
        assert_eq!(err, Err(expected));
        // The library claims more than requested.
        let err = fill_list("perfstat_cpu", &mut out, count_then(i32::MAX), || 0);
        let expected = PerfstatError::UnexpectedReturn {
            function: "perfstat_cpu",
            returned: 5,
        };
        assert_eq!(err, Err(expected));
        // A CPU went away between the count and the fill: fewer is fine.
        let filled = fill_list("perfstat_cpu", &mut out, count_then(3), || 0);
        assert_eq!(
            filled,
            Ok(Filled {
                available: 4,
                filled: 3
            })
        );
    }

    #[test]
    fn layout_sizes_round_trip() {
        for layout in PartitionTotalLayout::NEWEST_FIRST {
            assert_eq!(PartitionTotalLayout::from_size(layout.size()), Some(layout));
            assert!(layout.valid_bytes() <= layout.size());
        }
        assert_eq!(PartitionTotalLayout::from_size(800), None);
        assert_eq!(PartitionTotalLayout::NEWEST_FIRST[0].size(), 688);
    }
}
