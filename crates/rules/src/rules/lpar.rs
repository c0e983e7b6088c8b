//! How a PowerVM partition is described in the partition rules' evidence (PD401, PD402, PD407).

/// `dedicated, capped, donating, entitlement 21.00, 21 virtual processors`.
pub(crate) fn describe(p: &crate::PartitionFacts) -> String {
    let mut parts = vec![
        if p.shared { "shared" } else { "dedicated" }.to_owned(),
        if p.capped { "capped" } else { "uncapped" }.to_owned(),
    ];
    if p.donating {
        parts.push("donating".into());
    }
    if let Some(e) = p.entitled_capacity {
        parts.push(format!("entitlement {e:.2}"));
    }
    if let Some(v) = p.online_vcpus {
        parts.push(format!("{v} virtual processors"));
    }
    format!("partition: {}", parts.join(", "))
}
