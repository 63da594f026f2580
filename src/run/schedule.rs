//! The fan-out's scheduler: how many children run at once, per provider and model (a
//! lane), and when the next one may start.
//!
//! Each lane's limit starts low ([`INITIAL_LANE_LIMIT`]) and follows its children's
//! reports: until the provider first pushes back, each successful turn or attempt raises
//! it by one (it doubles as fast as requests succeed: a slow start, so that a wide fan-out
//! does not open with a burst the provider refuses); from then on additive increase,
//! multiplicative decrease: a rate limit or overload halves it (once per round: a report
//! from a child that started before the last decrease says nothing new), and each success
//! raises it by 1/limit. It never goes above the configured `concurrency`. A provider that asked for a delay (its `retry-after`, as the CLI
//! reported it) pauses the lane's new starts until then. All lanes together never run more
//! than `concurrency` children.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backends::Backend;
use crate::result::LaneReport;

/// The longest a provider's asked delay pauses a lane: beyond it the provider is more
/// likely out of quota than busy, which retries and fallback models deal with.
pub(crate) const MAX_PROVIDER_DELAY: Duration = Duration::from_secs(60);

/// Children a lane runs at once before any of them has succeeded (the configured
/// `concurrency` when that is lower).
pub(crate) const INITIAL_LANE_LIMIT: usize = 4;

/// The lane of a child: its provider and model (`anthropic/claude-sonnet-4-5`, the model's
/// own `provider/model` as pi and opencode name them), the provider alone when the CLI
/// picks the model, else the CLI's name.
pub(crate) fn lane(backend: Backend, model: Option<&str>) -> String {
    let provider = backend.spec().provider;
    match (model, provider) {
        (Some(m), _) if m.contains('/') => m.to_string(),
        (Some(m), Some(p)) => format!("{p}/{m}"),
        (Some(m), None) => format!("{}/{m}", backend.name()),
        (None, Some(p)) => p.to_string(),
        (None, None) => backend.name().to_string(),
    }
}

/// What a child reported that bears on its provider's capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Report {
    /// A request succeeded (a turn, or a whole attempt).
    Success,
    /// The provider refused for its rate limit or overload; it may have said how long to
    /// wait.
    Throttled { delay: Option<Duration> },
}

#[derive(Debug)]
pub(crate) struct Scheduler {
    /// The configured `concurrency`: every lane's ceiling, and all lanes' together.
    ceiling: usize,
    /// Whether lanes follow their children's reports; otherwise each runs `ceiling`.
    adaptive: bool,
    state: Mutex<State>,
    /// Woken whenever a child ends (or a lane's limit rises): waiters look again.
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Children running, every lane.
    running: usize,
    lanes: BTreeMap<String, Lane>,
}

#[derive(Debug)]
struct Lane {
    /// The limit, with its fraction (each success adds 1/limit).
    limit: f64,
    /// No rate limit yet: each success adds 1.
    slow_start: bool,
    running: usize,
    /// The most children it ran at once.
    peak: usize,
    /// The lowest limit it went down to.
    floor: usize,
    /// Rate-limit and overload reports.
    throttled: u32,
    /// Decreases so far: a child's report lowers the limit only if none happened since
    /// it started.
    round: u64,
    /// No new start before this (the provider's asked delay).
    paused_until: Option<Instant>,
}

impl Lane {
    fn new(start: usize) -> Lane {
        Lane {
            limit: start as f64,
            slow_start: true,
            running: 0,
            peak: 0,
            floor: start,
            throttled: 0,
            round: 0,
            paused_until: None,
        }
    }

    fn allowed(&self) -> usize {
        (self.limit.floor() as usize).max(1)
    }
}

/// Why a start must wait.
enum Wait {
    /// Until a child ends.
    Room,
    /// Until the lane's pause ends.
    Until(Instant),
}

impl Scheduler {
    pub(crate) fn new(ceiling: usize, adaptive: bool) -> Arc<Scheduler> {
        Arc::new(Scheduler {
            ceiling: ceiling.max(1),
            adaptive,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        })
    }

