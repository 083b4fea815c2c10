//! Single annotation values, below every rule that reads them (`annotations`, `gates`, `decision`): Go's boolean
//! syntax, as upstream parses its flags and annotations, and the problem reported for a value that is wrong.
//!
//! Pure: no client, no I/O.

/// A problem with a workload's configuration (an annotation value, a resource name), reported once per
/// workload change with the object, the key and the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadProblem {
    /// The annotation key (or env var name).
    pub key: String,
    /// The offending value.
    pub value: String,
    /// What is wrong, as a sentence naming key and value.
    pub message: String,
}

/// Go's `strconv.ParseBool`: `1,t,T,TRUE,true,True` and `0,f,F,FALSE,false,False`.
pub fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A `"true"`/`"false"` annotation's value; anything else is reported (`otherwise`: what happens instead) and is
/// `None`.
pub fn bool_value(key: &str, value: &str, otherwise: &str, problems: &mut Vec<WorkloadProblem>) -> Option<bool> {
    let parsed = parse_go_bool(value.trim());
    if parsed.is_none() {
        let message = format!("annotation {key:?}: {value:?} is not true or false; {otherwise}");
        problems.push(WorkloadProblem { key: key.to_owned(), value: value.to_owned(), message });
    }
    parsed
}
