//! The run's domain: what the artifacts say happened, and the rules every
//! check and command reads them by.
//!
//! [`RunModel`] is built once from the parsed artifacts and shared by every
//! check: per phase kind (`warmup`, `profiling`; a run with several profiling
//! phases aggregates them, as AIPerf's top-level server metrics do) the
//! configured and realised request counts and the windows; the role of each
//! scrape endpoint and the resets of its counters ([`resets`]). Beside it,
//! the domain rules the checks share: a request's connection temperature
//! ([`connection`]), the clients' cache hit rate ([`cache`]), which records a
//! published number is computed over ([`selection`]), which server series
//! together see every request once ([`observers`]), and how raw-scrape
//! increments are given to requests ([`attribution`]).

pub mod attribution;
pub mod cache;
pub mod connection;
pub mod layout;
pub mod observers;
pub mod resets;
pub mod selection;
pub mod steady;

use serde::Serialize;

use crate::artifacts::records::{Phase, Record};
use crate::artifacts::RunArtifacts;

/// What one phase kind looked like.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PhaseModel {
    /// Configured request count (`input_config.phases[kind].requests`);
    /// `null` for duration-bound phases or when the config is missing.
    pub configured_requests: Option<u64>,
    /// Configured duration (s), for duration-bound phases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_duration_s: Option<f64>,
    /// Configured concurrency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u64>,
    /// Records in `profile_export.jsonl`; `null` when the file is missing.
    pub records: Option<u64>,
    /// Records without error and not cancelled.
    pub successful: Option<u64>,
    /// Records with an error (cancelled ones included).
    pub errors: Option<u64>,
    /// Records AIPerf cancelled.
    pub cancelled: Option<u64>,
    /// The records without success by what they reached:
    /// `[client received a first token][AIPerf cancelled it]` (what a
    /// server can have observed of them, `frameworks::observes_unsuccessful`).
    #[serde(skip)]
    pub unsuccessful: [[u64; 2]; 2],
    /// Requests of the phase no record holds ([`Unrecorded`]); `None`
    /// when the phase cannot have any (it is not bounded by duration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unrecorded: Option<Unrecorded>,
    /// Earliest request start and latest request end over the records (ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records_window_ns: Option<(u64, u64)>,
    /// The phase window from `server_metrics_export.json` (ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_window_ns: Option<(u64, u64)>,
}

/// A duration-bound phase's requests in no record: those still in flight
/// when its grace period ended, which AIPerf cancels and writes to no
/// artifact but `logs/aiperf.log` (no record, no error record, nothing in
/// `error_summary` or `phase_manifest.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Unrecorded {
    /// How many, when the log says (its phase-end line's `cancelled`, less
    /// the cancelled records, which are request-cancellation testing).
    pub logged: Option<u64>,
    /// At most how many: the logged count, else the phase's concurrency
    /// (what can be in flight when the grace period ends); `u64::MAX` when
    /// neither is known.
    pub at_most: u64,
}

/// The model of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunModel {
    /// AIPerf version that wrote the run.
    pub aiperf_version: Option<String>,
    /// What that version's files hold ([`layout`]).
    pub layout: layout::Layout,
    /// Warmup, when the run had one.
    pub warmup: Option<PhaseModel>,
    /// Profiling.
    pub profiling: PhaseModel,
    /// The role of each scrape endpoint (`prefill`, `decode`, `frontend`),
    /// where its series say ([`observers::endpoint_roles`]).
    #[serde(skip)]
    pub endpoint_roles: std::collections::BTreeMap<String, String>,
    /// Resets of cumulative series in the raw scrapes ([`resets::detect`]).
    #[serde(skip)]
    pub resets: Vec<resets::Reset>,
    /// Cumulative series born mid-run ([`resets::births`]).
    #[serde(skip)]
    pub births: Vec<resets::Birth>,
    /// Every record's connection temperature, in file order: classified
    /// once here, read by every check, the timeline and the cleaning rules.
    #[serde(skip)]
    pub temperatures: Vec<connection::Temperature>,
    /// The steady state of the profiling records, found while the model is
    /// built (beside its other walks over the records) and then shared
    /// ([`RunModel::steady`]); found on first use by a model built without
    /// records.
    #[serde(skip)]
    steady: std::sync::OnceLock<steady::SteadyState>,
    /// What the steady state is found with.
    #[serde(skip)]
    steady_settings: crate::config::SteadySettings,
}

