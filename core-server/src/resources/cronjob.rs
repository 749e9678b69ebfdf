//! batch/v1 CronJobs: concurrencyPolicy Allow, not suspended, 3 successful
//! and 1 failed jobs kept by default; the schedule is a standard cron
//! expression (checked as kube's cron parser does) and names fit in 52 characters.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, items, text};
use super::{job, pod_spec, workload};

/// Longest CronJob name: job names get an 11-character suffix.
const MAX_NAME: usize = 52;

/// The cron descriptors kube's parser accepts.
const DESCRIPTORS: &[&str] = &[
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// The rules of `batch/v1/CronJob`.
pub struct CronJobStrategy;

/// One cron field's bounds and names.
struct CronField {
    min: i64,
    max: i64,
    names: &'static [&'static str],
}

const CRON_FIELDS: [CronField; 5] = [
    CronField {
        min: 0,
        max: 59,
        names: &[],
    },
    CronField {
        min: 0,
        max: 23,
        names: &[],
    },
    CronField {
        min: 1,
        max: 31,
        names: &[],
    },
    CronField {
        min: 1,
        max: 12,
        names: &[
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ],
    },
    CronField {
        min: 0,
        max: 6,
        names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    },
];

fn cron_number(s: &str, field: &CronField) -> Result<i64, String> {
    if let Some(i) = field.names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
        return Ok(i as i64 + if field.min == 1 { 1 } else { 0 });
    }
    let n: i64 = s.parse().map_err(|_| {
        format!("failed to parse int from {s}: strconv.Atoi: parsing {s:?}: invalid syntax")
    })?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {s}"));
    }
    Ok(n)
}

fn cron_range(expr: &str, field: &CronField) -> Result<(), String> {
    let (range, step) = match expr.split('/').collect::<Vec<_>>().as_slice() {
        [r] => (*r, None),
        [r, s] => (*r, Some(*s)),
        _ => return Err(format!("too many slashes: {expr}")),
    };
    let (start, end) = match range.split('-').collect::<Vec<_>>().as_slice() {
        ["*" | "?"] => (field.min, field.max),
        [single] => {
            let n = cron_number(single, field)?;
            (n, if step.is_some() { field.max } else { n })
        }
        [a, b] => (cron_number(a, field)?, cron_number(b, field)?),
        _ => return Err(format!("too many hyphens: {expr}")),
    };
    if let Some(step) = step
        && cron_number(step, &CRON_FIELDS[0])? == 0
    {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    if start < field.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            field.min
        ));
    }
    if end > field.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            field.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    Ok(())
}

/// Parses a standard cron schedule as kube's cron library does; the error is its message.
pub fn check_schedule(schedule: &str) -> Result<(), String> {
    let schedule = schedule.trim();
    if schedule.is_empty() {
        return Err("empty spec string".into());
    }
    if let Some(every) = schedule.strip_prefix("@every ") {
        let ok = every.len() > 1
            && every
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse::<f64>()
                .is_ok();
        return if ok {
            Ok(())
        } else {
            Err(format!(
                "failed to parse duration {schedule}: time: invalid duration {every:?}"
            ))
        };
    }
    if schedule.starts_with('@') {
        return if DESCRIPTORS.contains(&schedule) {
            Ok(())
        } else {
            Err(format!("unrecognized descriptor: {schedule}"))
        };
    }
    let parts: Vec<&str> = schedule.split_whitespace().collect();
    if parts.len() != CRON_FIELDS.len() {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            parts.len(),
            parts.join(" ")
        ));
    }
    for (part, field) in parts.iter().zip(CRON_FIELDS.iter()) {
        for expr in part.split(',') {
            cron_range(expr, field)?;
        }
    }
    Ok(())
}

