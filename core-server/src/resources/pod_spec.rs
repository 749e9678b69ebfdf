//! What pods and every workload share: PodSpec defaulting (kube's
//! `SetDefaults_PodSpec` with its containers, probes and volumes) and
//! validation (`ValidatePodSpec`, `ValidatePodTemplateSpec`), the template
//! checks of controllers, and the Containers/Images table cells.

use apimachinery::error::FieldError;
use apimachinery::label_selector::LabelSelector;
use apimachinery::validation;
use serde_json::{Value, json};

use super::fields::{self, default, has, int, is_set, items, text};
use apimachinery::quantity;

/// Where a pod's containers live, in the order kube validates them.
const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The volume sources a volume may name, one of which it must have.
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// Defaults a PodSpec, as kube's v1 defaulting does for pods and templates.
pub fn default_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default(spec, "/dnsPolicy", json!("ClusterFirst"));
    default(spec, "/restartPolicy", json!("Always"));
    default(spec, "/securityContext", json!({}));
    default(spec, "/terminationGracePeriodSeconds", json!(30));
    default(spec, "/schedulerName", json!("default-scheduler"));
    // v1 keeps the deprecated `serviceAccount` in step with `serviceAccountName`.
    let account = match (
        text(spec, "/serviceAccountName"),
        text(spec, "/serviceAccount"),
    ) {
        ("", old) => old.to_string(),
        (name, _) => name.to_string(),
    };
    if !account.is_empty() {
        spec["serviceAccountName"] = json!(account);
        spec["serviceAccount"] = json!(account);
    }
    for list in CONTAINER_LISTS {
        fields::each_mut(spec, &format!("/{list}"), default_container);
    }
    fields::each_mut(spec, "/volumes", default_volume);
}

/// Defaults the PodTemplateSpec at a JSON pointer (e.g. `/spec/template`).
pub fn default_template(obj: &mut Value, pointer: &str) {
    let Some(template) = obj.pointer_mut(pointer).filter(|t| t.is_object()) else {
        return;
    };
    null_creation_timestamp(template);
    if let Some(spec) = template.get_mut("spec") {
        default_spec(spec);
    }
}

/// Gives an embedded object (a template) the `metadata.creationTimestamp:
/// null` kube 1.33 answers with: its ObjectMeta's unset time is a Go struct
/// that `omitempty` does not omit (kube 1.34 omits it).
pub fn null_creation_timestamp(embedded: &mut Value) {
    if let Some(map) = embedded.as_object_mut() {
        let meta = map.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry("creationTimestamp").or_insert(Value::Null);
        }
    }
}

/// The pull policy kube picks: `Always` for `:latest` or an untagged image, else `IfNotPresent`.
fn pull_policy(image: &str) -> &'static str {
    let name = image.split('@').next().unwrap_or_default();
    let has_digest = image.contains('@');
    let last = name.rsplit('/').next().unwrap_or_default();
    let tag = last.split_once(':').map(|(_, t)| t);
    match tag {
        Some("latest") => "Always",
        None if !has_digest && !image.is_empty() => "Always",
        _ => "IfNotPresent",
    }
}

fn default_container(c: &mut Value) {
    let policy = pull_policy(text(c, "/image"));
    default(c, "/imagePullPolicy", json!(policy));
    default(c, "/terminationMessagePath", json!("/dev/termination-log"));
    default(c, "/terminationMessagePolicy", json!("File"));
    // A struct in kube's Container: answered `{}` when unset.
    if !is_set(c, "/resources") {
        c["resources"] = json!({});
    }
    fields::each_mut(c, "/ports", |p| default(p, "/protocol", json!("TCP")));
    fields::each_mut(c, "/env", |e| {
        if is_set(e, "/valueFrom/fieldRef") {
            default(e, "/valueFrom/fieldRef/apiVersion", json!("v1"));
        }
    });
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) {
            default_probe(p);
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(h) = c
            .pointer_mut(&format!("/lifecycle/{hook}"))
            .filter(|h| h.is_object())
        {
            default_handler(h);
        }
    }
}

