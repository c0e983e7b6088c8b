//! The partition flags word (`perfstat_partition_type_t`).
//!
//! IBM's header declares a union of `uint w` and a struct of 17 one-bit fields plus `spare:15`.
//! AIX allocates bitfields from the most significant bit (clang `-target powerpc64-ibm-aix`
//! folds `smt_capable = 1` to `0x8000_0000`; power-devops/perfstat reads `conf[0] & (1 << 7)` as
//! smt_capable and `conf[1] & (1 << 4)` as donate_enabled), so the flags are masks on the word.
//! `regen.sh` re-checks three of the masks against clang on every regeneration.

use core::fmt;

use crate::bindings::perfstat_partition_type_t;

/// MSB-first masks on the `perfstat_partition_type_t` word, in declaration order.
pub mod mask {
    /// OS supports SMT.
    pub const SMT_CAPABLE: u32 = 0x8000_0000;
    /// SMT is on.
    pub const SMT_ENABLED: u32 = 0x4000_0000;
    /// OS supports logical partitioning.
    pub const LPAR_CAPABLE: u32 = 0x2000_0000;
    /// Logical partitioning is on.
    pub const LPAR_ENABLED: u32 = 0x1000_0000;
    /// OS supports shared processor LPARs.
    pub const SHARED_CAPABLE: u32 = 0x0800_0000;
    /// The partition runs in shared processor mode.
    pub const SHARED_ENABLED: u32 = 0x0400_0000;
    /// OS supports dynamic LPAR.
    pub const DLPAR_CAPABLE: u32 = 0x0200_0000;
    /// The partition is capped.
    pub const CAPPED: u32 = 0x0100_0000;
    /// The kernel is 64-bit.
    pub const KERNEL_IS_64: u32 = 0x0080_0000;
    /// Pool utilisation data is available (`pool_idle_time` is meaningful).
    pub const POOL_UTIL_AUTHORITY: u32 = 0x0040_0000;
    /// Capable of donating cycles.
    pub const DONATE_CAPABLE: u32 = 0x0020_0000;
    /// Enabled for donating cycles (dedicated donating).
    pub const DONATE_ENABLED: u32 = 0x0010_0000;
    /// Active Memory Sharing capable.
    pub const AMS_CAPABLE: u32 = 0x0008_0000;
    /// Active Memory Sharing enabled.
    pub const AMS_ENABLED: u32 = 0x0004_0000;
    /// Power saving mode is on.
    pub const POWER_SAVE: u32 = 0x0002_0000;
    /// Active Memory Expansion is on.
    pub const AME_ENABLED: u32 = 0x0001_0000;
    /// Extended shared processor mode.
    pub const SHARED_EXTENDED: u32 = 0x0000_8000;
    /// The 15 spare bits.
    pub const SPARE: u32 = 0x0000_7FFF;
}

/// Decoded partition flags: `perfstat_partition_total_t::type_` or
/// `perfstat_partition_config_t::conf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PartitionFlags(pub u32);