impl RunModel {
    /// Builds the model from the artifacts, with the thresholds that say
    /// what a cold request and a steady state are.
    pub fn build(run: &RunArtifacts, settings: &crate::config::Settings) -> RunModel {
        let aiperf_version = run
            .summary
            .as_ref()
            .and_then(|s| s.aiperf_version.clone())
            .or_else(|| run.server.as_ref().and_then(|s| s.aiperf_version.clone()));
        let config = run
            .summary
            .as_ref()
            .and_then(|s| s.input_config.as_ref())
            .or_else(|| run.server.as_ref().and_then(|s| s.input_config.as_ref()));
        let layout = layout::Layout::of(
            run,
            aiperf_version.as_deref().and_then(layout::Version::parse),
        );
        let records = run.records.as_ref().map(|r| r.records.as_slice());
        let build = |kind: Phase| phase_model(run, kind, config, records, layout);
        // Four walks over the records, at once: the two phase models, every
        // record's temperature and the steady state (the longest: found
        // here, beside the others, it no longer runs alone at the end of the
        // steady_state check while the other core waits; docs/performance.md).
        // The steady state first, so that it starts at once while another
        // worker takes the three short walks; behind the temperatures, it
        // started only once they were done (the model 0.058 -> 0.050 s on a
        // 1 GB run, examples/check_timeline, eighth 2026-12-07 session).
        let (steady, ((warmup, profiling), temperatures)) = rayon::join(
            || records.map(|r| steady::detect(r, &settings.steady)),
            || {
                rayon::join(
                    || rayon::join(|| build(Phase::Warmup), || build(Phase::Profiling)),
                    || records.map(|r| connection::temperatures(r, &settings.cold)),
                )
            },
        );
        let has_warmup = warmup.configured_requests.is_some()
            || warmup.configured_duration_s.is_some()
            || warmup.records.is_some_and(|n| n > 0)
            || warmup.server_window_ns.is_some();
        let endpoint_roles = run
            .server
            .as_ref()
            .map(observers::endpoint_roles)
            .unwrap_or_default();
        let (resets, births) = match (run.scrapes.as_ref(), run.server.as_ref()) {
            // Each a walk over every scrape: both at once.
            (Some(sc), Some(server)) => {
                // Both walk the scrapes in state order: sorted first, with
                // every worker free for it (one waiting on the other's
                // sorting would leave a core idle).
                sc.sort_states();
                rayon::join(|| resets::detect(sc, server), || resets::births(sc, server))
            }
            _ => (Vec::new(), Vec::new()),
        };
        RunModel {
            aiperf_version,
            layout,
            warmup: has_warmup.then_some(warmup),
            profiling,
            endpoint_roles,
            resets,
            births,
            temperatures: temperatures.unwrap_or_default(),
            steady: steady.map_or_else(std::sync::OnceLock::new, std::sync::OnceLock::from),
            steady_settings: settings.steady.clone(),
        }
    }

    /// The temperature of the record at `index` (file order); unknown for
    /// an index the records do not have.
    pub fn temperature(&self, index: usize) -> connection::Temperature {
        connection::temperature_at(&self.temperatures, index)
    }

    /// The steady state of `records` (the run's records, those the model
    /// was built from), found once ([`steady::detect`], when the model was
    /// built) and then shared by the `steady_state` check, claims, cleaning
    /// and the timeline.
    pub fn steady(&self, records: &[Record]) -> &steady::SteadyState {
        debug_assert_eq!(
            records.len(),
            self.temperatures.len(),
            "the steady state of the records the model was built from"
        );
        if let Some(found) = self.steady.get() {
            return found;
        }
        // Found outside the cell's lock: the finding uses the pool, and a
        // worker blocked on the lock could hold work the finding waits for
        // (two callers at once both find it, the same state; one is kept).
        let found = steady::detect(records, &self.steady_settings);
        self.steady.get_or_init(|| found)
    }

    /// The earliest start of any record (ns), from the phases' windows (a
    /// run without a warmup model has no warmup records).
    pub fn first_request_start_ns(&self) -> Option<u64> {
        [self.warmup.as_ref(), Some(&self.profiling)]
            .into_iter()
            .flatten()
            .filter_map(|p| p.records_window_ns.map(|w| w.0))
            .min()
    }

