//! arm64 CPU names from the Main ID Register fields that `/proc/cpuinfo` prints (`CPU
//! implementer`, `CPU part`): arm64 kernels print no `model name`, so without this a Graviton,
//! an Ampere Altra and a Grace all read as an unnamed `aarch64`. The ids are the kernel's
//! (`arch/arm64/include/asm/cputype.h`) and the vendors' technical reference manuals; the names
//! follow lscpu's spelling, so the two tools agree. Server and common cores only: an unknown
//! part is still named by its implementer and hex id, never guessed.

/// (part id, part name).
type Parts = &'static [(u32, &'static str)];

/// (implementer id, vendor name, its parts).
const IMPLEMENTERS: &[(u32, &str, Parts)] = &[
    (
        0x41,
        "ARM",
        &[
            (0xd03, "Cortex-A53"),
            (0xd04, "Cortex-A35"),
            (0xd05, "Cortex-A55"),
            (0xd07, "Cortex-A57"),
            (0xd08, "Cortex-A72"),
            (0xd09, "Cortex-A73"),
            (0xd0a, "Cortex-A75"),
            (0xd0b, "Cortex-A76"),
            (0xd0c, "Neoverse-N1"),
            (0xd0d, "Cortex-A77"),
            (0xd40, "Neoverse-V1"),
            (0xd41, "Cortex-A78"),
            (0xd44, "Cortex-X1"),
            (0xd46, "Cortex-A510"),
            (0xd47, "Cortex-A710"),
            (0xd48, "Cortex-X2"),
            (0xd49, "Neoverse-N2"),
            (0xd4a, "Neoverse-E1"),
            (0xd4d, "Cortex-A715"),
            (0xd4e, "Cortex-X3"),
            (0xd4f, "Neoverse-V2"),
            (0xd80, "Cortex-A520"),
            (0xd81, "Cortex-A720"),
            (0xd82, "Cortex-X4"),
            (0xd84, "Neoverse-V3"),
            (0xd8e, "Neoverse-N3"),
        ],
    ),
    (0x42, "Broadcom", &[(0x516, "ThunderX2")]),
    (
        0x43,
        "Cavium",
        &[
            (0x0a1, "ThunderX-88XX"),
            (0x0a2, "ThunderX-81XX"),
            (0x0a3, "ThunderX-83XX"),
            (0x0af, "ThunderX2-99xx"),
            (0x0b8, "ThunderX3-T110"),
        ],
    ),
    (0x46, "FUJITSU", &[(0x001, "A64FX")]),
    (0x48, "HiSilicon", &[(0xd01, "Kunpeng-920")]),
    (0x4e, "NVIDIA", &[(0x004, "Carmel")]),
    (0x50, "APM", &[(0x000, "X-Gene")]),
    (0x51, "Qualcomm", &[(0xc00, "Falkor"), (0xc01, "Saphira")]),
    (
        0x61,
        "Apple",
        &[
            (0x022, "Icestorm-M1"),
            (0x023, "Firestorm-M1"),
            (0x032, "Blizzard-M2"),
            (0x033, "Avalanche-M2"),
        ],
    ),
    (0x6d, "Microsoft", &[(0xd49, "Azure-Cobalt-100")]),
    (0x70, "Phytium", &[(0x662, "FTC662"), (0x663, "FTC663")]),
    (0xc0, "Ampere", &[(0xac3, "Ampere-1"), (0xac4, "Ampere-1a")]),
];

fn hex(s: &str) -> Option<u32> {
    let s = s.trim();
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    u32::from_str_radix(digits, 16).ok()
}

/// `CPU implementer` 0x41 and `CPU part` 0xd0c → "ARM Neoverse-N1"; a known implementer with
/// an unlisted part → "ARM part 0xd99"; `None` when the implementer is not a hex number.
pub(super) fn model(implementer: &str, part: Option<&str>) -> Option<String> {
    let imp = hex(implementer)?;
    let part = part.and_then(hex);
    let known = IMPLEMENTERS.iter().find(|(id, ..)| *id == imp);
    let vendor = known.map_or_else(|| format!("implementer {imp:#04x}"), |k| k.1.to_owned());
    let name = known
        .zip(part)
        .and_then(|(k, p)| k.2.iter().find(|(id, _)| *id == p))
        .map(|(_, n)| *n);
    Some(match (name, part) {
        (Some(n), _) => format!("{vendor} {n}"),
        (None, Some(p)) => format!("{vendor} part {p:#05x}"),
        (None, None) => vendor,
    })
}

#[cfg(test)]
mod tests {
    use super::model;

    #[test]
    fn names_server_cores_and_never_guesses() {
        // Graviton2 / Ampere Altra, Graviton3, Grace / Graviton4, Kunpeng 920, A64FX.
        assert_eq!(model("0x41", Some("0xd0c")).unwrap(), "ARM Neoverse-N1");
        assert_eq!(model("0x41", Some("0xd40")).unwrap(), "ARM Neoverse-V1");
        assert_eq!(model("0x41", Some("0xd4f")).unwrap(), "ARM Neoverse-V2");
        assert_eq!(
            model("0x48", Some("0xd01")).unwrap(),
            "HiSilicon Kunpeng-920"
        );
        assert_eq!(model("0x46", Some("0x001")).unwrap(), "FUJITSU A64FX");
        assert_eq!(model("0xc0", Some("0xac3")).unwrap(), "Ampere Ampere-1");
        // Unlisted part or implementer: named by id.
        assert_eq!(model("0x41", Some("0xfff")).unwrap(), "ARM part 0xfff");
        assert_eq!(
            model("0x99", Some("0x001")).unwrap(),
            "implementer 0x99 part 0x001"
        );
        assert_eq!(model("0x41", None).unwrap(), "ARM");
        assert_eq!(model("ARM", Some("0xd0c")), None);
        assert_eq!(model("", None), None);
    }
}
