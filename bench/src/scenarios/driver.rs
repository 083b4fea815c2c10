//! Plays a scenario's update plan and records every write with the time it was sent.
//!
//! Latency is measured from the moment the API server *acknowledged* the bench's update (its response arrived):
//! the write is then committed and visible to watchers. It covers the watch delay to the controller, the
//! controller's work and its write, and the watch delay back to the bench. The round trip of the bench's own
//! request (send → acknowledgement) is reported separately, so "from sent" = latency + round trip.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use futures::future::join_all;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;
use tokio::time::MissedTickBehavior;

use super::{ConfigDef, ConfigKind, Plan, RefHow, WorkloadDef, objects};
use crate::{
    Error,
    measure::{actions::Update, content::hash_data},
};

/// A Deployment created during the run (S5).
#[derive(Clone, Debug, PartialEq)]
pub struct Churned {
    /// Its name.
    pub name: String,
    /// When its creation returned.
    pub created: Duration,
    /// When its deletion was sent.
    pub deleted: Option<Duration>,
}

struct Inner {
    seqs: Vec<u64>,
    updates: Vec<Update>,
    failures: usize,
    churned: Vec<Churned>,
    rng: u64,
    /// Round trip of each content update request (ms).
    rtts: Vec<f64>,
    /// Hash of the `value` key alone → hash of the whole content it belongs to: what a key-level reader
    /// (`reload-on: keys-used`, reading `value`) records for that update.
    value_hashes: HashMap<String, String>,
}

/// Writes a scenario's updates.
pub struct Driver {
    client: Client,
    namespaces: Vec<String>,
    configs: Vec<ConfigDef>,
    run: String,
    epoch: Instant,
    inner: Mutex<Inner>,
}

