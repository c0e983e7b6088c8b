//! A sample's `/metrics` body in both formats, each gzipped at most once per sample.
//!
//! A scrape serves the sample's encoded metrics plus a few lines of its own (the sample's age,
//! the last reload). Prometheus asks for gzip on every scrape, and compressing the whole body
//! each time was ~70% of a scrape's CPU (0.46 of 0.69 ms for 30 KB, measured). So the sample's
//! part is deflated once, ending with a sync flush (byte-aligned, not final: RFC 1951 allows
//! the stream to go on with any block), and each scrape deflates only its own lines as the
//! final blocks after it. The response is one ordinary gzip member (RFC 1952): header, the
//! kept blocks, the scrape's blocks, the CRC-32 and length of the whole text; any gzip
//! reader decodes it, not only those that accept several members.

use std::{
    io::Write,
    sync::{Arc, OnceLock},
};

use flate2::{Compression, write::DeflateEncoder};

/// The metrics of one sample, encoded once; the Prometheus text format and the gzipped
/// forms are made on the first scrape that asks for them.
#[derive(Debug)]
pub struct Encoded {
    /// OpenMetrics text without `# EOF`.
    openmetrics: String,
    text: OnceLock<String>,
    /// Indexed by [`Format`].
    deflated: [OnceLock<Arc<Deflated>>; 2],
}

/// The two exposition formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4.
    Text = 0,
    OpenMetrics = 1,
}

impl Encoded {
    pub fn new(openmetrics: String) -> Encoded {
        Encoded {
            openmetrics,
            text: OnceLock::new(),
            deflated: [OnceLock::new(), OnceLock::new()],
        }
    }

    /// The sample's metrics in `format`.
    pub fn body(&self, format: Format) -> &str {
        match format {
            Format::OpenMetrics => &self.openmetrics,
            Format::Text => self
                .text
                .get_or_init(|| super::metrics::to_prometheus_text(&self.openmetrics)),
        }
    }

    /// The sample's metrics in `format`, deflated up to a sync flush.
    pub fn deflated(&self, format: Format) -> Arc<Deflated> {
        self.deflated[format as usize]
            .get_or_init(|| Arc::new(Deflated::new(self.body(format).as_bytes())))
            .clone()
    }
}

/// Text deflated up to a sync flush, with what the gzip trailer needs to cover it.
#[derive(Debug)]
pub struct Deflated {
    blocks: Vec<u8>,
    crc: crc32fast::Hasher,
    len: u64,
}

/// The most one stored block holds.
const STORED_MAX: usize = u16::MAX as usize;

/// The 10-byte gzip header: deflate, no flags, no time, no extra flags, OS unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

impl Deflated {
    pub fn new(text: &[u8]) -> Deflated {
        let mut e = DeflateEncoder::new(Vec::with_capacity(text.len() / 4 + 64), level());
        // Writing to a Vec cannot fail; `flush` is the sync flush that byte-aligns the end.
        let _ = e.write_all(text);
        let _ = e.flush();
        let mut crc = crc32fast::Hasher::new();
        crc.update(text);
        Deflated {
            blocks: e.get_ref().clone(),
            crc,
            len: text.len() as u64,
        }
    }

    /// One gzip member of the kept text followed by `tail`, which goes in stored (uncompressed)
    /// blocks: a scrape's few hundred bytes are not worth a compressor's tables (a new one
    /// allocates and clears ~300 KB), and the kept blocks end byte-aligned where a stored
    /// block may start (RFC 1951 §3.2.4).
    pub fn gzip_with(&self, tail: &[u8]) -> Vec<u8> {
        let chunks = tail.len() / STORED_MAX + 1;
        let mut out =
            Vec::with_capacity(GZIP_HEADER.len() + self.blocks.len() + tail.len() + 5 * chunks + 8);
        out.extend_from_slice(&GZIP_HEADER);
        out.extend_from_slice(&self.blocks);
        let mut rest = tail;
        loop {
            let (chunk, after) = rest.split_at(rest.len().min(STORED_MAX));
            let last = after.is_empty();
            // BFINAL in bit 0, BTYPE 00 (stored) in bits 1-2, the rest of the byte padding;
            // then LEN and its ones' complement, little-endian.
            let len = chunk.len() as u16;
            out.push(u8::from(last));
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(chunk);
            if last {
                break;
            }
            rest = after;
        }
        let mut crc = self.crc.clone();
        crc.update(tail);
        out.extend_from_slice(&crc.finalize().to_le_bytes());
        // ISIZE is the length modulo 2^32.
        out.extend_from_slice(&((self.len + tail.len() as u64) as u32).to_le_bytes());
        out
    }
}