    /// A new lane's limit: low while adaptive, else the ceiling.
    fn start(&self) -> usize {
        if self.adaptive {
            self.ceiling.min(INITIAL_LANE_LIMIT)
        } else {
            self.ceiling
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot to run one child in `lane`, once the lane and the whole allow it; None when
    /// `cancel` fires first.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        lane: &str,
        cancel: &CancellationToken,
    ) -> Option<Slot> {
        loop {
            // Registered before looking, so that a child ending in between still wakes us.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let wait = match self.try_start(lane) {
                Ok(slot) => return Some(slot),
                Err(wait) => wait,
            };
            let until = match wait {
                Wait::Room => None,
                Wait::Until(t) => Some(t),
            };
            tokio::select! {
                _ = cancel.cancelled() => return None,
                _ = &mut changed => {}
                _ = async {
                    match until {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
    }

    fn try_start(self: &Arc<Self>, key: &str) -> Result<Slot, Wait> {
        let now = Instant::now();
        let ceiling = self.ceiling;
        let mut state = self.lock();
        let running = state.running;
        let lane = state
            .lanes
            .entry(key.to_string())
            .or_insert_with(|| Lane::new(self.start()));
        if let Some(until) = lane.paused_until.filter(|t| *t > now) {
            return Err(Wait::Until(until));
        }
        if lane.running >= lane.allowed() || running >= ceiling {
            return Err(Wait::Room);
        }
        lane.running += 1;
        lane.peak = lane.peak.max(lane.running);
        let round = lane.round;
        state.running += 1;
        Ok(Slot {
            scheduler: self.clone(),
            lane: key.to_string(),
            round,
        })
    }

    fn report(&self, key: &str, round: u64, report: Report) {
        let now = Instant::now();
        let mut state = self.lock();
        let Some(lane) = state.lanes.get_mut(key) else {
            return;
        };
        match report {
            Report::Success => {
                if !self.adaptive {
                    return;
                }
                let before = lane.allowed();
                let step = if lane.slow_start {
                    1.0
                } else {
                    1.0 / lane.limit
                };
                lane.limit = (lane.limit + step).min(self.ceiling as f64);
                if lane.allowed() > before {
                    drop(state);
                    self.changed.notify_waiters();
                }
            }
            Report::Throttled { delay } => {
                lane.throttled = lane.throttled.saturating_add(1);
                if let Some(delay) = delay {
                    let until = now + delay.min(MAX_PROVIDER_DELAY);
                    lane.paused_until = Some(lane.paused_until.map_or(until, |t| t.max(until)));
                }
                if !self.adaptive {
                    return;
                }
                // One decrease per round: a child that started before the last decrease
                // was sent at the old rate.
                if round != lane.round {
                    return;
                }
                lane.slow_start = false;
                lane.limit = (lane.limit / 2.0).max(1.0);
                lane.floor = lane.floor.min(lane.allowed());
                lane.round += 1;
            }
        }
    }

    fn release(&self, key: &str) {
        {
            let mut state = self.lock();
            state.running = state.running.saturating_sub(1);
            if let Some(lane) = state.lanes.get_mut(key) {
                lane.running = lane.running.saturating_sub(1);
            }
        }
        self.changed.notify_waiters();
    }

    /// What each lane that was throttled went through, for `details.scheduler`: nothing
    /// for a fan-out whose provider never pushed back, or whose limits are fixed.
    pub(crate) fn throttled_lanes(&self) -> BTreeMap<String, LaneReport> {
        if !self.adaptive {
            return BTreeMap::new();
        }
        self.lock()
            .lanes
            .iter()
            .filter(|(_, l)| l.throttled > 0)
            .map(|(k, l)| {
                (
                    k.clone(),
                    LaneReport {
                        peak: l.peak,
                        floor: l.floor,
                        throttled: l.throttled,
                    },
                )
            })
            .collect()
    }
}

/// One running child's place in its lane; dropping it makes room.
#[derive(Debug)]
pub(crate) struct Slot {
    scheduler: Arc<Scheduler>,
    lane: String,
    /// The lane's round when it started.
    round: u64,
}

impl Slot {
    pub(crate) fn report(&self, report: Report) {
        self.scheduler.report(&self.lane, self.round, report);
    }

    /// Whether its lane narrows when the provider refuses for load (adaptive
    /// concurrency), so that a refused task may be tried again without using up its
    /// attempts.
    pub(crate) fn narrows(&self) -> bool {
        self.scheduler.adaptive
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.scheduler.release(&self.lane);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
    }

    /// Starts as many as the lane allows now.
    fn fill(s: &Arc<Scheduler>, lane: &str) -> Vec<Slot> {
        std::iter::from_fn(|| s.try_start(lane).ok()).collect()
    }

    #[test]
    fn a_lane_starts_slow_then_a_rate_limit_halves_it_once_per_round_and_successes_win_it_back() {
        let s = Scheduler::new(8, true);
        let first = fill(&s, "p/m");
        assert_eq!(first.len(), INITIAL_LANE_LIMIT, "a slow start");
        // Until the first rate limit, each success adds one.
        for slot in &first {
            slot.report(Report::Success);
        }
        drop(first);
        let first = fill(&s, "p/m");
        assert_eq!(first.len(), 8);
        // Every child of the first round reports the rate limit: one decrease.
        for slot in &first {
            slot.report(Report::Throttled { delay: None });
        }
        drop(first);
        let second = fill(&s, "p/m");
        assert_eq!(second.len(), 4, "halved once, not eight times");
        // A child started after the decrease reports again: a new round.
        second[0].report(Report::Throttled { delay: None });
        drop(second);
        assert_eq!(fill(&s, "p/m").len(), 2);
        // Additive increase: 1/limit a success, up to the ceiling.
        let slot = s.try_start("p/m").ok().unwrap();
        // 2 + 1/2 + 1/2.5 + 1/2.9
        for _ in 0..3 {
            slot.report(Report::Success);
        }
        drop(slot);
        assert_eq!(fill(&s, "p/m").len(), 3);
        let slot = s.try_start("p/m").ok().unwrap();
        for _ in 0..1000 {
            slot.report(Report::Success);
        }
        drop(slot);
        assert_eq!(fill(&s, "p/m").len(), 8, "never above the ceiling");
        assert_eq!(
            s.throttled_lanes(),
            BTreeMap::from([(
                "p/m".to_string(),
                LaneReport {
                    peak: 8,
                    floor: 2,
                    throttled: 9
                }
            )])
        );
    }

    #[test]
    fn a_lane_is_a_provider_and_model() {
        let cases = [
            (
                Backend::named("claude"),
                Some("claude-sonnet-4-5"),
                "anthropic/claude-sonnet-4-5",
            ),
            (Backend::named("claude"), None, "anthropic"),
            (Backend::named("codex"), Some("gpt-5.5"), "openai/gpt-5.5"),
            (Backend::named("pi"), Some("mock/mock-1"), "mock/mock-1"),
            (Backend::named("pi"), Some("mock-1"), "pi/mock-1"),
            (Backend::named("opencode"), None, "opencode"),
        ];
        for (backend, model, want) in cases {
            assert_eq!(lane(backend, model), want);
        }
    }

    #[test]
    fn lanes_are_apart_but_share_the_ceiling() {
        let s = Scheduler::new(4, true);
        let a = fill(&s, "a");
        assert_eq!(a.len(), 4);
        assert!(s.try_start("b").is_err(), "the ceiling is for all lanes");
        a[0].report(Report::Throttled { delay: None });
        drop(a);
        let a = fill(&s, "a");
        assert_eq!(a.len(), 2);
        assert_eq!(
            fill(&s, "b").len(),
            2,
            "b's limit is its own, the rest of the ceiling"
        );
        assert_eq!(s.throttled_lanes().keys().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn fixed_concurrency_neither_moves_nor_reports() {
        let s = Scheduler::new(6, false);
        let slots = fill(&s, "a");
        assert_eq!(slots.len(), 6, "no slow start");
        for slot in &slots {
            slot.report(Report::Throttled { delay: None });
        }
        drop(slots);
        assert_eq!(fill(&s, "a").len(), 6);
        assert!(s.throttled_lanes().is_empty());
    }

    #[test]
    fn an_asked_delay_pauses_new_starts_in_that_lane_only() {
        rt().block_on(async {
            let s = Scheduler::new(4, true);
            let cancel = CancellationToken::new();
            let slot = s.acquire("a", &cancel).await.unwrap();
            slot.report(Report::Throttled {
                delay: Some(Duration::from_secs(3)),
            });
            drop(slot);
            let start = tokio::time::Instant::now();
            assert!(s.acquire("b", &cancel).await.is_some());
            assert_eq!(start.elapsed(), Duration::ZERO);
            let slot = s.acquire("a", &cancel).await.unwrap();
            assert_eq!(start.elapsed(), Duration::from_secs(3));
            drop(slot);
            // A provider asking for an hour pauses the lane for the cap only.
            let slot = s.acquire("a", &cancel).await.unwrap();
            slot.report(Report::Throttled {
                delay: Some(Duration::from_secs(3600)),
            });
            drop(slot);
            let start = tokio::time::Instant::now();
            let _slot = s.acquire("a", &cancel).await.unwrap();
            assert_eq!(start.elapsed(), MAX_PROVIDER_DELAY);
        });
    }

    #[test]
    fn a_waiter_starts_when_a_child_ends_and_not_after_a_cancel() {
        rt().block_on(async {
            let s = Scheduler::new(1, true);
            let cancel = CancellationToken::new();
            let first = s.acquire("a", &cancel).await.unwrap();
            let s2 = s.clone();
            let c2 = cancel.clone();
            let waiter = tokio::spawn(async move { s2.acquire("a", &c2).await.is_some() });
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert!(!waiter.is_finished());
            drop(first);
            assert!(waiter.await.unwrap());
            let _held = s.acquire("a", &cancel).await.unwrap();
            let s3 = s.clone();
            let c3 = cancel.clone();
            let waiter = tokio::spawn(async move { s3.acquire("a", &c3).await.is_some() });
            tokio::task::yield_now().await;
            cancel.cancel();
            assert!(!waiter.await.unwrap());
        });
    }
}
