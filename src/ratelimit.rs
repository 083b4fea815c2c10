//! A token bucket for the controller's writes (`--kube-api-qps`, `--kube-api-burst`), as Kubernetes controllers
//! have: a fan-out to thousands of workloads is spread out instead of flooding the API server. Reads (lists,
//! watches) are not limited: they are few and happen at start and after relists.

use std::time::Duration;

use tokio::{sync::Mutex, time::Instant};

/// Tokens refill at `qps` per second up to `burst`; each write takes one.
#[derive(Debug)]
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// A bucket starting full. `None` when `qps` is 0 (no limit).
    pub fn new(qps: f64, burst: u32) -> Option<Self> {
        let burst = f64::from(burst.max(1));
        (qps > 0.0).then(|| Self { qps, burst, state: Mutex::new((burst, Instant::now())) })
    }

    /// Waits for a token. Callers are served in the order they asked (the mutex is fair).
    pub async fn acquire(&self) {
        let mut state = self.state.lock().await;
        let (tokens, last) = &mut *state;
        let now = Instant::now();
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * self.qps).min(self.burst);
        *last = now;
        if *tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - *tokens) / self.qps);
            tokio::time::sleep(wait).await;
            *tokens = 1.0;
            *last = Instant::now();
        }
        *tokens -= 1.0;
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

    #[test]
    fn zero_qps_means_no_limit() {
        assert!(RateLimiter::new(0.0, 10).is_none());
    }
}
