//! OMB's backlog test (`WorkloadGenerator.buildAndDrainBacklog`): pause the consumers, build a
//! backlog, resume them and let it drain.

use super::generate::{Sim, Task};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BacklogPhase {
    WarmUp,
    Building,
    Draining,
}

/// OMB's backlog test while it runs: this broker's share of the backlog to build, and of the
/// backlog at or below which it is drained, in messages.
#[derive(Debug, Clone, Copy)]
pub(super) struct BacklogTest {
    pub(super) phase: BacklogPhase,
    pub(super) build_to: f64,
    pub(super) drained_at: f64,
    pub(super) test_us: u64,
}

impl Sim {
    /// OMB's backlog test (`WorkloadGenerator.buildAndDrainBacklog`), one look at a time: at the
    /// end of the warm-up it pauses its consumers, looks once a second until the backlog (messages
    /// published times subscriptions, less messages received) reaches the size asked for, resumes
    /// them, looks every 100 ms until the backlog is drained, and lets the test end
    /// `testDurationMinutes` after that. OMB sums over all topics; each broker's simulation looks
    /// at its own partitions' share, which is the same for all of them.
    pub(super) fn backlog_test(&mut self, t: u64) {
        let Some(test) = self.backlog else { return };
        let subs: Vec<(usize, usize)> = (0..self.parts.len())
            .flat_map(|p| (0..self.parts[p].subs.len()).map(move |s| (p, s)))
            .filter(|&(p, s)| self.parts[p].subs[s].pauses_for_backlog)
            .collect();
        for &(p, s) in &subs {
            if self.consume(t, p, s) {
                self.schedule_dispatch(t, p, s);
            }
        }
        if test.phase == BacklogPhase::WarmUp {
            for &(p, s) in &subs {
                self.parts[p].subs[s].paused = true;
            }
        }
        // OMB's figure: messages sent times subscriptions, less messages received (redeliveries
        // count as received), over all of them at once.
        let (mut sent, mut received) = (0u64, 0u64);
        for &(p, s) in &subs {
            sent = sent.saturating_add(self.parts[p].messages_published);
            received = received.saturating_add(self.parts[p].subs[s].received);
        }
        let backlog = sent.saturating_sub(received);
        let next = match test.phase {
            BacklogPhase::WarmUp | BacklogPhase::Building if (backlog as f64) < test.build_to => {
                Some((BacklogPhase::Building, 1_000_000))
            }
            BacklogPhase::WarmUp | BacklogPhase::Building => {
                for &(p, s) in &subs {
                    self.resume(t, p, s);
                }
                Some((BacklogPhase::Draining, 0))
            }
            BacklogPhase::Draining if backlog as f64 > test.drained_at => {
                Some((BacklogPhase::Draining, 100_000))
            }
            BacklogPhase::Draining => {
                self.end_us = self.end_us.min(t.saturating_add(test.test_us));
                None
            }
        };
        self.backlog = next.map(|(phase, _)| BacklogTest { phase, ..test });
        if let Some((_, after)) = next {
            self.schedule(t.saturating_add(after), Task::Backlog);
        }
    }

    /// A paused subscription's consumers resume processing from `t` (they were brought up to
    /// `t` just before, processing nothing while paused); their FLOWs follow as they process.
    pub(super) fn resume(&mut self, t: u64, p: usize, s: usize) {
        self.parts[p].subs[s].paused = false;
        self.plan_flows(t, p, s);
        self.schedule_dispatch(t, p, s);
    }
}
