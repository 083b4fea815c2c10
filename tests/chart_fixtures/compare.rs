//! Differences between two renders of a Reloader chart, as text lines that name what differs and both sides
//! (`-` where a side has nothing), e.g. `arg --is-openshift=false: only ours` or
//! `rbac ClusterRole {fullname}-role: apps/deployments: upstream [get list patch update], ours [list patch watch]`.
//! The release's full name is written `{fullname}` and our chart's appVersion `{appVersion}`, so one line
//! describes a difference for every release name. Only what decides the installed behaviour is compared: which
//! objects exist, the controller's container (image, args, env, probes), replicas, pull secrets, the
//! ServiceAccount token settings, the Deployment's annotations, and the RBAC verbs per resource.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// How the names of one render are normalised.
pub struct Names<'a> {
    /// The release's full name (`<release>-reloader`), written `{fullname}`.
    pub fullname: &'a str,
    /// Our chart's appVersion, written `{appVersion}` where it ends our image reference.
    pub app_version: &'a str,
}

impl Names<'_> {
    fn text(&self, value: Option<&Value>) -> String {
        let text = match value {
            None | Some(Value::Null) => "-".to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        text.replace(self.fullname, "{fullname}")
    }
}

/// Every difference between upstream's objects and ours.
pub fn differences(upstream: &[Value], ours: &[Value], names: &Names) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    objects(upstream, ours, names, &mut out);
    if let (Some(u), Some(o)) = (find(upstream, "Deployment"), find(ours, "Deployment")) {
        deployment(u, o, names, &mut out);
    }
    if let (Some(u), Some(o)) = (find(upstream, "ServiceAccount"), find(ours, "ServiceAccount")) {
        for field in ["imagePullSecrets", "automountServiceAccountToken"] {
            pair(&mut out, &format!("serviceaccount {field}"), names.text(u.get(field)), names.text(o.get(field)));
        }
    }
    rbac(upstream, ours, names, &mut out);
    out
}

/// `*` matches any run of characters (also none); everything else matches itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let Some((head, rest)) = pattern.split_once('*') else { return pattern == text };
    let Some(mut remaining) = text.strip_prefix(head) else { return false };
    let mut parts: Vec<&str> = rest.split('*').collect();
    let last = parts.pop().unwrap_or_default();
    for part in parts {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind)
}

fn pair(out: &mut BTreeSet<String>, what: &str, upstream: String, ours: String) {
    if upstream != ours {
        out.insert(format!("{what}: upstream {upstream}, ours {ours}"));
    }
}

fn only(out: &mut BTreeSet<String>, what: &str, in_upstream: &BTreeSet<String>, in_ours: &BTreeSet<String>) {
    for x in in_upstream.difference(in_ours) {
        out.insert(format!("{what} {x}: only upstream"));
    }
    for x in in_ours.difference(in_upstream) {
        out.insert(format!("{what} {x}: only ours"));
    }
}

/// `Kind namespace/name` (cluster-wide objects without the namespace).
fn object_id(o: &Value, names: &Names) -> String {
    let name = names.text(o["metadata"].get("name"));
    match o["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{} {ns}/{name}", names.text(o.get("kind"))),
        None => format!("{} {name}", names.text(o.get("kind"))),
    }
}

fn objects(upstream: &[Value], ours: &[Value], names: &Names, out: &mut BTreeSet<String>) {
    let ids = |list: &[Value]| list.iter().map(|o| object_id(o, names)).collect::<BTreeSet<_>>();
    only(out, "object", &ids(upstream), &ids(ours));
}

