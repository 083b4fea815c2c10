//! What faults 1, 2, 3 and 6 do to processes during the burst ([`api_faults`](super::api_faults): 4 and 5;
//! [`writer`](super::writer): 7). Each script runs concurrently with the updates, times its actions from the
//! burst's start, and reports what it did (evidence) and any requirement it saw broken (violations).

use std::time::{Duration, Instant};

use kube::Client;

use super::{
    ChaosOptions, Rng,
    controllers::{Controllers, lease_holder},
    layout::{ChaosLayout, ChaosWorkload},
    observe::Tracker,
    plane::{ChaosEnv, signal},
};
use crate::{Error, scenarios::driver::Driver};

/// Everything a fault script may act on.
pub struct FaultCtx<'a> {
    /// The cluster.
    pub env: &'a ChaosEnv,
    /// Admin client.
    pub client: &'a Client,
    /// The controller replicas.
    pub controllers: &'a mut Controllers,
    /// The runner's record of template writes.
    pub tracker: &'a Tracker,
    /// The run's objects.
    pub layout: &'a ChaosLayout,
    /// The update driver (fault 4 updates the re-created Rollouts' resources itself).
    pub driver: &'a Driver,
    /// The run's label value.
    pub tag: &'a str,
    /// Start of the run (all recorded times are offsets from it).
    pub epoch: Instant,
    /// Start of the burst (fault actions are timed from it).
    pub burst_start: Instant,
    /// Length of the burst.
    pub burst: Duration,
    /// Sizes and timings.
    pub opts: &'a ChaosOptions,
    /// Fault timings.
    pub rng: Rng,
}

/// What a fault script did.
#[derive(Clone, Debug, Default)]
pub struct FaultOutcome {
    /// What was done, when (for the report).
    pub evidence: Vec<String>,
    /// Requirements seen broken, or a fault that did not take effect.
    pub violations: Vec<String>,
    /// Workloads created during the run, with their creation time (fault 4's second Rollouts).
    pub created: Vec<(ChaosWorkload, Duration)>,
}

impl FaultCtx<'_> {
    /// Seconds since the run's start, for evidence lines.
    pub fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    /// Waits (supervising the controllers) until `offset` into the burst.
    pub async fn until(&mut self, offset: Duration) -> Result<(), Error> {
        let left = (self.burst_start + offset).saturating_duration_since(Instant::now());
        self.controllers.pause(left).await
    }

    /// `fraction` of the burst.
    pub fn part(&self, fraction: f64) -> Duration {
        self.burst.mul_f64(fraction)
    }
}

/// Fault 1: SIGKILL the controller at a random moment of each of `opts.kills` equal slots of the burst, and start
/// it again after a random 0.3–1.5 s (a pod restart).
pub async fn controller_kill(ctx: &mut FaultCtx<'_>) -> Result<FaultOutcome, Error> {
    let mut out = FaultOutcome::default();
    let kills = ctx.opts.kills.max(1);
    let slot = ctx.burst / u32::try_from(kills).unwrap_or(1);
    for k in 0..kills {
        let base = slot * u32::try_from(k).unwrap_or(0);
        let moment = base + ctx.rng.between(Duration::from_millis(500), slot.saturating_sub(Duration::from_secs(2)));
        ctx.until(moment).await?;
        let at = ctx.now_s();
        ctx.controllers.kill(0).await;
        let down = ctx.rng.between(Duration::from_millis(300), Duration::from_millis(1500));
        tokio::time::sleep(down).await;
        ctx.controllers.start(0)?;
        out.evidence.push(format!("SIGKILL at {at:.1} s, restarted {:.1} s later", down.as_secs_f64()));
    }
    Ok(out)
}

/// Fault 2: SIGSTOP kube-apiserver 5 s into the burst for `opts.apiserver_stop`, then SIGCONT.
pub async fn apiserver_stop(ctx: &mut FaultCtx<'_>) -> Result<FaultOutcome, Error> {
    let mut out = FaultOutcome::default();
    ctx.until(Duration::from_secs(5)).await?;
    let pid = ctx.env.pid("kube-apiserver").await?;
    let at = ctx.now_s();
    if !signal(pid, "STOP") {
        out.violations.push("could not SIGSTOP kube-apiserver".into());
        return Ok(out);
    }
    // Always resume it, whatever happens to the controllers meanwhile.
    let paused = ctx.controllers.pause(ctx.opts.apiserver_stop).await;
    let resumed = signal(pid, "CONT");
    paused?;
    out.evidence.push(format!(
        "kube-apiserver SIGSTOP at {at:.1} s, SIGCONT {:.0} s later{}",
        ctx.opts.apiserver_stop.as_secs_f64(),
        if resumed { "" } else { " (SIGCONT failed)" }
    ));
    Ok(out)
}

