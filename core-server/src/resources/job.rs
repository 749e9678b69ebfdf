//! batch/v1 Jobs: backoffLimit 6, completions and parallelism 1,
//! NonIndexed, not suspended and TerminatingOrFailed replacement by default;
//! the selector and the `controller-uid`/`job-name` labels are generated
//! from the job's uid unless `manualSelector` is set.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, text};
use super::{pod_spec, workload};

/// The labels kube puts on a job's pods (legacy and prefixed).
const CONTROLLER_UID: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];
const JOB_NAME: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];

/// Template fields a suspended job that never started may still change.
const SCHEDULING_FIELDS: &[&str] = &[
    "/spec/nodeSelector",
    "/spec/affinity",
    "/spec/tolerations",
    "/spec/schedulingGates",
    "/metadata/labels",
    "/metadata/annotations",
];

/// The rules of `batch/v1/Job`.
pub struct JobStrategy;

fn manual_selector(obj: &Value) -> bool {
    obj.pointer("/spec/manualSelector") == Some(&Value::Bool(true))
}

/// kube's `generateSelector`: pod labels from the job's name and uid, and a
/// selector on the uid.
fn generate_selector(obj: &mut Value) {
    let name = text(obj, "/metadata/name").to_string();
    let uid = text(obj, "/metadata/uid").to_string();
    let mut labels = obj
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for key in JOB_NAME {
        labels.entry(key).or_insert_with(|| json!(name));
    }
    for key in CONTROLLER_UID {
        labels.entry(key).or_insert_with(|| json!(uid));
    }
    fields::set(obj, "/spec/template/metadata/labels", Value::Object(labels));
    if !obj
        .pointer("/spec/selector/matchLabels")
        .is_some_and(Value::is_object)
    {
        fields::set(obj, "/spec/selector/matchLabels", json!({}));
    }
    default(
        obj,
        "/spec/selector/matchLabels/batch.kubernetes.io~1controller-uid",
        json!(uid),
    );
}

/// The generated labels and selector are what kube expects (`validateGeneratedSelector`).
fn validate_generated_selector(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let labels = obj.pointer("/spec/template/metadata/labels");
    let expectations = [
        (CONTROLLER_UID, text(obj, "/metadata/uid")),
        (JOB_NAME, text(obj, "/metadata/name")),
    ];
    for (keys, expected) in expectations {
        for key in keys {
            let field = format!("spec.template.metadata.labels[{key}]");
            match labels.and_then(|l| l.get(key)).and_then(Value::as_str) {
                None => errs.push(FieldError::required(field, format!("must be '{expected}'"))),
                Some(actual) if actual != expected => errs.push(FieldError::invalid(
                    field,
                    labels.cloned().unwrap_or_default(),
                    format!("must be '{expected}'"),
                )),
                Some(_) => {}
            }
        }
    }
    let expected =
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": text(obj, "/metadata/uid")}});
    if obj.pointer("/spec/selector") != Some(&expected) {
        errs.push(FieldError::invalid(
            "spec.selector",
            fields::value(obj, "/spec/selector"),
            "`selector` not auto-generated",
        ));
    }
    errs
}

/// Checks a JobSpec at `path` (`spec`, or `spec.jobTemplate.spec` in a CronJob).
pub fn validate_job_spec(spec: &Value, path: &str, selector_required: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        errs.extend(fields::non_negative(
            spec,
            &format!("/{field}"),
            &format!("{path}.{field}"),
        ));
    }
    let selector = spec.get("selector").filter(|s| !s.is_null());
    match selector {
        None if selector_required => {
            errs.push(FieldError::required(format!("{path}.selector"), ""))
        }
        None => {}
        Some(s) => errs.extend(fields::label_selector(s, &format!("{path}.selector"))),
    }
    let template = spec.get("template").cloned().unwrap_or_default();
    if let Some(s) = selector {
        let labels = template.pointer("/metadata/labels");
        if !fields::selector_of(Some(s)).matches(labels.and_then(Value::as_object)) {
            errs.push(FieldError::invalid(
                format!("{path}.template.metadata.labels"),
                labels.cloned().unwrap_or_default(),
                "`selector` does not match template `labels`",
            ));
        }
    }
    match text(spec, "/completionMode") {
        "" | "NonIndexed" => {}
        "Indexed" if !is_set(spec, "/completions") => errs.push(FieldError::required(
            format!("{path}.completions"),
            "when completion mode is Indexed",
        )),
        "Indexed" => {}
        other => errs.push(FieldError::not_supported(
            format!("{path}.completionMode"),
            other,
            &["NonIndexed", "Indexed"],
        )),
    }
    let replacement = text(spec, "/podReplacementPolicy");
    if !matches!(replacement, "" | "TerminatingOrFailed" | "Failed") {
        errs.push(FieldError::not_supported(
            format!("{path}.podReplacementPolicy"),
            replacement,
            &["Failed", "TerminatingOrFailed"],
        ));
    }
    errs.extend(pod_spec::validate_template(
        &template,
        &format!("{path}.template"),
    ));
    let restart = text(&template, "/spec/restartPolicy");
    if restart != "OnFailure" && restart != "Never" {
        errs.push(FieldError::not_supported(
            format!("{path}.template.spec.restartPolicy"),
            restart,
            &["OnFailure", "Never"],
        ));
    }
    errs
}

