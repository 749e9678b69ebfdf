//! API Priority and Fairness's configuration producer (kube's
//! `priority-and-fairness-config-producer`): kube's mandatory FlowSchemas
//! and PriorityLevelConfigurations are created at start and restored
//! whenever they are changed or deleted; the suggested ones are created
//! when missing and their spec kept as kube ships it while they are
//! annotated `apf.kubernetes.io/autoupdate-spec: "true"`. Each FlowSchema's
//! `Dangling` condition says whether its priority level exists.

use std::collections::HashSet;

use actix::prelude::*;
use apimachinery::error::Reason;
use apimachinery::flowcontrol::bootstrap::{self, AUTOUPDATE_ANNOTATION};
use generic_server::loopback::Loopback;
use serde_json::{Value, json};

/// Where the two resources are served.
const API: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";

/// Keeps the bootstrap configuration and the schemas' conditions.
pub struct ConfigurationController {
    client: Loopback,
    /// A pass is running.
    busy: bool,
    /// Something changed during the pass: run another.
    again: bool,
}

impl ConfigurationController {
    /// A controller acting through `client`.
    pub fn new(client: Loopback) -> Self {
        ConfigurationController {
            client,
            busy: false,
            again: false,
        }
    }
}

impl Actor for ConfigurationController {
    type Context = Context<Self>;
}

/// A FlowSchema or PriorityLevelConfiguration changed (or a resync): check everything.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync;

/// A pass ended.
#[derive(Message)]
#[rtype(result = "()")]
struct Done;

impl Handler<Sync> for ConfigurationController {
    type Result = ();

    fn handle(&mut self, _: Sync, ctx: &mut Context<Self>) {
        if self.busy {
            self.again = true;
            return;
        }
        self.busy = true;
        let (client, me) = (self.client.clone(), ctx.address());
        tokio::spawn(async move {
            ensure(&client).await;
            me.do_send(Done);
        });
    }
}

impl Handler<Done> for ConfigurationController {
    type Result = ();

    fn handle(&mut self, _: Done, ctx: &mut Context<Self>) {
        self.busy = false;
        if std::mem::take(&mut self.again) {
            ctx.notify(Sync);
        }
    }
}

/// One pass: every bootstrap object, then every schema's condition.
pub async fn ensure(client: &Loopback) {
    let kinds = [
        (
            "prioritylevelconfigurations",
            bootstrap::mandatory_priority_levels(),
            true,
        ),
        (
            "prioritylevelconfigurations",
            bootstrap::suggested_priority_levels(),
            false,
        ),
        ("flowschemas", bootstrap::mandatory_flow_schemas(), true),
        ("flowschemas", bootstrap::suggested_flow_schemas(), false),
    ];
    for (resource, objects, mandatory) in kinds {
        for object in objects {
            if let Err(e) = ensure_one(client, resource, object, mandatory).await
                && !matches!(e.reason(), Reason::Conflict | Reason::AlreadyExists)
            {
                tracing::warn!(resource, error = %e, "keeping the bootstrap flow control configuration");
            }
        }
    }
    if let Err(e) = mark_dangling(client).await
        && e.reason() != Reason::Conflict
    {
        tracing::warn!(error = %e, "updating the FlowSchemas' Dangling conditions");
    }
}