fn default_handler(handler: &mut Value) {
    if is_set(handler, "/httpGet") {
        default(handler, "/httpGet/path", json!("/"));
        default(handler, "/httpGet/scheme", json!("HTTP"));
    }
}

fn default_probe(probe: &mut Value) {
    for (field, value) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        if int(probe, &format!("/{field}")).unwrap_or(0) == 0 {
            probe[field] = json!(value);
        }
    }
    default_handler(probe);
}

fn default_volume(v: &mut Value) {
    if !VOLUME_SOURCES.iter().any(|s| is_set(v, &format!("/{s}"))) {
        v["emptyDir"] = json!({});
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if is_set(v, &format!("/{source}")) {
            default(v, &format!("/{source}/defaultMode"), json!(420));
        }
    }
    if is_set(v, "/hostPath") {
        default(v, "/hostPath/type", json!(""));
    }
    fields::each_mut(v, "/projected/sources", |s| {
        if is_set(s, "/serviceAccountToken") {
            default(s, "/serviceAccountToken/expirationSeconds", json!(3600));
        }
    });
    fields::each_mut(v, "/downwardAPI/items", |item| {
        if is_set(item, "/fieldRef") {
            default(item, "/fieldRef/apiVersion", json!("v1"));
        }
    });
}

/// Validates a PodSpec at a field path (`spec`, `spec.template.spec`).
pub fn validate_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let volumes = validate_volumes(spec, path, &mut errs);
    if items(spec, "/containers").is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let host_network = spec.get("hostNetwork") == Some(&Value::Bool(true));
    let mut names: Vec<String> = Vec::new();
    for list in CONTAINER_LISTS {
        for (i, c) in items(spec, &format!("/{list}")).iter().enumerate() {
            let ctx = ContainerContext {
                list,
                volumes: &volumes,
                host_network,
            };
            validate_container(
                c,
                &format!("{path}.{list}[{i}]"),
                &ctx,
                &mut names,
                &mut errs,
            );
        }
    }
    let restart = text(spec, "/restartPolicy");
    match restart {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required(format!("{path}.restartPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            other,
            &["Always", "OnFailure", "Never"],
        )),
    }
    match text(spec, "/dnsPolicy") {
        "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" => {}
        "None" if !is_set(spec, "/dnsConfig") => errs.push(FieldError::required(
            format!("{path}.dnsConfig"),
            "must provide `dnsConfig` when `dnsPolicy` is None",
        )),
        "None" => {}
        "" => errs.push(FieldError::required(format!("{path}.dnsPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            format!("{path}.dnsPolicy"),
            other,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    errs.extend(validation::labels(
        spec.get("nodeSelector"),
        &format!("{path}.nodeSelector"),
    ));
    let account = text(spec, "/serviceAccountName");
    if !account.is_empty() {
        for msg in validation::dns1123_subdomain(account) {
            errs.push(FieldError::invalid(
                format!("{path}.serviceAccountName"),
                account,
                msg,
            ));
        }
    }
    for field in ["hostname", "subdomain"] {
        let value = text(spec, &format!("/{field}"));
        if !value.is_empty() {
            for msg in validation::dns1123_label(value) {
                errs.push(FieldError::invalid(format!("{path}.{field}"), value, msg));
            }
        }
    }
    if let Some(deadline) = int(spec, "/activeDeadlineSeconds")
        && !(1..=i64::from(i32::MAX)).contains(&deadline)
    {
        errs.push(FieldError::invalid(
            format!("{path}.activeDeadlineSeconds"),
            deadline,
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    errs.extend(validate_tolerations(
        items(spec, "/tolerations"),
        &format!("{path}.tolerations"),
    ));
    errs
}

/// Checks the volumes and returns their names.
fn validate_volumes(spec: &Value, path: &str, errs: &mut Vec<FieldError>) -> Vec<String> {
    let mut names = Vec::new();
    for (i, v) in items(spec, "/volumes").iter().enumerate() {
        let vpath = format!("{path}.volumes[{i}]");
        let name = text(v, "/name");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{vpath}.name"), ""));
        } else {
            for msg in validation::dns1123_label(name) {
                errs.push(FieldError::invalid(format!("{vpath}.name"), name, msg));
            }
            if names.iter().any(|n| n == name) {
                errs.push(FieldError::duplicate(format!("{vpath}.name"), name));
            }
            names.push(name.to_string());
        }
        let sources: Vec<&str> = VOLUME_SOURCES
            .iter()
            .copied()
            .filter(|s| is_set(v, &format!("/{s}")))
            .collect();
        match sources.as_slice() {
            [] => errs.push(FieldError::required(
                vpath.clone(),
                "must specify a volume type",
            )),
            [_] => {}
            [_, second, ..] => errs.push(FieldError::forbidden(
                format!("{vpath}.{second}"),
                "may not specify more than 1 volume type",
            )),
        }
        for (source, field) in [
            ("configMap", "name"),
            ("secret", "secretName"),
            ("persistentVolumeClaim", "claimName"),
            ("hostPath", "path"),
            ("nfs", "server"),
            ("nfs", "path"),
        ] {
            if is_set(v, &format!("/{source}")) && text(v, &format!("/{source}/{field}")).is_empty()
            {
                errs.push(FieldError::required(
                    format!("{vpath}.{source}.{field}"),
                    "",
                ));
            }
        }
    }
    names
}

struct ContainerContext<'a> {
    list: &'a str,
    volumes: &'a [String],
    host_network: bool,
}

fn validate_container(
    c: &Value,
    path: &str,
    ctx: &ContainerContext<'_>,
    names: &mut Vec<String>,
    errs: &mut Vec<FieldError>,
) {
    let name = text(c, "/name");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        for msg in validation::dns1123_label(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
        }
        if names.iter().any(|n| n == name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), name));
        }
        names.push(name.to_string());
    }
    let image = text(c, "/image");
    if image.is_empty() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    } else if image.trim() != image {
        errs.push(FieldError::invalid(
            format!("{path}.image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    match text(c, "/imagePullPolicy") {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errs.push(FieldError::required(format!("{path}.imagePullPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            format!("{path}.imagePullPolicy"),
            other,
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    match text(c, "/terminationMessagePolicy") {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(
            format!("{path}.terminationMessagePolicy"),
            "must be 'File' or 'FallbackToLogsOnError'",
        )),
        other => errs.push(FieldError::invalid(
            format!("{path}.terminationMessagePolicy"),
            other,
            "must be 'File' or 'FallbackToLogsOnError'",
        )),
    }
    validate_ports(c, path, ctx.host_network, errs);
    validate_env(c, path, errs);
    validate_resources(c, path, errs);
    validate_mounts(c, path, ctx.volumes, errs);
    let restart = c.get("restartPolicy").and_then(Value::as_str);
    let sidecar = ctx.list == "initContainers" && restart == Some("Always");
    match (ctx.list, restart) {
        (_, None) => {}
        ("initContainers", Some("Always")) => {}
        ("initContainers", Some(other)) => errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            other,
            &["Always"],
        )),
        (_, Some(_)) => errs.push(FieldError::forbidden(
            format!("{path}.restartPolicy"),
            "may not be set for non-init containers",
        )),
    }
    for probe in [
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "lifecycle",
    ] {
        if !is_set(c, &format!("/{probe}")) {
            continue;
        }
        if ctx.list == "initContainers" && !sidecar {
            errs.push(FieldError::forbidden(
                format!("{path}.{probe}"),
                "may not be set for init containers without restartPolicy=Always",
            ));
        } else if probe != "lifecycle" {
            validate_probe(
                &c[probe],
                &format!("{path}.{probe}"),
                probe != "readinessProbe",
                errs,
            );
        }
    }
}