    /// When the run had a warmup its version wrote no records of (AIPerf
    /// before 0.12): the time its requests had all finished by, profiling's
    /// start (those versions start profiling once warmup's requests have
    /// returned).
    pub fn unrecorded_warmup_until(&self) -> Option<u64> {
        if self.layout.warmup_records {
            return None;
        }
        self.warmup.as_ref()?;
        self.profiling.server_window_ns.map(|w| w.0)
    }

    /// The phase model of a kind.
    pub fn phase(&self, phase: Phase) -> Option<&PhaseModel> {
        match phase {
            Phase::Warmup => self.warmup.as_ref(),
            Phase::Profiling => Some(&self.profiling),
        }
    }
}

/// One phase kind's model: its configuration, its records (when the
/// version writes them for it) and its server window.
fn phase_model(
    run: &RunArtifacts,
    kind: Phase,
    config: Option<&crate::artifacts::summary::InputConfig>,
    records: Option<&[Record]>,
    layout: layout::Layout,
) -> PhaseModel {
    let name = kind.as_str();
    let mut p = PhaseModel::default();
    if let Some(c) = config {
        p.configured_requests = c.configured_requests(name);
        let mut phases = c.phases_of_kind(name).map(|(_, p)| p).peekable();
        if phases.peek().is_some() {
            let phases: Vec<_> = phases.collect();
            p.configured_duration_s = phases
                .iter()
                .filter_map(|x| x.duration)
                .reduce(|a, b| a + b);
            p.concurrency = phases.iter().filter_map(|x| x.concurrency).max();
        } else if let Some(l) = c.loadgen.as_ref() {
            p.concurrency = l.concurrency;
        }
    }
    // A version that never exports warmup records has an unknown
    // warmup count there, not 0.
    let exported = kind == Phase::Profiling || layout.warmup_records;
    if let Some(records) = records.filter(|_| exported) {
        let mine = records.iter().filter(|r| r.phase == kind);
        let (mut n, mut ok, mut err, mut canc) = (0, 0, 0, 0);
        let mut window: Option<(u64, u64)> = None;
        for r in mine {
            n += 1;
            ok += u64::from(r.is_success());
            err += u64::from(r.error.is_some() || r.was_cancelled);
            canc += u64::from(r.was_cancelled);
            if !r.is_success() {
                let reached = usize::from(r.first_token_ns().is_some());
                p.unsuccessful[reached][usize::from(r.was_cancelled)] += 1;
            }
            window = Some(match window {
                None => (r.request_start_ns, r.request_end_ns),
                Some((a, b)) => (a.min(r.request_start_ns), b.max(r.request_end_ns)),
            });
        }
        p.records = Some(n);
        p.successful = Some(ok);
        p.errors = Some(err);
        p.cancelled = Some(canc);
        p.records_window_ns = window;
    }
    p.unrecorded = unrecorded(run, kind, &p);
    p.server_window_ns = run
        .server
        .as_ref()
        .and_then(|s| s.window(name))
        .map(|w| (w.start_ns, w.end_ns));
    p
}

/// The requests of a duration-bound phase no record holds.
fn unrecorded(run: &RunArtifacts, kind: Phase, p: &PhaseModel) -> Option<Unrecorded> {
    if p.configured_duration_s.is_none() || p.configured_requests.is_some() {
        return None;
    }
    let logged = run.log.as_ref().and_then(|log| {
        let ends: Vec<_> = log.ends_of(kind.as_str()).collect();
        if ends.is_empty() {
            return None;
        }
        let cut: u64 = ends
            .iter()
            .filter(|e| e.grace_period_timeout)
            .map(|e| e.cancelled)
            .sum();
        Some(cut.saturating_sub(p.cancelled.unwrap_or(0)))
    });
    Some(Unrecorded {
        logged,
        at_most: logged.or(p.concurrency).unwrap_or(u64::MAX),
    })
}

/// Records of one phase.
pub fn of_phase(records: &[Record], phase: Phase) -> impl Iterator<Item = &Record> {
    records.iter().filter(move |r| r.phase == phase)
}