/// xorshift64: a reproducible choice of resources without a dependency.
fn next_random(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

impl Driver {
    /// A driver for `configs` living in `namespaces`; times are offsets from `epoch`.
    pub fn new(client: Client, namespaces: Vec<String>, configs: Vec<ConfigDef>, run: String, epoch: Instant) -> Self {
        let inner = Inner {
            seqs: vec![0; configs.len()],
            updates: Vec::new(),
            failures: 0,
            churned: Vec::new(),
            rng: 0x2545F4914F6CDD1D,
            rtts: Vec::new(),
            value_hashes: HashMap::new(),
        };
        Self { client, namespaces, configs, run, epoch, inner: Mutex::new(inner) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The hash of every resource's creation content (sequence 0) → resource index.
    pub fn initial_hashes(&self) -> HashMap<String, usize> {
        let mut initial = HashMap::new();
        for (i, def) in self.configs.iter().enumerate() {
            let data = objects::content(def, &self.namespaces[def.ns], 0);
            initial.insert(hash_data(&data), i);
            initial.insert(value_hash(&data), i);
        }
        initial
    }

    /// Maps a hash seen on a workload to the whole content's hash when it is a key-level reader's `value`
    /// hash.
    pub fn value_hashes(&self) -> HashMap<String, String> {
        self.lock().value_hashes.clone()
    }

    /// Updates recorded so far.
    pub fn updates(&self) -> Vec<Update> {
        self.lock().updates.clone()
    }

    /// Writes that failed (their updates expect nothing).
    pub fn failures(&self) -> usize {
        self.lock().failures
    }

    /// Round trip of each successful content update request, ms (the API server's share of the latency).
    pub fn update_rtts(&self) -> Vec<f64> {
        self.lock().rtts.clone()
    }

    /// Deployments created during the run.
    pub fn churned(&self) -> Vec<Churned> {
        self.lock().churned.clone()
    }

    /// Changes resource `config`'s content; returns the new hash.
    pub async fn update(&self, config: usize) -> Option<String> {
        let def = &self.configs[config];
        let ns = &self.namespaces[def.ns];
        let (idx, data, hash) = {
            let mut inner = self.lock();
            inner.seqs[config] += 1;
            let data = objects::content(def, ns, inner.seqs[config]);
            let hash = hash_data(&data);
            inner.value_hashes.insert(value_hash(&data), hash.clone());
            let sent = self.epoch.elapsed();
            inner.updates.push(Update {
                config,
                hash: Some(hash.clone()),
                sent,
                written: None,
                order: 0,
                optional: false,
            });
            (inner.updates.len() - 1, data, hash)
        };
        // Only `value` changes; the padding is already there.
        let value = data.get("value").cloned().unwrap_or_default();
        let sent = Instant::now();
        let order = match self.patch(def, ns, json!({"data": {"value": encode(def.kind, &value)}})).await {
            Ok(rv) => rv,
            Err(e) => {
                tracing::warn!("{e}");
                let mut inner = self.lock();
                inner.failures += 1;
                inner.updates[idx].hash = None;
                return None;
            }
        };
        let mut inner = self.lock();
        inner.rtts.push(sent.elapsed().as_secs_f64() * 1000.0);
        inner.updates[idx].written = Some(self.epoch.elapsed());
        inner.updates[idx].order = order;
        drop(inner);
        Some(hash)
    }

    /// Changes only an annotation of resource `config` (S4): no reload may follow.
    pub async fn touch(&self, config: usize) {
        let def = &self.configs[config];
        let ns = &self.namespaces[def.ns];
        let seq = {
            let mut inner = self.lock();
            let sent = self.epoch.elapsed();
            inner.updates.push(Update { config, hash: None, sent, written: None, order: 0, optional: false });
            inner.updates.len()
        };
        let body = json!({"metadata": {"annotations": {"reloader-bench/touched": seq.to_string()}}});
        if let Err(e) = self.patch(def, ns, body).await {
            tracing::warn!("{e}");
            self.lock().failures += 1;
        }
    }

    /// Merge-patches the resource; returns the `resourceVersion` it got (0 if unreadable), the commit order.
    async fn patch(&self, def: &ConfigDef, ns: &str, body: serde_json::Value) -> Result<u64, Error> {
        let pp = PatchParams::default();
        let what = || format!("update {:?} {ns}/{}", def.kind, def.name);
        let rv = match def.kind {
            ConfigKind::ConfigMap => Api::<ConfigMap>::namespaced(self.client.clone(), ns)
                .patch(&def.name, &pp, &Patch::Merge(body))
                .await
                .map(|o| o.metadata.resource_version),
            ConfigKind::Secret => Api::<Secret>::namespaced(self.client.clone(), ns)
                .patch(&def.name, &pp, &Patch::Merge(body))
                .await
                .map(|o| o.metadata.resource_version),
        }
        .map_err(|e| Error::kube(what(), e))?;
        Ok(rv.and_then(|v| v.parse().ok()).unwrap_or(0))
    }

    fn pick(&self, targets: &[usize]) -> Option<usize> {
        let r = next_random(&mut self.lock().rng);
        targets.get(usize::try_from(r % targets.len().max(1) as u64).unwrap_or(0)).copied()
    }

    /// Plays `plan` for `duration` (a `Count` plan runs until its count is reached).
    pub async fn play(&self, plan: &Plan, duration: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + duration;
        match plan {
            Plan::Random { interval, tasks, targets, annotation_only } => {
                join_all((0..*tasks).map(|_| async move {
                    let mut tick = ticker(*interval);
                    while Instant::now() < deadline {
                        tick.tick().await;
                        let Some(c) = self.pick(targets) else { return };
                        if *annotation_only {
                            self.touch(c).await;
                        } else {
                            self.update(c).await;
                        }
                    }
                }))
                .await;
            }
            Plan::RoundRobin { interval, targets } => {
                let mut tick = ticker(*interval);
                for &c in targets.iter().cycle() {
                    tick.tick().await;
                    if Instant::now() >= deadline {
                        break;
                    }
                    self.update(c).await;
                }
            }
            Plan::Count { count, per_second, targets } => {
                let mut tick = ticker(Duration::from_secs(1) / (*per_second).max(1));
                for &c in targets.iter().cycle().take(*count) {
                    tick.tick().await;
                    self.update(c).await;
                }
            }
            Plan::Churn { create_every, keep, update_every, config } => {
                self.churn(*create_every, *keep, *update_every, *config, deadline).await?;
            }
        }
        Ok(())
    }

    async fn churn(
        &self,
        create_every: Duration,
        keep: usize,
        update_every: Duration,
        config: usize,
        deadline: Instant,
    ) -> Result<(), Error> {
        let ns = self.namespaces[0].clone();
        let def = &self.configs[config];
        let refs = [(def.kind, def.name.clone(), RefHow::EnvFrom)];
        let creator = async {
            let mut tick = ticker(create_every);
            let mut n = 0usize;
            while Instant::now() < deadline {
                tick.tick().await;
                let name = format!("churn-{n}");
                let w = WorkloadDef { name: name.clone(), ..super::deployment(0, String::new(), vec![]) };
                objects::create_workload(&self.client, &w, &ns, &self.run, &refs).await?;
                self.lock().churned.push(Churned { name, created: self.epoch.elapsed(), deleted: None });
                if n >= keep {
                    let old = format!("churn-{}", n - keep);
                    let at = self.epoch.elapsed();
                    if let Some(c) = self.lock().churned.iter_mut().find(|c| c.name == old) {
                        c.deleted = Some(at);
                    }
                    objects::delete_deployment(&self.client, &ns, &old).await?;
                }
                n += 1;
            }
            Ok::<(), Error>(())
        };
        let updater = async {
            let mut tick = ticker(update_every);
            tick.tick().await; // the first tick is immediate: let some Deployments exist first
            while Instant::now() < deadline {
                tick.tick().await;
                self.update(config).await;
            }
        };
        let (created, ()) = tokio::join!(creator, updater);
        created
    }
}

fn ticker(every: Duration) -> tokio::time::Interval {
    let mut t = tokio::time::interval(every);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

fn encode(kind: ConfigKind, value: &str) -> String {
    match kind {
        ConfigKind::ConfigMap => value.to_owned(),
        ConfigKind::Secret => {
            let one = BTreeMap::from([(String::new(), value.to_owned())]);
            objects::secret_data(&one).into_values().next().unwrap_or_default()
        }
    }
}

/// The hash of the `value` key alone.
fn value_hash(data: &std::collections::BTreeMap<String, String>) -> String {
    let value: std::collections::BTreeMap<String, String> =
        data.iter().filter(|(k, _)| *k == "value").map(|(k, v)| (k.clone(), v.clone())).collect();
    hash_data(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_choice_is_reproducible_and_spread() {
        let mut a = 0x2545F4914F6CDD1D;
        let mut b = a;
        let xs: Vec<u64> = (0..1000).map(|_| next_random(&mut a) % 10).collect();
        let ys: Vec<u64> = (0..1000).map(|_| next_random(&mut b) % 10).collect();
        assert_eq!(xs, ys);
        for k in 0..10 {
            let n = xs.iter().filter(|x| **x == k).count();
            assert!((50..=150).contains(&n), "{k} chosen {n} times of 1000");
        }
    }

    #[test]
    fn secret_updates_are_base64() {
        assert_eq!(encode(ConfigKind::Secret, "test"), "dGVzdA==");
        assert_eq!(encode(ConfigKind::ConfigMap, "test"), "test");
    }
}