fn validate_ports(c: &Value, path: &str, host_network: bool, errs: &mut Vec<FieldError>) {
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in items(c, "/ports").iter().enumerate() {
        let ppath = format!("{path}.ports[{i}]");
        let name = text(p, "/name");
        if !name.is_empty() {
            let problems = fields::port_name(name);
            if !problems.is_empty() {
                errs.extend(
                    problems
                        .into_iter()
                        .map(|m| FieldError::invalid(format!("{ppath}.name"), name, m)),
                );
            } else if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{ppath}.name"), name));
            } else {
                names.push(name);
            }
        }
        let container_port = int(p, "/containerPort").unwrap_or(0);
        if container_port == 0 {
            errs.push(FieldError::required(format!("{ppath}.containerPort"), ""));
        } else {
            errs.extend(fields::port_number(
                container_port,
                &format!("{ppath}.containerPort"),
            ));
        }
        let host_port = int(p, "/hostPort").unwrap_or(0);
        if host_port != 0 {
            errs.extend(fields::port_number(host_port, &format!("{ppath}.hostPort")));
        }
        if host_network && host_port != container_port {
            errs.push(FieldError::invalid(
                format!("{ppath}.hostPort"),
                host_port,
                "must match `containerPort` when `hostNetwork` is true",
            ));
        }
        match text(p, "/protocol") {
            "TCP" | "UDP" | "SCTP" => {}
            "" => errs.push(FieldError::required(format!("{ppath}.protocol"), "")),
            other => errs.push(FieldError::not_supported(
                format!("{ppath}.protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
}

fn validate_env(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (i, e) in items(c, "/env").iter().enumerate() {
        let epath = format!("{path}.env[{i}]");
        let name = text(e, "/name");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{epath}.name"), ""));
        } else if !name
            .chars()
            .all(|ch| (' '..='~').contains(&ch) && ch != '=')
        {
            errs.push(FieldError::invalid(
                format!("{epath}.name"),
                name,
                "a valid environment variable name must consist only of printable ASCII characters other than '='",
            ));
        }
        if is_set(e, "/valueFrom") && !text(e, "/value").is_empty() {
            errs.push(FieldError::invalid(
                format!("{epath}.valueFrom"),
                "",
                "may not be specified when `value` is not empty",
            ));
        }
    }
}

fn validate_resources(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let requests = c.pointer("/resources/requests");
    let limits = c.pointer("/resources/limits");
    errs.extend(quantity::validate_list(
        requests,
        &format!("{path}.resources.requests"),
    ));
    errs.extend(quantity::validate_list(
        limits,
        &format!("{path}.resources.limits"),
    ));
    for (name, request) in requests.and_then(Value::as_object).into_iter().flatten() {
        let Some(limit) = limits.and_then(|l| l.get(name)) else {
            continue;
        };
        if let (Some(r), Some(l)) = (quantity::of(request), quantity::of(limit))
            && r > l
        {
            let shown = |q: &Value| {
                q.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| q.to_string())
            };
            errs.push(FieldError::invalid(
                format!("{path}.resources.requests"),
                shown(request),
                format!(
                    "must be less than or equal to {name} limit of {}",
                    shown(limit)
                ),
            ));
        }
    }
}

fn validate_mounts(c: &Value, path: &str, volumes: &[String], errs: &mut Vec<FieldError>) {
    let mut paths: Vec<&str> = Vec::new();
    for (i, m) in items(c, "/volumeMounts").iter().enumerate() {
        let mpath = format!("{path}.volumeMounts[{i}]");
        let name = text(m, "/name");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{mpath}.name"), ""));
        } else if !volumes.iter().any(|v| v == name) {
            errs.push(FieldError::not_found(format!("{mpath}.name"), name));
        }
        let mount = text(m, "/mountPath");
        if mount.is_empty() {
            errs.push(FieldError::required(format!("{mpath}.mountPath"), ""));
        } else if paths.contains(&mount) {
            errs.push(FieldError::invalid(
                format!("{mpath}.mountPath"),
                mount,
                "must be unique",
            ));
        } else {
            paths.push(mount);
        }
    }
}

fn validate_probe(
    probe: &Value,
    path: &str,
    success_must_be_one: bool,
    errs: &mut Vec<FieldError>,
) {
    let handlers = ["exec", "httpGet", "tcpSocket", "grpc"]
        .iter()
        .filter(|h| is_set(probe, &format!("/{h}")))
        .count();
    if handlers == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    } else if handlers > 1 {
        errs.push(FieldError::forbidden(
            path,
            "may not specify more than 1 handler type",
        ));
    }
    for field in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        errs.extend(fields::non_negative(
            probe,
            &format!("/{field}"),
            &format!("{path}.{field}"),
        ));
    }
    let success = int(probe, "/successThreshold").unwrap_or(1);
    if success_must_be_one && success != 1 {
        errs.push(FieldError::invalid(
            format!("{path}.successThreshold"),
            success,
            "must be 1",
        ));
    }
}

