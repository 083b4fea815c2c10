//! A token bucket for the controller's writes (`--kube-api-qps`, `--kube-api-burst`), as Kubernetes controllers
//! have: a fan-out to thousands of workloads is spread out instead of flooding the API server. Reads (lists,
//! watches) are not limited: they are few and happen at start and after relists.

use std::time::Duration;

use tokio::{sync::Mutex, time::Instant};

/// The shortest wait for tokens (unless the bucket holds less): a writer that must wait sleeps at least this
/// long, so the writes behind it find the tokens that accrued meanwhile and go without a wait of their own —
/// a timer wake-up of the controller's one thread per few writes instead of per write, and their responses
/// close together. The rate is unchanged. At the default 50 writes/s that is groups of 5.
const MIN_WAIT: Duration = Duration::from_millis(100);

/// Tokens refill at `qps` per second up to `burst`; each write takes one.
#[derive(Debug)]
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    /// [`MIN_WAIT`], or less when the bucket could not hold what accrues in it.
    min_wait: Duration,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// A bucket starting full. `None` when `qps` is 0 (no limit).
    pub fn new(qps: f64, burst: u32) -> Option<Self> {
        let burst = f64::from(burst.max(1));
        let min_wait = MIN_WAIT.min(Duration::try_from_secs_f64(burst / qps).unwrap_or(MIN_WAIT));
        (qps > 0.0).then(|| Self { qps, burst, min_wait, state: Mutex::new((burst, Instant::now())) })
    }

    /// Waits for a token. Callers are served in the order they asked (the mutex is fair).
    pub async fn acquire(&self) {
        let mut state = self.state.lock().await;
        let (tokens, last) = &mut *state;
        self.refill(tokens, last);
        if *tokens < 1.0 {
            // Checked: a flag of 1e-30 writes/s would overflow `Duration` (and panic every write) unchecked.
            let wait = Duration::try_from_secs_f64((1.0 - *tokens) / self.qps).unwrap_or(Duration::MAX);
            tokio::time::sleep(wait.max(self.min_wait)).await;
            self.refill(tokens, last);
        }
        *tokens -= 1.0;
    }

    fn refill(&self, tokens: &mut f64, last: &mut Instant) {
        let now = Instant::now();
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * self.qps).min(self.burst);
        *last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_then_writes_are_spread_at_the_rate() {
        let limiter = RateLimiter::new(10.0, 5).expect("limited");
        let start = Instant::now();
        for _ in 0..5 {
            limiter.acquire().await;
        }
        assert!(start.elapsed() < Duration::from_millis(1), "the burst is free");
        for _ in 0..10 {
            limiter.acquire().await;
        }
        let spread = start.elapsed();
        assert!(spread >= Duration::from_millis(990) && spread <= Duration::from_millis(1010), "{spread:?}");
    }

    /// At 50 writes/s a waiting writer sleeps 100 ms, not 20: the 5 tokens that accrue let the next writers go
    /// at once. Writes come in small groups, a timer wake-up per 5 writes, and the rate stays 50/s.
    #[tokio::test(start_paused = true)]
    async fn waiting_writers_go_in_small_groups_at_the_same_rate() {
        let limiter = RateLimiter::new(50.0, 10).expect("limited");
        for _ in 0..10 {
            limiter.acquire().await;
        }
        let start = Instant::now();
        let mut instants = Vec::new();
        for _ in 0..100 {
            limiter.acquire().await;
            instants.push(start.elapsed());
        }
        let spread = start.elapsed();
        assert!(spread >= Duration::from_millis(1950) && spread <= Duration::from_millis(2050), "{spread:?}");
        instants.dedup();
        assert!(instants.len() <= 22, "{} wake-ups for 100 writes", instants.len());
        let groups = instants.windows(2).map(|w| w[1] - w[0]);
        assert!(groups.into_iter().all(|gap| gap >= Duration::from_millis(100)), "no wait shorter than 100 ms");
    }

    /// A bucket smaller than what accrues in 100 ms waits only as long as it can hold.
    #[tokio::test(start_paused = true)]
    async fn a_small_bucket_never_loses_tokens_to_the_minimum_wait() {
        let limiter = RateLimiter::new(100.0, 1).expect("limited");
        let start = Instant::now();
        for _ in 0..101 {
            limiter.acquire().await;
        }
        let spread = start.elapsed();
        assert!(spread >= Duration::from_millis(990) && spread <= Duration::from_millis(1010), "{spread:?}");
    }

    /// An absurd rate waits (practically forever) instead of panicking on `Duration` overflow.
    #[tokio::test(start_paused = true)]
    async fn an_absurdly_low_rate_waits_without_panicking() {
        let limiter = RateLimiter::new(1e-30, 1).expect("limited");
        limiter.acquire().await;
        let second = tokio::time::timeout(Duration::from_secs(3600), limiter.acquire()).await;
        assert!(second.is_err(), "still waiting after an hour");
    }

    #[test]
    fn zero_qps_means_no_limit() {
        assert!(RateLimiter::new(0.0, 10).is_none());
    }
}
