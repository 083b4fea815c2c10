//! The observer's CSI part: SecretProviderClassPodStatus hashes move their class's hash in the index (see
//! [`crate::rules::csi`]), and SecretProviderClass annotations set its `ignore`/`match` flags.

use std::time::Instant;

use super::Observer;
use crate::index::{Baseline, ConfigFacts, ConfigKey, ConfigUpdate};
use crate::rules::{csi::CsiUpdate, hash::ContentHash, resource::ConfigKind};

impl Observer {
    pub(super) fn csi_status(
        &mut self,
        stream: usize,
        namespace: &str,
        name: &str,
        class_hash: Option<(String, ContentHash)>,
        listed: bool,
        now: Instant,
    ) {
        let Some((class, hash)) = class_hash else { return };
        let mut index = self.ctx.index();
        let key = ConfigKey { kind: ConfigKind::SecretProviderClass, namespace: index.intern(namespace), name: class };
        if let Some(seen) = self.relisting.seen(stream, listed) {
            seen.configs.insert(key.clone());
        }
        let known = index.config(&key).is_some();
        let hash = match self.csi.observe(namespace, name, hash, known) {
            CsiUpdate::None => return,
            CsiUpdate::Seed(h) | CsiUpdate::Changed(h) => h,
        };
        let (ignored, matched) =
            self.csi_flags.get(&(namespace.to_owned(), key.name.clone())).copied().unwrap_or_default();
        // upstream: a status's creation never triggers; only a change of mounted versions does.
        let update = index.upsert_config(key.clone(), ConfigFacts::live(hash, ignored, matched), Baseline::Current);
        self.received(if update == ConfigUpdate::Created { "add" } else { "update" }, stream);
        if matches!(update, ConfigUpdate::Changed { .. }) && self.synced {
            self.trigger(&index, &key, now, None);
        }
        self.update_gauges(&index);
    }

    pub(super) fn csi_class(&mut self, namespace: String, name: String, ignored: bool, matched: bool) {
        let mut index = self.ctx.index();
        let key = ConfigKey {
            kind: ConfigKind::SecretProviderClass,
            namespace: index.intern(&namespace),
            name: name.clone(),
        };
        if let Some(facts) = index.config(&key).cloned() {
            index.upsert_config(key, ConfigFacts { ignored, matched, ..facts }, Baseline::Current);
        }
        // Only flags that are set are kept (a deleted class reports both unset): the map stays as small as the
        // classes with annotations.
        if ignored || matched {
            self.csi_flags.insert((namespace, name), (ignored, matched));
        } else {
            self.csi_flags.remove(&(namespace, name));
        }
    }
}