impl Strategy for CronJobStrategy {
    fn defaults(&self, obj: &mut Value) {
        default(obj, "/spec/concurrencyPolicy", json!("Allow"));
        default(obj, "/spec/suspend", json!(false));
        default(obj, "/spec/successfulJobsHistoryLimit", json!(3));
        default(obj, "/spec/failedJobsHistoryLimit", json!(1));
        if let Some(job) = obj.pointer_mut("/spec/jobTemplate") {
            pod_spec::null_creation_timestamp(job);
        }
        pod_spec::default_template(obj, "/spec/jobTemplate/spec/template");
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = text(obj, "/metadata/name");
        if name.len() > MAX_NAME {
            errs.push(FieldError::invalid(
                "metadata.name",
                name,
                format!("must be no more than {MAX_NAME} characters"),
            ));
        }
        let schedule = text(obj, "/spec/schedule");
        if schedule.is_empty() {
            errs.push(FieldError::required("spec.schedule", ""));
        } else if schedule.contains("TZ") {
            errs.push(FieldError::invalid(
                "spec.schedule",
                schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        } else if let Err(msg) = check_schedule(schedule) {
            errs.push(FieldError::invalid("spec.schedule", schedule, msg));
        }
        let zone = text(obj, "/spec/timeZone");
        if fields::is_set(obj, "/spec/timeZone") && (zone.is_empty() || zone.contains(' ')) {
            errs.push(FieldError::invalid(
                "spec.timeZone",
                zone,
                format!("unknown time zone {zone}"),
            ));
        }
        match text(obj, "/spec/concurrencyPolicy") {
            "Allow" | "Forbid" | "Replace" => {}
            "" => errs.push(FieldError::required("spec.concurrencyPolicy", "")),
            other => errs.push(FieldError::not_supported(
                "spec.concurrencyPolicy",
                other,
                &["Allow", "Forbid", "Replace"],
            )),
        }
        errs.extend(fields::non_negatives(
            obj,
            &[
                (
                    "/spec/startingDeadlineSeconds",
                    "spec.startingDeadlineSeconds",
                ),
                (
                    "/spec/successfulJobsHistoryLimit",
                    "spec.successfulJobsHistoryLimit",
                ),
                (
                    "/spec/failedJobsHistoryLimit",
                    "spec.failedJobsHistoryLimit",
                ),
            ],
        ));
        if obj.pointer("/spec/jobTemplate/spec/manualSelector") == Some(&Value::Bool(true)) {
            errs.push(FieldError::not_supported(
                "spec.jobTemplate.spec.manualSelector",
                true,
                &["nil", "false"],
            ));
        }
        errs.extend(job::validate_job_spec(
            &fields::value(obj, "/spec/jobTemplate/spec"),
            "spec.jobTemplate.spec",
            false,
        ));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            table::name_column(),
            Column::new(
                "Schedule",
                "string",
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
            ),
            Column::new(
                "Timezone",
                "string",
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
            ),
            Column::new(
                "Suspend",
                "boolean",
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.",
            ),
            Column::new(
                "Active",
                "integer",
                "A list of pointers to currently running jobs.",
            ),
            Column::new(
                "Last Schedule",
                "string",
                "Information when was the last time the job was successfully scheduled.",
            ),
            table::age_column(),
        ];
        columns.extend(workload::wide_columns(true));
        columns
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let suspend = match obj.pointer("/spec/suspend") {
            Some(Value::Bool(true)) => "True",
            Some(Value::Bool(false)) => "False",
            _ => "<unset>",
        };
        let last = text(obj, "/status/lastScheduleTime");
        let last = if last.is_empty() {
            "<none>".to_string()
        } else {
            table::age_of(Some(last))
        };
        let mut cells = vec![
            table::name_cell(obj),
            fields::text_cell(obj, "/spec/schedule"),
            json!(fields::none_if_empty(
                text(obj, "/spec/timeZone").to_string()
            )),
            json!(suspend),
            json!(items(obj, "/status/active").len()),
            json!(last),
            table::age_cell(obj),
        ];
        cells.extend(job::wide_cells(
            obj,
            "/spec/jobTemplate/spec/template",
            "/spec/jobTemplate/spec/selector",
        ));
        cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cronjob(schedule: &str) -> Value {
        let mut c = json!({"metadata": {"name": "hello"}, "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "hello", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}});
        CronJobStrategy.prepare_for_create(&mut c);
        CronJobStrategy.defaults(&mut c);
        c
    }

    #[test]
    fn defaults_and_schedule() {
        let c = cronjob("*/5 * * * *");
        assert_eq!(c["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(c["spec"]["suspend"], false);
        assert_eq!(c["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(c["spec"]["failedJobsHistoryLimit"], 1);
        assert!(
            CronJobStrategy.validate(&c).is_empty(),
            "{:?}",
            CronJobStrategy.validate(&c)
        );
        assert!(check_schedule("0 9 * * MON-FRI").is_ok());
        assert!(check_schedule("@hourly").is_ok());
        assert_eq!(
            check_schedule("61 * * * *").expect_err("out of range"),
            "end of range (61) above maximum (59): 61"
        );
        let bad = cronjob("every minute");
        assert_eq!(
            CronJobStrategy.validate(&bad)[0].to_string(),
            "spec.schedule: Invalid value: \"every minute\": expected exactly 5 fields, found 2: [every minute]"
        );
    }

    #[test]
    fn table_row() {
        let cells = CronJobStrategy.cells(&cronjob("0 * * * *"));
        assert_eq!(cells[1], "0 * * * *");
        assert_eq!(cells[2], "<none>");
        assert_eq!(cells[3], "False");
        assert_eq!(cells[4], 0);
        assert_eq!(cells[5], "<none>");
        assert_eq!(cells[9], "<none>");
        assert_eq!(cells.len(), CronJobStrategy.columns().len());
    }
}
