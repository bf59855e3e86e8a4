//! One container of a rendered pod, field by field. A container slurmops renders keeps its own
//! command, probes and hooks (its command absolute: no search path decides what runs); what a
//! push adds to it (env, mounts, a security context) meets the closed rules; a container the
//! push adds runs its image's entrypoint, or code the install reviewed by digest.

use serde_json::{Map, Value};

use super::context::{Cx, PRIVILEGED, Place};
use super::{env, security, volumes};

/// Container fields that only size, name or pace it: any value.
const DATA: &[&str] = &[
    "name",
    "imagePullPolicy",
    "resizePolicy",
    "resources",
    "restartPolicy",
    "stdin",
    "stdinOnce",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "tty",
    "workingDir",
];

/// Container C at P; OWN: the container of the same name slurmops renders there, if any.
pub(super) fn check(cx: &mut Cx<'_>, p: &Place<'_>, c: &Value, own: Option<&Value>) {
    let Some(c) = c.as_object() else {
        return;
    };
    let own = own.and_then(Value::as_object);
    let name = str_at_map(c, "name");
    for (k, v) in c {
        let field = format!("{}.{k}", p.at);
        let mine = own.and_then(|o| o.get(k));
        match k.as_str() {
            k if DATA.contains(&k) => {}
            "image" => {
                let image = v.as_str().unwrap_or_default();
                if let Some((why, hint)) = crate::cluster::guard_images::image_refusal(
                    cx.g,
                    image,
                    &format!("container {name}'s image"),
                ) {
                    cx.refuse(field, Some(image), why, hint);
                }
            }
            "command" | "args" => match own {
                Some(_) if mine == Some(v) && k == "command" => absolute(cx, &field, v),
                Some(_) if mine == Some(v) => {}
                Some(_) => cx.refuse(
                    field,
                    Some(name),
                    format!("the {k} of slurmops's container {name} is slurmops's, not the push's"),
                    "leave it out",
                ),
                // A container the push adds: its command and args are code, reviewed by digest.
                None if k == "command" || c.get("command").is_none() => {
                    code(cx, &field, name, c.get("command"), c.get("args"))
                }
                None => {}
            },
            "ports" => ports(cx, &field, v),
            "env" => env::check(cx, &field, v, mine),
            "envFrom" => env::from(cx, &field, v, mine),
            "volumeMounts" => volumes::mounts(cx, p, &field, v, mine, own.is_some()),
            "livenessProbe" | "readinessProbe" | "startupProbe" | "lifecycle" => {
                if mine != Some(v) && holds_exec(v) {
                    let exec = serde_json::to_string(v).unwrap_or_default();
                    let d = crate::cluster::guard_code::digest(&exec);
                    if !cx.g.programs.contains(&d) {
                        cx.refuse(
                            field,
                            Some(name),
                            format!("this {k} runs a command in the container: code this install has not reviewed ({d})"),
                            format!("use an httpGet or tcpSocket {k}, or once reviewed the install allows exactly this one with the daemon's --allow-program {d} (policy allowPrograms)"),
                        );
                    }
                }
            }
            "securityContext" => {
                if mine != Some(v) {
                    security::container(cx, &field, v, p.slurmd);
                }
            }
            _ if mine == Some(v) => {}
            _ => cx.refuse(
                field,
                Some(k),
                format!("{k} is not a container field a push may set under the install's guarded trust level"),
                "leave it out; a field slurmops does not list is refused, not passed (docs/trust-model.md lists what may be set)",
            ),
        }
    }
}

fn str_at_map<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// A command of slurmops's own container: an absolute program, found by no search path.
fn absolute(cx: &mut Cx<'_>, field: &str, command: &Value) {
    let program = command.get(0).and_then(Value::as_str).unwrap_or_default();
    if !program.starts_with('/') {
        cx.refuse(
            field,
            None,
            format!("slurmops's own container runs {program:?} by name: a search path would decide what runs"),
            "this is slurmops's defect: report it",
        );
    }
}

/// The command and args of a container the push adds: code, allowed by the digest of both.
fn code(cx: &mut Cx<'_>, field: &str, name: &str, command: Option<&Value>, args: Option<&Value>) {
    let text = serde_json::json!({"command": command, "args": args}).to_string();
    let d = crate::cluster::guard_code::digest(&text);
    if !cx.g.programs.contains(&d) {
        cx.refuse(
            field,
            Some(name),
            format!("container {name} runs the command and arguments cluster.yaml gives it: code this install has not reviewed ({d})"),
            format!("leave command and args out (the image's entrypoint runs), or once reviewed the install allows exactly these with the daemon's --allow-program {d} (policy allowPrograms)"),
        );
    }
}

fn ports(cx: &mut Cx<'_>, field: &str, ports: &Value) {
    for p in ports.as_array().into_iter().flatten() {
        let host = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
        if host != 0 && !cx.g.privileged {
            cx.refuse(
                format!("{field}.hostPort"),
                Some("hostPort"),
                format!("hostPort {host}: the pod would take a port of the node's own network (beyond Pod Security baseline)"),
                PRIVILEGED,
            );
        }
    }
}

/// Whether a probe or hook V runs a command.
fn holds_exec(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, v)| k == "exec" || holds_exec(v)),
        _ => false,
    }
}