/// Fault 9: 5 s into the burst (the pod-restarting workloads' first restarts under way), SIGSTOP
/// kube-controller-manager for 20 s — a restarted pod's replacement is not created meanwhile — then SIGCONT.
pub async fn owner_stop(ctx: &mut FaultCtx<'_>) -> Result<FaultOutcome, Error> {
    const STOPPED: Duration = Duration::from_secs(20);
    let mut out = FaultOutcome::default();
    ctx.until(Duration::from_secs(5)).await?;
    let pid = ctx.env.pid("kube-controller-manager").await?;
    let at = ctx.now_s();
    if !signal(pid, "STOP") {
        out.violations.push("could not SIGSTOP kube-controller-manager".into());
        return Ok(out);
    }
    tokio::time::sleep(STOPPED).await;
    let resumed = signal(pid, "CONT");
    out.evidence.push(format!(
        "kube-controller-manager SIGSTOP at {at:.1} s, SIGCONT {:.0} s later{}",
        STOPPED.as_secs_f64(),
        if resumed { "" } else { " (SIGCONT failed)" }
    ));
    Ok(out)
}

/// Fault 3: 10 s into the burst, SIGSTOP the controller; 2 s later (updates go on) compact etcd to its current
/// revision and restart kube-apiserver; once the runner's own watches have relisted, SIGCONT the controller.
/// Its watches resume from resourceVersions older than the new API server's watch cache (and than etcd's
/// compacted revision): 410 Gone, then a relist. Checked afterwards from the controller's log.
pub async fn etcd_compaction(ctx: &mut FaultCtx<'_>) -> Result<FaultOutcome, Error> {
    let mut out = FaultOutcome::default();
    ctx.until(Duration::from_secs(10)).await?;
    let stopped_at = Instant::now();
    let at = ctx.now_s();
    if !ctx.controllers.signal(0, "STOP") {
        out.violations.push("could not SIGSTOP the controller".into());
        return Ok(out);
    }
    let result = compact_and_restart(ctx).await;
    let resumed = ctx.controllers.signal(0, "CONT");
    let (revision, restart) = result?;
    out.evidence.push(format!(
        "controller SIGSTOP at {at:.1} s for {:.1} s; etcd compacted to revision {revision}; kube-apiserver \
         restarted (ready in {:.1} s){}",
        stopped_at.elapsed().as_secs_f64(),
        restart.as_secs_f64(),
        if resumed { "" } else { "; SIGCONT failed" }
    ));
    Ok(out)
}

async fn compact_and_restart(ctx: &mut FaultCtx<'_>) -> Result<(u64, Duration), Error> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let revision = ctx.env.compact_etcd().await?;
    let lists = ctx.tracker.lists();
    let restart = ctx.env.restart_apiserver().await?;
    // The controller stays stopped until the runner sees every write again (no blind window).
    ctx.tracker.wait_lists_after(&lists, Duration::from_secs(60)).await?;
    Ok((revision, restart))
}

/// Fault 6: at 30 % and 65 % of the burst, SIGKILL the replica holding the Lease, wait for another to take it,
/// and start the killed one again 2 s later.
pub async fn leader_kill(ctx: &mut FaultCtx<'_>) -> Result<FaultOutcome, Error> {
    let mut out = FaultOutcome::default();
    let lease_ns = ctx.layout.namespaces[0].clone();
    for fraction in [0.3, 0.65] {
        ctx.until(ctx.part(fraction)).await?;
        let Some(leader) = wait_holder(ctx, &lease_ns, None).await? else {
            out.violations.push(format!("no replica held the Lease at {:.1} s", ctx.now_s()));
            continue;
        };
        let Some(index) = leader.strip_prefix('r').and_then(|n| n.parse::<usize>().ok()).filter(|i| *i < 3) else {
            out.violations.push(format!("Lease held by an unknown identity {leader}"));
            continue;
        };
        let at = ctx.now_s();
        let killed = Instant::now();
        ctx.controllers.kill(index).await;
        match wait_holder(ctx, &lease_ns, Some(&leader)).await? {
            Some(next) => out.evidence.push(format!(
                "leader {leader} SIGKILLed at {at:.1} s; {next} leads {:.1} s later",
                killed.elapsed().as_secs_f64()
            )),
            None => out.violations.push(format!("no new leader within 30 s after {leader} was killed at {at:.1} s")),
        }
        ctx.controllers.pause(Duration::from_secs(2)).await?;
        ctx.controllers.start(index)?;
    }
    Ok(out)
}

/// The Lease holder other than `not` (any holder when `None`), waiting up to 30 s.
async fn wait_holder(ctx: &mut FaultCtx<'_>, ns: &str, not: Option<&str>) -> Result<Option<String>, Error> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let Some(h) = lease_holder(ctx.client, ns).await.filter(|h| Some(h.as_str()) != not) {
            return Ok(Some(h));
        }
        ctx.controllers.pause(Duration::from_millis(100)).await?;
    }
    Ok(None)
}