/// Creates `wanted` if missing; restores its spec if it is mandatory, or
/// suggested and annotated for automatic updates.
async fn ensure_one(
    client: &Loopback,
    resource: &str,
    wanted: Value,
    mandatory: bool,
) -> apimachinery::Result<()> {
    let name = wanted["metadata"]["name"].as_str().unwrap_or_default();
    let path = format!("{API}/{resource}/{name}");
    let mut current = match client.get(&path).await {
        Ok(current) => current,
        Err(e) if e.reason() == Reason::NotFound => {
            client.create(&format!("{API}/{resource}"), &wanted).await?;
            tracing::info!(resource, name, "created the bootstrap configuration");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let autoupdate = current
        .pointer(&format!(
            "/metadata/annotations/{}",
            AUTOUPDATE_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str);
    let restore = if mandatory {
        autoupdate != Some("true") || !same_spec(name, &current["spec"], &wanted["spec"])
    } else {
        autoupdate == Some("true") && !same_spec(name, &current["spec"], &wanted["spec"])
    };
    if !restore {
        return Ok(());
    }
    current["spec"] = wanted["spec"].clone();
    if !current["metadata"]["annotations"].is_object() {
        current["metadata"]["annotations"] = json!({});
    }
    current["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("true");
    client.update(&path, &current).await?;
    tracing::info!(resource, name, "restored the bootstrap configuration");
    Ok(())
}

/// Whether a stored spec is the one kube ships; of the mandatory `exempt`
/// level only the type counts (its `exempt` fields are the user's, as in kube).
fn same_spec(name: &str, current: &Value, wanted: &Value) -> bool {
    if name == "exempt" && wanted.get("exempt").is_some() {
        return current.get("type") == wanted.get("type") && current.get("limited").is_none();
    }
    current == wanted
}

/// Sets each FlowSchema's `Dangling` condition: `True` when the level it
/// names does not exist.
async fn mark_dangling(client: &Loopback) -> apimachinery::Result<()> {
    let levels = client
        .get(&format!("{API}/prioritylevelconfigurations"))
        .await?;
    let names: HashSet<&str> = levels["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["metadata"]["name"].as_str())
        .collect();
    let schemas = client.get(&format!("{API}/flowschemas")).await?;
    for schema in schemas["items"].as_array().into_iter().flatten() {
        let Some(name) = schema["metadata"]["name"].as_str() else {
            continue;
        };
        let level = schema["spec"]["priorityLevelConfiguration"]["name"]
            .as_str()
            .unwrap_or_default();
        let Some(condition) = dangling_condition(schema, names.contains(level)) else {
            continue;
        };
        let mut updated = schema.clone();
        let mut conditions: Vec<Value> = schema["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] != "Dangling")
            .cloned()
            .collect();
        conditions.push(condition);
        updated["status"] = json!({"conditions": conditions});
        match client
            .update(&format!("{API}/flowschemas/{name}/status"), &updated)
            .await
        {
            Ok(_) => {}
            Err(e) if matches!(e.reason(), Reason::NotFound | Reason::Conflict) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The `Dangling` condition `schema` should have, if it differs from the one it has.
fn dangling_condition(schema: &Value, level_exists: bool) -> Option<Value> {
    let status = if level_exists { "False" } else { "True" };
    let current = schema["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Dangling");
    if current.is_some_and(|c| c["status"] == status) {
        return None;
    }
    let level = schema["spec"]["priorityLevelConfiguration"]["name"]
        .as_str()
        .unwrap_or_default();
    let (reason, message) = if level_exists {
        (
            "Found",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists"
            ),
        )
    } else {
        (
            "NotFound",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object"
            ),
        )
    };
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    Some(json!({
        "type": "Dangling", "status": status, "lastTransitionTime": now,
        "reason": reason, "message": message,
    }))
}

#[cfg(test)]
mod tests {
    use generic_server::server::ApiServer;

    use super::*;

    /// A loopback client of a server holding the two resources over memory storage.
    async fn client() -> Loopback {
        let resources = crate::resources::all()
            .into_iter()
            .filter(|r| r.group == apimachinery::flowcontrol::GROUP)
            .collect();
        let (server, _) = ApiServer::in_memory(resources).await.expect("a server");
        Loopback::new(server, "test")
    }

    fn names(list: &Value) -> Vec<String> {
        let mut names: Vec<String> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    }

    #[actix::test]
    async fn bootstrap_objects_are_created_restored_and_left_when_asked() {
        let client = client().await;
        ensure(&client).await;
        let levels = client
            .get(&format!("{API}/prioritylevelconfigurations"))
            .await
            .expect("levels");
        assert_eq!(
            names(&levels),
            [
                "catch-all",
                "exempt",
                "global-default",
                "leader-election",
                "node-high",
                "system",
                "workload-high",
                "workload-low"
            ]
        );
        let schemas = client
            .get(&format!("{API}/flowschemas"))
            .await
            .expect("schemas");
        assert_eq!(names(&schemas).len(), 13);
        assert!(schemas["items"].as_array().expect("items").iter().all(|s| {
            s["status"]["conditions"][0]["type"] == "Dangling"
                && s["status"]["conditions"][0]["status"] == "False"
        }));

        // A mandatory schema deleted, another changed, comes back as shipped.
        let catch_all = format!("{API}/flowschemas/catch-all");
        client.delete(&catch_all).await.expect("deleted");
        let exempt = format!("{API}/flowschemas/exempt");
        let mut changed = client.get(&exempt).await.expect("exempt");
        changed["spec"]["matchingPrecedence"] = json!(5000);
        client.update(&exempt, &changed).await.expect("changed");
        // A suggested one the administrator owns is left as they changed it;
        // one still annotated for updates is restored.
        let workload_low = format!("{API}/prioritylevelconfigurations/workload-low");
        let mut mine = client.get(&workload_low).await.expect("workload-low");
        mine["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("false");
        mine["spec"]["limited"]["nominalConcurrencyShares"] = json!(7);
        client.update(&workload_low, &mine).await.expect("changed");
        let system = format!("{API}/prioritylevelconfigurations/system");
        let mut theirs = client.get(&system).await.expect("system");
        theirs["spec"]["limited"]["nominalConcurrencyShares"] = json!(7);
        client.update(&system, &theirs).await.expect("changed");
        // A schema naming a level that does not exist is dangling.
        let orphan = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": "orphan"}, "spec": {"priorityLevelConfiguration": {"name": "nowhere"},
            "matchingPrecedence": 700, "rules": []}});
        client
            .create(&format!("{API}/flowschemas"), &orphan)
            .await
            .expect("orphan");

        ensure(&client).await;
        let restored = client.get(&catch_all).await.expect("catch-all is back");
        assert_eq!(restored["spec"]["matchingPrecedence"], 10000);
        let exempt = client.get(&exempt).await.expect("exempt");
        assert_eq!(exempt["spec"]["matchingPrecedence"], 1);
        let mine = client.get(&workload_low).await.expect("workload-low");
        assert_eq!(mine["spec"]["limited"]["nominalConcurrencyShares"], 7);
        let theirs = client.get(&system).await.expect("system");
        assert_eq!(theirs["spec"]["limited"]["nominalConcurrencyShares"], 30);
        let orphan = client
            .get(&format!("{API}/flowschemas/orphan"))
            .await
            .expect("orphan");
        assert_eq!(orphan["status"]["conditions"][0]["status"], "True");
        assert_eq!(orphan["status"]["conditions"][0]["reason"], "NotFound");
    }
}
