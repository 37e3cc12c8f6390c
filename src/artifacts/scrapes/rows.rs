//! What a block of lines and the run's columns both speak of: a row's
//! label set and "no bounds", a position's numbers, a scrape's layout and
//! its phase tag. Both [`super::block`] and [`super::store`] use it; neither
//! uses the other's types for these.

pub use crate::artifacts::Labels;

/// "No bucket bounds" in a row.
pub const NONE: u32 = u32::MAX;

/// A position's numbers, above its label set's id ([`FLAGS_SHIFT`]).
pub const HAS_VALUE: u32 = 1;
/// See [`HAS_VALUE`].
pub const HAS_COUNT: u32 = 2;
/// See [`HAS_VALUE`].
pub const HAS_SUM: u32 = 4;

/// Where a position keeps its `HAS_*` bits: above the label set's id.
pub const FLAGS_SHIFT: u32 = 29;

/// The structure of a scrape: its families (in name order once the file is
/// read), each a range of row positions, and per position the label set's
/// id with the `HAS_*` bits above it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Layout {
    /// (family id, first position, end position).
    pub groups: Vec<(u32, u32, u32)>,
    /// Per position: label set id | `HAS_*` << [`FLAGS_SHIFT`].
    pub rows: Vec<u32>,
}

/// The label set's id of a position's tag.
pub fn labels_of(tag: u32) -> u32 {
    tag & ((1 << FLAGS_SHIFT) - 1)
}

/// The `HAS_*` bits of a position's tag.
pub fn flags_of(tag: u32) -> u32 {
    tag >> FLAGS_SHIFT
}

closed_set! {
    /// The phase AIPerf tagged a scrape with (`benchmark_phase`): absent for
    /// the configure-time baseline and the idle scrapes between phases.
    #[derive(Default)]
    pub enum ScrapePhase {
        /// No tag.
        #[default]
        Untagged => "untagged",
        /// Warmup.
        Warmup => "warmup",
        /// Profiling.
        Profiling => "profiling",
        /// A tag this reader does not know.
        Other => "other",
    }
}

impl ScrapePhase {
    /// The phase of a tag as written.
    pub fn of(tag: Option<&str>) -> ScrapePhase {
        match tag {
            None => ScrapePhase::Untagged,
            Some("warmup") => ScrapePhase::Warmup,
            Some("profiling") => ScrapePhase::Profiling,
            Some(_) => ScrapePhase::Other,
        }
    }
}