pub(crate) fn validate_tolerations(tolerations: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let tpath = format!("{path}[{i}]");
        let (key, operator, effect) = (text(t, "/key"), text(t, "/operator"), text(t, "/effect"));
        for msg in if key.is_empty() {
            Vec::new()
        } else {
            validation::qualified_name(key)
        } {
            errs.push(FieldError::invalid(format!("{tpath}.key"), key, msg));
        }
        if key.is_empty() && operator != "Exists" {
            errs.push(FieldError::invalid(
                format!("{tpath}.operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if is_set(t, "/tolerationSeconds") && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                format!("{tpath}.effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let value = text(t, "/value");
                let problems = validation::label_value(value);
                if !problems.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{tpath}.operator"),
                        value,
                        problems.join(";"),
                    ));
                }
            }
            "Exists" if has(t, "/value") => errs.push(FieldError::invalid(
                format!("{tpath}.operator"),
                t.clone(),
                "value must be empty when `operator` is 'Exists'",
            )),
            "Exists" => {}
            other => errs.push(FieldError::not_supported(
                format!("{tpath}.operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect)
        {
            errs.push(FieldError::not_supported(
                format!("{tpath}.effect"),
                effect,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
    errs
}

/// Validates a PodTemplateSpec at a field path (`spec.template`), as
/// `ValidatePodTemplateSpec` does (labels are reported at `<path>.labels`, as kube does).
pub fn validate_template(template: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = validation::labels(
        template.pointer("/metadata/labels"),
        &format!("{path}.labels"),
    );
    errs.extend(validation::annotations(
        template.pointer("/metadata/annotations"),
        &format!("{path}.annotations"),
    ));
    let spec = template.get("spec").cloned().unwrap_or(Value::Null);
    errs.extend(validate_spec(&spec, &format!("{path}.spec")));
    if !items(&spec, "/ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden(
            format!("{path}.spec.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errs
}

/// The template checks of a controller that keeps pods running (ReplicaSet,
/// Deployment, ReplicationController, StatefulSet, DaemonSet): the selector
/// matches the template's labels, pods restart Always, no active deadline.
pub fn validate_controller_template(
    template: Option<&Value>,
    path: &str,
    selector: &LabelSelector,
    owner: &str,
) -> Vec<FieldError> {
    let Some(template) = template.filter(|t| !t.is_null()) else {
        return vec![FieldError::required(path, "")];
    };
    let mut errs = Vec::new();
    let labels = template.pointer("/metadata/labels");
    if !selector.is_empty() && !selector.matches(labels.and_then(Value::as_object)) {
        errs.push(FieldError::invalid(
            format!("{path}.metadata.labels"),
            labels.cloned().unwrap_or(Value::Null),
            "`selector` does not match template `labels`",
        ));
    }
    errs.extend(validate_template(template, path));
    let restart = text(template, "/spec/restartPolicy");
    if !restart.is_empty() && restart != "Always" {
        errs.push(FieldError::not_supported(
            format!("{path}.spec.restartPolicy"),
            restart,
            &["Always"],
        ));
    }
    if is_set(template, "/spec/activeDeadlineSeconds") {
        errs.push(FieldError::forbidden(
            format!("{path}.spec.activeDeadlineSeconds"),
            format!("activeDeadlineSeconds in {owner} is not Supported"),
        ));
    }
    errs
}

/// The Containers and Images cells of a PodSpec: names and images joined by commas.
pub fn containers_and_images(spec: Option<&Value>) -> (Value, Value) {
    let containers = spec.map(|s| items(s, "/containers")).unwrap_or_default();
    let join = |field: &str| {
        containers
            .iter()
            .map(|c| text(c, field))
            .collect::<Vec<_>>()
            .join(",")
    };
    (json!(join("/name")), json!(join("/image")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_defaults() {
        let mut obj = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "nginx:1"}]}}}});
        default_template(&mut obj, "/spec/template");
        assert_eq!(
            obj["spec"]["template"]["metadata"],
            json!({"creationTimestamp": null})
        );
        assert_eq!(obj["spec"]["template"]["spec"]["restartPolicy"], "Always");
        let mut dated = json!({"metadata": {"creationTimestamp": "2025-01-01T00:00:00Z"}});
        null_creation_timestamp(&mut dated);
        assert_eq!(
            dated["metadata"]["creationTimestamp"],
            "2025-01-01T00:00:00Z"
        );
        let mut none = json!({"spec": {}});
        default_template(&mut none, "/spec/template");
        assert_eq!(none, json!({"spec": {}}), "no template, nothing added");
    }

    #[test]
    fn spec_defaults() {
        let mut spec = json!({
            "containers": [{"name": "a", "image": "nginx", "ports": [{"containerPort": 80}],
                "livenessProbe": {"httpGet": {"port": 80}}}],
            "initContainers": [{"name": "b", "image": "busybox:1.36"}],
            "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}}],
            "serviceAccountName": "robot"
        });
        default_spec(&mut spec);
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["securityContext"], json!({}));
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["serviceAccount"], "robot");
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["resources"], json!({}), "a Go struct, answered empty");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/");
        assert_eq!(c["livenessProbe"]["failureThreshold"], 3);
        assert_eq!(spec["initContainers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
        assert!(
            validate_spec(&spec, "spec").is_empty(),
            "{:?}",
            validate_spec(&spec, "spec")
        );
    }

    #[test]
    fn pull_policies() {
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("nginx:latest"), "Always");
        assert_eq!(pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(pull_policy("registry:5000/nginx:1.2"), "IfNotPresent");
        assert_eq!(pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn spec_validation_messages() {
        let mut spec = json!({"containers": [
            {"name": "a", "image": "x", "ports": [{"containerPort": 70000, "protocol": "HTTP"}]},
            {"name": "a"}
        ], "restartPolicy": "Sometimes"});
        default_spec(&mut spec);
        let errs: Vec<String> = validate_spec(&spec, "spec")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            errs.contains(
                &"spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive".to_string()
            ),
            "{errs:?}"
        );
        assert!(errs.contains(
            &"spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"".to_string()
        ));
        assert!(errs.contains(&"spec.containers[1].name: Duplicate value: \"a\"".to_string()));
        assert!(errs.contains(&"spec.containers[1].image: Required value".to_string()));
        assert!(errs.contains(
            &"spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"".to_string()
        ));
        let empty = validate_spec(
            &json!({"containers": [], "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}),
            "spec",
        );
        assert_eq!(empty[0].to_string(), "spec.containers: Required value");
    }

    #[test]
    fn controller_template_must_match_selector() {
        let mut template = json!({"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
        default_spec(&mut template["spec"]);
        let selector = LabelSelector::parse("app=a").expect("a valid selector");
        let errs =
            validate_controller_template(Some(&template), "spec.template", &selector, "ReplicaSet");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.template.metadata.labels");
        assert_eq!(
            errs[0].detail,
            "`selector` does not match template `labels`"
        );
    }
}