fn deployment(u: &Value, o: &Value, names: &Names, out: &mut BTreeSet<String>) {
    pair(out, "replicas", names.text(u["spec"].get("replicas")), names.text(o["spec"].get("replicas")));
    let annotations = |d: &Value| {
        let mut map = d["metadata"]["annotations"].as_object().cloned().unwrap_or_default();
        // upstream writes Helm's own release annotations into its templates; `helm install` adds them to ours.
        map.retain(|k, _| !k.starts_with("meta.helm.sh/"));
        names.text(Some(&Value::Object(map)))
    };
    pair(out, "deployment annotations", annotations(u), annotations(o));
    let (pu, po) = (&u["spec"]["template"]["spec"], &o["spec"]["template"]["spec"]);
    for field in ["imagePullSecrets", "automountServiceAccountToken", "serviceAccountName"] {
        pair(out, &format!("pod {field}"), names.text(pu.get(field)), names.text(po.get(field)));
    }
    let (cu, co) = (&pu["containers"][0], &po["containers"][0]);
    let our_image = names.text(co.get("image"));
    let our_image = match our_image.strip_suffix(&format!(":{}", names.app_version)) {
        Some(repository) => format!("{repository}:{{appVersion}}"),
        None => our_image,
    };
    pair(out, "image", names.text(cu.get("image")), our_image);
    pair(out, "imagePullPolicy", names.text(cu.get("imagePullPolicy")), names.text(co.get("imagePullPolicy")));
    only(out, "arg", &flags(cu), &flags(co));
    let (eu, eo) = (env(cu, names), env(co, names));
    for name in eu.keys().chain(eo.keys()).collect::<BTreeSet<_>>() {
        let side = |m: &BTreeMap<String, String>| m.get(name).cloned().unwrap_or_else(|| "-".into());
        pair(out, &format!("env {name}"), side(&eu), side(&eo));
    }
    for probe in ["livenessProbe", "readinessProbe"] {
        let (lu, lo) = (leaves(&cu[probe], probe), leaves(&co[probe], probe));
        for path in lu.keys().chain(lo.keys()).collect::<BTreeSet<_>>() {
            let side = |m: &BTreeMap<String, Value>| names.text(m.get(path));
            pair(out, path, side(&lu), side(&lo));
        }
    }
}

/// The container's flags, `--flag value` pairs written `--flag=value` (both spellings mean the same).
fn flags(container: &Value) -> BTreeSet<String> {
    let args: Vec<&str> = container["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i];
        match args.get(i + 1) {
            Some(next) if arg.starts_with("--") && !arg.contains('=') && !next.starts_with("--") => {
                out.insert(format!("{arg}={next}"));
                i += 2;
            }
            _ => {
                out.insert(arg.to_owned());
                i += 1;
            }
        }
    }
    out
}

/// Env var name → its value or `valueFrom`, as text.
fn env(container: &Value, names: &Names) -> BTreeMap<String, String> {
    let vars = container["env"].as_array().into_iter().flatten();
    vars.map(|v| {
        let value = v.get("value").or_else(|| v.get("valueFrom"));
        (names.text(v.get("name")), names.text(value))
    })
    .collect()
}

/// Every scalar of `value` by its dotted path under `prefix`.
fn leaves(value: &Value, prefix: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                out.extend(leaves(v, &format!("{prefix}.{k}")));
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
    out
}

/// (role, `group/resource`) → sorted verbs, a verb limited to resource names written `verb[name,…]`.
fn grants(objects: &[Value], names: &Names) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for role in objects.iter().filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole") {
        // The namespace is left out: scoped mode has one Role of the same name per namespace, and which objects
        // exist where is compared by `objects`.
        let id = format!("{} {}", names.text(role.get("kind")), names.text(role["metadata"].get("name")));
        for rule in role["rules"].as_array().into_iter().flatten() {
            let strings = |key: &str| -> Vec<String> {
                rule[key].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
            };
            let limited = strings("resourceNames");
            let suffix = if limited.is_empty() { String::new() } else { format!("[{}]", limited.join(",")) };
            for group in strings("apiGroups") {
                for resource in strings("resources") {
                    let verbs = out.entry((id.clone(), format!("{group}/{resource}"))).or_default();
                    verbs.extend(strings("verbs").into_iter().map(|v| format!("{v}{suffix}")));
                }
            }
        }
    }
    out
}

fn rbac(upstream: &[Value], ours: &[Value], names: &Names, out: &mut BTreeSet<String>) {
    let (gu, go) = (grants(upstream, names), grants(ours, names));
    let verbs = |m: &BTreeMap<(String, String), BTreeSet<String>>, key: &(String, String)| match m.get(key) {
        Some(v) => format!("[{}]", v.iter().cloned().collect::<Vec<_>>().join(" ")),
        None => "-".to_owned(),
    };
    for key in gu.keys().chain(go.keys()).collect::<BTreeSet<_>>() {
        pair(out, &format!("rbac {}: {}", key.0, key.1), verbs(&gu, key), verbs(&go, key));
    }
}
