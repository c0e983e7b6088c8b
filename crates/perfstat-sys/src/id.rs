//! Selectors (`perfstat_id_t`) and the name strings in the structures.

use core::ffi::c_char;

use crate::bindings::perfstat_id_t;

/// A selector with an empty name: `FIRST_CPU`, `FIRST_DISK`, ... (`""`).
pub fn id_first() -> perfstat_id_t {
    perfstat_id_t::default()
}

/// A selector naming process `pid` for `perfstat_process` (the name is the decimal pid).
pub fn id_for_pid(pid: u64) -> perfstat_id_t {
    let mut digits = [0u8; 20]; // u64::MAX has 20 digits
    let mut n = pid;
    let mut len = 0;
    loop {
        // `n % 10` is below 10, so the narrowing is exact.
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut id = perfstat_id_t::default();
    for (dst, src) in id.name.iter_mut().zip(digits[..len].iter().rev()) {
        // ASCII digits are below 0x80, so they mean the same as `i8` or `u8`.
        *dst = *src as c_char;
    }
    id
}

/// The bytes of a NUL-terminated name field (`name`, `proc_name`, `partitionname`, ...), without
/// the NUL; the whole field if it has none.
pub fn name_bytes(name: &[c_char]) -> &[u8] {
    // SAFETY: `c_char` is `i8` or `u8`: same size and alignment as `u8`, and every bit pattern
    // is a valid `u8`. The new slice covers exactly the memory of `name` and borrows it.
    let bytes = unsafe { core::slice::from_raw_parts(name.as_ptr().cast::<u8>(), name.len()) };
    match bytes.iter().position(|&b| b == 0) {
        Some(end) => &bytes[..end],
        None => bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_is_empty() {
        assert_eq!(name_bytes(&id_first().name), b"");
    }

    #[test]
    fn pid_is_decimal() {
        assert_eq!(name_bytes(&id_for_pid(0).name), b"0");
        assert_eq!(name_bytes(&id_for_pid(7).name), b"7");
        assert_eq!(name_bytes(&id_for_pid(4_325_670).name), b"4325670");
        assert_eq!(
            name_bytes(&id_for_pid(u64::MAX).name),
            b"18446744073709551615"
        );
    }

    #[test]
    fn name_without_nul_is_whole_field() {
        let full = [b'x' as c_char; 4];
        assert_eq!(name_bytes(&full), b"xxxx");
        let cpu = [
            b'c' as c_char,
            b'p' as c_char,
            b'u' as c_char,
            b'0' as c_char,
            0,
            b'z' as c_char,
        ];
        assert_eq!(name_bytes(&cpu), b"cpu0");
    }
}