/// The kept part's level: the fastest. On a 35 KB sample body (miniz_oxide, this VM) level 1
/// deflates in 0.16 ms to 7.8 KB, zlib's default 6 (Go's promhttp and tower-http) in 0.58 ms to
/// 6.3 KB. The agent deflates once a sample: 0.4 ms of its CPU saved each sample is worth more
/// than 1.5 KB more on the wire each scrape.
fn level() -> Compression {
    Compression::fast()
}

/// Whether an `Accept-Encoding` value accepts gzip (RFC 9110 §12.5.3): `gzip` or `x-gzip`
/// with a non-zero weight, or `*` with one when gzip is not listed.
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    let mut star = None;
    for item in accept_encoding.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        let weight = parts
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim().eq_ignore_ascii_case("q").then(|| v.trim())
            })
            .next()
            .map_or(Some(1.0), |v| v.parse::<f32>().ok());
        // A malformed weight does not accept.
        let accepted = weight.is_some_and(|q| q > 0.0);
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            return accepted;
        }
        if coding == "*" {
            star = Some(accepted);
        }
    }
    star.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn gunzip(bytes: &[u8]) -> String {
        let mut s = String::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_string(&mut s)
            .unwrap();
        s
    }

    #[test]
    fn a_kept_body_and_a_tail_make_one_gzip_member() {
        let body: String = (0..2_000)
            .map(|i| format!("powerdiag_x{{n=\"{i}\"}} {}\n", i * 7))
            .collect();
        let d = Deflated::new(body.as_bytes());
        assert!(d.blocks.len() < body.len() / 3, "{} bytes", d.blocks.len());
        let long = "y".repeat(2 * STORED_MAX + 10);
        for tail in ["", "powerdiag_sample_age_seconds 1.5\n# EOF\n", &long] {
            let gz = d.gzip_with(tail.as_bytes());
            assert_eq!(gunzip(&gz), format!("{body}{tail}"));
            // One member: a reader that stops after the first member sees the whole text.
            let mut first = flate2::read::GzDecoder::new(&gz[..]);
            let mut s = String::new();
            first.read_to_string(&mut s).unwrap();
            assert_eq!(s.len(), body.len() + tail.len());
            let mut rest = Vec::new();
            first.into_inner().read_to_end(&mut rest).unwrap();
            assert!(rest.is_empty(), "{} bytes after the member", rest.len());
        }
    }

    #[test]
    fn an_empty_body() {
        let d = Deflated::new(b"");
        assert_eq!(gunzip(&d.gzip_with(b"x 1\n")), "x 1\n");
        assert_eq!(gunzip(&d.gzip_with(b"")), "");
    }

    #[test]
    fn the_text_format_is_made_once_on_demand() {
        let e = Encoded::new("# TYPE a counter\na_total 1\n".into());
        assert!(e.text.get().is_none());
        let t = e.body(Format::Text);
        assert!(t.contains("# TYPE a_total counter"), "{t}");
        assert!(std::ptr::eq(t, e.body(Format::Text)));
        let a = e.deflated(Format::OpenMetrics);
        assert!(Arc::ptr_eq(&a, &e.deflated(Format::OpenMetrics)));
        assert!(e.deflated[Format::Text as usize].get().is_none());
    }

    #[test]
    fn accept_encoding() {
        for yes in [
            "gzip",
            "gzip, deflate, br",
            "deflate, GZIP;q=0.5",
            "x-gzip",
            "*",
            "br;q=1.0, *;q=0.1",
            "gzip;q=1",
            "gzip ; q=0.001",
        ] {
            assert!(accepts_gzip(yes), "{yes}");
        }
        for no in [
            "",
            "identity",
            "deflate, br",
            "gzip;q=0",
            "gzip;q=0.0, *",
            "*;q=0",
            "gzip;q=abc",
            "gzipx",
        ] {
            assert!(!accepts_gzip(no), "{no}");
        }
    }
}
