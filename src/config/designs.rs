//! The cache designs as operators know them: one declaration of each design's label, what it
//! models and whether a broker can run it, read by the command line, `calibrate`, the reports and
//! the docs (from Python through `ledgercache.designs()`).

use super::Strategy;

/// What a design is to an operator choosing a cache: which of them a broker can be told to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DesignRole {
    /// A Pulsar release runs it: a recommendation may name it.
    Broker,
    /// Proposed upstream, never merged: shown for comparison.
    Proposal,
    /// A textbook policy no broker runs: shown as a reference.
    Reference,
    /// The offline optimum: an upper bound, not a policy.
    Bound,
}

impl DesignRole {
    pub fn name(self) -> &'static str {
        match self {
            DesignRole::Broker => "broker",
            DesignRole::Proposal => "proposal",
            DesignRole::Reference => "reference",
            DesignRole::Bound => "bound",
        }
    }
}

/// Which of the broker read flow's rules a design runs under (the read flow maps each
/// to its flow), so that a new design names its rules here instead of in the read flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadRule {
    /// PIP-430 (master): an entry expects the reads of the cursors behind it when
    /// `eviction_by_expected_read_count` is on; otherwise the active cursors decide, with master's
    /// backlog rule.
    Pip430,
    /// Pulsar 4.0: the active cursors decide, with branch-4.0's backlog rule.
    Legacy,
    /// PIP-174's ring: filled on publish.
    SegmentedRing,
    /// Everything read or published is offered to the cache.
    AdmitAll,
}

/// One design's description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Design {
    /// The name `CacheConfig(strategy=...)` takes; its [`Strategy`] is its place in [`DESIGNS`].
    pub name: &'static str,
    /// The read flow's rules it runs under.
    pub read_rule: ReadRule,
    /// The name an operator knows it by, as reports and the terminal print it.
    pub label: &'static str,
    /// One line on what the lab simulates under this name.
    pub models: &'static str,
    pub role: DesignRole,
    /// The broker.conf settings that select it on a broker, where one can run it.
    pub broker_settings: &'static str,
    /// What of Pulsar's code (or which textbook policy) the simulation follows, for the reports.
    pub follows: &'static str,
    /// Whether the library's `EntryCacheManager` runs it (the others are replay-lab designs).
    pub manager: bool,
    /// Whether a replay reads the trace twice (the first pass learns the future).
    pub reads_trace_twice: bool,
    /// The version a broker running it reports (`pulsar_version_info`), by which `calibrate`
    /// infers the design back; empty where no broker runs it.
    pub release: &'static str,
}

/// The designs by name, each its place in [`DESIGNS`].
#[allow(
    non_upper_case_globals,
    reason = "designs read as the variants of an enum, in patterns too"
)]
impl Strategy {
    pub const Pip430: Strategy = Strategy(0);
    pub const Pip430Fifo: Strategy = Strategy(1);
    pub const Legacy: Strategy = Strategy(2);
    pub const Segmented: Strategy = Strategy(3);
    pub const Lru: Strategy = Strategy(4);
    pub const Belady: Strategy = Strategy(5);
}

/// Every design, in [`Strategy::ALL`] order.
pub const DESIGNS: [Design; 6] = [
    Design {
        name: "pip430",
        read_rule: ReadRule::Pip430,
        label: "PIP-430 (Pulsar 4.1+)",
        models: "one broker-wide FIFO removal queue; an entry's TTL is extended while cursors still \
                 expect to read it or it was read recently",
        role: DesignRole::Broker,
        broker_settings: "Pulsar 4.1 or later with its defaults",
        follows: "Pulsar's master: a redelivery read is never cached; only a Key_Shared hold-back adds an \
                  expected read",
        manager: true,
        reads_trace_twice: false,
        release: "4.1.0",
    },
    Design {
        name: "pip430-fifo",
        read_rule: ReadRule::Pip430,
        label: "PIP-430 without TTL extension (Pulsar 4.1+)",
        models: "PIP-430's removal queue with both TTL extensions off: FIFO with a TTL",
        role: DesignRole::Broker,
        broker_settings: "Pulsar 4.1 or later with \
                          managedLedgerCacheEvictionExtendTTLOfEntriesWithRemainingExpectedReadCount=false \
                          and managedLedgerCacheEvictionExtendTTLOfRecentlyAccessed=false",
        follows: "as PIP-430, with both TTL extensions off",
        manager: true,
        reads_trace_twice: false,
        release: "4.1.0",
    },
    Design {
        name: "legacy",
        read_rule: ReadRule::Legacy,
        label: "Pulsar 4.0 cache",
        models: "the cache of Pulsar 4.0 and earlier: a cache per ledger, size eviction spread \
                 over the ledgers",
        role: DesignRole::Broker,
        broker_settings: "Pulsar 4.0 or earlier",
        follows: "branch-4.0: storage reads cached only for cursors close together in backlog, off by \
                  default; backlogged cursors inactive; the cache cleared when the last active cursor \
                  leaves; ranges served all or nothing",
        manager: false,
        reads_trace_twice: false,
        release: "4.0.0",
    },
    Design {
        name: "segmented",
        read_rule: ReadRule::SegmentedRing,
        label: "PIP-174 ring (proposal)",
        models: "PIP-174's broker-wide ring of segments, filled on publish (proposed, not merged)",
        role: DesignRole::Proposal,
        broker_settings: "",
        follows: "PIP-174's PR #15955: cached on publish only, ranges all or nothing",
        manager: false,
        reads_trace_twice: false,
        release: "",
    },
    Design {
        name: "lru",
        read_rule: ReadRule::AdmitAll,
        label: "LRU (reference)",
        models: "one broker-wide least-recently-used cache: a reference no Pulsar release runs",
        role: DesignRole::Reference,
        broker_settings: "",
        follows: "admits everything; evicts the least recently used entry",
        manager: false,
        reads_trace_twice: false,
        release: "",
    },
    Design {
        name: "belady",
        read_rule: ReadRule::AdmitAll,
        label: "Belady MIN (bound)",
        models: "the offline optimum, which knows every future read: the best any cache of that \
                 size could do",
        role: DesignRole::Bound,
        broker_settings: "",
        follows: "admits everything; evicts the entry read furthest in the future (it knows every \
                  future read)",
        manager: false,
        reads_trace_twice: true,
        release: "",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_design_has_its_own_name_and_label_and_a_constant_naming_it() {
        let names: Vec<_> = Strategy::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "pip430",
                "pip430-fifo",
                "legacy",
                "segmented",
                "lru",
                "belady"
            ]
        );
        assert_eq!(Strategy::Belady.design().name, "belady");
        assert_eq!(
            "pip430-fifo".parse::<Strategy>().unwrap(),
            Strategy::Pip430Fifo
        );
        let mut distinct: Vec<_> = DESIGNS.iter().map(|d| d.name).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), DESIGNS.len(), "names are distinct");
        let mut labels: Vec<_> = DESIGNS.iter().map(|d| d.label).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), DESIGNS.len(), "labels are distinct");
    }

    #[test]
    fn only_broker_designs_name_broker_settings() {
        for d in DESIGNS {
            assert_eq!(
                d.role == DesignRole::Broker,
                !d.broker_settings.is_empty(),
                "{}",
                d.label
            );
            assert_eq!(
                d.role == DesignRole::Broker,
                !d.release.is_empty(),
                "{}",
                d.label
            );
        }
    }
}
