//! Size model of an MHNSW graph in memory, shared by the vector rules.

use crate::VectorIndex;

/// MariaDB's default `M` (`mhnsw_default_m`).
pub(crate) const DEFAULT_M: u32 = 6;

/// Fraction of the hidden table's clustered index that the graph occupies in memory, measured
/// on MariaDB 11.8 (20k rows: 32.4 MB graph for 37.3 MB of pages; 100k rows: ~170 MB for 181 MB).
const BYTES_PER_HIDDEN_BYTE: f64 = 0.9;

/// An estimate of one index's graph in the MHNSW cache.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphEstimate {
    pub bytes: u64,
    /// How it was derived, for the evidence line.
    pub method: String,
}

/// Estimates the memory the whole graph of `index` needs in the MHNSW cache.
///
/// Two models, and the larger answer wins (an estimate that is too small would recommend a
/// cache that still thrashes):
/// - per node, MariaDB keeps the vector quantised to int16 (2 bytes per dimension), a node
///   header and a neighbour array of 2*M pointers on layer 0: `2*dim + 64 + 16*M` bytes, 160 B
///   of overhead at M=6. With exact row counts this matches the measured plateaus within 5%
///   (20,000 × 768-d: 32.4 MB; 100,000 × 768-d: ~170 MB), but InnoDB's row counts are sampled
///   estimates that can be 10% low;
/// - 0.9 × the hidden graph table's clustered index (37.3 MB of pages held 32.4 MB of graph).
///
/// Both are derived from measurements, not MariaDB formulas.
pub fn estimate_graph_bytes(index: &VectorIndex, default_m: Option<u32>) -> Option<GraphEstimate> {
    let m = u64::from(index.m.or(default_m).unwrap_or(DEFAULT_M));
    let by_rows = match (index.rows, index.dimensions) {
        (Some(rows), Some(dim)) => {
            let per_node = 2 * u64::from(dim) + 64 + 16 * m;
            Some(GraphEstimate {
                bytes: rows.saturating_mul(per_node),
                method: format!("{rows} vectors × (2×{dim} + 64 + 16×M={m}) bytes"),
            })
        }
        _ => None,
    };
    let by_table = index.hidden_table_bytes.map(|hidden| GraphEstimate {
        bytes: (hidden as f64 * BYTES_PER_HIDDEN_BYTE) as u64,
        method: format!("0.9 × {hidden} bytes of the hidden graph table"),
    });
    match (by_rows, by_table) {
        (Some(a), Some(b)) => Some(if a.bytes >= b.bytes { a } else { b }),
        (a, b) => a.or(b),
    }
}

impl crate::MariadbFacts {
    /// [`estimate_graph_bytes`] with this server's `mhnsw_default_m` for indexes created
    /// without an explicit `M`.
    pub fn graph_estimate(&self, index: &VectorIndex) -> Option<GraphEstimate> {
        let default_m = self
            .var_u64(crate::Var::MhnswDefaultM)
            .ok()
            .and_then(|m| u32::try_from(m).ok());
        estimate_graph_bytes(index, default_m)
    }
}

/// Headroom over the largest graph in the suggested limit.
pub(crate) const HEADROOM: f64 = 1.5;

/// The limit to recommend for a graph of `graph_bytes`: with headroom, in whole MiB.
pub(crate) fn suggested_limit(graph_bytes: u64) -> u64 {
    ((graph_bytes as f64 * HEADROOM) as u64)
        .div_ceil(1 << 20)
        .saturating_mul(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::big_vector_index;

    #[test]
    fn matches_the_measured_plateaus() {
        let mut idx = big_vector_index();
        idx.hidden_table_bytes = None;
        let e = estimate_graph_bytes(&idx, None).unwrap();
        // 20k × 768-d measured at 32.4 MB.
        assert!((32_000_000..35_000_000).contains(&e.bytes), "{}", e.bytes);
        idx.rows = Some(100_000);
        let e = estimate_graph_bytes(&idx, None).unwrap();
        assert!((160_000_000..180_000_000).contains(&e.bytes), "{}", e.bytes);
    }

    #[test]
    fn the_larger_estimate_wins() {
        let mut idx = big_vector_index();
        idx.rows = Some(17_792); // InnoDB's sampled count for 20,000 rows
        let e = estimate_graph_bytes(&idx, None).unwrap();
        assert!(e.method.contains("hidden"), "{}", e.method);
        assert!(e.bytes > 33_000_000, "{}", e.bytes);
    }

    #[test]
    fn falls_back_to_the_hidden_table_and_then_to_nothing() {
        let mut idx = big_vector_index();
        idx.dimensions = None;
        let e = estimate_graph_bytes(&idx, None).unwrap();
        assert!(e.method.contains("hidden"));
        idx.hidden_table_bytes = None;
        assert_eq!(estimate_graph_bytes(&idx, None), None);
    }

    #[test]
    fn huge_values_saturate() {
        let mut idx = big_vector_index();
        idx.rows = Some(u64::MAX);
        idx.dimensions = Some(u32::MAX);
        idx.m = Some(u32::MAX);
        assert_eq!(estimate_graph_bytes(&idx, None).unwrap().bytes, u64::MAX);
    }
}