macro_rules! flag_getters {
    ($($(#[$doc:meta])* $name:ident => $mask:ident;)*) => {
        $(
            $(#[$doc])*
            pub const fn $name(self) -> bool {
                self.0 & mask::$mask != 0
            }
        )*
    };
}

impl PartitionFlags {
    /// Flags from the raw word.
    pub const fn from_word(w: u32) -> Self {
        Self(w)
    }

    /// The raw word.
    pub const fn word(self) -> u32 {
        self.0
    }

    /// Whether every bit of `mask` is set.
    pub const fn contains(self, mask: u32) -> bool {
        self.0 & mask == mask
    }

    flag_getters! {
        /// `smt_capable`.
        smt_capable => SMT_CAPABLE;
        /// `smt_enabled`.
        smt_enabled => SMT_ENABLED;
        /// `lpar_capable`.
        lpar_capable => LPAR_CAPABLE;
        /// `lpar_enabled`.
        lpar_enabled => LPAR_ENABLED;
        /// `shared_capable`.
        shared_capable => SHARED_CAPABLE;
        /// `shared_enabled`: `lparstat -i` prints Type Shared, else Dedicated.
        shared_enabled => SHARED_ENABLED;
        /// `dlpar_capable`.
        dlpar_capable => DLPAR_CAPABLE;
        /// `capped`.
        capped => CAPPED;
        /// `kernel_is_64`.
        kernel_is_64 => KERNEL_IS_64;
        /// `pool_util_authority`.
        pool_util_authority => POOL_UTIL_AUTHORITY;
        /// `donate_capable`.
        donate_capable => DONATE_CAPABLE;
        /// `donate_enabled`: `lparstat -i` prints Mode Donating.
        donate_enabled => DONATE_ENABLED;
        /// `ams_capable`.
        ams_capable => AMS_CAPABLE;
        /// `ams_enabled`.
        ams_enabled => AMS_ENABLED;
        /// `power_save`.
        power_save => POWER_SAVE;
        /// `ame_enabled`.
        ame_enabled => AME_ENABLED;
        /// `shared_extended`.
        shared_extended => SHARED_EXTENDED;
    }
}

impl perfstat_partition_type_t {
    /// The flags as one 32-bit word.
    pub fn word(&self) -> u32 {
        // SAFETY: the union's only member is a `c_uint`, every bit pattern of which is a valid
        // `u32`, and the union is `Copy`, so reading it cannot observe invalid data.
        unsafe { self.w }
    }

    /// The decoded flags.
    pub fn flags(&self) -> PartitionFlags {
        PartitionFlags(self.word())
    }
}

impl From<perfstat_partition_type_t> for PartitionFlags {
    fn from(t: perfstat_partition_type_t) -> Self {
        t.flags()
    }
}

impl From<PartitionFlags> for perfstat_partition_type_t {
    fn from(f: PartitionFlags) -> Self {
        Self { w: f.0 }
    }
}

impl fmt::Debug for perfstat_partition_type_t {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "perfstat_partition_type_t {{ w: {:#010x} }}",
            self.word()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    const ALL: [u32; 17] = [
        mask::SMT_CAPABLE,
        mask::SMT_ENABLED,
        mask::LPAR_CAPABLE,
        mask::LPAR_ENABLED,
        mask::SHARED_CAPABLE,
        mask::SHARED_ENABLED,
        mask::DLPAR_CAPABLE,
        mask::CAPPED,
        mask::KERNEL_IS_64,
        mask::POOL_UTIL_AUTHORITY,
        mask::DONATE_CAPABLE,
        mask::DONATE_ENABLED,
        mask::AMS_CAPABLE,
        mask::AMS_ENABLED,
        mask::POWER_SAVE,
        mask::AME_ENABLED,
        mask::SHARED_EXTENDED,
    ];

    #[test]
    fn masks_are_msb_first_in_declaration_order() {
        for (i, m) in ALL.iter().enumerate() {
            assert_eq!(*m, 1u32 << (31 - i), "flag #{i}");
        }
        let all = ALL.iter().fold(0, |acc, m| acc | m);
        assert_eq!(all & mask::SPARE, 0);
        assert_eq!(all | mask::SPARE, u32::MAX);
    }

    #[test]
    fn power_devops_byte_reading_matches() {
        // power-devops/perfstat reads the big-endian word byte by byte:
        // conf[0] & (1 << 7) is smt_capable, conf[1] & (1 << 4) is donate_enabled,
        // conf[2] & (1 << 7) is shared_extended.
        let from_bytes = |b0: u8, b1: u8, b2: u8| u32::from_be_bytes([b0, b1, b2, 0]);
        assert_eq!(from_bytes(1 << 7, 0, 0), 0x8000_0000);
        assert!(PartitionFlags(from_bytes(1 << 7, 0, 0)).smt_capable());
        assert_eq!(from_bytes(0, 1 << 4, 0), 0x0010_0000);
        assert!(PartitionFlags(from_bytes(0, 1 << 4, 0)).donate_enabled());
        assert!(PartitionFlags(from_bytes(0, 0, 1 << 7)).shared_extended());
        assert!(PartitionFlags(from_bytes(1 << 0, 0, 0)).capped());
        assert!(PartitionFlags(from_bytes(0, 1 << 6, 0)).pool_util_authority());
    }

    #[test]
    fn sample_words() {
        // Shared, uncapped, SMT on, 64-bit kernel, pool authority.
        let shared = PartitionFlags::from_word(0xFEC0_0000);
        assert!(shared.shared_enabled());
        assert!(!shared.capped());
        assert!(!shared.donate_enabled());
        assert!(shared.smt_enabled());
        assert!(shared.kernel_is_64());
        assert!(shared.pool_util_authority());

        // Dedicated donating: shared off, capped, donate capable and enabled.
        let donating = PartitionFlags::from_word(
            mask::SMT_CAPABLE
                | mask::SMT_ENABLED
                | mask::LPAR_CAPABLE
                | mask::LPAR_ENABLED
                | mask::CAPPED
                | mask::DONATE_CAPABLE
                | mask::DONATE_ENABLED,
        );
        assert!(!donating.shared_enabled());
        assert!(donating.capped());
        assert!(donating.donate_enabled());
        assert!(donating.contains(mask::DONATE_CAPABLE | mask::DONATE_ENABLED));
        assert!(!donating.contains(mask::DONATE_ENABLED | mask::AMS_ENABLED));

        let none = PartitionFlags::default();
        assert!(!none.smt_capable() && !none.shared_enabled() && !none.ame_enabled());
        assert_eq!(none.word(), 0);
    }

    #[test]
    fn union_round_trip_and_debug() {
        let t = perfstat_partition_type_t::from(PartitionFlags(mask::SHARED_ENABLED));
        assert_eq!(t.word(), 0x0400_0000);
        assert!(t.flags().shared_enabled());
        assert_eq!(PartitionFlags::from(t), PartitionFlags(0x0400_0000));
        assert_eq!(
            format!("{t:?}"),
            "perfstat_partition_type_t { w: 0x04000000 }"
        );
    }
}