fn validate_template_update(new: &Value, old: &Value) -> Option<FieldError> {
    let suspended_never_started = old.pointer("/spec/suspend") == Some(&Value::Bool(true))
        && !is_set(old, "/status/startTime");
    let comparable = |job: &Value| {
        let mut template = fields::value(job, "/spec/template");
        if suspended_never_started {
            for field in SCHEDULING_FIELDS {
                fields::remove(&mut template, field);
            }
        }
        template
    };
    (comparable(new) != comparable(old)).then(|| {
        FieldError::invalid(
            "spec.template",
            fields::value(new, "/spec/template"),
            "field is immutable",
        )
    })
}

/// kube's `printJob` STATUS column.
fn status(obj: &Value) -> &'static str {
    let has = |kind: &str| fields::condition_true(obj, kind);
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if is_set(obj, "/metadata/deletionTimestamp") {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

fn completions(obj: &Value) -> String {
    let succeeded = int(obj, "/status/succeeded").unwrap_or(0);
    match (
        int(obj, "/spec/completions"),
        int(obj, "/spec/parallelism").unwrap_or(0),
    ) {
        (Some(total), _) => format!("{succeeded}/{total}"),
        (None, parallelism) if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
        (None, _) => format!("{succeeded}/1"),
    }
}

fn duration(obj: &Value) -> String {
    let start = text(obj, "/status/startTime");
    match (
        fields::epoch_seconds(start),
        fields::epoch_seconds(text(obj, "/status/completionTime")),
    ) {
        (None, _) => String::new(),
        (Some(_), None) => table::age_of(Some(start)),
        (Some(s), Some(c)) => table::human_duration(c - s),
    }
}

/// The wide Containers, Images and Selector cells of a job template (shared with CronJobs).
pub fn wide_cells(obj: &Value, template: &str, selector: &str) -> [Value; 3] {
    let [containers, images] = workload::template_cells(obj, template);
    [
        containers,
        images,
        json!(fields::format_selector(obj.pointer(selector))),
    ]
}

/// A Job without labels takes its template's.
fn default_labels(obj: &mut Value) {
    if let Some(labels) = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned()
        && !fields::has(obj, "/metadata/labels")
    {
        fields::set(obj, "/metadata/labels", labels);
    }
}

impl Strategy for JobStrategy {
    fn defaults(&self, obj: &mut Value) {
        if !is_set(obj, "/spec/completions") && !is_set(obj, "/spec/parallelism") {
            fields::set(obj, "/spec/completions", json!(1));
        }
        default(obj, "/spec/parallelism", json!(1));
        let backoff = if is_set(obj, "/spec/backoffLimitPerIndex") {
            json!(i32::MAX)
        } else {
            json!(6)
        };
        default(obj, "/spec/backoffLimit", backoff);
        default_labels(obj);
        default(obj, "/spec/completionMode", json!("NonIndexed"));
        default(obj, "/spec/suspend", json!(false));
        let replacement = if is_set(obj, "/spec/podFailurePolicy") {
            "Failed"
        } else {
            "TerminatingOrFailed"
        };
        default(obj, "/spec/podReplacementPolicy", json!(replacement));
        default(obj, "/spec/manualSelector", json!(false));
        fields::each_mut(obj, "/spec/podFailurePolicy/rules", |rule| {
            fields::each_mut(rule, "/onPodConditions", |c| {
                default(c, "/status", json!("True"))
            });
        });
        pod_spec::default_template(obj, "/spec/template");
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
        // kube defaults the labels as it decodes the request, before the
        // selector's labels are added to the template.
        default_labels(obj);
        if !manual_selector(obj) {
            generate_selector(obj);
        }
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = if manual_selector(obj) {
            Vec::new()
        } else {
            validate_generated_selector(obj)
        };
        errs.extend(validate_job_spec(
            &fields::value(obj, "/spec"),
            "spec",
            true,
        ));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        // In kube's order (ValidateJobSpecUpdate).
        let mut errs = self.validate(new);
        let elastic = text(new, "/spec/completionMode") == "Indexed"
            && int(new, "/spec/completions") == int(new, "/spec/parallelism");
        if !elastic {
            errs.extend(fields::immutable(
                new,
                old,
                "/spec/completions",
                "spec.completions",
            ));
        }
        errs.extend(fields::immutable(
            new,
            old,
            "/spec/selector",
            "spec.selector",
        ));
        errs.extend(validate_template_update(new, old));
        for field in [
            "completionMode",
            "podFailurePolicy",
            "backoffLimitPerIndex",
            "managedBy",
            "successPolicy",
        ] {
            errs.extend(fields::immutable(
                new,
                old,
                &format!("/spec/{field}"),
                &format!("spec.{field}"),
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            table::name_column(),
            Column::new("Status", "string", "Status of the job."),
            Column::new(
                "Completions",
                "string",
                "The desired number of successfully finished pods the job should be run with.",
            ),
            Column::new("Duration", "string", "Time required to complete the job."),
            table::age_column(),
        ];
        columns.extend(workload::wide_columns(true));
        columns
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let mut cells = vec![
            table::name_cell(obj),
            json!(status(obj)),
            json!(completions(obj)),
            json!(duration(obj)),
            table::age_cell(obj),
        ];
        cells.extend(wide_cells(obj, "/spec/template", "/spec/selector"));
        cells
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.successful"]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        Some(match field {
            "status.successful" => int(obj, "/status/succeeded").unwrap_or(0).to_string(),
            other => fields::field_string(obj, other),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(restart: &str) -> Value {
        let mut j = json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"spec": {
            "containers": [{"name": "pi", "image": "perl"}], "restartPolicy": restart}}}});
        JobStrategy.prepare_for_create(&mut j);
        JobStrategy.defaults(&mut j);
        j
    }

    #[test]
    fn defaults_and_generated_selector() {
        let j = job("Never");
        let spec = &j["spec"];
        assert_eq!(
            (
                spec["completions"].clone(),
                spec["parallelism"].clone(),
                spec["backoffLimit"].clone()
            ),
            (json!(1), json!(1), json!(6))
        );
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        let labels = &spec["template"]["metadata"]["labels"];
        assert_eq!(
            (labels["job-name"].clone(), labels["controller-uid"].clone()),
            (json!("pi"), json!("u-1"))
        );
        assert_eq!(labels["batch.kubernetes.io/job-name"], "pi");
        assert_eq!(j["metadata"]["labels"], labels.clone());
        assert!(
            JobStrategy.validate(&j).is_empty(),
            "{:?}",
            JobStrategy.validate(&j)
        );
    }

    #[test]
    fn restart_policy_and_immutable_template() {
        let j = job("");
        assert_eq!(
            JobStrategy
                .validate(&j)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
            ]
        );
        let old = job("Never");
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:5");
        let errs = JobStrategy.validate_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.template");
    }

    #[test]
    fn table_row() {
        let mut j = job("Never");
        j["status"] = json!({"succeeded": 1, "startTime": "2024-01-01T00:00:00Z", "completionTime": "2024-01-01T00:00:42Z",
            "conditions": [{"type": "Complete", "status": "True"}]});
        let cells = JobStrategy.cells(&j);
        assert_eq!(
            (cells[1].clone(), cells[2].clone(), cells[3].clone()),
            (json!("Complete"), json!("1/1"), json!("42s"))
        );
        assert_eq!(cells[7], "batch.kubernetes.io/controller-uid=u-1");
        assert_eq!(cells.len(), JobStrategy.columns().len());
        assert_eq!(
            JobStrategy.field_value(&j, "status.successful").as_deref(),
            Some("1")
        );
    }
}
